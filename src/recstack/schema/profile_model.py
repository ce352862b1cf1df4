"""Typed models of the profile document (``recstack.profile``, version 2): the contract in code.

Every key a recstack producer writes today is declared here with its type,
unit and producer (the field's ``description`` and its ``x-unit`` /
``x-producer`` JSON-Schema annotations); docs/profile-schema.md and
``profile.schema.json`` are generated from these classes. Unknown keys are
allowed (``extra="allow"``) so a newer producer's additions survive a round
trip, but a declared key must have its declared type.

Units: times are seconds and end in ``_s``; sizes and traffic are bytes
(``bytes`` or ``_bytes``); ``flops`` is FLOP per step and rates are per second
(``achieved_flops``, ``peak_flops``, ``ceiling_flops``: FLOP/s; ``*_bytes_per_s``
and ``*_bandwidth``: bytes/s); shares and fractions are plain ratios (0.25 =
25 %). Every figure is per step unless its description says otherwise.

Validation is strict (``strict=True``): a string is never read as a number
and a number never as a string; floats must be finite (JSON has no NaN, and
``allow_nan=False`` writers never produce one).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recstack.schema.constants import LEVELS, MAX_TREE_DEPTH, SCHEMA, SCHEMA_VERSION  # noqa: F401 (re-exported)

_DI = "distributed"  # producer of the multi-rank sections (recstack.distributed)

# Value types: JSON numbers (an integer is a valid float), finite, and >= 0 where a negative is nonsense.
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Bytes = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # FLOPs, rows, calls, cycles: may be fractional per step
Ratio = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # rates, fractions that may exceed 1, factors
Share = Annotated[float, Field(ge=0, le=1.000001, allow_inf_nan=False)]  # a part of a whole (rounding allowed)
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegInt = Annotated[int, Field(ge=0)]


def F(description: str, default: Any = ..., *, unit: str | None = None, producer: str | None = None, **kw: Any) -> Any:
    """A documented field: ``description`` plus ``x-unit`` and ``x-producer`` annotations."""
    extra: dict[str, Any] = {}
    if unit:
        extra["x-unit"] = unit
    if producer:
        extra["x-producer"] = producer
    return Field(default, description=description, json_schema_extra=extra or None, **kw)


class _M(BaseModel):
    # Strict: "1.5" is not a number and 1 is not a string; unknown keys are kept (a newer producer's additions).
    model_config = ConfigDict(strict=True, extra="allow")


# -- node parts -----------------------------------------------------------------------------------


class Latency(_M):
    """Uninstrumented step latency percentiles (``root.latency_s``)."""

    p50: Seconds = F("median uninstrumented step", unit="s", producer="profiling.runner")
    p90: Seconds = F("90th percentile", unit="s", producer="profiling.runner")
    p99: Seconds = F("99th percentile", unit="s", producer="profiling.runner")


class BatchBucket(_M):
    """Uninstrumented step times of one batch-size bucket (``root.step_time_by_batch_bucket[]``)."""

    low: Annotated[int, Field(ge=1)] = F("smallest batch size of the bucket", unit="samples",
                                         producer="profiling.runner")
    high: Annotated[int, Field(ge=1)] = F("largest batch size of the bucket (a power of two)", unit="samples",
                                          producer="profiling.runner")
    steps: NonNegInt = F("uninstrumented steps with a batch in the bucket", unit="steps", producer="profiling.runner")
    batch_size_mean: Ratio = F("mean batch size of those steps", unit="samples", producer="profiling.runner")
    mean_s: Seconds = F("mean step time", unit="s", producer="profiling.runner")
    p50_s: Seconds = F("median step time", unit="s", producer="profiling.runner")
    samples_per_s: Ratio | None = F("the bucket's samples / its steps' time", None, unit="samples/s",
                                    producer="profiling.runner")


class CostDetail(_M):
    """Additive cost-model extras of a node (``cost_detail``), summed over its subtree."""

    matmul_flops: Count | None = F("FLOPs of matrix multiplications (part of ``flops``)", None, unit="FLOP",
                                   producer="costmodel.attach")
    int_ops: Count | None = F("integer operations (not in ``flops``)", None, unit="ops", producer="costmodel.attach")
    lookups: Count | None = F("embedding rows looked up", None, unit="rows", producer="costmodel.attach")
    unique_rows: Count | None = F("distinct embedding rows touched", None, unit="rows", producer="costmodel.attach")
    unique_bytes: Bytes | None = F("bytes of the distinct rows touched", None, unit="bytes", producer="costmodel.attach")
    table_bytes: Bytes | None = F("requested row bytes (lookups x row size)", None, unit="bytes",
                                  producer="costmodel.attach")
    approximate: Count | None = F("1.0 when lookups were split evenly over the tables of a fused call", None,
                                  producer="costmodel.attach")


class CostProvenance(_M):
    """Where a node's figures come from (``provenance``)."""

    time_s: Literal["measured", "derived"] | None = F(
        "measured (run, stages) or derived (apportioned, differences)", None, producer="costmodel.attach")
    flops: str | None = F("``formula`` when priced, else null", None, producer="costmodel.attach")
    bytes: str | None = F("``formula`` when priced, else null", None, producer="costmodel.attach")
    intensity: str | None = F("``derived`` when known, else null", None, producer="costmodel.attach")


class GatherPoint(_M):
    """The gather-roof operating point of a gather-like node (``roofline.gather``)."""

    row_bytes: Bytes = F("bytes per looked-up row", unit="bytes", producer="analysis.roofline")
    row_source: str = F("where ``row_bytes`` came from", producer="analysis.roofline")
    table_bytes: Bytes = F("size of one table", unit="bytes", producer="analysis.roofline")
    table_source: str = F("where ``table_bytes`` came from", producer="analysis.roofline")
    footprint_bytes: Bytes = F("sum of the tables read in turn", unit="bytes", producer="analysis.roofline")
    footprint_source: str = F("where ``footprint_bytes`` came from", producer="analysis.roofline")
    share: Ratio | None = F("share of the subtree's op time in its outermost gather ops", None,
                            producer="analysis.roofline")
    one_table_bytes_per_s: Ratio | None = F("gather bandwidth for one table alone", None, unit="bytes/s",
                                            producer="analysis.roofline")


class Roofline(_M):
    """Roofline figures of a node (``roofline``); rates are per second of the node's time."""

    roof: Literal["stream", "gather"] = F("memory roof the node is held to", producer="analysis.roofline")
    peak_flops: Ratio = F("compute roof", unit="FLOP/s", producer="analysis.roofline")
    partial: bool | None = F("the cost sums over a subtree with unpriced parts", None, producer="analysis.roofline")
    gather: GatherPoint | None = F("gather operating point (gather-like nodes)", None, producer="analysis.roofline")
    unique_bytes_source: str | None = F("where the unique bytes came from", None, producer="analysis.roofline")
    achieved_flops: Ratio | None = F("flops / time_s", None, unit="FLOP/s", producer="analysis.roofline")
    achieved_bytes_per_s: Ratio | None = F("bytes / time_s", None, unit="bytes/s", producer="analysis.roofline")
    achieved_unique_bytes_per_s: Ratio | None = F("unique bytes / time_s", None, unit="bytes/s",
                                                  producer="analysis.roofline")
    intensity: Ratio | None = F("flops / bytes", None, unit="FLOP/byte", producer="analysis.roofline")
    roof_bytes_per_s: Ratio | None = F("memory roof bandwidth", None, unit="bytes/s", producer="analysis.roofline")
    ridge_intensity: Ratio | None = F("peak_flops / roof_bytes_per_s", None, unit="FLOP/byte",
                                      producer="analysis.roofline")
    ceiling_flops: Ratio | None = F("min(peak, intensity x bandwidth) on the basis bytes", None, unit="FLOP/s",
                                    producer="analysis.roofline")
    ceiling_fraction: Ratio | None = F("achieved over ceiling (may exceed 1: see roof_suspect)", None,
                                       producer="analysis.roofline")
    compute_fraction: Ratio | None = F("achieved_flops / peak_flops", None, producer="analysis.roofline")
    memory_fraction_requested: Ratio | None = F("achieved_bytes_per_s / roof_bytes_per_s", None,
                                                producer="analysis.roofline")
    memory_fraction_unique: Ratio | None = F("achieved_unique_bytes_per_s / roof_bytes_per_s", None,
                                             producer="analysis.roofline")
    per_call_s: Seconds | None = F("time_s / calls", None, unit="s", producer="analysis.roofline")
    roof_suspect: bool | None = F("ceiling_fraction above 105 % of the measured roof", None,
                                  producer="analysis.roofline")
    roof_suspect_reason: str | None = F("why the roof is suspect", None, producer="analysis.roofline")
    roof_dtype: str | None = F("dtype of the GEMM roof: the dtype the node's ops ran in", None,
                               producer="analysis.roofline")
    roof_key: str | None = F("the roof of the ceiling: ``gemm.<dtype>``, ``stream`` or ``gather``", None,
                             producer="analysis.roofline")


class ResidentBytes(_M):
    """Bytes resident for one stage, computed from tensor sizes."""

    parameters_bytes: Bytes = F("parameters", unit="bytes", producer="profiling.memory")
    buffers_bytes: Bytes = F("registered buffers and plain tensor attributes", unit="bytes",
                             producer="profiling.memory")
    optimizer_state_bytes: Bytes = F("optimizer state tensors of the stage's parameters", unit="bytes",
                                     producer="profiling.memory")


