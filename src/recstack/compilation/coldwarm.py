"""Compile time, cold and warm, each in a fresh process.

Only a fresh process with an empty ``TORCHINDUCTOR_CACHE_DIR`` is cold: in-process resets still hit the
compiled-kernel caches. So the child (``python -m recstack.compilation.coldwarm SPEC.json``) builds the
model, runs one eager step (lazy initialisation is not compile time), applies the compile config and
times the first compiled step; the parent runs it twice with one new cache folder: cold, then warm.
The child reports the first compiled step's wall time (measured), the compile phases (torch's
compilation metrics, nested times subtracted) with cache hits/misses, and the growth of the process's
peak resident memory over that step (``getrusage`` ``ru_maxrss``, measured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from recstack.compilation.config import CompileConfig
from recstack.compilation.model import Loader, load
from recstack.config.run import RunConfig

CHILD_TIMEOUT_S = 1800


def _maxrss_bytes() -> int | None:
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB
    except (ImportError, OSError):
        return None


def child(spec: dict[str, Any], loader: Loader = load) -> dict[str, Any]:
    from types import SimpleNamespace

    from recstack.compilation.apply import CompiledRun
    from recstack.compilation.observe import phases
    from recstack.profiling.runner import ProfileOptions, Step

    cfg = RunConfig.model_validate(spec["run"])
    ccfg = CompileConfig.model_validate(spec["compile"])
    loaded = loader(cfg)
    step = Step(loaded.model, ProfileOptions(cfg, op_pass=False, cost_model=False, counters=False), None)
    batch = loaded.make_batches(cfg.batch_size, 1)[0]
    step.run(batch)
    rss0 = _maxrss_bytes()
    found = SimpleNamespace(smap=SimpleNamespace(stage_of=lambda _p: None))  # no stage discovery needed here
    run = CompiledRun.start(loaded.model, step, found, ccfg)
    try:
        t0 = time.perf_counter()
        run.run_step(batch)  # what fails to compile is compiled around, as in the session
        first = time.perf_counter() - t0
    finally:
        run.finish()
    rss1 = _maxrss_bytes()
    return {"first_step_s": first, "phases": phases(run.observer.obs.metrics), "hazards": len(run.hazards),
            "peak_rss_growth_bytes": (rss1 - rss0) if rss0 is not None and rss1 is not None else None}


def _run_child(spec_file: Path, cache: Path, entry: str) -> dict[str, Any]:
    # The child imports what this process can (a user's factory module found on sys.path).
    path = os.pathsep.join(p for p in sys.path if p)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache / "triton"),
               PYTHONPATH=path)
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", entry, "--compile-time-child", str(spec_file)], env=env,
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"unavailable": f"unavailable: the compile-time process failed ({tail[0][:300]})"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    return out


def compile_times(cfg: RunConfig, ccfg: CompileConfig, entry: str = "recstack.compilation.coldwarm") -> dict[str, Any]:
    """``{cold, warm, phases}``: first-compiled-step seconds in fresh processes, empty then populated cache.

    ``entry``: the module the child runs as ``python -m ENTRY --compile-time-child SPEC`` (one whose
    loader can build the model; this module's loads zoo models and factories)."""
    spec = {"run": cfg.model_dump(mode="json"), "compile": ccfg.model_dump(mode="json")}
    with tempfile.TemporaryDirectory(prefix="recstack-compile-") as tmp:
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        cache = Path(tmp) / "inductor-cache"
        cold = _run_child(spec_file, cache, entry)
        warm = _run_child(spec_file, cache, entry)
    return {
        "cold": cold.get("first_step_s"), "warm": warm.get("first_step_s"),
        "phases": {"cold": cold.get("phases", cold.get("unavailable")),
                   "warm": warm.get("phases", warm.get("unavailable"))},
        "peak_rss_growth_bytes": {"cold": cold.get("peak_rss_growth_bytes"),
                                  "warm": warm.get("peak_rss_growth_bytes")},
        "provenance": "measured: first compiled step in a fresh process, empty (cold) then populated (warm) "
                      "TORCHINDUCTOR_CACHE_DIR",
    }


def main(argv: list[str], loader: Loader = load) -> int:
    """``--compile-time-child SPEC.json``: print the child's measurement as one JSON line."""
    spec = json.loads(Path(argv[-1]).read_text(encoding="utf-8"))
    print(json.dumps(child(spec, loader)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
