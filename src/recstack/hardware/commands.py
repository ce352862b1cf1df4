"""CLI commands ``recstack machine`` and ``recstack roofline``.

``register(subparsers)`` adds both; each sub-parser sets ``func`` to a
callable ``(args) -> int``. Bad input raises :class:`~recstack.errors.RecstackError`
subclasses (the main CLI prints ``error: <msg>`` and exits 2). Progress goes
to stderr so that ``--json`` output on stdout stays parseable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from recstack.errors import ConfigError
from recstack.units import binary, si


def _stderr_progress() -> Callable[[str], None]:
    """Print one line per benchmark step (set-up lines once per kind, every timing round) to stderr."""
    last = [""]

    def say(msg: str) -> None:
        key = " ".join(msg.split()[:2])
        if key != last[0] or " round " in msg:
            last[0] = key
            sys.stderr.write(f"  measuring: {msg}\n")
            sys.stderr.flush()

    return say


def _stat(st: dict[str, Any], unit: str) -> str:
    med, lo, hi = (si(st[k], unit, digits=4, missing="n/a") for k in ("median", "min", "max"))
    return f"{med} [{lo} .. {hi}, n={st['repeats']}]"


def format_machine(m: dict[str, Any], counters: dict[str, Any] | None = None) -> str:
    """Human-readable summary of a machine dict (medians with [min .. max, repeats])."""
    out = [
        f"machine: {m['host']}  {m['cpu_model']}  ({m.get('cpus', '?')} CPUs)",
        f"measured {m['measured_at']}  mode {m.get('mode', 'quick' if m['quick'] else 'full')}"
        f"  in {m.get('duration_s', 0):.0f} s  load avg before/after {m.get('load_avg', {}).get('before')}"
        f" / {m.get('load_avg', {}).get('after')}",
    ]
    out += [f"note: {n}" for n in m.get("notes", [])]
    out.append(
        "caches: "
        + ", ".join(
            f"L{c['level']} {c['type']} {binary(c['size_bytes'])} x{c['instances']}" for c in m["caches"]
        )
    )
    out.append("GEMM FLOP/s  median [min .. max, repeats]:")
    for dt, entry in m["gemm_flops"].items():
        if not isinstance(entry, dict) or "by_threads" not in entry:
            continue
        tag = " (emulated)" if entry.get("emulated") else ""
        for t, st in sorted(entry["by_threads"].items(), key=lambda kv: int(kv[0])):
            out.append(f"  {dt}{tag:11s} {int(t):3d} thread(s): {_stat(st, 'FLOP/s')}  n={st.get('n')}")
    sb = m["stream_bandwidth"]
    out.append(f"stream bandwidth ({binary(sb.get('array_bytes', 0))} arrays):")
    for t, kinds in sorted(sb["by_threads"].items(), key=lambda kv: int(kv[0])):
        out.append(
            f"  {int(t):3d} thread(s): copy {_stat(kinds['copy'], 'B/s')}  triad {_stat(kinds['triad'], 'B/s')}"
        )
    gb = m["gather_bandwidth"]
    out.append(f"gather bandwidth ({gb.get('kernel', 'index_select')}), median bytes/s [min .. max]:")
    for c in gb["grid"]:
        turn = int(c.get("tables_in_turn", 1))
        what = f"{binary(c['table_bytes']):>9s} table" + (f" x {turn} in turn" if turn > 1 else "")
        out.append(
            f"  {c['threads']:3d} thr {c['dist']:7s} {c['row_bytes']:4d} B rows  {what}: "
            f"{_stat(c['bandwidth'], 'B/s')}  unique {c.get('unique_fraction', 0):.0%}"
        )
    lat = m["latency_ns"]
    how = lat.get("method") if lat.get("method") in ("native", "python-fallback") else "Python loop (older file)"
    trust = "" if lat.get("trusted") else "; not trusted, not used for classification"
    out.append(
        f"latency (ns per dependent load, {how}{trust}): "
        + ", ".join(
            f"{s.get('level', '')} {binary(s['bytes'])}: {s['ns']['median']:.1f} [{s['ns']['min']:.1f} .. {s['ns']['max']:.1f}]".strip()
            for s in lat.get("by_size", [])
        )
    )
    stops = [
        (name, st)
        for name, st in (
            ("fp32 GEMM", m["gemm_flops"].get("fp32", {}).get("stopping")),
            ("bf16 GEMM", (m["gemm_flops"].get("bf16") or {}).get("stopping")),
            ("stream", sb.get("stopping")),
            ("gather", gb.get("stopping")),
        )
        if st
    ]
    if stops:
        out.append(
            "repeats: " + ", ".join(f"{name} {st['rounds']} rounds ({st['stopped_by']})" for name, st in stops)
        )
    gpu = m.get("gpu")
    if gpu:
        out.append(f"gpu: {gpu['name']}  HBM copy {_stat(gpu['hbm_bandwidth']['copy'], 'B/s')}")
        for dt, st in gpu["gemm_flops"].items():
            out.append(f"  {dt} GEMM: {_stat(st, 'FLOP/s')}")
    if counters is not None:
        if counters.get("available"):
            out.append(
                f"hardware counters: available ({', '.join(counters.get('events', []))}; top-down {counters.get('topdown')})"
            )
        else:
            out.append(f"hardware counters: unavailable: {counters.get('reason')}")
    return "\n".join(out)


def roof_keys_used(profile: Any, machine: dict[str, Any]) -> set[str]:
    """The ``roofline.roof_key`` of every classified node (classifying against ``machine`` first when
    the profile carries none, e.g. one saved before roof keys existed)."""
    from recstack.analysis.pipeline import analyse

    def keys() -> set[str]:
        return {
            str(k) for n in profile.root.walk() if (k := (n.roofline or {}).get("roof_key")) is not None
        }

    if not keys():
        analyse(profile, machine, steps=["roofline"])
    return keys()


def _figure_matches(row: dict[str, Any], keys: set[str]) -> bool:
    if row["group"] == "gemm":
        return any(k.startswith("gemm.") and row["figure"].startswith(k.split(".", 1)[1] + " GEMM") for k in keys)
    return row["group"] in keys


def format_old_vs_new(cmp: dict[str, Any], keys: set[str], old_file: str) -> str:
    """Old vs new value of every re-measured roof figure at the roof statistic."""
    rows = [r for r in cmp["figures"] if r["stat"] == cmp["roof_statistic"] and _figure_matches(r, keys)]
    units = {"gemm": "FLOP/s", "stream": "B/s", "gather": "B/s"}
    out = [f"re-measured the roofs the profile used ({', '.join(sorted(keys))}); old = {old_file}, best repeat:"]
    width = max((len(r["figure"]) for r in rows), default=10)
    for r in rows:
        u = units.get(r["group"], "")
        old, new = (si(r[k], u, digits=4, missing="n/a") for k in ("before", "now"))
        out.append(f"  {r['figure']:{width}s}  old {old:>12s}  new {new:>12s}  {r['change']:+.1%}")
    if not rows:
        out.append("  (no figure of these roofs in common)")
    return "\n".join(out)


def cmd_machine_compare_profile(args: argparse.Namespace) -> int:
    """``machine --compare FILE --profile PROFILE``: re-measure only the roofs the profile used."""
    from recstack.hardware.machine import remeasure
    from recstack.hardware.repeatability import compare_machines
    from recstack.tree import Profile

    if not args.compare:
        raise ConfigError("needs --compare FILE (the machine file whose roofs the profile was held to)", field="--profile")
    from recstack.hardware.machine import load_machine

    old = load_machine(args.compare)
    profile = Profile.load(args.profile)
    keys = roof_keys_used(profile, old)
    new = remeasure(old, keys, progress=_stderr_progress())
    cmp = compare_machines(new, old)
    cmp["figures"] = [r for r in cmp["figures"] if _figure_matches(r, keys)]
    if args.json:
        sys.stdout.write(json.dumps({"roof_keys": sorted(keys), "remeasured": new["remeasured"], "comparison": cmp}, indent=1) + "\n")
        return 0
    print(format_old_vs_new(cmp, keys, args.compare))
    return 0


def parse_world_sizes(text: str) -> list[int]:
    """``--world-sizes 2,4`` -> [2, 4] (each within 2..64)."""
    try:
        sizes = sorted({int(w) for w in text.split(",") if w.strip()})
    except ValueError:
        raise ConfigError(f"must be world sizes like 2,4 (got {text!r})", field="--world-sizes") from None
    if not sizes or min(sizes) < 2 or max(sizes) > 64:
        raise ConfigError(f"must be world sizes within 2..64 (got {text!r})", field="--world-sizes")
    return sizes


def _with_collectives(machine: dict[str, Any], sizes: list[int], quick: bool, path: Any) -> dict[str, Any]:
    """Add the all-to-all / all-reduce benchmark (``machine --collectives``) and keep it in ``path``
    (the cache, or where a contended measurement was kept)."""
    from recstack.hardware.collectives import measure_collectives
    from recstack.hardware.machine import save_machine

    sys.stderr.write(f"  measuring: all-to-all, reduce-scatter and all-reduce (gloo) at world sizes {sizes}\n")
    machine = {**machine, "collectives": measure_collectives(sizes, quick=quick)}
    save_machine(machine, path)
    return machine


def cmd_machine(args: argparse.Namespace) -> int:
    from recstack.hardware.counters import detect_perf
    from recstack.hardware.machine import cached_or_measured, load_machine
    from recstack.hardware.measure_checks import summary
    from recstack.hardware.repeatability import (
        compare_machines,
        format_comparison,
        format_spread,
        within_run_spread,
    )

    if getattr(args, "profile", None):
        return cmd_machine_compare_profile(args)
    other = load_machine(args.compare) if args.compare else None  # a bad file fails before measuring
    if args.world_sizes is not None and not args.collectives:  # given alone it would be silently ignored
        parse_world_sizes(args.world_sizes)
        raise ConfigError("--world-sizes applies to --collectives; add --collectives or drop it",
                          field="--world-sizes")
    world_sizes = parse_world_sizes(args.world_sizes or "2") if args.collectives else None  # before measuring
    from recstack.render.progress import finish, reporter

    progress = reporter(_stderr_progress())  # a progress phase per benchmark group, besides the lines
    machine, kept, measured = cached_or_measured(args.remeasure, args.quick, progress=progress, strict=args.strict,
                                                 any_mode=not args.remeasure)
    finish()
    if world_sizes:
        machine = _with_collectives(machine, world_sizes, args.quick, kept)
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


def cmd_roofline(args: argparse.Namespace) -> int:
    """Draw the classification stored in the profile; with ``--machine`` (or when the profile has
    none: this host's figures) the analysis pipeline classifies it first."""
    from recstack.analysis.commands import HOST, machine_arg, stage_bound_lines
    from recstack.analysis.pipeline import analyse, is_classified
    from recstack.render.roofline_chart import output_paths, render_roofline
    from recstack.tree import Profile

    if args.top < 0:
        raise ConfigError(f"must be >= 0 (got {args.top})", field="--top")
    output_paths(args.output)  # reject a bad extension before any measuring
    from recstack.outputs import check_writable

    check_writable(args.output, "-o/--output")
    if args.save_profile:
        check_writable(args.save_profile, "--save-profile")
    profile = Profile.load(args.profile)
    if args.machine is not None or not is_classified(profile):
        analyse(profile, machine_arg(args.machine or HOST), steps=["roofline"])
    written = render_roofline(profile, args.output, top_ops=args.top)
    print("\n".join(stage_bound_lines(profile)))
    if args.save_profile:
        profile.save(args.save_profile)
        print(f"classified profile written to {args.save_profile}")
    print("chart written to " + ", ".join(str(p) for p in written))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``machine`` and ``roofline`` to the main CLI's sub-parsers."""
    p = subparsers.add_parser(
        "machine",
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
    p.set_defaults(func=cmd_machine)
    p = subparsers.add_parser(
        "roofline",
        help="draw a profile's roofline chart (classifying it against a machine file first if asked)",
        description="Plot stages and top ops against the roofs the profile was classified against "
        "(memory-, compute- or overhead-bound); see also `recstack analyse`.",
    )
    p.add_argument("profile", help="profile JSON (from recstack profile -o)")
    p.add_argument(
        "-o", "--output", required=True, help="chart file: .png (an .svg is written alongside) or .svg"
    )
    p.add_argument(
        "--machine",
        default=None,
        metavar="FILE|auto",
        help="classify against this machine file first, 'auto' for this host's (default: draw the profile's own "
        "classification; if it has none, this host's machine file, measured --quick if absent)",
    )
    p.add_argument(
        "--top", type=int, default=10, help="how many top ops to plot beside the stages (default 10; 0: stages only)"
    )
    p.add_argument("--save-profile", default=None, help="also write the classified profile JSON here")
    p.set_defaults(func=cmd_roofline)
