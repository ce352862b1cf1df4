"""CLI commands beyond zoo and workload: profile, show, demo.

The run options of ``recstack profile`` are generated from
:class:`~recstack.config.run.RunConfig`'s fields by :func:`add_run_arguments`
(flag ``--batch-size`` for field ``batch_size``, choices from ``Literal``
types, help from the description, ranges checked by RunConfig so that errors
name the flag); only output options (``-o``, ``--trace``, ``--depth``,
``--top``, ``--strict``, ``--config``) are written here (``--quiet`` and
``--debug`` are global: :mod:`recstack.cli`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recstack.cli_base import Parser, add_command, int_at_least
from recstack.cli_types import (  # the generated run options live there (package commands reuse them)
    add_run_arguments,
    cli_default,  # noqa: F401  (re-exported: recstack.commands kept its names)
    config_type,
    flag_of,  # noqa: F401
    flags_named,
    run_config_from_args,
)
from recstack.errors import RecstackError


def cmd_profile(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable, save_atomic, write_with_fallback

    # Everything that can be checked is checked before torch is imported or a model built.
    if args.output:
        check_writable(args.output, "-o/--output")
    if args.trace:
        check_writable(args.trace, "--trace")
    cfg = run_config_from_args(args)

    from recstack.session import profile_config

    with flags_named():  # an error names the flag the user typed
        prof = profile_config(cfg, trace=args.trace, memory=args.memory)
    written, why, failed = None, None, None
    if args.output:
        try:
            written, why = write_with_fallback(args.output, lambda p: save_atomic(prof, p))
        except OSError as exc:
            failed = exc
    from recstack.render.terminal import profile_tree

    profile_tree(prof, depth=args.depth, top=args.top)
    if failed is not None:
        raise RecstackError(f"cannot write the profile to {args.output} nor to a fallback file ({failed})")
    if written is not None:
        if why is not None:
            print(f"cannot write {args.output} ({why}); profile written to {written} instead")
        else:
            print(f"profile written to {written}")
    if args.trace:
        trace = prof.run.get("trace")
        if trace:
            print(f"trace written to {trace} (open in Perfetto or chrome://tracing)")
        else:
            print(f"no trace written to {args.trace} (the op pass did not run)")
    if args.strict:
        from recstack.profiling.environment import strict_check

        strict_check(prof, written)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from recstack.render.terminal import profile_tree
    from recstack.tree import Profile

    prof = Profile.load(args.profile)
    if args.explain_stages:
        from recstack.render.stages import explain_stages

        print(explain_stages(prof.run))
        return 0
    profile_tree(prof, depth=args.depth, top=args.top)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable
    from recstack.zoo.config import load_model_config

    out = Path(args.out)
    load_model_config(args.model)  # a bad --model fails before the folder exists
    name = Path(args.model).stem
    check_writable(out / f"{name}.profile.json", "--out")
    out.mkdir(parents=True, exist_ok=True)
    if args.machine == "auto":
        from recstack.hardware.machine import get_machine

        print("recstack demo: measuring this machine (quick; cached per host) for the roofline ...")
        sys.stdout.flush()
        from recstack.render.progress import finish, reporter

        get_machine(quick=True, progress=reporter())
        finish()
    ns = build_profile_parser().parse_args(
        [
            args.model,
            "--scale", str(args.scale),
            "--batch-size", str(args.batch_size),
            "--workload", "production",
            "--iters", "10",
            "--warmup", "3",
            "-o", str(out / f"{name}.profile.json"),
            "--trace", str(out / f"{name}.trace.json"),
            "--machine", args.machine,
        ]
    )
    print(f"recstack demo: profiling {args.model} (scale {args.scale}, batch {args.batch_size}, production workload)")
    sys.stdout.flush()
    rc = cmd_profile(ns)
    if rc:
        return rc
    from recstack.report import write_report
    from recstack.tree import Profile

    prof = Profile.load(ns.output)
    if isinstance(prof.machine, dict):
        from recstack.render.roofline_chart import render_roofline

        charts = render_roofline(prof, out / f"{name}.roofline.png")
        print("roofline chart written to " + ", ".join(str(c) for c in charts))
    html = write_report(prof, out / f"{name}.report.html")
    print(f"report written to {html.resolve()}")
    return 0


def _add_profile_args(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument("--config", default=None, metavar="RUN.yaml",
                   help="load the run options from YAML (RunConfig fields); flags given override them")
    p.add_argument("-o", "--output", default=None, help="write the profile JSON here")
    p.add_argument("--trace", default=None, help="write a Chrome/Perfetto trace here")
    p.add_argument("--memory", action="store_true", help="also run the memory pass: one more untimed step under "
                   "torch.profiler's memory events, each stage's allocator peak (docs/memory.md)")
    p.add_argument("--depth", type=int_at_least("--depth", 0), default=3, help="tree depth to print")
    p.add_argument("--top", type=int_at_least("--top", 1), default=8, help="children shown per node")
    p.add_argument("--strict", action="store_true",
                   help="exit 3 if the run was contended (the profile is still written)")


def build_profile_parser() -> argparse.ArgumentParser:
    p = Parser(prog="recstack profile")
    _add_profile_args(p)
    return p


def register_all(sub: argparse._SubParsersAction) -> None:
    from recstack.report.commands import register as register_report

    p = add_command(sub, "profile", cmd_profile, help="profile a model: run -> stage -> module -> op")
    _add_profile_args(p)

    p = add_command(sub, "show", cmd_show, help="render a saved profile JSON")
    p.add_argument("profile")
    p.add_argument("--depth", type=int_at_least("--depth", 0), default=3, help="tree depth to print")
    p.add_argument("--top", type=int_at_least("--top", 1), default=8, help="children shown per node")
    p.add_argument("--explain-stages", action="store_true",
                   help="print how each stage root was found (the rule, the op and inputs that decided) instead")

    p = add_command(sub, "demo", cmd_demo, help="the main job: profile a zoo model and write its profile and trace")
    p.add_argument("--model", default="rmc1", help="zoo id or model YAML")
    p.add_argument("--scale", type=config_type("scale", "--scale"), default=0.05, help="scale of the tables' rows")
    p.add_argument("--batch-size", type=config_type("batch_size", "--batch-size"), default=512,
                   help="samples per batch")
    p.add_argument("--out", default="out/demo", help="folder for the profile, trace, roofline and report")
    p.add_argument("--machine", default="auto", metavar="FILE|auto",
                   help="machine file; 'auto' (default) for this host's, measured once (quick) if absent")

    register_report(sub)
    from recstack.analysis.commands import cmd_machine_compare_profile
    from recstack.analysis.commands import register as register_analyse
    from recstack.hardware.commands import register as register_hardware

    register_hardware(sub, cmd_machine_compare_profile)
    register_analyse(sub)
    from recstack.schema.commands import register as register_schema

    register_schema(sub)
    from recstack.serving.commands import register as register_serve

    register_serve(sub)
    from recstack.correlate.commands import register as register_correlate

    register_correlate(sub)
    from recstack.sharing.commands import register as register_share

    register_share(sub)
    from recstack.sweeps.commands import register as register_sweep

    register_sweep(sub)
    from recstack.distributed.commands import register as register_distributed

    register_distributed(sub)
    from recstack.traceimport.commands import register as register_import

    register_import(sub)
    from recstack.memory.commands import register as register_memory

    register_memory(sub)
    from recstack.compilation.commands import register as register_compile

    register_compile(sub, add_run_arguments, run_config_from_args)
    from recstack.advisor.commands import register as register_advise

    register_advise(sub)
