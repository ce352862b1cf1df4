"""Analyses over a Profile, as named steps: what the runner runs after collecting, and what
``recstack analyse`` re-runs on a saved profile against another machine file.

The flow is collect -> analyse -> render. Collecting needs the live model
and is the runner's (the timing and op passes, then the cost model,
:func:`recstack.costmodel.attach.attach_model_costs`, and the counter
replay, :func:`recstack.profiling.counters_replay.counters_for_profile`).
The steps here need only the Profile (and, for the roofline, a machine
file), so a saved profile can be analysed again without running anything:

``counters``
    each stage node's ``extra["counters"]`` from the stored per-stage
    summary ``extra["counters"]["stages"]``;
``roofline``
    every node's ``bound``, ``bound_basis``, ``bound_reason`` and
    ``roofline`` and the profile's ``extra["machine"]``
    (:func:`recstack.analysis.roofline.classify`), after removing those
    fields from every node and the profile, so nothing from an earlier
    machine remains; ``extra["machine"]`` also records the machine file
    (``file``: its path, or None for a machine passed as a dict) and
    ``sha256`` (of the machine figures as canonical JSON, whatever file
    they came from). Needs a machine;
``findings``
    ``extra["findings"]`` entries derived from the classification (kinds in
    :data:`FINDING_KINDS`): replaced each time, findings of other kinds are
    kept.

Every analysis is a function of the profile (and the machine) alone, registered in :data:`STEPS` by
:func:`register_analysis` (as HolisticTraceAnalysis's analyzers over one parsed trace): the runner, ``recstack
analyse``, ``recstack roofline`` (classifying a profile before drawing it), ``recstack machine --profile`` and
``recstack import --machine`` all run them through :func:`analyse`, and a new analysis is one decorated function.
Steps run in :data:`STEPS` order (the order they were registered); running a step also runs the steps that
read what it writes (``roofline`` brings ``findings``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recstack.errors import ConfigError

if TYPE_CHECKING:  # annotations only: the CLI imports this module at start-up (no schema, no numpy)
    from recstack.tree import Profile

CLASSIFICATION_KEYS = ("bound", "bound_basis", "bound_reason", "roofline")
FINDING_KINDS = ("stage_bound",)


@dataclass(frozen=True)
class Machine:
    """The machine figures an analysis classifies against, and where they came from."""

    figures: dict[str, Any]
    file: str | None = None

    @property
    def sha256(self) -> str:
        canonical = json.dumps(self.figures, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


MachineArg = Machine | dict[str, Any] | str | Path | None


def as_machine(machine: MachineArg, file: str | None = None) -> Machine | None:
    """A :class:`Machine` from a machine dict (``file`` names where it came from, if anywhere), a
    machine JSON path (loaded and validated: DataError naming the file), or None."""
    if machine is None or isinstance(machine, Machine):
        return machine
    from recstack.hardware.machine import load_machine, validate_machine  # lazy: torch (CLI start-up)

    if isinstance(machine, dict):
        return Machine(validate_machine(machine, file or "machine"), file)
    return Machine(load_machine(machine), str(machine))


@dataclass(frozen=True)
class Step:
    """One analysis: ``run(profile, machine)`` mutates the profile; ``then`` are the steps that read
    what it writes and so must run after it; ``check`` runs before any step does."""

    name: str
    run: Callable[[Profile, Machine | None], None]
    needs_machine: bool = False
    then: tuple[str, ...] = ()
    check: Callable[[Profile, Machine | None], None] | None = None  # raises on bad input, changes nothing


STEPS: dict[str, Step] = {}
"""The registry of analyses, by name, in the order they run."""


def register_analysis(name: str, *, needs_machine: bool = False, then: tuple[str, ...] = (),
                      check: Callable[[Profile, Machine | None], None] | None = None,
                      ) -> Callable[[Callable[[Profile, Machine | None], None]], Callable[[Profile, Machine | None], None]]:
    """Register ``run(profile, machine)`` as the analysis ``name`` (decorator): it reads only the profile and the
    machine and writes only into the profile, so a saved profile can be analysed again. ``then``: the analyses
    that read what it writes; ``check``: raises on input it cannot serve, before any analysis changes anything."""
    def add(run: Callable[[Profile, Machine | None], None]) -> Callable[[Profile, Machine | None], None]:
        if name in STEPS:
            raise ValueError(f"analysis {name!r} is registered already")
        STEPS[name] = Step(name, run, needs_machine, then, check)
        return run

    return add


def is_classified(profile: Profile) -> bool:
    """True when the profile carries a roofline classification (the machine figures it was made against)."""
    machine = profile.machine
    return isinstance(machine, dict) and "peak_flops" in machine


def clear_classification(profile: Profile) -> None:
    """Remove every roofline field a classification writes, from every node and the profile."""
    for node in profile.nodes():
        node.drop(*CLASSIFICATION_KEYS)
    del profile.machine


def stage_counters(profile: Profile) -> None:
    """Put each stage's counters from ``profile.counters["stages"]`` on its stage node
    (``counters``), after removing what any node held before; stages without counters get none."""
    for node in profile.nodes():
        del node.counters
    stages = (profile.counters or {}).get("stages") or {}
    for name, compact in stages.items():
        node = profile.stage(name)
        if node is not None and compact.get("available") is not False:
            node.counters = dict(compact)


@register_analysis("counters")
def _counters(profile: Profile, _machine: Machine | None) -> None:
    stage_counters(profile)


def _roofs_for(profile: Profile, machine: Machine | None) -> None:
    """Fail before anything changes when the machine cannot serve the profile (e.g. a cuda run
    against a machine file without GPU figures)."""
    from recstack.analysis.roofline import build_roofs  # lazy: torch (CLI start-up)

    assert machine is not None
    build_roofs(machine.figures, profile.run or {})


@register_analysis("roofline", needs_machine=True, then=("contention", "findings"), check=_roofs_for)
def _roofline(profile: Profile, machine: Machine | None) -> None:
    from recstack.analysis.roofline import classify  # lazy: torch (CLI start-up)

    assert machine is not None
    clear_classification(profile)
    classify(profile, machine.figures)
    profile.machine.update(file=machine.file, sha256=machine.sha256)


CPU_SHARE_EVIDENCE = "this process got "  # the closing line contention adds when anything was found


@register_analysis("contention", needs_machine=True)
def _contention_probe(profile: Profile, machine: Machine | None) -> None:
    """Judge the run's stored capacity probes again against ``machine``'s probe.

    The probes were measured during the run (``environment.contention.probe``);
    whether they show a slower host depends on the machine file they are
    compared with, so re-analysing against another file replaces that verdict
    (evidence, notes, ``detected``). Everything else in the record stays as measured.
    """
    from recstack.hardware.probe import compare_probe  # lazy: torch (CLI start-up)

    rec = (profile.environment or {}).get("contention")
    probe = rec.get("probe") if isinstance(rec, dict) else None
    if not isinstance(probe, dict) or not probe.get("before") or not probe.get("after"):
        return
    assert rec is not None
    old_ev, old_notes = set(probe.get("evidence") or []), set(probe.get("notes") or [])
    figures = machine.figures if machine is not None else {}
    ev, notes, record = compare_probe(
        probe["before"], probe["after"], figures.get("probe"), machine is not None, figures.get("measured_at"),
        machine_contention=figures.get("contention"), machine_file=machine.file if machine is not None else None,
    )
    kept = [e for e in rec.get("evidence") or [] if e not in old_ev and not e.startswith(CPU_SHARE_EVIDENCE)]
    closing = [e for e in rec.get("evidence") or [] if e.startswith(CPU_SHARE_EVIDENCE)]
    rec["evidence"] = kept + ev + (closing if kept or ev else [])
    rec["notes"] = [n for n in rec.get("notes") or [] if n not in old_notes] + notes
    rec["probe"] = record["probe"]
    rec["detected"] = bool(kept or ev)


@register_analysis("findings")
def _findings(profile: Profile, _machine: Machine | None) -> None:
    kept = [f for f in profile.findings or [] if f.get("kind") not in FINDING_KINDS]
    new = [f for stage in profile.root.children if (f := stage_bound_finding(stage.name, stage.extra))]
    if kept or new:
        profile.findings = kept + new
    else:
        del profile.findings


def stage_bound_finding(stage: str, extra: dict[str, Any]) -> dict[str, Any] | None:
    """``stage_bound``: a classified stage's bound class and ceiling fraction (None if unclassified)."""
    bound, roof = extra.get("bound"), extra.get("roofline") or {}
    frac = roof.get("ceiling_fraction")
    if bound is None or frac is None:
        return None
    key = str(roof.get("roof_key") or "")
    # The ceiling the fraction is against: the GEMM peak for a compute ceiling, else the memory roof.
    ceiling = f"{key.split('.', 1)[1]} GEMM" if key.startswith("gemm.") else f"{roof.get('roof')} roofline"
    finding: dict[str, Any] = {"kind": "stage_bound", "stage": stage, "value": frac, "unit": "fraction"}
    if roof.get("roof_suspect"):
        # Above the measured roof: the roof, not the stage, is the likely error; never a plain number.
        finding["roof_suspect"] = True
        finding["roof_suspect_reason"] = roof.get("roof_suspect_reason")
        finding["text"] = (
            f"{stage} is {bound}-bound at {frac:.0%}? of its {ceiling} ceiling ({roof.get('roof_suspect_reason')})"
        )
    else:
        finding["text"] = f"{stage} is {bound}-bound at {frac:.0%} of its {ceiling} ceiling"
    return finding