class StageMemory(_M):
    """Allocator-level memory of one stage in the memory pass (``recstack profile --memory``): one extra step,
    never a timed one, under torch.profiler's memory events (every allocation and free, in order)."""

    peak_bytes: Bytes = F("peak of live allocator bytes inside the stage, above what was live when the step "
                          "began (the model, optimizer state and batch are not in it; the stage's "
                          "temporaries, outputs and what earlier stages still hold are)", unit="bytes",
                          producer="profiling.memory")
    allocated_bytes: Bytes = F("bytes the stage allocated (every allocation summed, frees not subtracted)",
                               unit="bytes", producer="profiling.memory")
    saved_for_backward_bytes: Bytes | None = F(
        "training: bytes of the tensors autograd saved for backward while the stage ran (each storage once, "
        "parameters and buffers not, a batch tensor saved as it is counted too)", None, unit="bytes",
        producer="profiling.memory")
    device: Literal["cpu", "cuda"] = F("the allocator measured: ``cpu`` (CPU allocator) or ``cuda`` (the caching "
                                       "allocator's allocations, not its reserve)", producer="profiling.memory")
    predicted_peak_bytes: Bytes | None = F("zoo models: the footprint model's prediction of the same figure "
                                           "(recstack.zoo.footprint, the stage's dynamic bytes)", None,
                                           unit="bytes", producer="session.run")


class TopDown(_M):
    """Top-down level 1 fractions of pipeline slots."""

    retiring: Ratio | None = F("retiring share", None, producer="profiling.counters_replay")
    bad_speculation: Ratio | None = F("bad speculation share", None, producer="profiling.counters_replay")
    frontend_bound: Ratio | None = F("front-end bound share", None, producer="profiling.counters_replay")
    backend_bound: Ratio | None = F("back-end bound share", None, producer="profiling.counters_replay")
    source: str | None = F("events or perf metrics", None, producer="profiling.counters_replay")


class StageCounters(_M):
    """Hardware counters of one stage, per step (``counters`` on a stage node and in ``counters.stages``)."""

    available: bool | None = F("false when this stage could not be counted", None, producer="profiling.counters_replay")
    reason: str | None = F("why not", None, producer="profiling.counters_replay")
    cycles: Count | None = F("CPU cycles per step", None, unit="cycles", producer="profiling.counters_replay")
    instructions: Count | None = F("instructions per step", None, unit="instructions", producer="profiling.counters_replay")
    cache_misses: Count | None = F("cache misses per step", None, unit="misses", producer="profiling.counters_replay")
    ipc: Ratio | None = F("instructions per cycle", None, producer="profiling.counters_replay")
    cache_misses_per_kinstr: Ratio | None = F("cache misses per 1000 instructions", None,
                                              producer="profiling.counters_replay")
    topdown: TopDown | None = F("top-down level 1", None, producer="profiling.counters_replay")
    multiplexed: bool | None = F("some event was multiplexed (scaled)", None, producer="profiling.counters_replay")


class Rusage(_M):
    """Kernel resource counts of a stage, per step (central-step mean)."""

    minor_faults: Count | None = F("minor page faults", None, unit="faults", producer="profiling.timing")
    major_faults: Count | None = F("major page faults", None, unit="faults", producer="profiling.timing")
    voluntary_ctx_switches: Count | None = F("voluntary context switches", None, unit="switches",
                                             producer="profiling.timing")
    involuntary_ctx_switches: Count | None = F("involuntary context switches", None, unit="switches",
                                               producer="profiling.timing")


class Bf16Timing(_M):
    """A bf16 run's stage timed again in both dtypes, forward only, outside the timed passes (best step each)."""

    bf16_s: Seconds = F("best forward step of the stage in bf16", unit="s", producer="analysis.dtype_compare")
    fp32_s: Seconds = F("best forward step of the stage in fp32", unit="s", producer="analysis.dtype_compare")
    ratio: Ratio = F("bf16_s / fp32_s (below 1: bf16 is faster)", producer="analysis.dtype_compare")
    kernels: list[dict[str, Any]] = F("the oneDNN kernels that ran in the stage (empty: no oneDNN lines)",
                                      producer="analysis.dtype_compare")
    amx: bool = F("an AMX kernel ran", producer="analysis.dtype_compare")
    avx512_bf16: bool = F("an AVX512-BF16 kernel ran", producer="analysis.dtype_compare")


class Node(_M):
    """One node of the tree ``run -> stage -> module -> op (-> kernel)``; every figure is per step."""

    name: str = F("stage name, module path, op name or kernel name", producer="profiling.runner")
    path: str = F("unique within the profile: ``run`` for the root, else ``stage/module/.../op``",
                  producer="profiling.runner")
    level: Literal["run", "stage", "module", "op", "kernel"] = F("tree level", producer="profiling.runner")
    stage: str | None = F("the stage the node belongs to (null for the root)", producer="profiling.runner")
    time_s: Seconds = F("time per step: measured (run, stage) or apportioned (module, op)", unit="s",
                        producer="profiling.runner")
    self_time_s: Seconds = F("time_s minus the children's", unit="s", producer="profiling.runner")
    calls: NonNegInt = F("calls per step", unit="calls", producer="profiling.runner")
    flops: Count | None = F("analytic floating-point work (null: unknown, never 0 for unknown)", unit="FLOP",
                            producer="costmodel.attach")
    bytes: Bytes | None = F("analytic memory traffic, read + written (null: unknown)", unit="bytes",
                            producer="costmodel.attach")
    intensity: Ratio | None = F("flops / bytes", unit="FLOP/byte", producer="costmodel.attach")
    children: list[Node] = F("child nodes, largest first", producer="profiling.runner")

    # run and stage nodes
    time_s_p10: Seconds | None = F("10th percentile over the timed steps (run, stage, timed communication phase)", None, unit="s",
                                   producer="profiling.runner")
    time_s_p90: Seconds | None = F("90th percentile over the timed steps (run, stage, timed communication phase)", None, unit="s",
                                   producer="profiling.runner")
    latency_s: Latency | None = F("uninstrumented step latency percentiles (run)", None, unit="s",
                                  producer="profiling.runner")
    throughput_samples_per_s: Ratio | None = F("batch size / latency_s.p50 (run); with workload_batches "
                                               "query: all samples / all uninstrumented steps' time", None,
                                               unit="samples/s", producer="profiling.runner")
    step_time_by_batch_bucket: list[BatchBucket] | None = F(
        "step times per batch-size bucket (run; workload_batches query)", None, producer="profiling.runner")
    optimizer_note: str | None = F("why there is no optimizer stage (run)", None, producer="profiling.runner")
    op_pass_time_s: Seconds | None = F("time in the op pass, under torch.profiler (stage, op)", None, unit="s",
                                       producer="profiling.runner")
    apportion_factor: Ratio | None = F("timing-pass over op-pass time: scales the stage's children (stage, "
                                       "timed communication phase)",
                                       None, producer="profiling.runner")
    note: str | None = F("a remark on the stage (e.g. fused optimizer)", None, producer="profiling.runner")
    collective_pass_wait_s: Seconds | None = F("a communication phase's ``collective`` node: the collective "
                                               "pass's wait for the last rank (measured; that pass makes every "
                                               "collective blocking)", None, unit="s",
                                               producer="distributed.ranks")
    collective_pass_transfer_s: Seconds | None = F("a communication phase's ``collective`` node: the collective "
                                                   "pass's transfer once every rank had called (measured)", None,
                                                   unit="s", producer="distributed.ranks")
    source: Literal["timing pass", "op pass, apportioned", "timing pass + op pass"] | None = F(
        "a communication phase: where its time comes from: timed as a stage of its own on the rank (TorchRec's "
        "forward input/output distribution), op-pass times of collectives found by name in other stages, or "
        "both", None, producer="distributed.communication")
    measured_s: Seconds | None = F("a communication phase's time timed as a stage of its own (timing pass; its "
                                   "p10/p90, op_pass_time_s and apportion_factor beside it)", None, unit="s",
                                   producer="distributed.communication")
    moved_s: Seconds | None = F("a communication phase's time found by name in other stages and moved out of "
                                "them (op-pass times apportioned there)", None, unit="s",
                                producer="distributed.communication")
    communication_moved_s: Seconds | None = F("collectives moved out of this stage into ``communication`` "
                                              "(stage, multi-rank runs)", None, unit="s",
                                              producer="distributed.communication")
    resident_bytes: ResidentBytes | None = F("bytes resident for the stage (stage)", None, unit="bytes",
                                             producer="profiling.runner")
    memory_peak: StageMemory | None = F("allocator-level memory of the stage, measured in the memory pass "
                                        "(stage; ``recstack profile --memory``)", None, producer="profiling.memory")
    counters: StageCounters | None = F("hardware counters of the stage, from ``counters.stages`` (stage)", None,
                                       producer="analysis.pipeline")
    rusage: Rusage | None = F("page faults and context switches per step (stage)", None,
                              producer="profiling.timing")
    bf16: Bf16Timing | None = F("a bf16 run: the stage's forward timed again in bf16 and fp32 (stage)", None,
                                producer="analysis.dtype_compare")
    # module, op and kernel nodes
    label: str | None = F("display name, disambiguated among siblings that share a name", None,
                          producer="profiling.runner")
    kind: str | None = F("``unattributed`` (a stage's time the op pass did not see), ``framework`` "
                         "(Python and framework time between ops, under other or caller code) or ``caller`` "
                         "(a stage's ``[caller code]``: the model's own code run outside every stage root "
                         "just before the stage's root), ``model_code`` (a stage's ``[model code]``: the model's "
                         "own code whose ops compute this stage's work, moved from where it ran); ``backward_of`` (imported: ``backward/[backward of <stage>]``, the "
                         "backward ranges whose sequence numbers link them to that forward stage's ops); "
                         "in a communication phase ``collective`` (torch.distributed calls and "
                         "Work waits) or ``torchrec_overhead`` (TorchRec's ops and Python around them)", None,
                         producer="profiling.runner")
    moved_from: dict[str, Seconds] | None = F("``[model code]``: interval -> seconds per step moved from it (the "
                                              "caller code of that stage, or ``other``)", None, unit="s",
                                              producer="profiling.assemble")
    module_type: str | None = F("the module's class name (module)", None, producer="profiling.runner")
    rule: str | None = F("the stage rule that placed the module, or ``inherited`` (module)", None,
                         producer="profiling.runner")
    shapes: list[Any] | None = F("distinct input shapes seen, at most 16 (op)", None, producer="profiling.runner")
    distinct_shapes: NonNegInt | None = F("number of distinct input shapes: the dynamic-shape signal (op)", None,
                                          producer="profiling.runner")
    device_time_s: Seconds | None = F("device (CUDA) time per step (op: of what it launched; imported run, "
                                      "stage and module: summed over their ops), the device's own durations, "
                                      "never scaled by a host factor", None, unit="s",
                                      producer="profiling.runner")
    dtypes: dict[str, Count] | None = F("input dtype -> calls in the op pass (op; the roofline's roof_dtype)",
                                        None, unit="calls", producer="profiling.runner")
    device: str | None = F("device of a kernel node (``cuda``)", None, producer="profiling.runner")
    overhead_removed_s: Seconds | None = F(
        "imported stage, caller code or other: host time the profiler-overhead correction removed per step "
        "(mean; included in its time as recorded, not in time_s)", None, unit="s", producer="traceimport.build")
    overhead_events_per_step: Count | None = F("imported: host events recorded in it per step, the count the "
                                               "correction multiplies", None, unit="events",
                                               producer="traceimport.build")
    overhead_bound: Literal["per-event estimate", "waits", "GPU busy"] | None = F(
        "imported: what set the cut: the per-event estimate x its events, its time less its waits in "
        "synchronising calls, or its step's span less the GPU's busy time (docs/import.md)", None,
        producer="traceimport.build")
    device_kind: Literal["kernel", "memcpy", "memset", "collective"] | None = F(
        "an imported kernel node's kind (a collective: an NCCL/RCCL kernel)", None, producer="traceimport.build")
    # cost model
    bytes_read: Bytes | None = F("analytic bytes read", None, unit="bytes", producer="costmodel.attach")
    bytes_written: Bytes | None = F("analytic bytes written", None, unit="bytes", producer="costmodel.attach")
    cost_detail: CostDetail | None = F("additive cost-model extras", None, producer="costmodel.attach")
    uncovered: bool | None = F("the cost model could not price this op", None, producer="costmodel.attach")
    uncovered_reason: str | None = F("why (``not seen by the cost counter``, ``no formula``)", None,
                                     producer="costmodel.attach")
    cost_in_parent: bool | None = F("its work is counted at the enclosing op", None, producer="costmodel.attach")
    cost_match: Literal["exact", "scope", "backward", "name"] | None = F(
        "how specifically the counted cost was matched to this op", None, producer="costmodel.attach")
    covered_time_share: Share | None = F("share of op time the cost model priced (run, stage)", None,
                                         producer="costmodel.attach")
    uncovered_calls_share: Share | None = F("share of calls without a formula", None,
                                            producer="costmodel.attach")
    provenance: CostProvenance | None = F("measured / derived / formula, per figure", None,
                                          producer="costmodel.attach")
    partial: bool | None = F("the cost sums over a subtree with unpriced parts", None,
                             producer="costmodel.attach")
    # roofline
    bound: Literal["memory", "compute", "overhead"] | None = F("roofline bound class (null: no cost figures)",
                                                              None, producer="analysis.roofline")
    bound_basis: Literal["requested bytes", "unique bytes"] | None = F(
        "bytes the memory fraction is taken on", None, producer="analysis.roofline")
    bound_reason: str | None = F("one sentence: why this bound", None, producer="analysis.roofline")
    roofline: Roofline | None = F("roofline figures", None, producer="analysis.roofline")


