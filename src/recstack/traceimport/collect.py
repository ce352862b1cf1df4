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
from typing import TYPE_CHECKING, Any

from recstack.traceimport.annotate import MODULE_RANGE, parse_range_name
from recstack.traceimport.decode import Event

if TYPE_CHECKING:
    from recstack.traceimport.module_map import ModuleMap, ModuleMapEntry, load_module_map  # noqa: F401

# Event kinds.
OP, MODULE, NNMODULE, STEP, THROUGH, RUNTIME, PSEUDO_STAGE, SKIP, DEVICE, DEVICE_RANGE = range(10)
NN_PREFIX = "nn.Module: "
SIG_SEP = b"\x1f"  # between a call's Input Dims, Input type and Concrete Inputs JSON (neither can hold a raw control byte)
STEP_PREFIX = "ProfilerStep#"
THROUGH_PREFIXES = ("recstack.stage::", "recstack.step::")  # a live profile's own ranges: looked through
# Categories as Kineto spells them now; older traces (PyTorch <= 1.9, some inference traces today) write
# ``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``: read in any case, through CAT_ALIASES.
CAT_ALIASES = {"operator": "cpu_op", "runtime": "cuda_runtime", "memcpy": "gpu_memcpy", "memset": "gpu_memset",
               "driver": "cuda_driver"}
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})  # device events: time on the device
# Ranges on a device's timeline (not work of their own: they span kernels): counted, never device time.
DEVICE_RANGE_CATS = frozenset({"gpu_user_annotation", "cuda_sync", "cuda_profiler_range", "mtia_ccp_events"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "mtia_runtime"})
RUNTIME_PREFIXES = ("cuda", "hip")  # an event of an unknown category so named is a runtime call (cudaLaunchKernel, hipExtModuleLaunchKernel)
TORCH_CATS = frozenset({"cpu_op", "user_annotation", "python_function", "kernel", "cuda_runtime", "gpu_memcpy",
                        "gpu_memset", "cpu_instant_event", "trace"})
KNOWN_CATS = TORCH_CATS | DEVICE_CATS | DEVICE_RANGE_CATS | RUNTIME_CATS | frozenset({"overhead"})
DEVICE_KINDS = ("kernel", "memcpy", "memset", "collective")  # device time by kind (a collective: an NCCL/RCCL kernel)
COLLECTIVE_MARKS = ("nccl", "rccl")
FLOW_CATS = frozenset({"ac2g", "async_gpu", "async_cpu_to_gpu"})  # launch -> device flows (id: correlation)
MAX_DUR_US = 7 * 86400e6  # a week: a longer event is beyond any trace's span
MAX_TS_US = 1e17  # microseconds since 1970: about the year 5100
NONFINITE = 1.7976931348623155e308  # a NaN / Infinity token reads as this (decode.py), or above


def norm_cat(cat: str) -> str:
    """A category as the importer reads it: lower case, older spellings by their current names."""
    low = cat.lower()
    return CAT_ALIASES.get(low, low)


def device_kind(cat: str, name: str) -> int:
    """Index in :data:`DEVICE_KINDS` of a device event of (normalised) category ``cat``."""
    if cat == "gpu_memcpy":
        return 1
    if cat == "gpu_memset":
        return 2
    low = name.lower()
    return 3 if any(m in low for m in COLLECTIVE_MARKS) else 0


