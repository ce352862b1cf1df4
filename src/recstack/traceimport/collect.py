"""Events -> compact columns: what one trace holds, with names, shapes and types interned.

Each host event kept is six numbers (start, end, thread, name id, an auxiliary
id, an input-type id: about 40 bytes); every string is stored once per distinct
value. Python functions other than ``nn.Module:`` ones are dropped (they only
add nesting levels the tree looks through); GPU events (kernels, copies, sets)
go to their own columns, keyed by correlation id.
"""

from __future__ import annotations

import fnmatch
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from recstack.config.loading import load_yaml_file, parse_config
from recstack.traceimport.annotate import MODULE_RANGE, parse_range_name
from recstack.traceimport.decode import Event

# Event kinds.
OP, MODULE, NNMODULE, STEP, THROUGH, RUNTIME, PSEUDO_STAGE, SKIP, DEVICE = range(9)
NN_PREFIX = "nn.Module: "
SIG_SEP = b"\x1f"  # between a call's Input Dims, Input type and Concrete Inputs JSON (neither can hold a raw control byte)
STEP_PREFIX = "ProfilerStep#"
THROUGH_PREFIXES = ("recstack.stage::", "recstack.step::")  # a live profile's own ranges: looked through
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime"})
TORCH_CATS = frozenset({"cpu_op", "user_annotation", "python_function", "kernel", "cuda_runtime", "gpu_memcpy",
                        "gpu_memset", "cpu_instant_event", "Trace"})
# Ranges that open a training stage when they run outside every forward stage.
PSEUDO_STAGES = (("autograd::engine::evaluate_function", "backward"), ("Optimizer.step#", "optimizer"),
                 ("Optimizer.zero_grad#", "optimizer"))


class ModuleMapEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    match: str = Field(min_length=1, description="glob on a range name, e.g. 'nn.Module: MLP_1' or '## dense ##'")
    path: str = Field(min_length=1, description="the module path that range stands for, e.g. 'over_arch'")
    type: str | None = Field(None, description="the module's class name, for the stage type rules")


class ModuleMap(BaseModel):
    """``--module-map FILE``: ``modules: [{match, path, type}]``, first match wins."""

    model_config = ConfigDict(extra="forbid")
    modules: list[ModuleMapEntry] = Field(default_factory=list)

    def lookup(self, name: str) -> ModuleMapEntry | None:
        return next((m for m in self.modules if fnmatch.fnmatchcase(name, m.match)), None)


def load_module_map(path: str | Path) -> ModuleMap:
    return parse_config(ModuleMap, load_yaml_file(path), source=str(path))


def pseudo_stage(name: str) -> str | None:
    return next((st for prefix, st in PSEUDO_STAGES if name.startswith(prefix)), None)


@dataclass
class Columns:
    """The kept events of one trace as columns (host events; device events apart)."""

    ts: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    thr: array = field(default_factory=lambda: array("i"))
    nid: array = field(default_factory=lambda: array("i"))
    aux: array = field(default_factory=lambda: array("q"))  # op: shape id; module: path id; runtime: correlation
    ty: array = field(default_factory=lambda: array("i"))  # op: input-type id (-1: none)
    k_corr: array = field(default_factory=lambda: array("q"))
    k_nid: array = field(default_factory=lambda: array("i"))
    k_dur: array = field(default_factory=lambda: array("d"))