# -- top-level sections ---------------------------------------------------------------------------


class StageEvidence(_M):
    """Why a stage root is in its stage (docs/profiling.md, "How stages are found")."""

    basis: Literal["dataflow", "name or type", "user rule"] = F(
        "what decided: the ops the module ran (one traced step), its class or attribute name, a user rule",
        producer="profiling.rules")
    why: str | None = F("one sentence: what the deciding op does", None, producer="profiling.rules")
    op: str | None = F("the first op of the deciding kind (dataflow)", None, producer="profiling.dataflow")
    module: str | None = F("the module that op ran in (the root or one of its descendants)", None,
                           producer="profiling.dataflow")
    inputs: list[str] | None = F("what flowed into that op: shape and origin (tables looked up, batch inputs), with "
                                 "flags (sequence, after a layer, features met)", None, producer="profiling.dataflow")
    ops_by_stage: dict[str, NonNegInt] | None = F("ops with evidence in the module's subtree, by the stage they "
                                                  "point to", None, producer="profiling.dataflow")
    hint: str | None = F("the class or name rule that matched too (``type:AFMLayer -> interaction``); dataflow wins "
                         "over it except for layers placed by position only", None, producer="profiling.rules")


class StageRoot(_M):
    stage: str = F("stage the module roots", producer="profiling.runner")
    rule: str | None = F("the rule that matched (``dataflow:<stage>``, ``type:...``, ``name:...``, ``user:...``, "
                         "``inherited-from:...``)", None, producer="profiling.runner")
    evidence: StageEvidence | None = F("why it is in that stage (``recstack show --explain-stages`` prints it)", None,
                                       producer="profiling.rules")


class ModelCode(_M):
    """The model's own ops (outside every stage root) whose dataflow places them in a stage other than the
    interval they ran in: the stage's ``[model code]`` (docs/profiling.md, "The model's own code")."""

    stage: str = F("the stage their ops compute", producer="profiling.modelcode")
    ops: dict[str, NonNegInt] = F("op name -> calls moved, in the traced step", producer="profiling.modelcode")
    moved_from: list[str] = F("the intervals they ran in: the stage whose root ran next (its caller code), or "
                              "``other`` (after the last root), or ``loss`` (training)", producer="profiling.modelcode")
    evidence: StageEvidence = F("the first moved op with evidence of its own, or why one without was placed",
                                producer="profiling.modelcode")


class NeverRanRoot(_M):
    stage: str = F("stage the container matched", producer="profiling.rules")
    rule: str | None = F("the rule that matched it", None, producer="profiling.rules")
    handed_to: list[str] = F("its outermost running descendants, now stage roots (empty: none ran)",
                             producer="profiling.rules")


class Loss(_M):
    """The training step's loss (``run.loss``; docs/profiling.md, "Training loss")."""

    function: Literal["loss_fn", "model.loss", "output", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                      "cross_entropy"] = F(
        "``loss_fn`` (given), ``model.loss`` (the model's own, with the batch's labels), ``output`` (a 0-dim "
        "output is the loss) or the built-in loss used", producer="profiling.loss")
    name: str | None = F("the given or the model's loss function, ``module.qualname``", None,
                         producer="profiling.loss")
    labels: Literal["batch", "seeded_random"] | None = F(
        "where the labels came from: ``batch`` (``recstack.Batch``, a zoo batch) or ``seeded_random`` (0/1 "
        "from the run's seed); null: the loss function read what it needed", None, producer="profiling.loss")
    why: str = F("why this loss (e.g. a sigmoid made the output: probabilities)", producer="profiling.loss")


