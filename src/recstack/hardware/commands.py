"""CLI command ``recstack machine`` (``recstack roofline`` is in :mod:`recstack.analysis.commands`).

``register(subparsers, compare_profile)`` adds it; each sub-parser sets ``func`` to a
callable ``(args) -> int``. Bad input raises :class:`~recstack.errors.RecstackError`
subclasses (the main CLI prints ``error: <msg>`` and exits 2). Progress goes
to stderr so that ``--json`` output on stdout stays parseable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from recstack.cli_base import add_command
from recstack.errors import ConfigError


def cmd_machine(args: argparse.Namespace) -> int:
    from recstack.hardware.collectives import parse_world_sizes, with_collectives
    from recstack.hardware.counters import detect_perf
    from recstack.hardware.machine import cached_or_measured, load_machine
    from recstack.hardware.measure_checks import summary
    from recstack.hardware.repeatability import compare_machines, within_run_spread

    if getattr(args, "profile", None):
        return int(args.compare_profile(args))
    other = load_machine(args.compare) if args.compare else None  # a bad file fails before measuring
    if args.world_sizes is not None and not args.collectives:  # given alone it would be silently ignored
        parse_world_sizes(args.world_sizes)
        raise ConfigError("--world-sizes applies to --collectives; add --collectives or drop it",
                          field="--world-sizes")
    world_sizes = parse_world_sizes(args.world_sizes or "2") if args.collectives else None  # before measuring
    from recstack.render.machine import format_comparison, format_machine, format_spread
    from recstack.render.progress import finish, measuring_lines, reporter

    progress = reporter(measuring_lines())  # a progress phase per benchmark group, besides the lines
    machine, kept, measured = cached_or_measured(args.remeasure, args.quick, progress=progress, strict=args.strict,
                                                 any_mode=not args.remeasure)
    finish()
    if world_sizes:
        machine = with_collectives(machine, world_sizes, args.quick, kept)
    counters = detect_perf().to_dict()
    comparison = compare_machines(machine, other) if other is not None else machine.get("repeatability")
    if args.json:
        extra = {"comparison": comparison} if other is not None else {}
        sys.stdout.write(json.dumps({**machine, "counters": counters, **extra}, indent=1) + "\n")
        return 0
    print(format_machine(machine, counters))
    print(format_spread(machine.get("spread") or within_run_spread(machine)))
    if comparison is not None:
        if other is not None and comparison["summary"] == {}:
            print(f"compare: {args.compare} has no figures in common with this machine")
        else:
            print(format_comparison(comparison))
    print(summary(machine))
    if measured:
        print(f"measured now; kept in {kept}")
    else:
        print(f"cache: {kept} (the measurement of {machine['measured_at']}; `recstack machine --remeasure` "
              "measures anew)")
    return 0


def register(subparsers: argparse._SubParsersAction, compare_profile: Callable[[argparse.Namespace], int]) -> None:
    """Add ``machine`` to the main CLI's sub-parsers; ``compare_profile`` runs its ``--profile`` mode (which reads a
    profile: :func:`recstack.analysis.commands.cmd_machine_compare_profile`, handed in by the CLI registry)."""
    p = add_command(
        subparsers, "machine", cmd_machine,
        help="show the cached (or measure the) roofs of this host: GEMM FLOP/s, stream/gather bandwidth, latency",
        description="Show this host's cached measurement; without one (or with --remeasure) measure peak GEMM "
        "FLOP/s, streaming and random-gather bandwidth, memory latency and caches, checking the host is quiet "
        "(load, steal, busy processes, repeat spread). Cached per host and CPU model under $RECSTACK_CACHE_DIR "
        "(default ~/.cache/recstack).",
    )
    p.add_argument("--json", action="store_true", help="print the machine figures as JSON to stdout")
    p.add_argument("--remeasure", "--refresh", dest="remeasure", action="store_true",
                   help="measure anew even when a cache exists (default: show the cached measurement)")
    p.add_argument("--quick", action="store_true",
                   help="when measuring: smaller arrays and fewer repeats (under a minute)")
    p.add_argument("--strict", action="store_true",
                   help="a measurement under contention (or a cached one marked so) is an error (exit 3); "
                        "nothing contended is cached")
    p.add_argument("--collectives", action="store_true",
                   help="also measure gloo all-to-all, reduce-scatter and all-reduce per message size (communication roofline)")
    p.add_argument("--world-sizes", default=None, metavar="N[,N...]",
                   help="world sizes of --collectives (default: 2; ranks run one thread each)")
    p.add_argument(
        "--compare",
        default=None,
        metavar="FILE",
        help="compare every figure with this machine JSON (a --remeasure compares with the replaced cache itself)",
    )
    p.add_argument(
        "--profile",
        default=None,
        metavar="PROFILE",
        help="with --compare FILE: re-measure only the roofs this profile's nodes were held to and print old vs new",
    )
    p.set_defaults(compare_profile=compare_profile)
