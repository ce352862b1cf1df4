"""``recstack import TRACE -o profile.json``: a torch.profiler trace as a recstack profile.

TRACE is a Chrome-trace JSON (``.json`` or ``.json.gz``) written by
torch.profiler, or a folder of per-rank traces. The profile then works with
every command that reads one (show, report, diff, export, roofline, analyse,
validate). Bad input (a missing path, an empty file, a file that is not a
torch.profiler trace) is one ``error:`` line and exit 2; a truncated trace
(plain or gzipped alike) is imported as far as it is complete, with a warning,
and exits 4. A partial import never replaces an existing ``-o`` file unless
``--overwrite-partial`` says so: it goes beside it, as ``<name>.partial.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

from recstack.cli_base import add_command
from recstack.errors import EXIT_PARTIAL


def cmd_import(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable

    out = check_writable(args.output, "-o")
    existed = out.exists()
    if args.machine is None:  # no roofline, no machine measured: the import does no linear algebra, and
        # OpenBLAS's thread pool (a thread and its buffers per core, started as numpy loads) is start-up for nothing
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from recstack.profiling.rules import rules_of
    from recstack.traceimport.build import import_trace

    rules = rules_of(args.stage_rules or None)  # pydantic models: loaded only when a file is given
    mmap = None
    if args.module_map:
        from recstack.traceimport.module_map import load_module_map

        mmap = load_module_map(args.module_map)
    machine = None
    if args.machine is not None:
        from recstack.analysis.machine_file import machine_arg  # the analysis pipeline: only for --machine

        machine = machine_arg(args.machine)
    prof = import_trace(args.trace, rules=rules, step_range=args.step_range, module_map=mmap, model=args.model,
                        machine=machine, correct_overhead=not args.raw_times)
    info = prof.import_
    files = info["files"]
    partial = any(f["truncated"] for f in files)
    target = out
    if partial and existed and not args.overwrite_partial:  # never a partial result over a complete older one
        target = out.with_name(f"{out.name.removesuffix('.json')}.partial.json")
    from recstack.outputs import write_with_fallback

    written, why = write_with_fallback(target, prof.save)
    if why is not None:
        print(f"warning: could not write {target} ({why}); the profile is in {written}", file=sys.stderr)
    events = sum(f["events"] for f in files)
    print(f"imported {events:,} events, {files[0]['steps']} steps ({info['steps_from']}), "
          f"{len(files)} rank(s); hierarchy: {info['hierarchy']}")
    total = prof.root.time_s or 1.0
    for st in prof.root.children:
        print(f"  {st.name:20s} {st.time_s * 1e3:10.3f} ms  {st.time_s / total:6.1%}")
    per = prof.overhead.get("per_event_s")
    how = ("overhead unknown" if per is None else
           f"less the profiler's estimated {per * 1e6:.2f} us per recorded event, estimated from the trace")
    print(f"profile written to {written} (times per step, measured under the profiler; {how})")
    if partial:
        kept = (f"; {out} existed and is kept (--overwrite-partial writes a partial import over it)"
                if target != out else "")
        print(f"partial import: the trace was truncated (see the warning above){kept}", file=sys.stderr)
        return EXIT_PARTIAL
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``import`` to the main CLI's sub-parsers."""
    p = add_command(
        sub,
        "import", cmd_import,
        help="import a torch.profiler trace (.json, .json.gz, or a folder of per-rank traces) as a profile",
        description="Turn a torch.profiler (Kineto) Chrome trace into a recstack profile: steps from "
        "ProfilerStep ranges (or --step-range, else the whole trace is one step), modules from "
        "recstack.annotate ranges (else nn.Module events of with_stack, else --module-map), stages by the "
        "same rules as a live profile, kernels attached to their ops by correlation id. Nothing in the "
        "trace is executed.",
    )
    p.add_argument("trace", metavar="TRACE", help="trace file (.json, .json.gz) or a folder of per-rank traces")
    p.add_argument("-o", "--output", required=True, help="where to write the profile JSON")
    p.add_argument("--machine", default=None, metavar="FILE|auto",
                   help="machine JSON (from recstack machine), or 'auto' for this host's machine file (measured "
                        "--quick if absent): classify every node (roofline) (default: none, unclassified)")
    p.add_argument("--stage-rules", default=None, metavar="FILE", help="stage rules YAML (as for recstack profile)")
    p.add_argument("--module-map", default=None, metavar="FILE",
                   help="YAML 'modules: [{match: <glob on a range name>, path: <module path>, type: <class>}]': "
                   "ranges that stand for modules, when the trace has no recstack.annotate ranges")
    p.add_argument("--step-range", default=None, metavar="NAME",
                   help="the range that marks one step (a name, or a glob such as 'recstack.step::*'), when the trace "
                   "has no ProfilerStep ranges")
    p.add_argument("--raw-times", action="store_true",
                   help="keep the times as the trace recorded them (default: less the profiler's per-event cost, "
                   "estimated from the trace's wrapper ops; see docs/import.md)")
    p.add_argument("--overwrite-partial", action="store_true",
                   help="write a partial import (a truncated trace) over an existing -o file (default: beside it, "
                   "as NAME.partial.json, the existing file kept)")
    p.add_argument("--model", default=None, help="model name for the profile (default: the root module's class)")


__all__ = ["cmd_import", "register"]