class Run(_M):
    """What was run (``run``). Only ``model`` is required: hand-built and imported profiles may lack the rest."""

    model: str = F("zoo id, model name or factory", producer="profiling.runner")
    source: Literal["live", "imported"] | None = F(
        "``imported``: built from a torch.profiler trace by ``recstack import`` (null: a live run)", None,
        producer="traceimport.build")
    config: dict[str, Any] | None = F("the whole RunConfig as a dict (its fields: recstack.config.run)", None,
                                      producer="api")
    config_key: str | None = F("RunConfig.key(): sha256 of the options, referenced files by contents", None,
                               producer="api")
    batch_size: Annotated[int, Field(ge=1)] | None = F("samples per step", None, unit="samples",
                                                       producer="profiling.runner")
    mode: Literal["inference", "train"] | None = F("inference or train", None, producer="profiling.runner")
    grad_mode: Literal["inference_mode", "no_grad", "train"] | None = F("autograd mode of the steps", None,
                                                                        producer="profiling.runner")
    backend: str | None = F("embedding backend: ``torch``, ``torchrec``, ``tbe`` or ``user``", None,
                            producer="api")
    table_dtype: str | None = F("embedding table dtype: ``fp32``, ``fp16``, ``int8``", None, producer="api")
    dtype: str | None = F("dense-layer dtype: ``fp32``, ``bf16``", None, producer="profiling.runner")
    dtype_note: str | None = F("native or emulated bf16", None, producer="profiling.runner")
    threads: Annotated[int, Field(ge=1)] | None = F("intra-op threads", None, unit="threads",
                                                    producer="profiling.runner")
    device: str | None = F("``cpu`` or ``cuda``", None, producer="profiling.runner")
    seed: int | None = F("random seed", None, producer="profiling.runner")
    workload_batches: Literal["fixed", "query"] | None = F(
        "fixed batch size, or batches as serving forms them (query sizes split at batch_size)", None,
        producer="profiling.runner")
    scale: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = F("table-row scale of a zoo model", None,
                                                                           producer="api")
    workload: str | None = F("workload preset or spec file", None, producer="api")
    model_cfg: dict[str, Any] | None = F("the resolved zoo model config", None, producer="api", alias="model_config")
    workload_config: dict[str, Any] | None = F("the resolved workload", None, producer="api")
    iters: NonNegInt | None = F("timed steps per pass", None, unit="steps", producer="profiling.runner")
    warmup: NonNegInt | None = F("warm-up steps", None, unit="steps", producer="profiling.runner")
    op_iters: NonNegInt | None = F("steps in the op pass (0: no op pass)", None, unit="steps",
                                   producer="profiling.runner")
    optimizer: str | None = F("``sgd`` or ``adagrad`` (train), else null", None, producer="profiling.runner")
    optimizer_fused_into_backward: bool | None = F("TBE fuses the table update into backward", None,
                                                   producer="profiling.runner")
    loss: Loss | None = F("the training step's loss (null: inference)", None, producer="profiling.runner")
    warnings: list[str] | None = F("what the run warned about on stderr (e.g. a batch size it could not "
                                   "tell)", None, producer="profiling.runner")
    stage_rules: list[dict[str, Any]] | None = F("user stage rules", None, producer="profiling.runner")
    stage_roots: dict[str, StageRoot] | None = F("module path -> the stage it roots", None,
                                                 producer="profiling.runner")
    stage_methods: dict[str, StageRoot] | None = F(
        "``<module path>:<method>`` -> a module's own method (not ``forward``) whose ops are one stage's work; both "
        "passes mark its calls as that stage (docs/profiling.md)", None, producer="profiling.methods")
    model_code: dict[str, ModelCode] | None = F(
        "stage -> the model's own code moved to it by its dataflow (its ``[model code]`` node; docs/profiling.md)",
        None, producer="profiling.modelcode")
    unassigned_modules: list[str] | None = F("top-level modules in no stage", None, producer="profiling.runner")
    trace: str | None = F("the Chrome trace: the op pass's file really written (absent: none; multi-rank: the "
                          "critical rank's), or the trace imported (a file or a folder)", None,
                          producer="profiling.runner")
    nproc: Annotated[int, Field(ge=1)] | None = F("ranks of a multi-rank run", None, producer="distributed.ranks")
    sharding: str | None = F("embedding sharding of a multi-rank run", None, producer="distributed.ranks")
    critical_rank: NonNegInt | None = F("the rank whose tree is the top-level root", None,
                                        producer="distributed.ranks")
    compile: dict[str, Any] | None = F("what torch.compile did (``--compile``): regions, graphs, graph breaks, "
                                       "recompiles, fallbacks, hazards, stages hidden (docs/compile.md)", None,
                                       producer="compilation.profiling")
    never_ran_roots: dict[str, NeverRanRoot] | None = F("module path -> a stage root whose forward never ran "
                                                        "(a container) and who took its role", None,
                                                        producer="profiling.runner")

    model_config = ConfigDict(strict=True, extra="allow", protected_namespaces=(), populate_by_name=True)


class ProcessLoad(_M):
    """A process that used our CPUs during the timed steps."""

    pid: NonNegInt = F("process id", producer="hardware.contention")
    name: str = F("process name", producer="hardware.contention")
    cmd: str = F("its command line (shortened)", producer="hardware.contention")
    cores: Ratio = F("CPU time over the window's wall time", unit="cores", producer="hardware.contention")
    threads: NonNegInt | None = F("its threads", None, producer="hardware.contention")


class BeforeAfter(_M):
    """A figure read before and after the timed steps."""

    before: Any = F("before the timed steps", None, producer="hardware.contention")
    after: Any = F("after the timed steps", None, producer="hardware.contention")


class ProbeFigures(_M):
    """One capacity probe (a copy beyond the last-level cache, then a GEMM; medians of the repeats)."""

    threads: NonNegInt | None = F("threads the probe ran at", None, unit="threads", producer="hardware.probe")
    gemm_flops: Ratio | None = F("GEMM rate", None, unit="FLOP/s", producer="hardware.probe")
    stream_bytes_per_s: Ratio | None = F("streaming copy rate", None, unit="bytes/s", producer="hardware.probe")
    gemm_spread: Ratio | None = F("(max - min) / median of the GEMM repeats", None, producer="hardware.probe")
    stream_spread: Ratio | None = F("(max - min) / median of the copy repeats", None, producer="hardware.probe")
    settings: dict[str, Any] | None = F("what the probe did (sizes, repeats, LLC, version)", None,
                                        producer="hardware.probe")


class ContentionProbe(_M):
    """The capacity probes and what they were compared with."""

    before: ProbeFigures | None = F("probe before the timed steps", None, producer="hardware.contention")
    after: ProbeFigures | None = F("probe after the timed steps", None, producer="hardware.contention")
    settings: dict[str, Any] | None = F("probe sizes and repeats", None, producer="hardware.contention")
    machine: dict[str, Any] | None = F("the machine file's probe at these threads (null: not compared)", None,
                                       producer="hardware.contention")
    floor: dict[str, Ratio] | None = F("kind -> the rate below which the host counts as slower", None,
                                       producer="hardware.contention")
    margin: dict[str, Ratio] | None = F("kind -> the floor's distance below the machine probe's median, as a "
                                        "fraction (from the probe's spread)", None, producer="hardware.probe")
    machine_contended: bool | None = F("the machine file was measured under contention", None,
                                       producer="hardware.probe")
    evidence: list[str] | None = F("the probe's own evidence lines (also in the record's evidence); "
                                   "replaced when the profile is re-analysed against another machine file", None,
                                   producer="hardware.probe")
    notes: list[str] | None = F("the probe's own notes (also in the record's notes)", None, producer="hardware.probe")


class CgroupQuota(_M):
    quota_cores: Ratio | None = F("the container's CPU quota (null: none)", None, unit="cores",
                                  producer="hardware.contention")
    throttled_fraction: Ratio | None = F("share of the window the quota throttled this process", None,
                                         producer="hardware.contention")


class ThreadLoad(_M):
    """This process's threads of one name over the timed steps (``environment.contention.own_threads[]``)."""

    name: str = F("thread name (comm): python (main), pt_gloo_runloop, gloo_tcp_loop, OpenMP workers, ...",
                  producer="hardware.threads")
    threads: NonNegInt = F("threads of this name seen at the end of the window", unit="threads",
                           producer="hardware.threads")
    cpu_s: Seconds = F("their CPU time in the window (schedstat)", unit="s", producer="hardware.threads")
    runq_wait_s: Seconds = F("their time runnable but waiting for a core (schedstat)", unit="s",
                             producer="hardware.threads")
    slices: NonNegInt = F("time slices they ran", unit="slices", producer="hardware.threads")
    cores: Ratio = F("cpu_s / the window's wall time", unit="cores", producer="hardware.threads")
    waiting_cores: Ratio = F("runq_wait_s / the window's wall time", unit="cores", producer="hardware.threads")


class Contention(_M):
    """Was the run sharing its CPUs, or the host slower than measured (``environment.contention``)."""

    detected: bool | None = F("the run was contended", None, producer="hardware.contention")
    evidence: list[str] | None = F("why (one sentence each); empty when not contended", None,
                                   producer="hardware.contention")
    notes: list[str] | None = F("what was seen but is not contention, or could not be compared", None,
                                producer="hardware.contention")
    busy_processes: list[ProcessLoad] | None = F("other processes busy on our CPUs", None,
                                                 producer="hardware.contention")
    planned_load: list[ProcessLoad] | None = F("recstack's own planned processes (workers, ranks)", None,
                                               producer="hardware.contention")
    other_cores: Ratio | None = F("cores others used on our CPUs", None, unit="cores",
                                  producer="hardware.contention")
    oversubscribed: bool | None = F("torch threads + others' cores exceeded the usable cores", None,
                                    producer="hardware.contention")
    torch_threads: NonNegInt | None = F("torch intra-op threads", None, unit="threads",
                                        producer="hardware.contention")
    usable_cores: NonNegInt | None = F("cores this process may run on", None, unit="cores",
                                       producer="hardware.contention")
    steal_fraction: Ratio | None = F("share of our CPUs' time the hypervisor took", None,
                                     producer="hardware.contention")
    cgroup: CgroupQuota | None = F("the container's CPU quota (null: none found)", None,
                                   producer="hardware.contention")
    probe: ContentionProbe | None = F("capacity probes before and after", None, producer="hardware.contention")
    cpu_time_ratio: Ratio | None = F("this process's CPU time over wall time", None, unit="cores",
                                     producer="hardware.contention")
    involuntary_ctx_switches_per_s: Ratio | None = F("involuntary context switches of this process", None,
                                                     unit="1/s", producer="hardware.contention")
    load_avg: BeforeAfter | None = F("1, 5, 15 minute load averages, before and after", None,
                                     producer="hardware.contention")
    runnable: BeforeAfter | None = F("runnable tasks on the host, before and after", None, unit="tasks",
                                     producer="hardware.contention")
    own_threads: list[ThreadLoad] | None = F("this process's own threads by name, over the window (null: the "
                                              "kernel keeps no per-thread schedstat)", None,
                                              producer="hardware.threads")
    window_s: Seconds | None = F("the watched window", None, unit="s", producer="hardware.contention")
    method: str | None = F("how it was measured", None, producer="hardware.contention")


class Environment(_M):
    """Facts about the host and software (``environment``)."""

    python: str | None = F("Python version", None, producer="profiling.environment")
    torch: str | None = F("PyTorch version", None, producer="profiling.environment")
    recstack: str | None = F("recstack version", None, producer="profiling.environment")
    torchrec: str | None = F("TorchRec version (null: absent)", None, producer="profiling.environment")
    fbgemm_gpu: str | None = F("FBGEMM version (null: absent)", None, producer="profiling.environment")
    cpu_model: str | None = F("CPU model name", None, producer="profiling.environment")
    cores: NonNegInt | None = F("logical CPUs", None, unit="cores", producer="profiling.environment")
    host: str | None = F("host name", None, producer="profiling.environment")
    os: str | None = F("OS and kernel release", None, producer="profiling.environment")
    native_bf16: bool | None = F("the CPU has bf16 arithmetic", None, producer="profiling.environment")
    cuda: bool | None = F("CUDA is available", None, producer="profiling.environment")
    gpu: str | None = F("GPU name (CUDA only)", None, producer="profiling.environment")
    contention: Contention | None = F("contention found during the run", None, producer="hardware.contention")


