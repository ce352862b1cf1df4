"""Run the passes and assemble the Profile.

The passes (:mod:`recstack.profiling.passes`), each on the same pre-generated
batches (input generation never runs inside a timed region):

0. **Warm-up and discovery**: the second warm-up step (of at least two) records which modules
   run, at every depth, and in what order; stage rules place modules, and a
   stage root that never ran (a container) hands its role to its descendants
   that did (:func:`recstack.profiling.rules.hand_down_roots`).
1. **Timing pass, interleaved with an uninstrumented run** (A B A B ...): A is
   the plain step; B is the same step with stage-boundary hooks
   (:mod:`recstack.profiling.timing`). Per-step samples give every stage's
   time, p10 and p90, and the paired ratios B/A give the overhead with a
   bootstrap confidence interval.
2. **Op pass**: torch.profiler with module and stage ranges
   (:mod:`recstack.profiling.oppass`), used for what ran inside each stage and
   in what proportion.

:mod:`recstack.profiling.assemble` builds the tree from both (apportioning,
``[unattributed]``, ``other``'s breakdown, labels); this module adds the
overhead figures, run metadata, memory and the analyses.
"""

from __future__ import annotations

import contextlib
import time
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from recstack.calls import argument_error, call_model, infer_batch_size, unknown_batch_size
from recstack.config.run import RunConfig
from recstack.errors import ConfigError
from recstack.hardware.contention import ContentionWatch
from recstack.profiling.assemble import STAGE_ORDER, build_tree, overhead_figures
from recstack.profiling.environment import environment, native_bf16
from recstack.profiling.loss import TrainLoss, choose_loss
from recstack.profiling.oppass import Folder
from recstack.profiling.passes import (
    Discovery,
    OpPassResult,
    Regions,
    TimingResult,
    checked_op_pass,
    memory_pass,
    op_pass,
    timing_pass,
    warm_up_and_discover,
)
from recstack.profiling.rules import Placement, StageMap, StageRules
from recstack.profiling.stats import central_steps, median, percentile
from recstack.profiling.timing import attach_stage_rusage, cuda_sync
from recstack.render import progress
from recstack.tree import Node, Profile


