"""Start-up time of light CLI commands, each in a fresh process (the goal: `recstack --help` under 0.3 s).

Runs every command ``--repeats`` times in a new Python process (after one
unmeasured run that warms the file cache) and prints the median and min wall
time in seconds, and whether torch got imported (it should not be for these).

    python benchmarks/bench_startup.py [--repeats 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

COMMANDS = {
    "recstack --help": ["--help"],
    "recstack zoo list": ["zoo", "list"],
    "recstack zoo list --json": ["zoo", "list", "--json"],
    "recstack profile --help": ["profile", "--help"],
}

CODE = """
import sys
from recstack.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
sys.stderr.write("TORCH=%s\\n" % ("torch" in sys.modules))
"""


def run_once(argv: list[str]) -> tuple[float, bool]:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CODE.format(argv=argv)], capture_output=True, text=True, env=env,
                       check=True)
    wall = time.perf_counter() - t0
    return wall, "TORCH=True" in r.stderr


def bench(argv: list[str], repeats: int) -> dict[str, float | bool]:
    run_once(argv)
    times, torch_seen = [], False
    for _ in range(repeats):
        wall, imported = run_once(argv)
        times.append(wall)
        torch_seen |= imported
    return {"median_s": statistics.median(times), "min_s": min(times), "repeats": repeats, "imports_torch": torch_seen}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bare = bench_python(args.repeats)
    results = {"python -c pass (baseline)": bare}
    for name, argv in COMMANDS.items():
        results[name] = bench(argv, args.repeats)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for name, r in results.items():
        torch_note = "  (imports torch!)" if r.get("imports_torch") else ""
        print(f"{name:28s} median {r['median_s']:.3f} s  min {r['min_s']:.3f} s  n={r['repeats']}{torch_note}")
    return 0


def bench_python(repeats: int) -> dict[str, float | bool]:
    """The interpreter's own start-up, for reference."""
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    times = times[1:]
    return {"median_s": statistics.median(times), "min_s": min(times), "repeats": repeats, "imports_torch": False}


if __name__ == "__main__":
    sys.exit(main())
