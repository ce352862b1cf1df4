"""A/B of the load generator's cost between source trees, alternating, one fresh process per run.

Each run is one spin worker under that tree's load generator for ``--duration``
seconds (1,000 QPS trivial, then the 20,000 req/s schedule); the order of the trees
rotates every round, so that a shared host's drift falls on all of them.
One JSON line per run: dispatcher CPU and the worker's CPU (``/proc/PID/stat``)
in cores, the worker's busy share (its service), mean queueing and release
lateness in s. Both trees are driven through the same calls
(``recstack.serving.service``), so the script needs no benchmark of theirs.

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
import json, os, sys, time
from recstack.config.run import RunConfig
from recstack.serving.service import ServeOptions, build_plan, plan_sizes, pool_for, probe

def cpu_of(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")

if __name__ == "__main__":
    qps, svc, depth, duration = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    cfg = RunConfig(model="spin")
    opts = ServeOptions(qps=qps, duration_s=duration, workers=1, query_size=1, max_batch=1, service_ms=svc,
                        depth=depth, grace_s=2.0)
    plan = build_plan(cfg, opts)
    with pool_for(cfg, opts, plan_sizes(plan)) as pool:
        pool.start()
        pids = pool.pids()
        c0, t0 = cpu_of(pids), time.perf_counter()
        r = probe(pool, plan, opts)
        worker = (cpu_of(pids) - c0) / (time.perf_counter() - t0)
    print(json.dumps({"cpu": r["loadgen"]["cpu_cores"], "worker_cpu": worker, "busy": r["utilisation"],
                      "queue_s": r["queue_s_mean"], **r["loadgen"]["dispatch_lateness_s"]}))
"""
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
                    env = dict(os.environ, PYTHONPATH=str(path / "src"))
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
