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

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from recstack.config.loading import load_yaml_file, parse_config
from recstack.traceimport.annotate import MODULE_RANGE, parse_range_name
from recstack.traceimport.decode import Args, Event

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
        self._by_key: dict[tuple[str, str], int] = {}  # (category, name) -> name id
        self._torch: list[int] = []  # name id -> 1 if its category is torch.profiler's
        self._tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
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
        self._torch.append(int(cat in TORCH_CATS))
        return kind, nid

    def _ids(self, events: list[Event]) -> np.ndarray:
        """The name id of every event (a distinct (category, name) is classified once)."""
        keys = [(e.cat, e.name) for e in events]
        nids = list(map(self._by_key.get, keys))
        if None in nids:
            for i in [i for i, v in enumerate(nids) if v is None]:
                nid = self._by_key.get(keys[i])
                if nid is None:
                    nid = self._by_key[keys[i]] = self._classify(*keys[i])[1]
                    self._tables = None
                nids[i] = nid
        return np.array(nids, dtype=np.int32)

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per name id: kind, torch category (0/1), module path id (-1: not a module range)."""
        if self._tables is None:
            path = np.full(len(self.kinds), -1, dtype=np.int64)
            for nid, pid in self.name_path.items():
                path[nid] = pid
            self._tables = (np.array(self.kinds, dtype=np.int8), np.array(self._torch, dtype=np.int8), path)
        return self._tables

    def add(self, events: list[Event]) -> None:
        """Append one decoded chunk to the columns: per-event work is list comprehensions and numpy, with
        every string interned through a dict lookup."""
        self.events += len(events)
        xs = [e for e in events if e.ph == "X"]
        if len(xs) != len(events):
            for e in events:
                if e.ph == "M" and e.name == "thread_name" and e.args is not None and e.args.name:
                    self.thread_names[(e.pid, e.tid)] = e.args.name
        if not xs:
            return
        nid = self._ids(xs)
        kinds_t, torch_t, path_t = self.tables()
        kind = kinds_t[nid]
        self.torch_events += int(torch_t[nid].sum())
        self.annotate_ranges += int(np.count_nonzero(kind == MODULE))
        self.nn_events += int(np.count_nonzero(kind == NNMODULE))
        self.step_events += int(np.count_nonzero(kind == STEP))
        c = self.cols
        dev = np.nonzero(kind == DEVICE)[0]
        if len(dev):
            dl = dev.tolist()
            c.k_corr.frombytes(np.array(_correlations([xs[i].args for i in dl]), dtype=np.int64).tobytes())
            c.k_nid.frombytes(nid[dev].tobytes())
            c.k_dur.frombytes(np.array([xs[i].dur for i in dl], dtype=np.float64).tobytes())
        keep = np.nonzero((kind != SKIP) & (kind != DEVICE))[0]
        if len(keep) == 0:
            return
        if len(keep) != len(xs):
            xs = [xs[i] for i in keep.tolist()]
            nid, kind = nid[keep], kind[keep]
        ts = np.array([e.ts for e in xs], dtype=np.float64)
        c.ts.frombytes(ts.tobytes())
        c.end.frombytes((ts + np.array([e.dur for e in xs], dtype=np.float64)).tobytes())
        threads = self.threads
        tkeys = [(e.pid, e.tid) for e in xs]
        for k in set(tkeys) - threads.keys():
            threads[k] = len(threads)
        c.thr.frombytes(np.array(list(map(threads.__getitem__, tkeys)), dtype=np.int32).tobytes())
        c.nid.frombytes(nid.tobytes())
        aux = np.where(kind == MODULE, path_t[nid], -1)
        ty = np.full(len(xs), -1, dtype=np.int32)
        ops = np.nonzero(kind == OP)[0]
        if len(ops):
            aux[ops], ty[ops] = self._signatures([xs[i].args for i in ops.tolist()])
        rt = np.nonzero(kind == RUNTIME)[0]
        if len(rt):
            aux[rt] = _correlations([xs[i].args for i in rt.tolist()])
        c.aux.frombytes(aux.astype(np.int64, copy=False).tobytes())
        c.ty.frombytes(ty.tobytes())

    def _signatures(self, args: list[Args | None]) -> tuple[list[int], list[int]]:
        """(signature id, input-type id) of each op call; -1 where the trace recorded none. A signature is the
        call's Input Dims, Input type and Concrete Inputs JSON together (the cost model prices it)."""
        types = [bytes(a.input_type) if a is not None else b"" for a in args]
        sigs = [bytes(a.input_dims) + SIG_SEP + t + SIG_SEP + bytes(a.concrete) if a is not None and a.input_dims
                else None for a, t in zip(args, types, strict=True)]
        return _intern(self.shapes, sigs), _intern(self.types, [t or None for t in types])


def _intern(table: dict[bytes, int], keys: list[bytes | None]) -> list[int]:
    """The id of each key in ``table`` (new keys get the next ids); None -> -1."""
    ids = list(map(table.get, keys))
    if None in ids:
        for i in [i for i, v in enumerate(ids) if v is None]:
            k = keys[i]
            if k is None:
                ids[i] = -1
                continue
            v = table.get(k)
            if v is None:
                v = table[k] = len(table)
            ids[i] = v
    return ids


def _correlations(args: list[Args | None]) -> list[int]:
    return [a.correlation if a is not None and a.correlation is not None else -1 for a in args]