class ProfileOptions:
    """The resolved runtime options of one run: a validated RunConfig plus what it resolved to.

    Every RunConfig field reads as an attribute (``opts.mode``, ``opts.iters``, ...);
    ``stage_rules`` and ``machine`` are the loaded rules and machine dict (the
    config holds their file names). ``ProfileOptions(mode="train")`` builds the
    config from keyword fields, validated by RunConfig.
    """

    def __init__(
        self,
        config: RunConfig | None = None,
        *,
        stage_rules: StageRules | None = None,
        machine: dict[str, Any] | None = None,
        machine_file: str | None = None,
        trace_path: str | None = None,
        run_info: dict[str, Any] | None = None,
        op_pass: bool = True,
        cost_model: bool = True,
        counters: bool = True,
        memory: bool = False,
        compile_hook: Callable[..., Any] | None = None,
        regions: Regions | None = None,
        **fields: Any,
    ) -> None:
        self.config = RunConfig.build(config, fields) if fields or config is None else config
        self.stage_rules = stage_rules
        self.machine = machine
        self.machine_file = machine_file  # where ``machine`` was read from (recorded in extra.machine.file)
        self.trace_path = trace_path
        self.run_info: dict[str, Any] = dict(run_info or {})
        self.op_pass = op_pass
        self.cost_model = cost_model
        self.counters = counters
        self.memory = memory  # the memory pass: one more untimed step under the allocator's eye (profile --memory)
        # Applies ``config.compile`` after discovery (recstack.compilation.profiling.compile_for_profile,
        # passed in by the session so that profiling does not import compilation).
        self.compile_hook = compile_hook
        self.regions = regions  # code outside the module tree timed as stages (passes.Regions), or None

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not instance attributes: the config's fields.
        if name != "config" and name in RunConfig.model_fields:
            return getattr(self.config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def validate(self) -> None:
        """RunConfig validated every field; what is left is the resolved objects' types."""
        if self.stage_rules is not None and not isinstance(self.stage_rules, StageRules):
            raise ConfigError("must be loaded StageRules (recstack.profiling.load_stage_rules)", field="stage_rules")

    def write_trace(self, prof: Any) -> None:
        """Export the op pass's Chrome trace to ``trace_path`` atomically, never failing the run.

        torch.profiler exports a trace only once, so it is staged in the temp
        folder first, then copied into place; if that fails, the staged file is
        where the trace stays (a warning names it). ``run_info["trace"]`` (so
        ``run.trace``) records the file really written, and is absent if none was.
        """
        import shutil

        from recstack.outputs import atomic_output, fallback_path

        staged = fallback_path(self.trace_path)
        try:
            prof.export_chrome_trace(str(staged))
        except OSError as exc:
            staged.unlink(missing_ok=True)
            warnings.warn(f"trace: not written ({exc.strerror or exc})", stacklevel=2)
            return
        try:
            with atomic_output(self.trace_path) as tmp:
                shutil.copyfile(staged, tmp)
        except OSError as exc:
            warnings.warn(f"trace: cannot write {self.trace_path} ({exc.strerror or exc}); written to {staged}",
                          stacklevel=2)
            self.run_info["trace"] = str(staged)
            return
        staged.unlink(missing_ok=True)
        self.run_info["trace"] = str(self.trace_path)


class Step:
    """One step (inference forward, or a full training step) with optional stage regions."""

    def __init__(
        self,
        model: nn.Module,
        opts: ProfileOptions,
        loss_fn: Callable[[Any, Any], torch.Tensor] | None,
    ) -> None:
        self.model = model
        self.opts = opts
        self.train = opts.mode == "train"
        backend = getattr(model, "sparse_arch", None)
        self.fused = bool(getattr(backend, "fused_optimizer", False)) and self.train
        # The model itself may say so too (a DistributedModelParallel wrapper has no sparse_arch).
        self.inference_mode_ok = bool(getattr(backend, "supports_inference_mode",
                                              getattr(model, "supports_inference_mode", True)))
        self.grad_mode = "train" if self.train else ("inference_mode" if self.inference_mode_ok else "no_grad")
        self.loss_fn = loss_fn
        self.loss: TrainLoss | None = None  # chosen at the first training step (profiling.loss)
        self.optimizer: torch.optim.Optimizer | None = None
        if self.train:
            params = [
                p
                for n, p in model.named_parameters()
                if p.requires_grad and not (self.fused and n.startswith("sparse_arch."))
            ]
            cls = torch.optim.SGD if opts.optimizer == "sgd" else torch.optim.Adagrad
            self.optimizer = cls(params, lr=opts.learning_rate)
            model.train()
        else:
            model.eval()

    def _loss(self, out: Any, batch: Any) -> torch.Tensor:
        if self.loss is None:
            self.loss = choose_loss(self.model, out, batch, self.loss_fn, self.opts.seed)
        return self.loss(out, batch)

    def run(self, batch: Any, region: Callable[[str], Any] | None = None) -> None:
        reg = region or (lambda _s: contextlib.nullcontext())
        if not self.train:
            ctx = torch.inference_mode() if self.inference_mode_ok else torch.no_grad()
            with ctx:
                call_model(self.model, batch)
            return
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=True)
        out = call_model(self.model, batch)
        with reg("loss"):
            loss = self._loss(out, batch)
        with reg("backward"):
            loss.backward()
        with reg("optimizer"):
            self.optimizer.step()


def profile_model(
    model: nn.Module,
    batches: list[Any],
    opts: ProfileOptions,
    *,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    batch_size: int | None = None,
) -> Profile:
    """Profile ``model`` on ``batches`` (cycled). See the module docstring for the method."""
    opts.validate()
    if not batches:
        raise ConfigError("no batches to run", field="inputs")
    old_threads = torch.get_num_threads()
    if opts.threads:
        torch.set_num_threads(opts.threads)
    dtype_note = None
    if opts.dtype == "bf16":
        if not hasattr(model, "set_dense_dtype"):
            raise ConfigError("bf16 needs a recstack zoo model; convert your own model before profiling", field="--dtype")
        model.set_dense_dtype(torch.bfloat16)
        dtype_note = "native bf16" if native_bf16() else "emulated: this CPU has no native bf16 (no AVX512-BF16/AMX)"
    try:
        return _profile(model, batches, opts, loss_fn, batch_size, dtype_note)
    finally:
        progress.finish()
        torch.set_num_threads(old_threads)