class Overhead(_M):
    """The profiler's own cost (``overhead``)."""

    uninstrumented_step_s: Seconds | None = F("median plain step", None, unit="s", producer="profiling.runner")
    uninstrumented_step_s_p10: Seconds | None = F("10th percentile plain step", None, unit="s",
                                                  producer="profiling.runner")
    uninstrumented_step_s_p90: Seconds | None = F("90th percentile plain step", None, unit="s",
                                                  producer="profiling.runner")
    stage_pass_step_s: Seconds | None = F("timing-pass step (interquartile mean)", None, unit="s",
                                          producer="profiling.runner")
    stage_pass_ratio: Ratio | None = F("median of per-pair timing-pass / plain step", None,
                                       producer="profiling.runner")
    stage_pass_ratio_ci: list[Finite] | None = F("95 % bootstrap interval [low, high] of that median", None,
                                                 producer="profiling.runner", min_length=2, max_length=2)
    op_pass_step_s: Seconds | None = F("median op-pass step (under torch.profiler)", None, unit="s",
                                       producer="profiling.runner")
    op_pass_ratio: Ratio | None = F("op-pass median / plain median", None, producer="profiling.runner")
    op_pass_op_time_s: Seconds | None = F("op-pass time of the outermost ops per step, from the raw events "
                                          "(the op nodes' op_pass_time_s add up to it)", None, unit="s",
                                          producer="profiling.runner")
    op_pass_remeasured: dict[str, Finite | None] | None = F(
        "the op pass ran beyond 3x the plain step either way and was measured again: ``first_ratio``, "
        "``second_ratio`` and ``kept_ratio`` (the run nearer the plain step is kept)", None,
        producer="profiling.passes")
    op_pass_ratio_flag: str | None = F("set when the kept op pass is still beyond 3x either way: its proportions "
                                       "within stages may not hold (one sentence)", None, producer="profiling.passes")
    pairs: NonNegInt | None = F("A/B pairs", None, producer="profiling.runner")
    profiling_wall_s: Seconds | None = F("wall time of all passes", None, unit="s", producer="profiling.runner")
    method: str | None = F("one-line statement of the method", None, producer="profiling.runner")
    per_event_s: Seconds | None = F("imported traces: the profiler's estimated cost per recorded event (median "
                                    "exclusive time of wrapper ops; see docs/import.md)", None, unit="s",
                                    producer="traceimport.build")
    events_per_step: Count | None = F("imported traces: host events recorded per step (mean), the count the "
                                        "correction multiplies", None, producer="traceimport.build")
    removed_step_s: Seconds | None = F("imported traces: profiler time removed per step (per_event_s x "
                                       "events_per_step, less where a part would go below zero; mean)", None, unit="s", producer="traceimport.build")


class Shard(_M):
    """One shard a rank holds (sharded runs: ``recstack profile --nproc N``; see docs/distributed.md)."""

    table: str = F("table the shard belongs to", producer="profiling.runner")
    sharding: str | None = F("TorchRec sharding type (``table_wise``, ``column_wise``, ``data_parallel``, ...)",
                             None, producer=_DI)
    offset: list[NonNegInt] | None = F("first row and column of the shard (null: a data-parallel replica)",
                                       None, producer=_DI)
    size: list[NonNegInt] | None = F("rows and columns of the shard (null: a data-parallel replica)", None,
                                     producer=_DI)
    replica: bool | None = F("a full data-parallel replica (every rank holds one)", None, producer=_DI)
    rows: Count | None = F("rows held", None, unit="rows", producer=_DI)
    columns: Count | None = F("columns held", None, unit="elements", producer=_DI)
    lookups: Count | None = F("IDs this shard looks up per step (table- and column-wise: every rank's batch; "
                              "a replica: its own rank's), computed", None, unit="rows", producer=_DI)
    unique_rows: Count | None = F("distinct rows of those lookups, computed", None, unit="rows", producer=_DI)
    bytes_requested: Bytes | None = F("lookups x columns x element size", None, unit="bytes", producer=_DI)
    bytes_unique: Bytes | None = F("unique_rows x columns x element size", None, unit="bytes", producer=_DI)
    table_bytes: Bytes | None = F("rows x columns x element size (the shard's memory, computed)", None,
                                  unit="bytes", producer=_DI)


class Rank(_M):
    """One rank's part of the run."""

    rank: NonNegInt = F("rank number", producer="profiling.runner")
    root: Node | None = F("this rank's tree; null means the top-level ``root`` (single-process profiles)",
                          producer="profiling.runner")
    shards: list[Shard] = F("the shards this rank holds (empty: unsharded)", producer="profiling.runner")


class UncoveredOp(_M):
    name: str = F("op name", producer="costmodel.attach")
    time_s: Seconds = F("op time without a formula", unit="s", producer="costmodel.attach")
    calls: Count = F("calls per step", unit="calls", producer="costmodel.attach")
    reason: str = F("why", producer="costmodel.attach")


class UnplacedCost(_M):
    module: str = F("module path the counter saw", producer="costmodel.attach")
    op: str = F("op name", producer="costmodel.attach")
    calls: Count = F("calls per step", unit="calls", producer="costmodel.attach")
    flops: Count = F("FLOPs", unit="FLOP", producer="costmodel.attach")
    bytes: Bytes = F("bytes", unit="bytes", producer="costmodel.attach")


class CostModel(_M):
    """Cost-model coverage (``cost_model``)."""

    uncovered_ops: list[UncoveredOp] = F("ops the cost model could not price, by time", producer="costmodel.attach")
    uncovered_time_share: Share = F("share of op time unpriced", producer="costmodel.attach")
    covered_time_share: Share | None = F("share of op time priced", producer="costmodel.attach")
    unplaced: list[UnplacedCost] = F("counted costs that matched no op node", producer="costmodel.attach")
    formula_errors: NonNegInt = F("formulas that raised", producer="costmodel.attach")
    flops: Count | None = F("run total", unit="FLOP", producer="costmodel.attach")
    bytes: Bytes | None = F("run total", unit="bytes", producer="costmodel.attach")


class EmbeddingTable(_M):
    """One embedding table, computed from one batch's indices (``embedding_tables[]``)."""

    table: str = F("table name", producer="zoo.embedding")
    feature: str = F("feature it serves", producer="zoo.embedding")
    kind: str = F("``pooled`` or ``sequence``", producer="zoo.embedding")
    rows: NonNegInt = F("rows", unit="rows", producer="zoo.embedding")
    dim: NonNegInt = F("embedding dimension", unit="elements", producer="zoo.embedding")
    dtype: str = F("table dtype", producer="zoo.embedding")
    row_bytes: Bytes = F("dim x element size (+4 per int8 row)", unit="bytes", producer="zoo.embedding")
    table_bytes: Bytes = F("rows x row_bytes", unit="bytes", producer="zoo.embedding")
    lookups: Count = F("IDs looked up per step", unit="rows", producer="zoo.embedding")
    unique_rows: Count = F("distinct rows touched per step", unit="rows", producer="zoo.embedding")
    bytes_requested: Bytes = F("lookups x row_bytes", unit="bytes", producer="zoo.embedding")
    bytes_unique: Bytes = F("unique_rows x row_bytes", unit="bytes", producer="zoo.embedding")
    pooling_factor: Ratio = F("lookups per sample", unit="rows/sample", producer="zoo.embedding")
    reuse: Ratio | None = F("lookups / unique_rows", producer="zoo.embedding")
    backward_bytes: Bytes | None = F("backward traffic (train)", None, unit="bytes", producer="profiling.runner")
    backward_rows_touched: Count | None = F("rows the backward touches (train)", None, unit="rows",
                                            producer="profiling.runner")
    optimizer_bytes: Bytes | None = F("optimizer traffic (train)", None, unit="bytes", producer="profiling.runner")
    optimizer_rows_touched: Count | None = F("rows the optimizer touches (train)", None, unit="rows",
                                             producer="profiling.runner")
    optimizer_state_bytes: Bytes | None = F("optimizer state tensors of the table (train)", None, unit="bytes",
                                            producer="profiling.runner")


class PeakStep(_M):
    """Peak memory of one step (measured)."""

    provenance: str | None = F("``measured``", None, producer="profiling.memory")
    peak_rss_bytes: Bytes | None = F("peak resident set during the step", None, unit="bytes",
                                     producer="profiling.memory")
    rss_before_step_bytes: Bytes | None = F("resident set at the step's start", None, unit="bytes",
                                            producer="profiling.memory")
    step_increase_bytes: Bytes | None = F("peak minus start", None, unit="bytes", producer="profiling.memory")
    cuda_peak_allocated_bytes: Bytes | None = F("torch.cuda.max_memory_allocated (CUDA)", None, unit="bytes",
                                                producer="profiling.memory")
    basis: str | None = F("how the peak was taken", None, producer="profiling.memory")


class MemoryPass(_M):
    """The memory pass's step-level figures (``profile --memory``; the stages' are on the stage nodes)."""

    device: Literal["cpu", "cuda"] = F("the allocator measured", producer="profiling.passes")
    step_peak_bytes: Bytes = F("peak of live allocator bytes over the step, above its start", unit="bytes",
                               producer="profiling.passes")
    cuda_peak_allocated_above_start_bytes: Bytes | None = F(
        "CUDA: torch.cuda.memory_stats' allocated peak of the step, above its start", None, unit="bytes",
        producer="profiling.passes")
    cuda_peak_reserved_bytes: Bytes | None = F("CUDA: the caching allocator's reserved peak of the step (its "
                                               "cache and fragmentation included)", None, unit="bytes",
                                               producer="profiling.passes")


