"""Measure what a prediction predicts: a zoo model built for real, one step under the allocator's eye.

* Resident bytes are exact: the unique storages of parameters, registered buffers and plain tensor
  attributes (FBGEMM's inference kernel keeps its tables so) and the optimizer's state tensors.
* The step's dynamic peak comes from torch.profiler's memory events (``profile_memory=True``): every
  allocation and free of the CPU allocator, in order, summed; the peak of that running sum above the
  bytes live when the step starts (model, optimizer state and one batch) is the step's peak, and the
  peak inside each stage's range (forward stages by module hooks, then loss, backward and optimizer)
  is that stage's. This is the allocator's own figure: workspace and temporaries included, the
  allocator's caching and fragmentation not (the CPU allocator returns every block to malloc).

The step mirrors the profiler's: ``zero_grad(set_to_none=True)`` before the measured range, the
optimizer over every trainable parameter except TBE's tables (its update is fused into backward),
one warm-up step first so that lazily created state exists.
"""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from recstack.profiling.stage_memory import stage_peaks
from recstack.zoo.footprint.stages import stage_of_child

PHASES = ("loss", "backward", "optimizer")


@dataclass
class Measured:
    parameters_bytes: int
    buffers_bytes: int
    optimizer_state_bytes: int
    batch_bytes: int
    step_peak_bytes: int  # dynamic: above what is live at the step's start
    stage_peak_bytes: dict[str, int] = field(default_factory=dict)  # dynamic peak inside each stage's range
    stage_end_bytes: dict[str, int] = field(default_factory=dict)  # dynamic bytes live when each stage ends

    @property
    def resident_bytes(self) -> int:
        return self.parameters_bytes + self.buffers_bytes + self.optimizer_state_bytes

    @property
    def peak_bytes(self) -> int:
        return self.resident_bytes + self.batch_bytes + self.step_peak_bytes


def _nbytes(t: torch.Tensor) -> int:
    return 0 if t.device.type == "meta" else int(t.untyped_storage().nbytes())


def resident(model: nn.Module, optimizer: torch.optim.Optimizer | None) -> tuple[int, int, int]:
    """(parameter, buffer, optimizer-state) bytes, each storage once."""
    seen: set[int] = set()

    def once(t: torch.Tensor) -> int:
        if t.device.type == "meta":
            return 0
        key = t.untyped_storage().data_ptr() or id(t)
        if key in seen:
            return 0
        seen.add(key)
        return _nbytes(t)

    named = list(model.named_parameters())
    # FBGEMM's training kernel registers its fused optimizer state (momentum1_host, ...) as parameters: state
    state = sum(once(p) for n, p in named if n.rsplit(".", 1)[-1].startswith(("momentum1", "momentum2")))
    params = sum(once(p) for n, p in named if not n.rsplit(".", 1)[-1].startswith(("momentum1", "momentum2")))
    buffers = 0
    for mod in model.modules():
        # FBGEMM keeps its tables as buffers or plain attributes (weights_host, ...): they count as parameters;
        # its training kernel also keeps the last batch's _indices/_offsets (step data, not resident)
        plain = [(k, v) for k, v in vars(mod).items()
                 if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter) and k not in ("_indices", "_offsets")]
        for k, b in [*mod.named_buffers(recurse=False), *plain]:
            if k.startswith("weights_") and k.endswith(("_host", "_dev", "_uvm")):
                params += once(b)
            else:
                buffers += once(b)
    if optimizer is not None:
        for st in optimizer.state.values():
            state += sum(once(v) for v in st.values() if isinstance(v, torch.Tensor))
    return params, buffers, state


def batch_bytes(batch: Any) -> int:
    total = sum(_nbytes(t) for t in (batch.dense, batch.labels) if t is not None)
    for f in batch.sparse.values():
        total += _nbytes(f.values) + _nbytes(f.lengths)
    return total


def _hooks(model: nn.Module) -> list[Any]:
    """record_function ranges around every top-level child that is a forward stage."""
    handles = []
    for name, child in model.named_children():
        stage = stage_of_child(name)
        if stage is None:
            continue
        ranges: list[Any] = []

        def pre(_m: nn.Module, _a: Any, stage: str = stage, ranges: list[Any] = ranges) -> None:
            r = torch.autograd.profiler.record_function(f"stage:{stage}")
            r.__enter__()
            ranges.append(r)

        def post(_m: nn.Module, _a: Any, _o: Any, ranges: list[Any] = ranges) -> None:
            ranges.pop().__exit__(None, None, None)

        handles += [child.register_forward_pre_hook(pre), child.register_forward_hook(post)]
    return handles