def _profile(
    model: nn.Module,
    batches: list[Any],
    opts: ProfileOptions,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None,
    batch_size: int | None,
    dtype_note: str | None,
) -> Profile:
    step = Step(model, opts, loss_fn)
    sync = cuda_sync()
    wall0 = time.perf_counter()
    progress.advance("warm-up")
    multi = _multi_rank()  # one rank of several: no pass may run on this rank alone (the others would wait)
    try:
        found = warm_up_and_discover(model, step, batches, opts.warmup, opts.stage_rules,
                                     forward=None if multi else lambda b: call_model(model, b))
    except TypeError as exc:  # forward cannot take the batch's arguments: say how to pass them
        err = argument_error(model, batches[0], exc)
        if err is None:
            raise
        raise err from exc
    roots = found.roots
    compiled = None
    if opts.compile is not None:  # compile in place; stage roots inside compiled regions cannot time
        if opts.compile_hook is None:
            raise ConfigError("compiling needs recstack.session (recstack.profile, profile_zoo)", field="compile")
        progress.advance("compiling")
        compiled = opts.compile_hook(model, step, batches, found, opts.compile, opts.warmup)
        roots = compiled.roots
        found.model_code = None  # planned for the eager roots; compiled regions hide the ops it would match
    progress.advance(
        "timing pass", estimate_s=2 * opts.iters * (time.perf_counter() - wall0) / max(opts.warmup, 1), measuring=True
    )
    regions = found.regions(opts.regions)  # the model's own methods that run a stage, and opts.regions
    watch = ContentionWatch(opts.machine).start()
    timing = timing_pass(model, step, batches, roots, opts.iters, sync, regions)
    contention = watch.stop()
    ops, op_check = OpPassResult(folder=Folder(), steps_s=[]), {}
    if opts.op_pass:
        progress.advance("op pass", measuring=True)
        ops, op_check = checked_op_pass(lambda: op_pass(
            model, step, batches, roots, opts.op_iters, sync, export_trace=opts.write_trace if opts.trace_path else None,
            opaque=compiled.opaque if compiled is not None else frozenset(), regions=regions,
            plan=found.model_code), median(timing.plain),
            remeasure=not multi)
    extra = _embedding_and_memory(model, step, batches[0], found.smap, opts)
    stage_memory = None
    if opts.memory:  # after the timed passes, never inside them
        progress.advance("memory pass", measuring=True)
        stage_memory = memory_pass(model, step, batches[0], roots, sync,
                                   opaque=compiled.opaque if compiled is not None else frozenset(), regions=regions)
        extra["memory"]["memory_pass"] = {k: v for k, v in stage_memory.items() if k != "stages"}
    if compiled is not None:
        opts.run_info["compile"] = compiled.finish()
    wall = time.perf_counter() - wall0

    model_name = opts.run_info.get("model") or type(model).__name__
    root = build_tree(model_name, timing, ops.folder)
    attach_stage_rusage(root, timing.timer, central_steps(timing.counter_steps))
    _stage_notes(root, step)
    _annotate_modules(root, found.smap, model)
    for st in root.children:
        res = extra["memory"]["resident_by_stage"].get(st.name)
        if res:
            st.resident_bytes = res
    if stage_memory is not None:
        _attach_stage_memory(root, stage_memory)
    bs = batch_size or infer_batch_size(batches[0])
    if bs is None:
        _warn(opts, unknown_batch_size(batches[0]))
    _latency(root, timing, bs)
    if opts.workload_batches == "query":
        _latency_by_bucket(root, timing, [infer_batch_size(b) or 0 for b in batches])
    prof = Profile(
        run_id=uuid.uuid4().hex[:12],
        run=_run_metadata(model, model_name, bs, opts, step, found, dtype_note),
        environment=environment(contention=contention),
        overhead={**overhead_figures(timing, ops.steps_s, ops.folder, root.time_s, wall), **op_check},
        root=root,
        extra=extra,
    )
    _analyse(prof, model, step, batches[0], opts)
    return prof


def _warn(opts: ProfileOptions, message: str) -> None:
    """A warning on stderr that the profile keeps too (``run.warnings``)."""
    warnings.warn(message, stacklevel=3)
    opts.run_info.setdefault("warnings", []).append(message)


def _stage_notes(root: Node, step: Step) -> None:
    """Say where the table update went when the optimizer is fused into backward."""
    if not step.fused:
        return
    for st in root.children:
        if st.name == "optimizer":
            st.note = "embedding-table update is fused into backward (tbe); this stage holds dense layers only"
        if st.name == "backward":
            st.note = "includes the fused embedding-table optimizer update (tbe)"
    if root.child("optimizer") is None or root.child("optimizer").time_s == 0:
        root.optimizer_note = "embedding-table update fused into backward (tbe)"


def _latency(root: Node, timing: TimingResult, batch_size: int | None) -> None:
    """Latency percentiles and throughput from the uninstrumented steps."""
    plain = timing.plain
    latency = {"p50": percentile(plain, 50), "p90": percentile(plain, 90), "p99": percentile(plain, 99)}
    root.latency_s = latency
    root.throughput_samples_per_s = (
        (batch_size / latency["p50"]) if batch_size and latency["p50"] > 0 else None
    )


