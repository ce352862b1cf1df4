"""Typed accessors for the optional keys of a node and of a profile: the schema as the in-memory interface.

A :class:`recstack.tree.Node` or :class:`recstack.tree.Profile` keeps every key
beyond its fixed fields in its ``extra`` dict, which is what it serialises
(``to_dict`` merges it in, in insertion order). The classes below name those
keys once, with the value type :mod:`recstack.schema.profile_model` declares,
so code reads ``node.roofline`` and writes ``node.bound = "memory"`` instead
of ``node.extra["..."]``:

* reading an absent key gives None (as ``extra.get(key)``);
* assigning stores the value as is, None included (a JSON null: ``"rule": null``
  is a different document from no ``rule``);
* ``del node.key`` removes the key and is a no-op when it is absent
  (``extra.pop(key, None)``).

The accessors hold no state of their own, so the JSON a profile writes is
exactly what ``extra`` holds; tests/test_schema.py checks that they cover the
schema's keys and no others. Sections are plain dicts and lists, as loaded
from JSON (the pydantic models validate; they are not built per access).
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar, overload

T = TypeVar("T")


class Section(Generic[T]):
    """One optional key of ``obj.extra``, read as an attribute (None when absent)."""

    __slots__ = ("key",)

    def __init__(self, key: str = "") -> None:
        self.key = key

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = self.key or name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Section[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T | None: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.extra.get(self.key)

    def __set__(self, obj: Any, value: T | None) -> None:
        obj.extra[self.key] = value

    def __delete__(self, obj: Any) -> None:
        obj.extra.pop(self.key, None)


Dict = dict[str, Any]


class NodeSections:
    """The optional keys of a tree node (docs/profile-schema.md, ``Node``); the level each is on in brackets."""

    extra: dict[str, Any]

    # timing (run, stage)
    time_s_p10: Section[float] = Section()
    time_s_p90: Section[float] = Section()
    latency_s: Section[Dict] = Section()  # p50, p90, p99, ... (run)
    throughput_samples_per_s: Section[float] = Section()
    step_time_by_batch_bucket: Section[list[Dict]] = Section()
    optimizer_note: Section[str] = Section()
    op_pass_time_s: Section[float] = Section()  # (stage, op)
    apportion_factor: Section[float] = Section()
    note: Section[str] = Section()
    resident_bytes: Section[Dict] = Section()  # parameters_bytes, buffers_bytes, optimizer_state_bytes
    counters: Section[Dict] = Section()  # a stage's hardware counters
    rusage: Section[Dict] = Section()  # page faults and context switches per step
    # communication phases (multi-rank)
    collective_pass_wait_s: Section[float] = Section()
    collective_pass_transfer_s: Section[float] = Section()
    source: Section[Literal["timing pass", "op pass, apportioned", "timing pass + op pass"]] = Section()
    measured_s: Section[float] = Section()
    moved_s: Section[float] = Section()
    communication_moved_s: Section[float] = Section()
    # module, op and kernel nodes
    label: Section[str] = Section()
    kind: Section[str] = Section()  # unattributed, framework, caller, model_code, backward_of, collective, torchrec_overhead
    moved_from: Section[dict[str, float]] = Section()  # [model code]: interval -> seconds per step moved from it
    module_type: Section[str] = Section()
    rule: Section[str] = Section()
    shapes: Section[list[Any]] = Section()
    distinct_shapes: Section[int] = Section()
    device_time_s: Section[float] = Section()
    dtypes: Section[dict[str, float]] = Section()  # input dtype -> calls
    device: Section[str] = Section()
    # imported traces
    overhead_removed_s: Section[float] = Section()
    overhead_events_per_step: Section[float] = Section()
    overhead_bound: Section[Literal["per-event estimate", "waits", "GPU busy"]] = Section()
    device_kind: Section[Literal["kernel", "memcpy", "memset", "collective"]] = Section()
    # cost model
    bytes_read: Section[float] = Section()
    bytes_written: Section[float] = Section()
    cost_detail: Section[dict[str, float]] = Section()
    uncovered: Section[bool] = Section()
    uncovered_reason: Section[str] = Section()
    cost_in_parent: Section[bool] = Section()
    cost_match: Section[Literal["exact", "scope", "backward", "name"]] = Section()
    covered_time_share: Section[float] = Section()
    uncovered_calls_share: Section[float] = Section()
    provenance: Section[dict[str, str | None]] = Section()
    partial: Section[bool] = Section()
    # roofline
    bound: Section[Literal["memory", "compute", "overhead"]] = Section()
    bound_basis: Section[Literal["requested bytes", "unique bytes"]] = Section()
    bound_reason: Section[str] = Section()
    roofline: Section[Dict] = Section()
    memory_peak: Section[Dict] = Section()  # a stage's memory-pass figures (schema StageMemory)
    bf16: Section[Dict] = Section()  # a bf16 stage's timing against fp32 (analysis.dtype_compare)

    def drop(self, *keys: str) -> None:
        """Remove these keys where present (a group that an analysis rewrites)."""
        for k in keys:
            self.extra.pop(k, None)

    def pick(self, *keys: str) -> dict[str, Any]:
        """These keys and their values, where present (a group copied to another node as is)."""
        return {k: self.extra[k] for k in keys if k in self.extra}


class ProfileSections:
    """The optional top-level sections of a profile (docs/profile-schema.md, ``Profile``)."""

    extra: dict[str, Any]

    cost_model: Section[Dict] = Section()
    embedding_tables: Section[list[Dict]] = Section()
    memory: Section[Dict] = Section()
    machine: Section[Dict] = Section()
    counters: Section[Dict] = Section()
    findings: Section[list[Dict]] = Section()
    distributed: Section[Dict] = Section()
    upgraded_from: Section[Dict] = Section()
    import_: Section[Dict] = Section("import")


def sections(cls: type) -> dict[str, str]:
    """Attribute name -> ``extra`` key, for every accessor a sections class declares."""
    return {name: v.key for c in cls.__mro__ for name, v in vars(c).items() if isinstance(v, Section)}
