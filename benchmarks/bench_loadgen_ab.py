"""A/B of the load generator's cost between source trees, alternating, one fresh process per run.

Each run is one spin worker under that tree's load generator for ``--duration``
seconds (1,000 QPS trivial, then the 20,000 req/s schedule); the order of the trees
rotates every round, so that a shared host's drift falls on all of them.
One JSON line per run: dispatcher CPU and the worker's CPU (``/proc/PID/stat``)
in cores, the worker's busy share (its service), mean queueing and release
lateness in s. Both trees are driven by this tree's ``bench_loadgen.measure``
(it passes only options every tree has), so the script needs no benchmark of theirs.

    python benchmarks/bench_loadgen_ab.py main=/work/main new=. [--rounds 3] [--duration 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ONE = """
import json, sys
from bench_loadgen import measure
if __name__ == "__main__":
    r = measure(float(sys.argv[1]), float(sys.argv[4]), float(sys.argv[2]), 1, int(sys.argv[3]))
    print(json.dumps({"cpu": r["loadgen"]["cpu_cores"], "worker_cpu": r["worker_cpu_cores"], "busy": r["utilisation"],
                      "queue_s": r["queue_s_mean"], **r["loadgen"]["dispatch_lateness_s"]}))
"""
HERE = Path(__file__).resolve().parent
RUNS = (("1000 QPS trivial", 1000.0, 0.1, 1), ("20k schedule", 20000.0, 0.02, 64))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", help="NAME=PATH of a recstack checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    args = ap.parse_args()
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.trees]
    script = Path(os.environ.get("TMPDIR", "/tmp")) / f"recstack-lg-ab-{os.getpid()}.py"
    script.write_text(ONE)
    print(f"# load before: {os.getloadavg()}", file=sys.stderr)
    try:
        for r in range(args.rounds):
            order = trees[r % len(trees):] + trees[:r % len(trees)]
            for name, qps, svc, depth in RUNS:
                for code, path in order:
                    # that tree's recstack, this tree's bench_loadgen (it passes only options every tree has)
                    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(path / "src"), str(HERE)]))
                    out = subprocess.run([sys.executable, str(script), str(qps), str(svc), str(depth),
                                          str(args.duration)], cwd=path, env=env, capture_output=True,
                                         text=True, timeout=600, check=True)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    print(json.dumps({"round": r, "run": name, "code": code, **row}), flush=True)
    finally:
        script.unlink(missing_ok=True)
    print(f"# load after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
