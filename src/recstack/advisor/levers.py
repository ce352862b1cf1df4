"""Candidate levers from a profile: per stage, by its bound class, the run changes that can move it.

A lever is a change to the run (RunConfig fields, or a keyword option of a user factory) with the stage it
targets and a conflict group (two levers of one group cannot be combined). A lever that cannot run here is
a :class:`NotTried` with its reason, so the output says what was not looked at and why.
"""

from __future__ import annotations

import importlib.util
import inspect
from dataclasses import asdict, dataclass, field
from typing import Any

from recstack.config.run import BATCH_SIZE_MAX, RunConfig

KINDS = ("backend", "table_dtype", "batch_size", "dtype", "threads", "fused_optimizer", "compile", "option")
EMBEDDING_STAGES = ("embedding", "feature_processing")
COMPUTE_STAGES = ("dense", "interaction", "head", "sequence", "attention", "tower")
TRAINING_STAGES = ("backward", "optimizer", "loss")
MIN_SHARE = 0.02  # stages below 2 % of the step are not worth a lever of their own


@dataclass
class Lever:
    name: str  # e.g. "backend=tbe"
    kind: str  # one of KINDS
    stage: str  # the stage it targets ("step" for the whole step)
    group: str  # conflict group: levers of one group are alternatives, never combined
    change: dict[str, Any] = field(default_factory=dict)  # RunConfig fields it sets
    options: dict[str, Any] = field(default_factory=dict)  # keyword options of a user factory it sets
    why: str = ""
    numeric: bool = False  # changes the arithmetic: its output deviation is checked against the tolerance

    def describe(self) -> str:
        """The exact change, as a user would make it."""
        parts = [f"--{k.replace('_', '-')} {v}" for k, v in self.change.items()]
        parts += [f"factory option {k}={v!r}" for k, v in self.options.items()]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NotTried:
    name: str
    stage: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StageInfo:
    name: str
    time_s: float
    share: float
    bound: str | None  # memory / compute / overhead from the roofline, else guessed from the stage's name


def stages_of(prof: Any) -> list[StageInfo]:
    """The profile's stages (largest first), their share of the step and bound class."""
    root = prof.root
    total = root.time_s or sum(c.time_s for c in root.children) or 1.0
    out = []
    for s in root.children:
        if s.name == "other":
            continue
        bound = s.bound
        if bound is None:
            bound = "memory" if s.name in EMBEDDING_STAGES else "compute"
        out.append(StageInfo(s.name, s.time_s, s.time_s / total, bound))
    return sorted(out, key=lambda s: -s.time_s)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def factory_options(factory: Any) -> dict[str, bool]:
    """A user factory's boolean keyword options beyond ``(batch_size, seed)``: ``{name: default}``."""
    try:
        params = list(inspect.signature(factory).parameters.values())[2:]
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if isinstance(p.default, bool)}


def candidates(prof: Any, cfg: RunConfig, *, goal: str = "throughput", factory: Any = None,
               kinds: set[str] | None = None) -> tuple[list[Lever], list[NotTried]]:
    """Levers for the profile's stages (largest first), and the levers not tried with their reasons.

    ``factory``: the user's factory when the model is one (zoo-only levers then do not apply);
    ``kinds``: only these lever kinds (``--levers``)."""
    levers: list[Lever] = []
    skipped: list[NotTried] = []
    stages = stages_of(prof)
    big = [s for s in stages if s.share >= MIN_SHARE]
    emb = next((s for s in big if s.name in EMBEDDING_STAGES or s.bound == "memory"), None)
    # forward stages first: bf16 targets the dense layers (backward and optimizer follow from them)
    comp = sorted([s for s in big if s is not emb and s.bound in ("compute", "overhead")],
                  key=lambda s: s.name in TRAINING_STAGES)
    top = big[0].name if big else "step"
    small = [s for s in stages if s.share < MIN_SHARE]
    if emb is not None or factory is not None:
        _embedding_levers(emb.name if emb else "embedding", cfg, factory, levers, skipped)
    else:
        skipped += [NotTried(f"{s.name} levers", s.name, f"the stage is {100 * s.share:.1f}% of the step (below "
                                                          f"{100 * MIN_SHARE:g}%)") for s in small]
    if comp or factory is not None:
        _compute_levers(comp[0].name if comp else "dense", cfg, factory, levers, skipped)
    _step_levers(top, cfg, goal, factory, levers, skipped)
    if kinds is None:  # compile searches for minutes (a compile per candidate): only when asked for
        kinds = set(KINDS) - {"compile"}
        skipped += [NotTried(lv.name, lv.stage, "a compile search takes minutes: ask for it with --levers "
                                                "compile,...") for lv in levers if lv.kind == "compile"]
        levers = [lv for lv in levers if lv.kind != "compile"]
    else:
        skipped += [NotTried(lv.name, lv.stage, "not among --levers") for lv in levers if lv.kind not in kinds]
        levers = [lv for lv in levers if lv.kind in kinds]
    return levers, skipped