class Collector:
    """Receives decoded chunks (:func:`recstack.traceimport.decode.stream_events`) and fills :class:`Columns`."""

    def __init__(self, step_range: str | None = None, module_map: ModuleMap | None = None) -> None:
        self.step_range = step_range
        self.module_map = module_map
        self.cols = Columns()
        self.names: list[str] = []
        self.kinds: list[int] = []
        self._by_cat: dict[str, dict[str, tuple[int, int]]] = {}
        self.threads: dict[tuple[int | str, int | str], int] = {}
        self.thread_names: dict[tuple[int | str, int | str], str] = {}
        self.shapes: dict[bytes, int] = {}  # call signature (dims JSON, SIG_SEP, types JSON) -> id
        self.types: dict[bytes, int] = {}
        self.paths: list[str] = []  # module path id -> path
        self.path_ids: dict[str, int] = {}
        self.path_types: dict[str, str | None] = {}
        self.name_path: dict[int, int] = {}  # name id of an annotate / module-map range -> path id
        self.events = 0
        self.torch_events = 0
        self.annotate_ranges = 0
        self.nn_events = 0
        self.mapped_ranges = 0
        self.step_events = 0

    def path_id(self, path: str, type_name: str | None) -> int:
        pid = self.path_ids.get(path)
        if pid is None:
            pid = self.path_ids[path] = len(self.paths)
            self.paths.append(path)
        if type_name and not self.path_types.get(path):
            self.path_types[path] = type_name
        else:
            self.path_types.setdefault(path, type_name)
        return pid

    def _classify(self, cat: str, name: str) -> tuple[int, int]:
        """(kind, name id) of a distinct (category, name)."""
        nid = len(self.names)
        self.names.append(name)
        if cat in DEVICE_CATS:
            kind = DEVICE
        elif cat == "Trace":
            kind = SKIP
        elif name.startswith(MODULE_RANGE):
            kind = MODULE
            path, tname = parse_range_name(name)
            self.name_path[nid] = self.path_id(path, tname)
        elif (self.step_range is not None and fnmatch.fnmatchcase(name, self.step_range)) or (
                self.step_range is None and name.startswith(STEP_PREFIX)):
            kind = STEP
        elif name.startswith(THROUGH_PREFIXES) or name.startswith(STEP_PREFIX):
            kind = THROUGH
        elif self.module_map is not None and (hit := self.module_map.lookup(name)) is not None:
            kind = MODULE
            self.name_path[nid] = self.path_id(hit.path, hit.type)
        elif cat == "python_function":
            kind = NNMODULE if name.startswith(NN_PREFIX) else SKIP
        elif cat in RUNTIME_CATS:
            kind = RUNTIME
        elif pseudo_stage(name) is not None:
            kind = PSEUDO_STAGE
        else:
            kind = OP
        self.kinds.append(kind)
        return kind, nid

    def add(self, events: list[Event]) -> None:
        c = self.cols
        ts_a, end_a, thr_a, nid_a, aux_a, ty_a = c.ts.append, c.end.append, c.thr.append, c.nid.append, \
            c.aux.append, c.ty.append
        by_cat, threads, shapes, types = self._by_cat, self.threads, self.shapes, self.types
        self.events += len(events)
        last_cat, names = None, {}
        last_pid, last_tid, th = None, None, -1
        torch_events = 0
        for e in events:
            if e.ph != "X":
                if e.ph == "M" and e.name == "thread_name" and e.args is not None and e.args.name:
                    self.thread_names[(e.pid, e.tid)] = e.args.name
                continue
            cat = e.cat
            if cat != last_cat:  # events come in runs of one category: one dict per category
                names = by_cat.get(cat)
                if names is None:
                    names = by_cat[cat] = {}
                last_cat = cat
                is_torch = cat in TORCH_CATS
            info = names.get(e.name)
            if info is None:
                info = names[e.name] = self._classify(cat, e.name)
            kind, nid = info
            torch_events += is_torch
            if kind == SKIP:
                continue
            if kind == DEVICE:
                a = e.args
                c.k_corr.append(a.correlation if a is not None and a.correlation is not None else -1)
                c.k_nid.append(nid)
                c.k_dur.append(e.dur)
                continue
            if e.tid != last_tid or e.pid != last_pid:
                last_pid, last_tid = e.pid, e.tid
                th = threads.get((last_pid, last_tid), -1)
                if th < 0:
                    th = threads[(last_pid, last_tid)] = len(threads)
            t = e.ts
            ts_a(t)
            end_a(t + e.dur)
            thr_a(th)
            nid_a(nid)
            a = e.args
            if kind == OP:
                aux = ty = -1
                if a is not None:
                    raw_t = bytes(a.input_type)
                    if raw_t:
                        ty = types.get(raw_t, -1)
                        if ty < 0:
                            ty = types[raw_t] = len(types)
                    raw = bytes(a.input_dims)
                    if raw:  # a call signature: dims and types together (the cost model prices it)
                        raw += SIG_SEP + raw_t + SIG_SEP + bytes(a.concrete)
                        aux = shapes.get(raw, -1)
                        if aux < 0:
                            aux = shapes[raw] = len(shapes)
                aux_a(aux)
                ty_a(ty)
                continue
            if kind == MODULE:
                aux = self.name_path[nid]
                self.annotate_ranges += 1
            elif kind == RUNTIME:
                aux = a.correlation if a is not None and a.correlation is not None else -1
            else:
                aux = -1
                self.nn_events += kind == NNMODULE
                self.step_events += kind == STEP
            aux_a(aux)
            ty_a(-1)
        self.torch_events += torch_events

    def merge(self, other: Collector) -> None:
        """Append ``other``'s events (collected from the part of the trace after this one's): the result is
        what one collector fed both parts in order would hold (ids in first-seen order)."""
        import numpy as np

        name_map = np.empty(len(other.names), dtype=np.int32)
        by_cat: dict[str, dict[str, tuple[int, int]]] = self._by_cat
        path_map = np.array([self.path_id(p, other.path_types.get(p)) for p in other.paths] or [0], dtype=np.int64)
        seen = sorted((nid, cat, name, kind) for cat, names in other._by_cat.items()
                      for name, (kind, nid) in names.items())
        for nid, cat, name, kind in seen:  # in the other part's first-seen order
            mine = by_cat.setdefault(cat, {})
            hit = mine.get(name)
            if hit is None:
                hit = mine[name] = (kind, len(self.names))
                self.names.append(name)
                self.kinds.append(kind)
                if nid in other.name_path:
                    self.name_path[hit[1]] = int(path_map[other.name_path[nid]])
            name_map[nid] = hit[1]
        thr_map = np.array([self.threads.setdefault(k, len(self.threads)) for k in other.threads] or [0], dtype=np.int32)
        self.thread_names.update(other.thread_names)
        shape_map = np.array([self.shapes.setdefault(k, len(self.shapes)) for k in other.shapes] or [0], dtype=np.int64)
        type_map = np.array([self.types.setdefault(k, len(self.types)) for k in other.types] or [0], dtype=np.int32)
        o, c = other.cols, self.cols
        nid = name_map[np.frombuffer(o.nid, dtype=np.int32)]
        kind = np.array(other.kinds or [0], dtype=np.int8)[np.frombuffer(o.nid, dtype=np.int32)]
        aux = np.frombuffer(o.aux, dtype=np.int64).copy()
        ty = np.frombuffer(o.ty, dtype=np.int32).copy()
        op, mod = (kind == OP) & (aux >= 0), kind == MODULE
        aux[op] = shape_map[aux[op]]
        aux[mod] = path_map[aux[mod]]
        ty[ty >= 0] = type_map[ty[ty >= 0]]
        c.ts.frombytes(o.ts.tobytes())
        c.end.frombytes(o.end.tobytes())
        c.thr.frombytes(thr_map[np.frombuffer(o.thr, dtype=np.int32)].astype(np.int32).tobytes())
        c.nid.frombytes(nid.astype(np.int32).tobytes())
        c.aux.frombytes(aux.tobytes())
        c.ty.frombytes(ty.tobytes())
        c.k_corr.frombytes(o.k_corr.tobytes())
        c.k_nid.frombytes(name_map[np.frombuffer(o.k_nid, dtype=np.int32)].astype(np.int32).tobytes())
        c.k_dur.frombytes(o.k_dur.tobytes())
        for k in ("events", "torch_events", "annotate_ranges", "nn_events", "mapped_ranges", "step_events"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
