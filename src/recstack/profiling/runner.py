"""Run the passes and assemble the Profile.

Passes, each after warm-up, on the same pre-generated batches (input
generation never runs inside a timed region):

1. **Timing pass, interleaved with an uninstrumented run** (A B A B ...): A is
   the plain step; B is the same step with stage-boundary hooks
   (:mod:`recstack.profiling.timing`). Per-step samples give every stage's
   time (the mean over the central steps, those whose step time lies within
   p25..p75, so stages add up to the run), p10 and p90, and the paired
   ratios B/A give the overhead with a
   bootstrap confidence interval.
2. **Op pass**: torch.profiler with module and stage ranges
   (:mod:`recstack.profiling.oppass`); its times are distorted by the
   profiler, so they are used only for *proportions*: every module and op
   node of a stage is scaled by ``k = T_stage / P_stage`` (timing-pass stage time
   over op-pass time of that stage), so children add up to their stage.

``other`` is, per step, step time - sum of stage times (averaged like the stages): work
outside every stage root (the model's own forward glue, hooks' own cost).
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

from recstack.config.run import RunConfig
from recstack.errors import ConfigError
from recstack.profiling.contention import ContentionWatch
from recstack.profiling.environment import environment, native_bf16
from recstack.profiling.native_stderr import quiet_native
from recstack.profiling.oppass import (
    STAGE,
    STEP,
    Folder,
    RawNode,
    install_range_hooks,
    profiler_range,
)
from recstack.profiling.rules import FORWARD_STAGES, StageMap, StageRules, detect_stages
from recstack.profiling.stats import bootstrap_ci, central_mean, central_steps, median, percentile
from recstack.profiling.timing import StageTimer, _Region, attach_stage_rusage, cuda_sync, install_stage_hooks
from recstack.render import progress
from recstack.tree import Node, Profile

STAGE_ORDER = FORWARD_STAGES + ("loss", "backward", "optimizer", "communication", "other")


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
        trace_path: str | None = None,
        run_info: dict[str, Any] | None = None,
        op_pass: bool = True,
        cost_model: bool = True,
        counters: bool = True,
        **fields: Any,
    ) -> None:
        self.config = RunConfig.build(config, fields) if fields or config is None else config
        self.stage_rules = stage_rules
        self.machine = machine
        self.trace_path = trace_path
        self.run_info: dict[str, Any] = dict(run_info or {})
        self.op_pass = op_pass
        self.cost_model = cost_model
        self.counters = counters

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


def call_model(model: nn.Module, batch: Any) -> Any:
    """A tuple batch is positional arguments, a dict keyword arguments, anything else the single argument."""
    if isinstance(batch, tuple):
        return model(*batch)
    if isinstance(batch, dict):
        return model(**batch)
    return model(batch)


def _first_tensor(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            return _first_tensor(o)
    if isinstance(out, dict):
        for o in out.values():
            return _first_tensor(o)
    if hasattr(out, "values") and callable(out.values):
        return _first_tensor(out.values())
    raise ConfigError("model output has no tensor to compute a loss on; pass loss_fn", field="loss_fn")


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
        self.inference_mode_ok = bool(getattr(backend, "supports_inference_mode", True))
        self.grad_mode = "train" if self.train else ("inference_mode" if self.inference_mode_ok else "no_grad")
        self.loss_fn = loss_fn
        self.labels: dict[tuple[int, ...], torch.Tensor] = {}
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
        if self.loss_fn is not None:
            return self.loss_fn(out, batch)
        labels = getattr(batch, "labels", None)
        if hasattr(self.model, "loss") and labels is not None:
            return self.model.loss(out, labels)
        logits = _first_tensor(out).float()
        key = tuple(logits.shape)
        if key not in self.labels:
            g = torch.Generator().manual_seed(self.opts.seed)
            self.labels[key] = torch.randint(0, 2, key, generator=g).float().to(logits.device)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, self.labels[key])

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


def _discover_call_order(model: nn.Module, step: Step, batch: Any) -> list[str]:
    order: list[str] = []
    handles = [
        m.register_forward_pre_hook(lambda _m, _a, _n=name: order.append(_n)) for name, m in model.named_children()
    ]
    try:
        step.run(batch)
    finally:
        for h in handles:
            h.remove()
    return order


def _stage_roots(smap: StageMap) -> dict[str, str]:
    return {p: pl.stage for p, pl in smap.placements.items() if pl.root and pl.stage and pl.stage != "other"}


def _to_node(raw: RawNode, parent_path: str, factor: float, steps: int) -> Node:
    path = f"{parent_path}/{raw.name}" if parent_path else raw.name
    time_s = raw.us * 1e-6 / max(steps, 1) * factor
    node = Node(
        name=raw.name,
        path=path,
        level=raw.level,
        stage=raw.stage,
        time_s=time_s,
        calls=int(round(raw.calls / max(steps, 1))),
    )
    if raw.level == "op":
        node.extra["shapes"] = [eval_shape(k) for k in raw.shapes]
        node.extra["distinct_shapes"] = len(raw.shapes)
        if raw.dtypes:
            node.extra["dtypes"] = dict(raw.dtypes)  # input dtype -> calls (the roofline's roof_dtype)
        node.extra["op_pass_time_s"] = raw.us * 1e-6 / max(steps, 1)
        if raw.device_us:
            node.extra["device_time_s"] = raw.device_us * 1e-6 / max(steps, 1)
    if raw.level == "kernel":
        node.extra["device"] = "cuda"
    node.children = [_to_node(c, path, factor, steps) for c in raw.children.values()]
    node.children.sort(key=lambda n: -n.time_s)
    node.self_time_s = max(0.0, node.time_s - sum(c.time_s for c in node.children if c.level != "kernel"))
    return node


def eval_shape(key: str) -> Any:
    import ast

    try:
        return ast.literal_eval(key)
    except (ValueError, SyntaxError):
        return key


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
    n = len(batches)
    sync = cuda_sync()
    wall0 = time.perf_counter()

    # Warm-up (the first step also records the top-level call order for stage rules).
    progress.advance("warm-up")
    order = _discover_call_order(model, step, batches[0])
    for i in range(max(0, opts.warmup - 1)):
        step.run(batches[(i + 1) % n])
    smap = detect_stages(model, opts.stage_rules, order)
    roots = _stage_roots(smap)

    # Pass 1: A (uninstrumented) / B (stage timing), interleaved.
    timer = StageTimer(sync)
    plain: list[float] = []
    timed: list[float] = []
    stage_samples: dict[str, list[float]] = {}
    region = (lambda s: _Region(timer, s)) if step.train else None
    progress.advance("timing pass", estimate_s=2 * opts.iters * (time.perf_counter() - wall0) / max(opts.warmup, 1))
    watch = ContentionWatch(opts.machine).start()
    for i in range(opts.iters):
        batch = batches[i % n]
        if sync:
            sync()
        t0 = time.perf_counter_ns()
        step.run(batch)
        if sync:
            sync()
        plain.append((time.perf_counter_ns() - t0) * 1e-9)

        wrappers = install_stage_hooks(model, roots, timer)
        try:
            timer.reset()
            t0 = timer.start()
            step.run(batch, region)
            t1 = timer.stop()
        finally:
            wrappers.remove()
        total = (t1 - t0) * 1e-9
        timed.append(total)
        acc = {k: v * 1e-9 for k, v in timer.acc.items()}
        acc["other"] = max(0.0, total - sum(acc.values()))
        for k in set(stage_samples) | set(acc):
            stage_samples.setdefault(k, [0.0] * i).append(acc.get(k, 0.0))
    contention = watch.stop()

    # Pass 2: op level.
    folder = Folder()
    op_steps: list[float] = []
    if opts.op_pass:
        from torch.profiler import ProfilerActivity, profile

        progress.advance("op pass")
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])

        def op_region(s: str) -> Any:
            return profiler_range(STAGE + s)

        range_wrappers = install_range_hooks(model, roots)
        try:
            with quiet_native(profile(activities=acts, record_shapes=True)) as prof:
                for i in range(opts.op_iters):
                    batch = batches[i % n]
                    t0 = time.perf_counter_ns()
                    with profiler_range(f"{STEP}{i}"):
                        step.run(batch, op_region if step.train else None)
                    if sync:
                        sync()
                    op_steps.append((time.perf_counter_ns() - t0) * 1e-9)
        finally:
            range_wrappers.remove()
        folder.fold(prof.events())
        if opts.trace_path:
            opts.write_trace(prof)
    extra = _embedding_and_memory(model, step, batches[0], smap, opts)
    wall = time.perf_counter() - wall0

    # Assemble the tree.
    # Interquartile mean: the mean over the central steps (step time within p25..p75). Robust like a
    # median, and additive: stage times (and other) sum to the run time, which medians of each
    # stage do not on a noisy host (they summed to 72% of the median step in one CI run).
    central = central_steps(timed)
    run_t = central_mean(timed, central)
    model_name = opts.run_info.get("model") or type(model).__name__
    root = Node(name=model_name, path="run", level="run", stage=None, time_s=run_t, calls=1)
    root.extra.update(
        time_s_p10=percentile(timed, 10),
        time_s_p90=percentile(timed, 90),
    )
    stage_names = sorted(stage_samples, key=lambda s: STAGE_ORDER.index(s) if s in STAGE_ORDER else 99)
    for sname in stage_names:
        samples = stage_samples[sname]
        t = central_mean(samples, central)
        raw = folder.root.children.get(("stage", sname))
        node = Node(name=sname, path=sname, level="stage", stage=sname, time_s=t, calls=1)
        node.extra.update(time_s_p10=percentile(samples, 10), time_s_p90=percentile(samples, 90))
        if raw is not None and folder.steps:
            p_us = Folder.stage_exclusive_us(raw) if sname != "other" else sum(c.us for c in raw.children.values())
            p = p_us * 1e-6 / folder.steps
            factor = t / p if p > 0 else 0.0
            node.extra.update(op_pass_time_s=p, apportion_factor=factor)
            node.children = [_to_node(c, sname, factor, folder.steps) for c in raw.children.values()]
            node.children.sort(key=lambda c: -c.time_s)
        node.self_time_s = max(0.0, node.time_s - sum(c.time_s for c in node.children))
        if sname == "optimizer" and step.fused:
            node.extra["note"] = "embedding-table update is fused into backward (tbe); this stage holds dense layers only"
        if sname == "backward" and step.fused:
            node.extra["note"] = "includes the fused embedding-table optimizer update (tbe)"
        root.children.append(node)
    attach_stage_rusage(root, timer, central)
    if step.fused and "optimizer" not in stage_samples:
        root.extra["optimizer_note"] = "embedding-table update fused into backward (tbe)"
    root.self_time_s = max(0.0, root.time_s - sum(c.time_s for c in root.children))

    a_med = median(plain)
    ratios = [b / a for a, b in zip(plain, timed, strict=True) if a > 0]
    overhead = {
        "uninstrumented_step_s": a_med,
        "uninstrumented_step_s_p10": percentile(plain, 10),
        "uninstrumented_step_s_p90": percentile(plain, 90),
        "stage_pass_step_s": run_t,
        "stage_pass_ratio": median(ratios),
        "stage_pass_ratio_ci": list(bootstrap_ci(ratios)),
        "op_pass_step_s": median(op_steps) if op_steps else None,
        "op_pass_ratio": (median(op_steps) / a_med) if op_steps and a_med > 0 else None,
        "pairs": len(ratios),
        "profiling_wall_s": wall,
        "method": "A/B interleaved: A uninstrumented, B stage hooks; ratio = median of per-pair B/A, "
        "95% bootstrap CI of that median; op pass under torch.profiler with module ranges",
    }
    bs = batch_size or _infer_batch_size(batches[0])
    latency = {"p50": percentile(plain, 50), "p90": percentile(plain, 90), "p99": percentile(plain, 99)}
    root.extra["latency_s"] = latency
    root.extra["throughput_samples_per_s"] = (bs / latency["p50"]) if bs and latency["p50"] > 0 else None

    run = {
        "model": model_name,
        "batch_size": bs,
        "mode": opts.mode,
        "grad_mode": step.grad_mode,
        "dtype": opts.dtype,
        "dtype_note": dtype_note,
        "threads": torch.get_num_threads(),
        "device": "cuda" if torch.cuda.is_available() and _on_cuda(model) else "cpu",
        "seed": opts.seed,
        "iters": opts.iters,
        "warmup": opts.warmup,
        "op_iters": opts.op_iters if opts.op_pass else 0,
        "optimizer": opts.optimizer if step.train else None,
        "optimizer_fused_into_backward": step.fused,
        "stage_rules": [r.model_dump() for r in opts.stage_rules.rules] if opts.stage_rules else [],
        "stage_roots": {p: {"stage": s, "rule": smap.placements[p].rule} for p, s in roots.items()},
        "unassigned_modules": [
            p for p, pl in smap.placements.items() if p and pl.stage is None and "." not in p
        ],
    }
    for k, v in opts.run_info.items():
        run.setdefault(k, v)
    _annotate_modules(root, smap, model)
    for st in root.children:
        res = extra["memory"]["resident_by_stage"].get(st.name)
        if res:
            st.extra["resident_bytes"] = res
    prof = Profile(
        run_id=uuid.uuid4().hex[:12],
        run=run,
        environment=environment(contention=contention),
        overhead=overhead,
        root=root,
        extra=extra,
    )
    _analyse(prof, model, step, batches[0], opts)
    return prof


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
    analyse(prof, machine=opts.machine)
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
            n.extra["module_type"] = types.get(n.name)
            n.extra["rule"] = pl.rule if pl else None


def _on_cuda(model: nn.Module) -> bool:
    for p in model.parameters():
        return p.is_cuda
    return False


def _infer_batch_size(batch: Any) -> int | None:
    bs = getattr(batch, "batch_size", None)
    if isinstance(bs, int):
        return bs
    try:
        return int(_first_tensor(batch).shape[0])
    except Exception:
        return None


__all__ = ["ProfileOptions", "profile_model"]