def _embedding_levers(stage: str, cfg: RunConfig, factory: Any, levers: list[Lever], skipped: list[NotTried]) -> None:
    if factory is not None:
        for name in ("backend", "table_dtype"):
            skipped.append(NotTried(name, stage, "your factory builds the model: zoo backend and table dtype levers "
                                                 "do not apply (change them in your code)"))
        return
    have = {"torch": True, "torchrec": _has("torchrec"), "tbe": _has("fbgemm_gpu")}
    train = cfg.mode == "train"
    for backend in ("torch", "torchrec", "tbe"):
        if backend == cfg.backend or cfg.table_dtype != "fp32":
            continue
        name = f"backend={backend}"
        if not have[backend]:
            skipped.append(NotTried(name, stage, f"{'TorchRec' if backend == 'torchrec' else 'fbgemm_gpu'} is not "
                                                 "installed"))
            continue
        why = "memory-bound gathers: another embedding implementation"
        kind = "backend"
        if backend == "tbe" and train:
            why, kind = "the tbe backend fuses the sparse optimizer into backward", "fused_optimizer"
        levers.append(Lever(name, kind, stage, "backend", {"backend": backend}, why=why, numeric=True))
    for dt in ("fp16", "int8"):
        name = f"table_dtype={dt}"
        if dt == cfg.table_dtype:
            continue
        if train:
            skipped.append(NotTried(name, stage, "fp16/int8 tables are tbe inference only"))
        elif not have["tbe"]:
            skipped.append(NotTried(name, stage, "fp16/int8 tables need the tbe backend (fbgemm_gpu not installed)"))
        else:
            change = {"backend": "tbe", "table_dtype": dt} if cfg.backend != "tbe" else {"table_dtype": dt}
            levers.append(Lever(name, "table_dtype", stage, "backend", change,
                                why="fewer bytes per gathered row", numeric=True))


def _compute_levers(stage: str, cfg: RunConfig, factory: Any, levers: list[Lever], skipped: list[NotTried]) -> None:
    from recstack.hardware.sysinfo import native_bf16

    if cfg.dtype == "fp32":
        if factory is not None:
            skipped.append(NotTried("dtype=bf16", stage, "your factory builds the model: convert it to bf16 in "
                                                         "your code (recstack's bf16 switch is for zoo models)"))
        elif cfg.resolved_device() == "cpu" and not native_bf16():
            skipped.append(NotTried("dtype=bf16", stage, "no native bf16 on this CPU (no avx512_bf16/amx_bf16): "
                                                         "emulated bf16 is slower"))
        else:
            levers.append(Lever("dtype=bf16", "dtype", stage, "dtype", {"dtype": "bf16"},
                                why="dense layers in bf16 (native on this CPU)", numeric=True))
    levers.append(Lever("compile", "compile", stage, "compile", why="per-stage torch.compile: the compile "
                        "analysis's search (recstack compile --recommend), measured by it against eager"))


def _step_levers(stage: str, cfg: RunConfig, goal: str, factory: Any, levers: list[Lever],
                 skipped: list[NotTried]) -> None:
    import os

    cores = len(os.sched_getaffinity(0))
    now = cfg.threads or cores
    for t in sorted({max(1, now // 2), min(cores, now * 2)} - {now}):
        levers.append(Lever(f"threads={t}", "threads", stage, "threads", {"threads": t},
                            why="intra-op threads against per-op overhead"))
    if cfg.device != "cuda":
        skipped.append(NotTried("device=cuda", stage, "no GPU here") if not _cuda() else
                       NotTried("device=cuda", stage, "not yet measured by advise (run with --device cuda)"))
    if goal == "throughput":
        for mult in (2, 4):
            bs = cfg.batch_size * mult
            if bs <= BATCH_SIZE_MAX:
                levers.append(Lever(f"batch_size={bs}", "batch_size", stage, "batch_size", {"batch_size": bs},
                                    why="per-step overhead spread over more samples (throughput per sample)"))
    else:
        skipped.append(NotTried("batch_size", stage, "goal latency: a larger batch raises each step's latency"))
    if factory is not None:
        for name, default in factory_options(factory).items():
            levers.append(Lever(f"{name}={not default}", "option", "step", f"option:{name}",
                                options={name: not default}, numeric=True,
                                why="a boolean keyword option of your factory (its outputs are checked too)"))
    if cfg.mode == "train":
        skipped.append(NotTried("optimizer", stage, "changing the optimizer changes what is trained: not tried"))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


__all__ = ["KINDS", "Lever", "NotTried", "StageInfo", "candidates", "factory_options", "stages_of"]