class Memory(_M):
    """Memory of the run (``memory``)."""

    resident_by_stage: dict[str, ResidentBytes] = F("stage -> resident bytes (computed)", unit="bytes",
                                                    producer="profiling.memory")
    peak_step: PeakStep = F("peak process memory of one step (measured)", producer="profiling.memory")
    provenance: dict[str, str] | None = F("figure -> computed / measured", None, producer="profiling.runner")
    memory_pass: MemoryPass | None = F("the memory pass (``profile --memory``): the step's allocator peak", None,
                                       producer="profiling.runner")


class ComputeRoof(_M):
    dtype: str = F("GEMM dtype", producer="analysis.roofline")
    label: str = F("display label", producer="analysis.roofline")
    flops: Ratio = F("GEMM roof at the profile's threads", unit="FLOP/s", producer="analysis.roofline")
    main: bool | None = F("the roof nodes are held to", None, producer="analysis.roofline")


class GatherRoof(_M):
    label: str = F("display label", producer="analysis.roofline")
    bytes_per_s: Ratio = F("gather bandwidth of a stage's operating point", unit="bytes/s",
                           producer="analysis.roofline")


class Machine(_M):
    """The machine figures the roofline used (``machine``), at the profile's threads and dtype."""

    host: str | None = F("host measured", None, producer="analysis.roofline")
    cpu_model: str | None = F("CPU model", None, producer="analysis.roofline")
    measured_at: str | None = F("ISO time of the measurement", None, producer="analysis.roofline")
    mode: str | None = F("``quick`` or ``full``", None, producer="analysis.roofline")
    device: str | None = F("``cpu`` or ``cuda``", None, producer="analysis.roofline")
    threads: NonNegInt | None = F("threads the roofs were taken at", None, unit="threads",
                                  producer="analysis.roofline")
    dtype: str | None = F("dtype of the main compute roof", None, producer="analysis.roofline")
    peak_flops: Ratio | None = F("main compute roof", None, unit="FLOP/s", producer="analysis.roofline")
    peak_label: str | None = F("its label", None, producer="analysis.roofline")
    compute_roofs: list[ComputeRoof] | None = F("every GEMM roof", None, producer="analysis.roofline")
    stream_bandwidth: Ratio | None = F("streaming roof (best of copy, triad)", None, unit="bytes/s",
                                       producer="analysis.roofline")
    stream_label: str | None = F("its label", None, producer="analysis.roofline")
    gather_bandwidth_range: list[Ratio] | None = F("[slowest, fastest] measured gather bandwidth", None,
                                                   unit="bytes/s", producer="analysis.roofline",
                                                   min_length=2, max_length=2)
    gather_roofs: list[GatherRoof] | None = F("the stages' gather roofs", None, producer="analysis.roofline")
    dram_latency_s: Seconds | None = F("DRAM load-to-use latency", None, unit="s", producer="analysis.roofline")
    ridge_intensity: Ratio | None = F("peak_flops / stream_bandwidth", None, unit="FLOP/byte",
                                      producer="analysis.roofline")
    thresholds: dict[str, Any] | None = F("classification thresholds used", None, producer="analysis.roofline")
    notes: list[str] | None = F("caveats (clamped threads, emulated dtype)", None, producer="analysis.roofline")
    file: str | None = F("the machine file classified against (null: a machine passed as a dict)", None,
                         producer="analysis.pipeline")
    sha256: str | None = F("SHA-256 of the machine figures as canonical JSON", None, producer="analysis.pipeline")
    contended: bool | None = F("the machine file was measured under contention (its roofs are suspect)", None,
                               producer="analysis.roofline")


class Counters(_M):
    """Hardware counters (``counters``)."""

    available: bool = F("counters were measured", producer="profiling.counters_replay")
    reason: str | None = F("why not", None, producer="profiling.counters_replay")
    method: str | None = F("how they were counted", None, producer="profiling.counters_replay")
    perf: str | None = F("perf version", None, producer="profiling.counters_replay")
    stages: dict[str, StageCounters] | None = F("stage -> per-step counters", None, producer="profiling.counters_replay")


class Finding(_M):
    """A measured finding worth a sentence in the report (``findings[]``)."""

    kind: str = F("what was found: ``stage_bound`` (a stage's bound and ceiling fraction), ``bf16_speedup`` "
                  "(analysis.dtype_compare: the stage's bf16/fp32 time ratio)", producer="analysis.pipeline")
    stage: str | None = F("the stage it concerns", None, producer="analysis.pipeline")
    text: str = F("one sentence", producer="analysis.pipeline")
    value: Finite | None = F("the figure (the ceiling fraction; the bf16/fp32 time ratio)", None,
                             producer="analysis.pipeline")
    unit: str | None = F("the unit of ``value``: ``fraction`` (of a ceiling) or ``ratio`` (a time ratio)", None,
                         producer="analysis.pipeline")
    roof_suspect: bool | None = F("``value`` is a ceiling fraction above 105% of the measured roof: "
                                  "the roof is probably under-measured", None, producer="analysis.pipeline")
    roof_suspect_reason: str | None = F("why ``roof_suspect`` is set", None, producer="analysis.pipeline")


class ImportedDeviceStep(_M):
    """One step's device figures of an imported trace (``import.files[].device.steps[]``): unions of the device
    events' own intervals clipped to the step's span, never host times."""

    span_s: Seconds = F("the step's span (its ProfilerStep range)", unit="s", producer="traceimport.device")
    busy_s: Seconds = F("GPU busy: the union of every device event (kernels, copies, sets) within the span",
                        unit="s", producer="traceimport.device")
    idle_s: Seconds = F("GPU idle: span less busy", unit="s", producer="traceimport.device")
    compute_s: Seconds = F("the union of non-collective kernels within the span", unit="s",
                           producer="traceimport.device")
    communication_s: Seconds = F("the union of collective kernels (NCCL/RCCL) within the span", unit="s",
                                 producer="traceimport.device")
    overlap_s: Seconds = F("compute and communication running at once (compute + communication less their union)",
                           unit="s", producer="traceimport.device")


class ImportedDevice(_M):
    """Where one trace's device time went (``import.files[].device``), by kind: ``kernel``, ``memcpy``,
    ``memset``, ``collective`` (an NCCL/RCCL kernel); seconds over every step, from the device events' own
    durations. ``in_tree_s`` + ``outside_steps_s`` + ``unlaunched_s`` = ``raw_s`` for every kind."""

    raw_s: dict[str, Seconds] = F("device time summed straight from the trace's device events", unit="s",
                                  producer="traceimport.fold")
    in_tree_s: dict[str, Seconds] = F("the part attached to the ops in the steps that launched it (the tree's "
                                      "kernel nodes and device_time_s, per step x steps)", unit="s",
                                      producer="traceimport.fold")
    outside_steps_s: dict[str, Seconds] = F("the part launched by ops outside every step", unit="s",
                                            producer="traceimport.fold")
    unlaunched_s: dict[str, Seconds] = F("the part whose launching runtime call is not in the trace (correlation "
                                         "id and External id found nowhere)", unit="s", producer="traceimport.fold")
    linked_by_external_id: NonNegInt = F("device events joined to their op by ``External id`` (no runtime call "
                                         "of their correlation id)", unit="events", producer="traceimport.fold")
    correlation_from_flow: NonNegInt = F("device events whose correlation id came from their ``ac2g`` flow",
                                         unit="events", producer="traceimport.fold")
    ranges_s: dict[str, Seconds] = F("device-timeline ranges by category (``gpu_user_annotation``, ``cuda_sync``, "
                                     "...): summed durations, not device time (they span kernels)", unit="s",
                                     producer="traceimport.collect")
    steps: list[ImportedDeviceStep] = F("per step: GPU busy, idle, compute/communication overlap",
                                        producer="traceimport.device")


class ImportedFile(_M):
    """One trace file an imported profile was built from (``import.files[]``)."""

    file: str = F("the trace file", producer="traceimport.build")
    rank: NonNegInt = F("its rank (``distributedInfo.rank``, else its place among the sorted files)",
                        producer="traceimport.build")
    events: NonNegInt = F("trace events read", unit="events", producer="traceimport.build")
    steps: NonNegInt = F("steps found", unit="steps", producer="traceimport.build")
    kernels: NonNegInt = F("device events attached to the ops that launched them (by correlation id)",
                           unit="events", producer="traceimport.build")
    truncated: bool = F("the file ended inside the event array (imported as far as complete)",
                        producer="traceimport.build")
    notes: list[str] = F("what the import said about this file", producer="traceimport.build")
    categories: dict[str, NonNegInt] | None = F("complete events per category, as spelled in the file (older "
                                                "spellings such as ``Kernel`` or ``Operator`` are read as today's)",
                                                None, unit="events", producer="traceimport.collect")
    left_out: dict[str, NonNegInt] | None = F("events left out because their time is not a time, by side and "
                                              "fault: ``<host|device|device range> event <duration|timestamp>: "
                                              "<negative|non-finite|beyond any trace's span>``", None,
                                              unit="events", producer="traceimport.collect")
    device: ImportedDevice | None = F("where the device time went and per-step GPU figures (null: no device "
                                      "events)", None, producer="traceimport.build")