def _latency_by_bucket(root: Node, timing: TimingResult, sizes: list[int]) -> None:
    """Per batch-size bucket (powers of two: 1, 2, 3-4, 5-8, ...): the uninstrumented steps' times.

    Step i ran batch i mod len(batches) (the timing pass cycles them); throughput is the
    bucket's samples over its steps' time. With variable batches the run's own
    throughput is all samples over all plain steps' time, not batch size / p50.
    """
    steps = [(sizes[i % len(sizes)], t) for i, t in enumerate(timing.plain)]
    buckets: dict[int, list[tuple[int, float]]] = {}
    for n, t in steps:
        buckets.setdefault(max(0, (n - 1).bit_length()), []).append((n, t))
    rows = []
    for k in sorted(buckets):
        got = buckets[k]
        times = [t for _, t in got]
        rows.append({
            "low": 1 if k == 0 else (1 << (k - 1)) + 1, "high": 1 << k, "steps": len(got),
            "batch_size_mean": sum(n for n, _ in got) / len(got), "mean_s": sum(times) / len(times),
            "p50_s": percentile(times, 50),
            "samples_per_s": sum(n for n, _ in got) / sum(times) if sum(times) > 0 else None,
        })
    root.step_time_by_batch_bucket = rows
    total = sum(t for _, t in steps)
    root.throughput_samples_per_s = sum(n for n, _ in steps) / total if total > 0 else None


def _run_metadata(
    model: nn.Module,
    model_name: str,
    batch_size: int | None,
    opts: ProfileOptions,
    step: Step,
    found: Discovery,
    dtype_note: str | None,
) -> dict[str, Any]:
    """``profile.run``: what ran, how, and where each stage's boundaries are."""
    smap = found.smap
    run = {
        "model": model_name,
        "batch_size": batch_size,
        "mode": opts.mode,
        "grad_mode": step.grad_mode,
        "dtype": opts.dtype,
        "dtype_note": dtype_note,
        "threads": torch.get_num_threads(),
        "device": "cuda" if torch.cuda.is_available() and _on_cuda(model) else "cpu",
        "seed": opts.seed,
        "workload_batches": opts.workload_batches,
        "iters": opts.iters,
        "warmup": opts.warmup,
        "op_iters": opts.op_iters if opts.op_pass else 0,
        "optimizer": opts.optimizer if step.train else None,
        "loss": step.loss.info if step.loss is not None else None,
        "optimizer_fused_into_backward": step.fused,
        "stage_rules": [r.model_dump() for r in opts.stage_rules.rules] if opts.stage_rules else [],
        "stage_roots": {p: _root_entry(smap.placements[p]) for p in found.roots},
        "stage_methods": {m.key: {"stage": m.stage, "rule": f"dataflow:{m.stage}", "evidence": m.evidence}
                          for m in found.methods},
        "model_code": found.model_code.evidence if found.model_code is not None and opts.op_pass else {},
        "never_ran_roots": {
            p: {"stage": nr.stage, "rule": nr.rule, "handed_to": nr.handed_to} for p, nr in found.never_ran.items()
        },
        "unassigned_modules": [
            p for p, pl in smap.placements.items() if p and pl.stage is None and "." not in p
        ],
    }
    for k, v in opts.run_info.items():
        run.setdefault(k, v)
    return run


def _attach_stage_memory(root: Node, measured: dict[str, Any]) -> None:
    """Each stage node's memory-pass figures (a stage the pass did not see gets none)."""
    from recstack.profiling.stage_memory import set_stage_memory

    for st in root.children:
        fig = measured["stages"].get(st.name)
        if fig is not None:
            set_stage_memory(st, {"peak_bytes": fig["peak_bytes"], "allocated_bytes": fig["allocated_bytes"],
                                  "saved_for_backward_bytes": fig.get("saved_bytes"), "device": measured["device"]})


