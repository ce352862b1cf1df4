"""``recstack show --explain-stages``: how each stage root of a profile was found, and the evidence.

Plain text from ``profile.run`` only (``stage_roots`` with their ``evidence``, ``never_ran_roots``,
``stage_methods``, ``model_code``, ``unassigned_modules``); docs/profiling.md ("How stages are found") says how to read it.
"""

from __future__ import annotations

from typing import Any

from recstack.stage_names import ALL_STAGES

_SHOW = 4  # roots named per container before "+N more"


def _evidence_lines(ev: dict[str, Any] | None) -> list[str]:
    if not ev:
        return ["    (no evidence recorded: a profile from before recstack found stages by dataflow)"]
    lines = [f"    {ev.get('basis', '?')}: {ev.get('why') or ''}".rstrip()]
    if ev.get("op"):
        lines.append(f"    op: {ev['op']} in {ev.get('module') or '<model>'}")
    for i, inp in enumerate(ev.get("inputs") or []):
        lines.append(f"    {'inputs: ' if i == 0 else '        '}{inp}")
    if ev.get("ops_by_stage"):
        lines.append("    ops by stage: " + ", ".join(f"{k} {v}" for k, v in sorted(ev["ops_by_stage"].items())))
    if ev.get("hint"):
        lines.append(f"    name/type hint: {ev['hint']}")
    return lines


def explain_stages(run: dict[str, Any]) -> str:
    """The explanation as text: per stage, its roots (a never-run container's heirs once), rule and evidence."""
    roots: dict[str, dict[str, Any]] = run.get("stage_roots") or {}
    never: dict[str, dict[str, Any]] = run.get("never_ran_roots") or {}
    out = [f"stages of {run.get('model', '?')}: each stage root, the rule that placed it and why"]
    stages = sorted({r.get("stage", "?") for r in roots.values()},
                    key=lambda s: ALL_STAGES.index(s) if s in ALL_STAGES else 99)
    for stage in stages:
        out.append(f"\n{stage}")
        shown: set[str] = set()
        for path, r in roots.items():
            if r.get("stage") != stage or path in shown:
                continue
            container = next((c for c, n in never.items() if path in (n.get("handed_to") or [])), None)
            if container is not None:
                heirs = never[container]["handed_to"]
                shown.update(heirs)
                names = ", ".join(heirs[:_SHOW]) + (f" +{len(heirs) - _SHOW} more" if len(heirs) > _SHOW else "")
                out.append(f"  {container}  [{never[container].get('rule')}; never ran itself: its {len(heirs)} "
                           f"running modules are the roots: {names}]")
            else:
                out.append(f"  {path}  [{r.get('rule')}]")
            out.extend(_evidence_lines(r.get("evidence")))
    methods: dict[str, dict[str, Any]] = run.get("stage_methods") or {}
    if methods:
        out.append("\nthe model's own methods timed as a stage (their calls, not the next stage's caller code)")
        for key, m in methods.items():
            out.append(f"  {key}  [{m.get('rule')}] -> {m.get('stage')}")
            out.extend(_evidence_lines(m.get("evidence")))
    moved: dict[str, dict[str, Any]] = run.get("model_code") or {}
    if moved:
        out.append("\nthe model's own code (outside every root) moved to the stage its ops compute: [model code]")
        for stage, m in moved.items():
            ops = ", ".join(f"{k} x{v}" for k, v in m.get("ops", {}).items())
            out.append(f"  {stage}  [from {', '.join(m.get('moved_from') or [])}]: {ops}")
            out.extend(_evidence_lines(m.get("evidence")))
    unassigned = run.get("unassigned_modules") or []
    if unassigned:
        out.append("\nin no stage (their work is caller code of the next stage, or `other`): " + ", ".join(unassigned))
    return "\n".join(out)


__all__ = ["explain_stages"]
