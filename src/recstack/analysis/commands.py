"""``recstack analyse`` and ``recstack roofline``: the analyses of a saved profile, against a machine file.

``register(subparsers)`` adds the commands. Nothing of the model is re-run: the steps
of :mod:`recstack.analysis.pipeline` read the profile and the machine file. ``analyse``
writes the re-analysed profile to ``-o``; ``roofline`` draws its chart.
``cmd_machine_compare_profile`` is ``recstack machine --compare FILE --profile PROFILE``
(the CLI registry hands it to :mod:`recstack.hardware.commands`, which knows nothing of profiles).
"""

from __future__ import annotations

import argparse
import json
import sys

from recstack.analysis.machine_file import HOST, machine_arg
from recstack.analysis.pipeline import STEPS, analyse, is_classified, roof_keys_used, select_steps
from recstack.cli_base import add_command, add_profile_input
from recstack.errors import ConfigError


def _steps(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [n for n in names if n not in STEPS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"--steps must list steps from {', '.join(STEPS)} (got {text!r})")
    return names


def cmd_analyse(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable
    from recstack.render.roofline_text import stage_bound_lines

    out = check_writable(args.output, "-o")
    from recstack.tree import Profile  # lazy: the profile schema (CLI start-up)

    profile = Profile.load(args.profile)
    machine = machine_arg(args.machine) if args.machine is not None else None
    steps = select_steps(args.steps or list(STEPS), machine is not None)
    analyse(profile, machine, steps=steps)
    profile.save(out)
    mach = profile.machine or {}
    if machine is not None:
        print(f"classified against {machine.file} ({mach.get('host')}, {mach.get('cpu_model')})")
        print("\n".join(stage_bound_lines(profile)))
    print(f"analysed profile (steps: {', '.join(steps)}) written to {out}")
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    """Draw the classification stored in the profile; with ``--machine`` (or when the profile has
    none: this host's figures) the analysis pipeline classifies it first."""
    from recstack.outputs import check_writable
    from recstack.render.roofline_chart import output_paths, render_roofline
    from recstack.render.roofline_text import stage_bound_lines
    from recstack.tree import Profile

    if args.top < 0:
        raise ConfigError(f"must be >= 0 (got {args.top})", field="--top")
    output_paths(args.output)  # reject a bad extension before any measuring
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


def cmd_machine_compare_profile(args: argparse.Namespace) -> int:
    """``machine --compare FILE --profile PROFILE``: re-measure only the roofs the profile used."""
    from recstack.hardware.machine import load_machine, remeasure
    from recstack.hardware.repeatability import compare_machines, figure_matches
    from recstack.render.machine import format_old_vs_new
    from recstack.render.progress import measuring_lines
    from recstack.tree import Profile

    if not args.compare:
        raise ConfigError("needs --compare FILE (the machine file whose roofs the profile was held to)", field="--profile")
    old = load_machine(args.compare)
    profile = Profile.load(args.profile)
    keys = roof_keys_used(profile, old)
    new = remeasure(old, keys, progress=measuring_lines())
    cmp = compare_machines(new, old)
    cmp["figures"] = [r for r in cmp["figures"] if figure_matches(r, keys)]
    if args.json:
        sys.stdout.write(json.dumps({"roof_keys": sorted(keys), "remeasured": new["remeasured"], "comparison": cmp}, indent=1) + "\n")
        return 0
    print(format_old_vs_new(cmp, keys, args.compare))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``roofline`` and ``analyse`` to the main CLI's sub-parsers."""
    p = add_command(
        sub, "roofline", cmd_roofline,
        help="draw a profile's roofline chart (classifying it against a machine file first if asked)",
        description="Plot stages and top ops against the roofs the profile was classified against "
        "(memory-, compute- or overhead-bound); see also `recstack analyse`.",
    )
    add_profile_input(p, "chart file: .png (an .svg is written alongside) or .svg")
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
    p = add_command(
        sub, "analyse", cmd_analyse,
        help="re-run the analyses of a saved profile (roofline classification, ...) against a machine file",
        description="Re-classify a saved profile against a machine file without re-running the model: every "
        "earlier classification is removed first, and the profile records which machine it was classified "
        f"against. Steps: {', '.join(STEPS)}.",
    )
    add_profile_input(p, "where to write the analysed profile JSON")
    p.add_argument(
        "--machine",
        default=None,
        metavar="FILE|auto",
        help=f"machine JSON (from recstack machine), or '{HOST}' for this host's machine file "
        "(measured --quick if absent); needed by the roofline step",
    )
    p.add_argument(
        "--steps",
        type=_steps,
        default=None,
        help=f"comma-separated steps to run (default: all: {','.join(STEPS)}); a step also runs the steps "
        "that read what it writes",
    )


__all__ = ["cmd_analyse", "cmd_machine_compare_profile", "cmd_roofline", "register"]