def _multi_rank() -> bool:
    """This process is one rank of several (torch.distributed initialised with more than one)."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _root_entry(pl: Placement) -> dict[str, Any]:
    """``run.stage_roots[path]``: the stage, the rule and its evidence."""
    entry: dict[str, Any] = {"stage": pl.stage, "rule": pl.rule}
    if pl.evidence is not None:
        entry["evidence"] = pl.evidence
    return entry


def _analyse(prof: Profile, model: nn.Module, step: Step, batch: Any, opts: ProfileOptions) -> None:
    """Outside the timed passes: collect analytic costs and hardware counters (they run the model),
    then the analysis pipeline (:func:`recstack.analysis.pipeline.analyse`: roofline bound classes, ...)."""
    from recstack.analysis.pipeline import analyse

    progress.advance("cost model and analyses")
    if opts.cost_model:
        from recstack.costmodel.attach import attach_model_costs

        attach_model_costs(prof, model, lambda: step.run(batch))
    if opts.counters:
        from recstack.profiling.counters_replay import counters_for_profile

        counters_for_profile(prof, model, lambda: step.run(batch), repeats=5)
    analyse(prof, machine=opts.machine, machine_file=opts.machine_file)
    if opts.dtype == "bf16":  # measured bf16/fp32 time per stage, and the oneDNN kernels that ran
        from recstack.analysis.dtype_compare import add_bf16_findings

        add_bf16_findings(prof, model, lambda: call_model(model, batch))


def _train_table_costs(t: dict[str, Any], backend: str, optimizer: str) -> None:
    """Backward and optimizer bytes per table (formula; sparse updates touch unique rows)."""
    uniq, req, full = t["bytes_unique"], t["bytes_requested"], t["table_bytes"]
    if backend == "torch":  # sparse gradient: one row per lookup (uncoalesced), then a coalesced sparse update
        bw = req
        opt = 3 * uniq + (2 * uniq if optimizer == "adagrad" else 0)
    elif backend == "torchrec":  # unsharded EBC: a dense gradient the size of the table
        bw = full + req
        opt = 3 * full + (2 * full if optimizer == "adagrad" else 0)
    else:  # tbe: the optimizer is fused into backward and touches unique rows only
        bw = req + 2 * uniq + (2 * 4 * t["unique_rows"] if optimizer == "adagrad" else 0)
        opt = 0
    t["backward_bytes"] = bw
    t["backward_rows_touched"] = t["unique_rows"]
    t["optimizer_bytes"] = opt
    t["optimizer_rows_touched"] = t["unique_rows"] if backend != "torchrec" else t["rows"]


def _embedding_and_memory(model: nn.Module, step: Step, batch: Any, smap: StageMap, opts: ProfileOptions) -> dict:
    """Per-table embedding detail (computed from the batch's indices) and memory (computed and measured).

    Runs outside the timed passes.
    """
    from recstack.profiling.memory import peak_step_memory, resident_by_stage

    out: dict[str, Any] = {}
    backend = getattr(model, "sparse_arch", None)
    from recstack.workload.batch import RawBatch

    if backend is not None and hasattr(backend, "tables") and isinstance(batch, RawBatch):
        from recstack.zoo.embedding import table_stats

        table_dtype = getattr(backend, "table_dtype", "fp32")
        tables = table_stats(backend, batch, table_dtype=table_dtype)
        if step.train:
            for t in tables:
                _train_table_costs(t, backend.name, opts.optimizer)
        out["embedding_tables"] = tables
    peak = peak_step_memory(lambda: step.run(batch))
    resident = resident_by_stage(model, smap, step.optimizer)
    out["memory"] = {"resident_by_stage": resident, "peak_step": peak, "provenance": {
        "resident_by_stage": "computed (tensor sizes)", "peak_step": "measured"}}
    if "embedding_tables" in out and step.optimizer is not None:
        _table_optimizer_state(model, step.optimizer, out["embedding_tables"])
    return out


def _table_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, tables: list[dict]) -> None:
    weights = getattr(model.sparse_arch, "table_weights", None)
    if weights is None:
        return
    try:
        by_ptr = {w.data_ptr(): name for name, w in weights().items()}
    except Exception:
        return
    state_bytes: dict[str, int] = {}
    for p, st in optimizer.state.items():
        name = by_ptr.get(p.data_ptr())
        if name:
            state_bytes[name] = sum(v.numel() * v.element_size() for v in st.values() if isinstance(v, torch.Tensor))
    for t in tables:
        t["optimizer_state_bytes"] = state_bytes.get(t["table"], 0)


def _annotate_modules(root: Node, smap: StageMap, model: nn.Module) -> None:
    types = {p: type(m).__name__ for p, m in model.named_modules()}
    for n in root.walk():
        if n.level == "module":
            pl = smap.placements.get(n.name)
            n.module_type = types.get(n.name)
            n.rule = pl.rule if pl else None


def _on_cuda(model: nn.Module) -> bool:
    for p in model.parameters():
        return p.is_cuda
    return False


__all__ = ["STAGE_ORDER", "ProfileOptions", "Step", "call_model", "profile_model"]