def _drop_kept_inputs(model: nn.Module) -> None:
    """FBGEMM's training kernel keeps the last step's indices and offsets until the next forward replaces them:
    dropped before the measured step, so that its baseline holds no step data (the step's own are counted)."""
    for mod in model.modules():
        for name in ("_indices", "_offsets"):
            value = getattr(mod, name, None)
            if isinstance(value, torch.Tensor) and value.numel():
                setattr(mod, name, value.new_empty(0))


class _Step:
    def __init__(self, model: nn.Module, mode: str, optimizer: str, lr: float) -> None:
        self.model, self.train = model, mode == "train"
        backend = getattr(model, "sparse_arch", None)
        fused = bool(getattr(backend, "fused_optimizer", False)) and self.train
        self.inference_mode = bool(getattr(backend, "supports_inference_mode", True))
        self.optimizer: torch.optim.Optimizer | None = None
        if self.train:
            params = [p for n, p in model.named_parameters()
                      if p.requires_grad and not (fused and n.startswith("sparse_arch."))]
            cls = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}[optimizer]
            self.optimizer = cls(params, lr=lr)
            model.train()
        else:
            model.eval()

    def __call__(self, batch: Any) -> None:
        rf = torch.autograd.profiler.record_function
        if not self.train:
            ctx = torch.inference_mode() if self.inference_mode else torch.no_grad()
            with ctx:
                self.model(batch)
            return
        assert self.optimizer is not None
        out = self.model(batch)
        with rf("stage:loss"):
            loss = self.model.loss(out, batch.labels)
        del out
        with rf("stage:backward"):
            loss.backward()
        del loss
        with rf("stage:optimizer"):
            self.optimizer.step()


def measure(model: str, *, backend: str = "torch", mode: str = "inference", optimizer: str = "sgd",
            table_dtype: str = "fp32", batch_size: int = 64, scale: float = 1.0, workload: str = "uniform",
            seed: int = 0) -> Measured:
    """Build ``model`` for real and measure its resident bytes and one step's peak (see the module doc)."""
    from torch.profiler import ProfilerActivity, profile

    from recstack.config.build import BuildOptions
    from recstack.config.run import RunConfig
    from recstack.workload import bind
    from recstack.workload.presets import load_workload
    from recstack.zoo.build import build_model

    cfg = RunConfig(model=model, backend=backend, mode=mode, optimizer=optimizer, table_dtype=table_dtype, seed=seed,
                    batch_size=batch_size, scale=scale, workload=workload)
    net = build_model(model, scale=scale, options=BuildOptions.of(cfg), preflight=False)
    bound = bind(load_workload(workload), net.features(), net.num_dense, net.num_tasks)
    batch = bound.batch(batch_size, 0)
    step = _Step(net, mode, optimizer, 0.01)
    handles = _hooks(net)
    try:
        step(batch)  # warm-up: lazily created state (and TBE's first-call buffers)
        if step.optimizer is not None:
            step.optimizer.zero_grad(set_to_none=True)
        _drop_kept_inputs(net)
        gc.collect()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step(batch)
        events = list(prof.profiler.kineto_results.events())  # type: ignore[union-attr]
    finally:
        for h in handles:
            h.remove()
    if step.optimizer is not None:
        with contextlib.suppress(Exception):
            step.optimizer.zero_grad(set_to_none=True)
    peak, figures = stage_peaks(events, "stage:")
    stages = {k: v["peak_bytes"] for k, v in figures.items()}
    ends = {k: v["end_bytes"] for k, v in figures.items()}
    params, buffers, state = resident(net, step.optimizer)
    return Measured(params, buffers, state, batch_bytes(batch), peak, stages, ends)


def measured_stages(cfg: Any) -> dict[str, Any]:
    """``recstack memory --measure``: the run options ``cfg``'s zoo model built for real and ``recstack profile
    --memory``'s memory pass run on it (the profiler's step, stage roots discovered in two warm-up steps, no timed
    pass): ``{"device", "step_peak_bytes", "stages": {stage: {"peak_bytes", ...}}}``
    (:func:`recstack.profiling.passes.memory_pass`)."""
    from recstack.calls import to_device
    from recstack.profiling.passes import memory_pass, warm_up_and_discover
    from recstack.profiling.runner import ProfileOptions
    from recstack.profiling.runner import Step as ProfileStep
    from recstack.session import build_zoo
    from recstack.workload import bind

    net, spec = build_zoo(cfg)
    bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
    batches = [bound.batch(cfg.batch_size, i) for i in range(2)]
    if cfg.resolved_device() == "cuda":
        net.to("cuda")
        batches = [to_device(b, "cuda") for b in batches]
    step = ProfileStep(net, ProfileOptions(cfg), None)
    found = warm_up_and_discover(net, step, batches, 2, None)
    return memory_pass(net, step, batches[0], found.roots, None, regions=found.regions(None))
