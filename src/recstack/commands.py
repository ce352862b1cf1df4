"""CLI commands beyond zoo and workload: profile, show, demo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recstack.cli_types import int_at_least, positive_float


def cmd_profile(args: argparse.Namespace) -> int:
    from recstack import api
    from recstack.render.terminal import profile_tree

    common = dict(
        mode=args.mode,
        iters=args.iters,
        warmup=args.warmup,
        op_iters=args.op_iters,
        threads=args.threads,
        dtype=args.dtype,
        optimizer=args.optimizer,
        stage_rules=args.stage_rules,
        trace=args.trace,
        seed=args.seed,
        machine=None if args.machine == "none" else args.machine,
    )
    if ":" in args.model and not Path(args.model).exists():
        factory = api.load_factory(args.model)
        model, batch_fn = factory(args.batch_size, args.seed)
        prof = api.profile(
            model, batch_fn, batch_size=args.batch_size, run_info={"model": args.model, "backend": "user"}, **common
        )
    else:
        prof = api.profile_zoo(
            args.model,
            scale=args.scale,
            batch_size=args.batch_size,
            workload=args.workload,
            backend=args.backend,
            table_dtype=args.table_dtype,
            tasks=args.tasks,
            **common,
        )
    if args.output:
        prof.save(args.output)
    profile_tree(prof, depth=args.depth, top=args.top)
    if args.output:
        print(f"profile written to {args.output}")
    if args.trace:
        print(f"trace written to {args.trace} (open in Perfetto or chrome://tracing)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from recstack.render.terminal import profile_tree
    from recstack.tree import Profile

    profile_tree(Profile.load(args.profile), depth=args.depth, top=args.top)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from recstack.hardware.machine import get_machine

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.machine == "auto":
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
            "-o", str(out / f"{args.model}.profile.json"),
            "--trace", str(out / f"{args.model}.trace.json"),
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

        charts = render_roofline(prof, out / f"{args.model}.roofline.png")
        print("roofline chart written to " + ", ".join(str(c) for c in charts))
    html = write_report(prof, out / f"{args.model}.report.html")
    print(f"report written to {html.resolve()}")
    return 0


def _add_profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo id (rmc1 ... dien), a model YAML file, or package.module:factory")
    p.add_argument("--scale", type=positive_float("--scale"), default=1.0, help="scale table rows (default 1)")
    p.add_argument("--batch-size", type=int_at_least("--batch-size", 1), default=1024)
    p.add_argument("--workload", default="uniform", help="preset (uniform, production) or a workload spec YAML")
    p.add_argument("--mode", choices=("inference", "train"), default="inference")
    p.add_argument("--optimizer", choices=("sgd", "adagrad"), default="sgd")
    p.add_argument("--threads", type=int_at_least("--threads", 1), default=None)
    p.add_argument("--backend", choices=("torch", "torchrec", "tbe"), default="torch")
    p.add_argument("--table-dtype", choices=("fp32", "fp16", "int8"), default="fp32", help="tbe inference only")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="dense-layer dtype")
    p.add_argument("--tasks", type=int_at_least("--tasks", 1), default=None, help="tasks (mtwnd only)")
    p.add_argument("--iters", type=int_at_least("--iters", 2), default=20, help="timed steps per pass")
    p.add_argument("--warmup", type=int_at_least("--warmup", 0), default=5)
    p.add_argument("--op-iters", type=int_at_least("--op-iters", 1), default=3, help="steps in the op pass")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stage-rules", default=None, help="YAML with rules: [{match: <glob>, stage: <stage>}]")
    p.add_argument("-o", "--output", default=None, help="write the profile JSON here")
    p.add_argument("--trace", default=None, help="write a Chrome/Perfetto trace here")
    p.add_argument(
        "--machine",
        default="auto",
        help="machine file for the roofline and bound classes (recstack machine --json > m.json); "
        "'auto' (default) uses this host's cached measurement if present, 'none' skips",
    )
    p.add_argument("--depth", type=int_at_least("--depth", 0), default=3, help="tree depth to print")
    p.add_argument("--top", type=int_at_least("--top", 1), default=8, help="children shown per node")


def build_profile_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="recstack profile")
    _add_profile_args(p)
    return p


def register_all(sub: argparse._SubParsersAction) -> None:
    from recstack.report.commands import register as register_report

    p = sub.add_parser("profile", help="profile a model: run -> stage -> module -> op")
    _add_profile_args(p)
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("show", help="render a saved profile JSON")
    p.add_argument("profile")
    p.add_argument("--depth", type=int_at_least("--depth", 0), default=3)
    p.add_argument("--top", type=int_at_least("--top", 1), default=8)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("demo", help="the main job: profile a zoo model and write its profile and trace")
    p.add_argument("--model", default="rmc1")
    p.add_argument("--scale", type=positive_float("--scale"), default=0.05)
    p.add_argument("--batch-size", type=int_at_least("--batch-size", 1), default=512)
    p.add_argument("--out", default="out/demo")
    p.add_argument("--machine", default="auto", help="machine file; 'auto' (default) measures this host once (quick)")
    p.set_defaults(func=cmd_demo)

    register_report(sub)
    from recstack.hardware.commands import register as register_hardware

    register_hardware(sub)
    from recstack.analysis.commands import register as register_analyse

    register_analyse(sub)
    from recstack.schema.commands import register as register_schema

    register_schema(sub)