class ImportInfo(_M):
    """How an imported profile was built (``import``; ``recstack import`` only)."""

    files: list[ImportedFile] = F("the trace files, by rank", producer="traceimport.build")
    steps_from: str = F("where the steps came from: ProfilerStep ranges, ``--step-range NAME`` or the whole trace",
                        producer="traceimport.build")
    hierarchy: str = F("where the module hierarchy came from: recstack.annotate ranges, nn.Module events, "
                       "a module map, or none", producer="traceimport.build")
    time_statistic: str = F("what run and stage times are (the mean over every step)", producer="traceimport.build")
    notes: list[str] = F("every file's notes", producer="traceimport.build")


class UpgradedFrom(_M):
    """Set when an older profile was upgraded in memory and saved again."""

    schema_version: NonNegInt = F("the version the figures were written under", producer="tree")
    time_statistic: Literal["median", "interquartile mean"] | None = F(
        "what its run and stage times are (version-1 files hold either)", None, producer="tree")
    notes: list[str] = F("what the upgrade changed and what it could not", producer="tree")


class RankFigures(_M):
    """One rank's figures per step (``distributed.per_rank[]``); formulas in docs/distributed.md."""

    rank: NonNegInt = F("rank number", producer=_DI)
    time_s: Seconds = F("the rank's run time (measured)", unit="s", producer=_DI)
    stages: dict[str, Seconds] = F("stage -> time (measured; communication moved out of its stages)", unit="s",
                                   producer=_DI)
    compute_s: Seconds = F("time_s - communication_s", unit="s", producer=_DI)
    communication_s: Seconds = F("time in the communication stage", unit="s", producer=_DI)
    wait_s: Seconds = F("communication_s - the smallest communication_s of all ranks: waiting for the "
                        "slowest rank (derived)", unit="s", producer=_DI)
    transfer_s: Seconds = F("communication_s - wait_s", unit="s", producer=_DI)
    shards: NonNegInt = F("shards held", producer=_DI)
    tables: NonNegInt = F("distinct tables held", producer=_DI)
    lookups: Count = F("lookups of its shards (computed)", unit="rows", producer=_DI)
    bytes_requested: Bytes = F("requested bytes of its shards (computed)", unit="bytes", producer=_DI)
    bytes_unique: Bytes = F("unique bytes of its shards (computed)", unit="bytes", producer=_DI)
    table_bytes: Bytes = F("memory of its shards (computed)", unit="bytes", producer=_DI)
    stage_pass_ratio: Ratio | None = F("the rank's stage-pass step over its uninstrumented step (its own "
                                       "profiler overhead, measured)", None, producer=_DI)
    peer_wait_s: Seconds | None = F("collective pass: time its collectives waited for the last rank to "
                                    "call them (measured)", None, unit="s", producer=_DI)
    transfer_measured_s: Seconds | None = F("collective pass: time its collectives ran once every rank had "
                                            "called them (measured)", None, unit="s", producer=_DI)
    communication_other_s: Seconds | None = F("communication_s - transfer_measured_s - the larger of peer_wait_s "
                                              "and wait_s, at least 0: Python/TorchRec work around the "
                                              "collectives (derived)", None, unit="s", producer=_DI)
    threads: list[ThreadLoad] | None = F("the rank's threads over its timing pass (its "
                                         "``environment.contention.own_threads``, measured)", None, producer=_DI)
    comm_thread_cores: Ratio | None = F("cores the collective backend's threads (gloo*, pt_gloo*, nccl*) used "
                                        "over the timing pass (measured)", None, unit="cores", producer=_DI)
    waiting_cores: Ratio | None = F("the rank's threads runnable but waiting for a core, on average over the "
                                    "timing pass (measured)", None, unit="cores", producer=_DI)


class Imbalance(_M):
    """max / mean over ranks (1.0: balanced) (``distributed.imbalance``)."""

    by_stage: dict[str, Ratio] = F("stage -> max / mean of its time over ranks", producer=_DI)
    totals: dict[str, Ratio] = F("time_s, compute_s, communication_s, lookups, bytes_requested, table_bytes -> "
                                 "max / mean", producer=_DI)
    max_wait_s: Seconds = F("the longest wait_s of a rank", unit="s", producer=_DI)
    mean_wait_s: Seconds = F("mean wait_s over ranks", unit="s", producer=_DI)


class PlannerShard(_M):
    table: str = F("table", producer=_DI)
    rank: NonNegInt = F("rank holding the shard", producer=_DI)
    sharding: str = F("sharding type", producer=_DI)
    estimated_s: Seconds = F("TorchRec planner: forward (+ backward in training) compute", unit="s", producer=_DI)
    estimated_comms_s: Seconds = F("TorchRec planner: the shard's communication", unit="s", producer=_DI)
    measured_s: Seconds = F("the rank's embedding time without communication split by requested bytes (derived)",
                            unit="s", producer=_DI)
    estimated_storage_bytes: Bytes | None = F("TorchRec planner: storage", None, unit="bytes", producer=_DI)
    table_bytes: Bytes | None = F("the shard's tensor bytes (computed)", None, unit="bytes", producer=_DI)


class PlannerComm(_M):
    rank: NonNegInt = F("rank", producer=_DI)
    estimated_s: Seconds = F("sum of the planner's communication estimates of the rank's shards", unit="s",
                             producer=_DI)
    measured_s: Seconds = F("the rank's communication stage (measured)", unit="s", producer=_DI)
    replay_s: Seconds | None = F("the replay of the run's collectives, all phases (measured; "
                                 "``distributed.collective_replay``)", None, unit="s", producer=_DI)
    estimated_at_replay_bandwidth_s: Seconds | None = F(
        "estimated_s x the planner's bandwidth / the replay's bandwidth (derived): the estimate with the "
        "measured bandwidth, still without per-collective latency", None, unit="s", producer=_DI)


class Planner(_M):
    """TorchRec's planner estimates beside the measurement (``distributed.planner``)."""

    shards: list[PlannerShard] = F("one row per shard", producer=_DI)
    error_by_sharding: dict[str, Ratio | None] = F("sharding type -> sum measured_s / sum estimated_s", producer=_DI)
    communication_by_rank: list[PlannerComm] = F("per rank: estimated against measured communication", producer=_DI)
    method: str = F("how measured_s is derived", producer=_DI)
    comms_bandwidth_bytes_per_s: Ratio | None = F("the bandwidth the planner's communication estimate assumes "
                                                  "(its topology's intra-host figure)", None,
                                                  unit="bytes/s", producer=_DI)
    replay_bandwidth_bytes_per_s: Ratio | None = F("the replay's bytes / time over all the run's collectives "
                                                   "(measured)", None, unit="bytes/s", producer=_DI)
    communication_note: str | None = F("why the communication estimate and the measurement differ", None,
                                       producer=_DI)


class CommClass(_M):
    """The communication stage against the measured collective benchmark (``distributed.communication_roofline``)."""

    phase: str = F("communication phase (input_dist, output_dist, ...)", producer=_DI)
    collective: str = F("benchmark it is compared with (all_to_all, all_reduce)", producer=_DI)
    bytes: Bytes = F("bytes this rank sends in the phase per step (computed)", unit="bytes", producer=_DI)
    collectives: NonNegInt | None = F("collectives the phase runs one after another", None, producer=_DI)
    measured_s: Seconds = F("the phase's time on the critical rank (measured)", unit="s", producer=_DI)
    benchmark_s: Seconds | None = F("the benchmark's time for those collectives, interpolated per message size "
                                    "and summed (measured)", None,
                                    unit="s", producer=_DI)
    ratio: Ratio | None = F("measured_s / benchmark_s", None, producer=_DI)
    bound: str | None = F("``latency`` (every collective at most twice the benchmark's smallest-message time) "
                          "or ``bandwidth``",
                          None, producer=_DI)
    transfer_s: Seconds | None = F("collective pass: the slowest rank's transfer (last rank's call until "
                                   "done; the union over the phase's collectives), median over steps (measured)",
                                   None, unit="s", producer=_DI)
    transfer_bytes: Bytes | None = F("those collectives' input bytes (the largest rank's; measured from the "
                                     "tensors)", None, unit="bytes", producer=_DI)
    transfer_collectives: NonNegInt | None = F("collectives the pass saw in the phase per step", None, producer=_DI)
    transfer_benchmark_s: Seconds | None = F("the benchmark at each of those collectives' bytes, summed "
                                             "(measured)", None, unit="s", producer=_DI)
    transfer_ratio: Ratio | None = F("transfer_s / transfer_benchmark_s", None, producer=_DI)
    transfer_benchmark: str | None = F("which benchmark transfer_benchmark_s is: ``size sweep: <collective>`` "
                                       "(the machine file's even-split benchmark of that kind)", None,
                                       producer=_DI)
    replay_s: Seconds | None = F("the replay of the model's own collectives of the phase (same kinds, per-peer "
                                 "splits, dtypes, order; blocking), timed as transfer_s (measured; "
                                 "``distributed.collective_replay``)", None, unit="s", producer=_DI)
    replay_ratio: Ratio | None = F("transfer_s / replay_s", None, producer=_DI)
    wait_s: Seconds | None = F("collective pass: the critical rank's wait for the last rank (measured)", None,
                               unit="s", producer=_DI)
    other_s: Seconds | None = F("measured_s - wait_s - transfer on the critical rank, at least 0 (derived)",
                                None, unit="s", producer=_DI)
    collective_s: Seconds | None = F("the phase's ``collective`` child on the critical rank: op-pass time inside "
                                     "torch.distributed calls and Work waits (measured, apportioned)", None,
                                     unit="s", producer=_DI)
    torchrec_overhead_s: Seconds | None = F("the phase's ``torchrec_overhead`` child: the rest of the phase, "
                                            "TorchRec's ops and Python around the calls (measured, apportioned)",
                                            None, unit="s", producer=_DI)
    collective_ratio: Ratio | None = F("collective_s / transfer_benchmark_s (the size sweep at the collectives' "
                                       "own bytes)", None, producer=_DI)