# Ranges that open a training stage when they run outside every forward stage.
PSEUDO_STAGES = (("autograd::engine::evaluate_function", "backward"), ("Optimizer.step#", "optimizer"),
                 ("Optimizer.zero_grad#", "optimizer"))


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
    ext: array = field(default_factory=lambda: array("q"))  # op: its External id (-1: none)
    seq: array = field(default_factory=lambda: array("q"))  # op, backward range: autograd sequence number (-1)
    k_corr: array = field(default_factory=lambda: array("q"))  # device events: correlation id (-1: none)
    k_nid: array = field(default_factory=lambda: array("i"))
    k_dur: array = field(default_factory=lambda: array("d"))
    k_ts: array = field(default_factory=lambda: array("d"))
    k_kind: array = field(default_factory=lambda: array("b"))  # index in DEVICE_KINDS
    k_ext: array = field(default_factory=lambda: array("q"))  # External id (-1: none)
    f_ts: array = field(default_factory=lambda: array("d"))  # flow ends (``ph: f``) on the device: start, id
    f_id: array = field(default_factory=lambda: array("q"))


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
        self.categories: dict[str, list[int]] = {}  # complete events per category, as spelled in the file
        self.device_us = [0.0] * len(DEVICE_KINDS)  # device time by kind, summed from the raw events
        self.bad_times: dict[str, int] = {}  # "<side> event <duration|timestamp>: <fault>" -> events left out
        self.range_us: dict[str, float] = {}  # device-timeline ranges (gpu_user_annotation, ...): time per category
        self._device_kinds: dict[int, int] = {}  # name id of a device event -> its kind (one per category and name)
        self._cat_info: dict[str, tuple[dict[str, tuple[int, int]], bool, list[int], str]] = {}  # see _category

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
        cat = norm_cat(cat)
        if cat in DEVICE_CATS:
            kind = DEVICE
        elif cat in DEVICE_RANGE_CATS:
            kind = DEVICE_RANGE
        elif cat == "trace":
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
        elif cat in RUNTIME_CATS or (cat not in KNOWN_CATS and name.startswith(RUNTIME_PREFIXES)):
            kind = RUNTIME
        elif pseudo_stage(name) is not None:
            kind = PSEUDO_STAGE
        else:
            kind = OP
        self.kinds.append(kind)
        return kind, nid

    def _category(self, cat: str) -> tuple[dict[str, tuple[int, int]], bool, list[int], str]:
        """Per category as spelled: its (name -> (kind, name id)) dict, whether torch.profiler writes it, its
        event count, its normalised spelling (worked out once: events switch category every other event)."""
        names = self._by_cat.setdefault(cat, {})
        low = norm_cat(cat)
        info = self._cat_info[cat] = (names, low in TORCH_CATS, self.categories.setdefault(cat, [0]), low)
        return info

    def add(self, events: list[Event]) -> None:
        c = self.cols
        # Host columns gather in lists (a list's append costs half an array's) and go into the arrays at the end.
        cols: tuple[list, ...] = ([], [], [], [], [], [], [], [])
        ts_a, end_a, thr_a, nid_a, aux_a, ty_a, ext_a, seq_a = (col.append for col in cols)
        cat_info, threads, shapes, types = self._cat_info, self.threads, self.shapes, self.types
        device_kinds, device_us = self._device_kinds, self.device_us
        self.events += len(events)
        last_cat, names, low, count, is_torch = None, {}, "", [0], False
        last_pid, last_tid, th = None, None, -1
        torch_events = 0
        for e in events:
            ph = e.ph
            if ph != "X":
                if ph == "f":
                    if type(e.id) is int and e.cat in FLOW_CATS:
                        c.f_ts.append(e.ts)
                        c.f_id.append(e.id)
                elif ph == "M" and e.name == "thread_name" and e.args is not None and e.args.name:
                    self.thread_names[(e.pid, e.tid)] = e.args.name
                continue
            cat = e.cat
            if cat != last_cat:
                info = cat_info.get(cat) or self._category(cat)
                names, is_torch, count, low = info
                last_cat = cat
            count[0] += 1
            name = e.name
            info = names.get(name)
            if info is None:
                info = names[name] = self._classify(cat, name)
            kind, nid = info
            torch_events += is_torch
            if kind == SKIP:
                continue
            t, dur = e.ts, e.dur
            if not (0.0 <= dur <= MAX_DUR_US and 0.0 <= t <= MAX_TS_US):
                self._bad_time(kind, t, dur)
                continue
            a = e.args
            if kind == DEVICE:  # a kernel, copy or set: the device columns
                k = device_kinds.get(nid)
                if k is None:
                    k = device_kinds[nid] = device_kind(low, name)
                if a is None:
                    c.k_corr.append(-1)
                    c.k_ext.append(-1)
                else:
                    c.k_corr.append(-1 if a.correlation is None else a.correlation)
                    c.k_ext.append(a.ext if a.ext is not None else a.ext_old if a.ext_old is not None else -1)
                c.k_nid.append(nid)
                c.k_dur.append(dur)
                c.k_ts.append(t)
                c.k_kind.append(k)
                device_us[k] += dur
                continue
            if kind == DEVICE_RANGE:  # a device-timeline range: counted
                self.range_us[low] = self.range_us.get(low, 0.0) + dur
                continue
            if e.tid != last_tid or e.pid != last_pid:
                last_pid, last_tid = e.pid, e.tid
                th = threads.get((last_pid, last_tid), -1)
                if th < 0:
                    th = threads[(last_pid, last_tid)] = len(threads)
            ts_a(t)
            end_a(t + dur)
            thr_a(th)
            nid_a(nid)
            if kind == OP:
                aux = ty = x = -1
                if a is None:
                    seq_a(-1)
                else:
                    seq_a(-1 if a.seq is None else a.seq)
                    x = a.ext if a.ext is not None else a.ext_old if a.ext_old is not None else -1
                    raw_t = bytes(a.input_type)
                    if raw_t:
                        ty = types.get(raw_t, -1)
                        if ty < 0:
                            ty = types[raw_t] = len(types)
                    raw = bytes(a.input_dims)
                    if raw:  # a call signature: dims and types together (the cost model prices it)
                        raw = SIG_SEP.join((raw, raw_t, bytes(a.concrete)))
                        aux = shapes.get(raw, -1)
                        if aux < 0:
                            aux = shapes[raw] = len(shapes)
                aux_a(aux)
                ty_a(ty)
                ext_a(x)
                continue
            if kind == RUNTIME:
                aux = a.correlation if a is not None and a.correlation is not None else -1
            elif kind == MODULE:
                aux = self.name_path[nid]
                self.annotate_ranges += 1
            else:
                aux = -1
                self.nn_events += kind == NNMODULE
                self.step_events += kind == STEP
            aux_a(aux)
            ty_a(-1)
            ext_a(-1)
            seq_a(-1 if kind != PSEUDO_STAGE or a is None or a.seq is None else a.seq)
        self.torch_events += torch_events
        for arr, col in zip((c.ts, c.end, c.thr, c.nid, c.aux, c.ty, c.ext, c.seq), cols, strict=True):
            arr.fromlist(col)

    def _bad_time(self, kind: int, t: float, dur: float) -> None:
        """Count an event whose start or duration cannot be a time (never turned into one), by side and fault."""
        side = "device" if kind == DEVICE else "device range" if kind == DEVICE_RANGE else "host"
        what = "duration" if not 0.0 <= dur <= MAX_DUR_US else "timestamp"
        v = dur if what == "duration" else t
        fault = ("non-finite" if v != v or abs(v) >= NONFINITE else "negative" if v < 0 else
                 "beyond any trace's span")
        key = f"{side} event {what}: {fault}"
        self.bad_times[key] = self.bad_times.get(key, 0) + 1

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
        c.ext.frombytes(o.ext.tobytes())
        c.seq.frombytes(o.seq.tobytes())
        c.k_corr.frombytes(o.k_corr.tobytes())
        c.k_nid.frombytes(name_map[np.frombuffer(o.k_nid, dtype=np.int32)].astype(np.int32).tobytes())
        for k in ("k_dur", "k_ts", "k_kind", "k_ext", "f_ts", "f_id"):
            getattr(c, k).frombytes(getattr(o, k).tobytes())
        for cat, n in other.categories.items():
            self.categories.setdefault(cat, [0])[0] += n[0]
        self.device_us = [a + b for a, b in zip(self.device_us, other.device_us, strict=True)]
        for d, od in ((self.range_us, other.range_us), (self.bad_times, other.bad_times)):
            for k2, v in od.items():
                d[k2] = d.get(k2, 0) + v
        for k in ("events", "torch_events", "annotate_ranges", "nn_events", "mapped_ranges", "step_events"):
            setattr(self, k, getattr(self, k) + getattr(other, k))


def __getattr__(name: str) -> Any:
    """``ModuleMap``, ``ModuleMapEntry``, ``load_module_map``: pydantic loads when ``--module-map`` is given."""
    if name in ("ModuleMap", "ModuleMapEntry", "load_module_map"):
        from recstack.traceimport import module_map

        return getattr(module_map, name)
    raise AttributeError(f"module 'recstack.traceimport.collect' has no attribute {name!r}")