def select_steps(steps: Iterable[str] | None, has_machine: bool) -> list[str]:
    """The steps to run, in :data:`STEPS` order: ``steps`` and the steps that must follow them; None
    means every step, less those that need a machine when there is none."""
    if steps is None:
        return [n for n, s in STEPS.items() if has_machine or not s.needs_machine]
    wanted = set(steps)
    unknown = sorted(wanted - set(STEPS))
    if unknown:
        raise ConfigError(f"unknown analysis step(s) {unknown}: choose from {list(STEPS)}", field="steps")
    for name in list(STEPS):  # STEPS order: a step's followers come after it
        if name in wanted:
            wanted.update(STEPS[name].then)
    names = [n for n in STEPS if n in wanted]
    if not has_machine and (need := [n for n in names if STEPS[n].needs_machine]):
        raise ConfigError(f"step(s) {need} need a machine file", field="--machine")
    return names


def analyse(
    profile: Profile,
    machine: MachineArg = None,
    steps: Iterable[str] | None = None,
    *,
    machine_file: str | None = None,
) -> Profile:
    """Run the analysis ``steps`` (default: all that apply) on ``profile`` in place and return it.

    ``machine``: a machine dict (``machine_file`` says which file it was read
    from, if any), a machine JSON path, or None (the roofline step is then
    skipped, or refused if asked for). Bad input raises ConfigError/DataError
    before the profile is changed.
    """
    mach = as_machine(machine, machine_file)
    names = select_steps(steps, mach is not None)
    for name in names:
        if (check := STEPS[name].check) is not None:
            check(profile, mach)
    for name in names:
        STEPS[name].run(profile, mach)
    return profile


def roof_keys_used(profile: Any, machine: dict[str, Any]) -> set[str]:
    """The ``roofline.roof_key`` of every classified node (classifying against ``machine`` first when
    the profile carries none, e.g. one saved before roof keys existed)."""
    def keys() -> set[str]:
        return {
            str(k) for n in profile.root.walk() if (k := (n.roofline or {}).get("roof_key")) is not None
        }

    if not keys():
        analyse(profile, machine, steps=["roofline"])
    return keys()


__all__ = [
    "CLASSIFICATION_KEYS",
    "FINDING_KINDS",
    "STEPS",
    "Machine",
    "Step",
    "analyse",
    "as_machine",
    "clear_classification",
    "is_classified",
    "register_analysis",
    "roof_keys_used",
    "select_steps",
    "stage_counters",
]

