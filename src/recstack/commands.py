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
from typing import Any

from recstack.cli_types import (  # the generated run options live there (package commands reuse them)
    Parser,
    add_run_arguments,
    cli_default,  # noqa: F401  (re-exported: recstack.commands kept its names)
    cli_name,
    config_type,
    flag_of,  # noqa: F401
    int_at_least,
    run_config_from_args,
)
from recstack.config.run import RunConfig
from recstack.errors import ConfigError, ContendedRunError, RecstackError


# -- profile ------------------------------------------------------------------------------
def _save_atomic(prof: Any, path: Path) -> None:
    from recstack.outputs import atomic_output

    with atomic_output(path) as tmp:
        prof.save(tmp)


def strict_check(prof: Any, written: Path | None) -> None:
    """``--strict``: a contended run (``environment.contention.detected``), or one classified against a
    machine file measured under contention (``extra.machine.contended``), is an error (exit 3), after writing."""
    contention = prof.environment.get("contention") or {}
    where = f" (the profile is written to {written})" if written else ""
    if isinstance(contention, dict) and contention.get("detected"):
        evidence = "; ".join(str(e) for e in contention.get("evidence", [])[:2]) or "see environment.contention"
        raise ContendedRunError(f"--strict: the run was contended: {evidence}{where}")
    machine = prof.extra.get("machine") if isinstance(prof.extra, dict) else None
    if isinstance(machine, dict) and machine.get("contended"):
        raise ContendedRunError(f"--strict: the machine file {machine.get('file') or ''} was measured under "
                                f"contention: its roofs are suspect{where}; `recstack machine --remeasure` on a "
                                "quiet host")


def cmd_profile(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable, write_with_fallback

    # Everything that can be checked is checked before torch is imported or a model built.
    if args.output:
        check_writable(args.output, "-o/--output")
    if args.trace:
        check_writable(args.trace, "--trace")
    cfg = run_config_from_args(args)

    from recstack import api

    try:
        prof = api.profile_config(cfg, trace=args.trace)
    except ConfigError as exc:
        if exc.field in RunConfig.model_fields and exc.source is None:
            raise ConfigError(exc.detail, field=cli_name(exc.field)) from exc  # the flag the user typed
        raise
    written, why, failed = None, None, None
    if args.output:
        try:
            written, why = write_with_fallback(args.output, lambda p: _save_atomic(prof, p))
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
    if isinstance(prof.extra.get("machine"), dict):
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

    p = sub.add_parser("profile", help="profile a model: run -> stage -> module -> op")
    _add_profile_args(p)
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("show", help="render a saved profile JSON")
    p.add_argument("profile")
    p.add_argument("--depth", type=int_at_least("--depth", 0), default=3, help="tree depth to print")
    p.add_argument("--top", type=int_at_least("--top", 1), default=8, help="children shown per node")
    p.add_argument("--explain-stages", action="store_true",
                   help="print how each stage root was found (the rule, the op and inputs that decided) instead")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("demo", help="the main job: profile a zoo model and write its profile and trace")
    p.add_argument("--model", default="rmc1", help="zoo id or model YAML")
    p.add_argument("--scale", type=config_type("scale", "--scale"), default=0.05, help="scale of the tables' rows")
    p.add_argument("--batch-size", type=config_type("batch_size", "--batch-size"), default=512,
                   help="samples per batch")
    p.add_argument("--out", default="out/demo", help="folder for the profile, trace, roofline and report")
    p.add_argument("--machine", default="auto", metavar="FILE|auto",
                   help="machine file; 'auto' (default) for this host's, measured once (quick) if absent")
    p.set_defaults(func=cmd_demo)

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
