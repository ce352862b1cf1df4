"""``recstack analyse``: run the analysis steps again on a saved profile, against a machine file.

``register(subparsers)`` adds the command. Nothing is re-measured: the steps
of :mod:`recstack.analysis.pipeline` read the profile and the machine file,
and the re-analysed profile is written to ``-o``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from recstack.analysis.pipeline import STEPS, Machine, analyse, as_machine, select_steps

if TYPE_CHECKING:
    from recstack.tree import Profile

HOST = "auto"  # the one word every --machine takes for this host's machine file (hardware.machine.AUTO)


def machine_arg(value: str) -> Machine:
    """``--machine``: a machine JSON file, or ``auto`` for this host's cached figures (measured
    ``--quick`` and cached when there are none; :func:`recstack.hardware.machine.machine_with_file`)."""
    from recstack.hardware.machine import AUTO, machine_with_file, machine_word

    if machine_word(value) != AUTO:  # a file: recorded as given
        machine = as_machine(value)
    else:
        figures, file = machine_with_file(AUTO, measure=True,
                                          progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
        machine = as_machine(figures, file)
    assert machine is not None
    return machine


def stage_bound_lines(profile: Profile) -> list[str]:
    """One line per stage: its bound class and ceiling fraction, or why it has none."""
    lines = []
    for stage in profile.root.children:
        r = stage.roofline or {}
        frac = r.get("ceiling_fraction")
        what = (
            f"{frac:6.1%} of the {r.get('roof')} roofline ceiling"
            + (f"  [roof suspect: {r.get('roof_suspect_reason')}]" if r.get("roof_suspect") else "")
            if frac is not None
            else f"({stage.bound_reason})"
        )
        lines.append(f"{stage.name:20s} {str(stage.bound):9s} {what}")
    return lines


def _steps(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [n for n in names if n not in STEPS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"--steps must list steps from {', '.join(STEPS)} (got {text!r})")
    return names


def cmd_analyse(args: argparse.Namespace) -> int:
    from recstack.outputs import check_writable

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


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``analyse`` to the main CLI's sub-parsers."""
    p = sub.add_parser(
        "analyse",
        help="re-run the analyses of a saved profile (roofline classification, ...) against a machine file",
        description="Re-classify a saved profile against a machine file without re-running the model: every "
        "earlier classification is removed first, and the profile records which machine it was classified "
        f"against. Steps: {', '.join(STEPS)}.",
    )
    p.add_argument("profile", help="profile JSON (from recstack profile -o)")
    p.add_argument("-o", "--output", required=True, help="where to write the analysed profile JSON")
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
    p.set_defaults(func=cmd_analyse)


__all__ = ["cmd_analyse", "machine_arg", "register", "stage_bound_lines"]