class SplitPhase(_M):
    """One communication phase of one rank, split (``distributed.collective_split.per_rank[].phases``)."""

    stage_s: Seconds = F("the phase's time in the communication stage (op pass, measured)", unit="s", producer=_DI)
    wait_s: Seconds | None = F("collectives in flight before the last rank called them (measured)", None,
                               unit="s", producer=_DI)
    transfer_s: Seconds | None = F("collectives in flight after every rank called them (measured)", None,
                                   unit="s", producer=_DI)
    other_s: Seconds | None = F("stage_s - wait_s - transfer_s, at least 0 (derived)", None, unit="s",
                                producer=_DI)
    collectives: float = F("Python-issued collectives per step (DDP's all-reduce is not seen)", producer=_DI)
    bytes: Bytes = F("their input bytes per step (measured from the tensors)", unit="bytes", producer=_DI)


class SplitRank(_M):
    rank: NonNegInt = F("rank", producer=_DI)
    phases: dict[str, SplitPhase] = F("phase -> its split", producer=_DI)


class CollectiveSplit(_M):
    """The collective timing pass (``distributed.collective_split``): see docs/distributed.md."""

    steps: NonNegInt = F("steps timed", producer=_DI)
    per_rank: list[SplitRank] = F("per rank", producer=_DI)
    method: str = F("how it is measured", producer=_DI)


class ReplayCollective(_M):
    """One collective of a step, recorded by the timing pass and replayed (``collective_replay.per_collective``)."""

    index: NonNegInt = F("its place in the step's collective sequence", producer=_DI)
    collective: str = F("torch.distributed function (all_to_all_single, reduce_scatter_tensor, ...)", producer=_DI)
    phase: str = F("communication phase", producer=_DI)
    dtype: str = F("element type", producer=_DI)
    async_: bool = F("issued with async_op=True by the model", alias="async", producer=_DI)
    bytes: list[Bytes] = F("per rank: input bytes (step 0, measured from the tensors)", unit="bytes", producer=_DI)
    in_splits: list[list[NonNegInt] | None] = F("per rank: per-peer input split sizes in elements (null: even)",
                                               producer=_DI)
    transfer_s: Seconds = F("in the model: last rank's call until the slowest rank's finish, median over steps "
                            "(measured)", unit="s", producer=_DI)
    replay_s: Seconds = F("the same in the blocking replay, buffers allocated beforehand (measured)", unit="s",
                          producer=_DI)
    replay_skewed_s: Seconds | None = F("the same with every rank spinning, before each call, as long as it "
                                        "computed before it in the model (measured)", None, unit="s",
                                        producer=_DI)
    replay_fresh_s: Seconds | None = F("the same with new buffers per call, as TorchRec allocates them "
                                       "(measured)", None, unit="s", producer=_DI)
    issue_s: Seconds | None = F("in the model: time inside the torch.distributed call until it returned, median "
                                "over ranks and steps (measured)", None, unit="s", producer=_DI)
    replay_issue_s: Seconds | None = F("the same in the blocking replay (measured)", None, unit="s", producer=_DI)
    ratio: Ratio | None = F("transfer_s / replay_s", None, producer=_DI)


class ReplayPhase(_M):
    """A phase's collectives in the model and replayed (``collective_replay.phases``)."""

    transfer_s: Seconds = F("in the model: the union over the phase's collectives of last call until slowest "
                            "finish, median over steps (measured)", unit="s", producer=_DI)
    replay_s: Seconds | None = F("the same, blocking replay (measured)", None, unit="s", producer=_DI)
    replay_issued_s: Seconds | None = F("the same, async collectives issued together as the model issues them "
                                        "(measured)", None, unit="s", producer=_DI)
    replay_skewed_s: Seconds | None = F("the same, with the model's per-rank compute gaps before each call "
                                        "(measured)", None, unit="s", producer=_DI)
    replay_fresh_s: Seconds | None = F("the same, new buffers per call (measured)", None, unit="s", producer=_DI)
    collectives: NonNegInt = F("collectives per step", producer=_DI)
    ratio: Ratio | None = F("transfer_s / replay_s", None, producer=_DI)


class ReplayTotal(_M):
    """All phases together (``collective_replay.total``)."""

    transfer_s: Seconds = F("sum of the phases' in-model transfer (measured)", unit="s", producer=_DI)
    replay_s: Seconds = F("sum of the phases' blocking replay (measured)", unit="s", producer=_DI)
    ratio: Ratio | None = F("transfer_s / replay_s", None, producer=_DI)


class CollectiveReplay(_M):
    """The timing pass's collectives replayed bare (``distributed.collective_replay``): docs/distributed.md."""

    repeats: NonNegInt = F("replays of every recorded step per mode", producer=_DI)
    per_collective: list[ReplayCollective] = F("one entry per collective the pass recorded in a step",
                                               producer=_DI)
    phases: dict[str, ReplayPhase] = F("phase -> its collectives together", producer=_DI)
    total: ReplayTotal | None = F("all phases: the sums", None, producer=_DI)


class RankPlacement(_M):
    """Where one rank ran (``distributed.placement[]``): set before its process group started."""

    rank: NonNegInt = F("rank number", producer=_DI)
    mode: str = F("the run's rank_placement (pin, os)", producer=_DI)
    pinned: bool = F("the rank was pinned to its own cores (sched_setaffinity)", producer=_DI)
    cpus: list[NonNegInt] = F("the CPUs it (and gloo's threads) could run on", producer=_DI)
    usable_cpus: list[NonNegInt] = F("the CPUs usable before pinning", producer=_DI)
    interop_threads: NonNegInt = F("torch's inter-op threads in the rank", producer=_DI)
    reason: str = F("why pinned or not", producer=_DI)


class Distributed(_M):
    """A multi-rank run (``distributed``): see docs/distributed.md."""

    world_size: Annotated[int, Field(ge=2)] = F("ranks", producer=_DI)
    sharding: str = F("the run's --sharding", producer=_DI)
    backend: str = F("process-group backend (gloo, nccl)", producer=_DI)
    critical_rank: NonNegInt = F("the rank whose tree is the top-level root (most compute per step)", producer=_DI)
    threads_per_rank: list[NonNegInt] = F("torch threads of each rank", producer=_DI)
    placement: list[RankPlacement | None] | None = F("per rank: its CPUs and pinning (null: not recorded)", None,
                                                     producer=_DI)
    dense_param_bytes: Bytes | None = F("bytes of the parameters outside the embedding collections (what DDP "
                                        "all-reduces in training)", None, unit="bytes", producer=_DI)
    oversubscribed: bool = F("more rank threads than usable cores (planned oversubscription)", producer=_DI)
    oversubscription_note: str | None = F("what that means for the times", None, producer=_DI)
    per_rank: list[RankFigures] = F("per rank figures", producer=_DI)
    imbalance: Imbalance = F("imbalance ratios", producer=_DI)
    planner: Planner | None = F("planner against measurement (null: a hand-built plan, no estimates)", None,
                                producer=_DI)
    communication_bytes: dict[str, Bytes] | None = F("phase -> bytes the critical rank sends per step "
                                                     "(computed; formulas in docs/distributed.md)", None,
                                                     unit="bytes", producer=_DI)
    communication_messages: dict[str, list[Bytes]] | None = F(
        "phase -> the bytes of each collective the phase runs, in order (computed)", None, unit="bytes",
        producer=_DI)
    communication_roofline: list[CommClass] | None = F("communication phases against the machine's collective "
                                                       "benchmark (null: the machine file has none)", None,
                                                       producer=_DI)
    collective_split: CollectiveSplit | None = F("the communication stage split into waiting, transfer and other "
                                                 "(null: the ranks' collectives did not line up)", None,
                                                 producer=_DI)
    collective_replay: CollectiveReplay | None = F("the model's own collective sequence replayed with bare "
                                                   "torch.distributed calls (null: no timing pass)", None,
                                                   producer=_DI)


class Profile(_M):
    """One profile document (``recstack.profile``)."""

    schema_: Literal["recstack.profile"] = F("always ``recstack.profile``", alias="schema", producer="tree")
    schema_version: Literal[2] = F("2 (1: stage times were medians, not interquartile means)", producer="tree")
    run_id: str = F("random id of this run", producer="profiling.runner")
    run: Run = F("what was run", producer="profiling.runner")
    environment: Environment = F("host and software", producer="profiling.environment")
    overhead: Overhead = F("the profiler's own cost", producer="profiling.runner")
    ranks: list[Rank] = F("per-rank entries; single-process: ``[{rank: 0, root: null, shards: []}]``",
                          producer="profiling.runner")
    root: Node = F("the tree", producer="profiling.runner")
    cost_model: CostModel | None = F("cost-model coverage", None, producer="costmodel.attach")
    embedding_tables: list[EmbeddingTable] | None = F("per-table figures of one batch", None,
                                                      producer="zoo.embedding")
    memory: Memory | None = F("resident and peak memory", None, producer="profiling.memory")
    machine: Machine | None = F("machine figures the roofline used", None, producer="analysis.roofline")
    counters: Counters | None = F("hardware counters", None, producer="profiling.counters_replay")
    findings: list[Finding] | None = F("measured findings", None, producer="analysis.pipeline")
    distributed: Distributed | None = F("multi-rank run: per-rank figures, imbalance, planner", None,
                                        producer="distributed.ranks")
    upgraded_from: UpgradedFrom | None = F("present when upgraded from an older version", None, producer="tree")
    import_: ImportInfo | None = F("how an imported profile was built (``recstack import``)", None, alias="import",
                                   producer="traceimport.build")

    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)


Node.model_rebuild()
Rank.model_rebuild()
