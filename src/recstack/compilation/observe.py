"""What torch.compile did: graphs, graph breaks (file:line), recompiles (guards), fallbacks, compile phases.

Sources, each feature-detected (a missing one is reported as ``"unavailable: <reason>"``, never a crash):

* the graph-break and recompile log artifacts (``torch._logging`` ``graph_breaks`` / ``recompiles``):
  "Graph break in user code at FILE:LINE" + "Graph Break Reason: ..." and
  "Recompiling function F in FILE:LINE ... - guard";
* the recompile-limit warning of ``torch._dynamo.convert_frame`` (the silent fallback to eager);
* ``torch._dynamo.utils.get_compilation_metrics()``: one record per frame compile, with nested
  cumulative times (dynamo ⊃ AOTAutograd ⊃ Inductor ⊃ code generation: phases are differences)
  and FX-graph / AOTAutograd cache hits and misses, and in training one more per backward graph
  (compiled lazily at the first backward, outside the frame's span: its own record);
* ``torch._dynamo.utils.counters`` (``stats.unique_graphs``, ``graph_break``).

Which region a record belongs to is known from :data:`CURRENT_REGION`, set by the regional
wrapper around each compiled call (compilation happens synchronously inside that call).
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CURRENT_REGION: contextvars.ContextVar[str | None] = contextvars.ContextVar("recstack_compile_region", default=None)

GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"
RECOMPILE_LOGGER = "torch._dynamo.guards.__recompiles"
LIMIT_LOGGER = "torch._dynamo.convert_frame"

_BREAK_RE = re.compile(r"Graph break(?: \(user stack suppressed[^)]*\))? in user code at (.+?):(\d+)\n(.*)", re.S)
_WONT_RE = re.compile(r"WON'T CONVERT (\S+) (.+?) line (\d+)")
_RECOMPILE_RE = re.compile(r"Recompiling function (\S+) in (.+?):(\d+)\n(.*)", re.S)
_LIMIT_RE = re.compile(r"hit config\.(\w+) \((\d+)\)\s+function: '([^']*)' \((.+?):(\d+)\)(?:\s+last reason: (.*?))?(?:\n|$)",
                       re.S)

def _current() -> str | None:
    r = CURRENT_REGION.get()
    return "<model>" if r == "" else r


# locate(file, line, region) -> (module_path, stage): where a user source line sits in the model.
Locator = Callable[[str, int, str | None], tuple[str | None, str | None]]


def _reason(text: str) -> str:
    """The one-line reason of a graph-break record ('Graph Break Reason: ...', skipping the generic lead)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("Graph Break Reason:"):
            first = ln.removeprefix("Graph Break Reason:").strip()
            if first.startswith("Encountered graph break when attempting to trace") and i + 1 < len(lines):
                return lines[i + 1]
            return first
    return lines[0] if lines else ""


class _Collect(logging.Handler):
    def __init__(self, sink: Callable[[logging.LogRecord], None]) -> None:
        super().__init__(level=logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink(record)
        except Exception:  # an unparseable record must never break the user's run
            pass


@dataclass
class Observation:
    """Everything observed while active; ``to_json`` gives the report's compile keys."""

    graph_breaks: list[dict[str, Any]] = field(default_factory=list)
    recompiles: list[dict[str, Any]] = field(default_factory=list)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)
    unique_graphs: int | None = None
    region_by_compile_id: dict[str, str | None] = field(default_factory=dict)
    not_converted: list[dict[str, Any]] = field(default_factory=list)  # frames whose compile failed
    unavailable: dict[str, str] = field(default_factory=dict)

    def region_of(self, record: Any) -> str | None:
        """The region whose call compiled a metrics record (its compile id's frame)."""
        cid = str(getattr(record, "compile_id", "") or "")
        hit = self.region_by_compile_id.get(cid)
        return hit if hit is not None else self.region_by_compile_id.get(cid.split("/")[0])


class Observer:
    """Context manager collecting an :class:`Observation`; ``locate`` maps a source line to module and stage."""

    def __init__(self, locate: Locator | None = None) -> None:
        self.locate = locate or (lambda _f, _l, region: (region, None))
        self.obs = Observation()
        self._attached: list[tuple[logging.Logger, logging.Handler, bool, int]] = []
        self._metrics_start = 0
        self._graphs_start = 0
        self._seen_breaks: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._callback: Any = None

    # -- lifecycle -----------------------------------------------------------
    def __enter__(self) -> Observer:
        self._enable_artifacts()
        self._attach(GRAPH_BREAK_LOGGER, self._on_break, quiet=True)
        self._attach(RECOMPILE_LOGGER, self._on_recompile, quiet=True)
        self._attach(LIMIT_LOGGER, self._on_limit, quiet=False)
        metrics = _metrics_api()
        if isinstance(metrics, str):
            self.obs.unavailable["compilation_metrics"] = metrics
        else:
            self._metrics_start = len(metrics())
        self._graphs_start = _unique_graphs() or 0
        self._callback = self._register_start_callback()
        return self

    def _register_start_callback(self) -> Any:
        """Note which region each compile starts in (torch._dynamo.callback; compile ids name the frames)."""
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError as exc:
            self.obs.unavailable["regions_of_graphs"] = f"unavailable: torch._dynamo.callback ({exc})"
            return None

        def on_start(args: Any) -> None:
            cid = str(getattr(args, "compile_id", "") or "")
            region = _current()
            self.obs.region_by_compile_id[cid] = region
            self.obs.region_by_compile_id.setdefault(cid.split("/")[0], region)

        return callback_handler.register_start_callback(on_start)

    def __exit__(self, *exc: Any) -> None:
        for lg, h, propagate, level in self._attached:
            lg.removeHandler(h)
            lg.propagate = propagate
            lg.setLevel(level)
        self._attached.clear()
        self._restore_logs()
        if self._callback is not None:
            from torch._dynamo.callback import callback_handler

            callback_handler.remove_start_callback(self._callback)
            self._callback = None
        metrics = _metrics_api()
        if not isinstance(metrics, str):
            self.obs.metrics = list(metrics())[self._metrics_start:]
            self._fallbacks_from_metrics()
        graphs = _unique_graphs()
        if graphs is None:
            self.obs.unavailable["counters"] = "unavailable: torch._dynamo.utils.counters has no stats.unique_graphs"
        else:
            self.obs.unique_graphs = graphs - self._graphs_start

    def _enable_artifacts(self) -> None:
        try:
            import torch._logging as tl

            tl.set_logs(graph_breaks=True, recompiles=True)
        except Exception as exc:  # older/newer torch without these artifacts
            why = f"unavailable: torch._logging.set_logs(graph_breaks, recompiles) failed ({exc})"
            self.obs.unavailable["graph_break_log"] = why
            self.obs.unavailable["recompile_log"] = why

    def _restore_logs(self) -> None:
        """Back to the logging torch had: its defaults, then what TORCH_LOGS asks (torch's own init)."""
        try:
            import torch._logging as tl
            from torch._logging._internal import _init_logs

            tl.set_logs()
            _init_logs()
        except Exception:  # a torch without these: the artifacts stay on, which only adds log lines
            pass

    def _attach(self, name: str, sink: Callable[[logging.LogRecord], None], *, quiet: bool) -> None:
        lg = logging.getLogger(name)
        h = _Collect(sink)
        self._attached.append((lg, h, lg.propagate, lg.level))
        lg.addHandler(h)
        if quiet:  # keep the artifact's text off stderr: it is in the report
            lg.propagate = False
            lg.setLevel(logging.DEBUG)

    # -- record parsers ------------------------------------------------------
    def _on_break(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        wont = _WONT_RE.search(text)
        if wont:  # the frame failed to compile and runs eagerly (torch logs it among the graph breaks)
            self._on_not_converted(wont, text)
            return
        m = _BREAK_RE.search(text)
        if not m:
            return
        file, line, reason = m.group(1), int(m.group(2)), _reason(m.group(3))
        region = _current()
        key = (file, line, reason, region)
        if key in self._seen_breaks:  # the same break met again (a recompile retraces it)
            self._seen_breaks[key]["count"] += 1
            return
        module_path, stage = self.locate(file, line, region)
        entry = {"reason": reason, "file": file, "line": line, "module_path": module_path, "stage": stage,
                 "region": region, "count": 1}
        self._seen_breaks[key] = entry
        self.obs.graph_breaks.append(entry)

    def _on_not_converted(self, m: re.Match, text: str) -> None:
        file, line = m.group(2), int(m.group(3))
        region = _current()
        module_path, stage = self.locate(file, line, region)
        errors = [ln.strip() for ln in text.splitlines() if re.match(r"\s*[\w.]+(Error|Exception): ", ln)]
        self.obs.not_converted.append({
            "region": region or "<model>", "module_path": module_path, "stage": stage, "what": "frame not compiled",
            "function": m.group(1), "file": file, "line": line,
            "reason": errors[-1][:400] if errors else "compilation failed (see torch's graph-break log)",
            "action": f"{m.group(1)} ({file}:{line}) runs eagerly (torch skipped the frame)",
        })

    def _on_recompile(self, record: logging.LogRecord) -> None:
        m = _RECOMPILE_RE.search(record.getMessage())
        if not m:
            return
        guards = [ln.strip()[2:] for ln in m.group(4).splitlines() if ln.strip().startswith("- ")]
        self.obs.recompiles.append({
            "guard": guards[0] if guards else m.group(4).strip(),
            "guards": guards, "function": m.group(1), "file": m.group(2), "line": int(m.group(3)),
            "region": _current(),
        })

    def _on_limit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        m = _LIMIT_RE.search(text)
        if not m:
            return
        self.obs.fallbacks.append({
            "kind": m.group(1), "limit": int(m.group(2)), "function": m.group(3), "file": m.group(4),
            "line": int(m.group(5)), "last_reason": (m.group(6) or "").strip() or None,
            "region": _current(),
            "error": f"{m.group(1)} ({m.group(2)}) hit: this code object now runs eagerly (silent fallback); "
                     "raise recompile_limit or make the shapes dynamic",
        })

    def _fallbacks_from_metrics(self) -> None:
        """A limit hit logged nowhere (a logger configured away) still shows in the metrics' fail_reason."""
        for r in self.obs.metrics:
            why = str(getattr(r, "fail_reason", "") or "")
            if "recompile limit" not in why.lower():
                continue
            co = (getattr(r, "co_filename", None), getattr(r, "co_firstlineno", None))
            if any((f["file"], f["line"]) == co for f in self.obs.fallbacks):
                continue
            self.obs.fallbacks.append({
                "kind": "recompile_limit", "limit": None, "function": getattr(r, "co_name", None),
                "file": co[0], "line": co[1], "last_reason": getattr(r, "recompile_reason", None), "region": None,
                "error": "recompile limit hit: this code object now runs eagerly (silent fallback)",
            })


# -- metrics -----------------------------------------------------------------
def _metrics_api() -> Callable[[], Any] | str:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError as exc:
        return f"unavailable: torch._dynamo.utils.get_compilation_metrics ({exc})"
    return get_compilation_metrics


def _unique_graphs() -> int | None:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    stats = counters.get("stats", {})
    return int(stats.get("unique_graphs", 0))


def raise_metrics_limit(n: int = 100_000) -> None:
    """Keep every compile record (the buffer keeps 64 by default)."""
    try:
        from torch._dynamo.utils import set_compilation_metrics_limit

        set_compilation_metrics_limit(n)
    except (ImportError, Exception):
        pass


_US = 1e-6
_PHASE_FIELDS = {
    "dynamo": "dynamo_cumulative_compile_time_us",
    "aot_autograd": "aot_autograd_cumulative_compile_time_us",
    "inductor": "inductor_cumulative_compile_time_us",
    "code_gen": "inductor_code_gen_cumulative_compile_time_us",
}


def _is_backward(record: Any) -> bool:
    """A backward-graph compile: AOTAutograd compiles it lazily, at the first backward, in a record of its
    own (no dynamo or AOTAutograd span; ``backward_cumulative_compile_time_us`` is its whole time)."""
    return getattr(record, "dynamo_cumulative_compile_time_us", None) is None and bool(
        getattr(record, "backward_cumulative_compile_time_us", None))


def _split(record: Any) -> dict[str, float]:
    """One record's phases (seconds), nested times subtracted within the record; a backward record's
    outer span is its backward time (AOTAutograd's backward wrapper around Inductor)."""
    get = {k: (getattr(record, f, None) or 0) * _US for k, f in _PHASE_FIELDS.items()}
    if _is_backward(record):
        outer = (getattr(record, "backward_cumulative_compile_time_us", None) or 0) * _US
        return {"tracing_s": 0.0, "aot_autograd_s": max(0.0, outer - get["inductor"]),
                "inductor_s": max(0.0, get["inductor"] - get["code_gen"]), "code_gen_s": get["code_gen"],
                "total_s": outer}
    return {"tracing_s": max(0.0, get["dynamo"] - get["aot_autograd"]),
            "aot_autograd_s": max(0.0, get["aot_autograd"] - get["inductor"]),
            "inductor_s": max(0.0, get["inductor"] - get["code_gen"]), "code_gen_s": get["code_gen"],
            "total_s": get["dynamo"]}


def phases(records: list[Any]) -> dict[str, Any]:
    """Compile time by phase over ``records`` (seconds), from the nested cumulative times by subtraction,
    record by record: tracing = dynamo - aot; aot_autograd = aot - inductor; inductor = inductor - code_gen;
    code_gen. Backward graphs (compiled lazily, in records of their own) add their AOTAutograd, Inductor
    and code generation; ``backward_s`` is their total, ``forward_s`` the frames'."""
    keys = ("tracing_s", "aot_autograd_s", "inductor_s", "code_gen_s", "total_s")
    out: dict[str, Any] = dict.fromkeys(keys, 0.0)
    out.update(forward_s=0.0, backward_s=0.0, backward_graphs=0)
    if records and not all(hasattr(records[0], f) for f in _PHASE_FIELDS.values()):
        return {"unavailable": "unavailable: compilation metrics lack the cumulative compile-time fields"}
    cache: dict[str, int] = {}
    for r in records:
        part = _split(r)
        for k in keys:
            out[k] += part[k]
        if _is_backward(r):
            out["backward_s"] += part["total_s"]
            out["backward_graphs"] += 1
        else:
            out["forward_s"] += part["total_s"]
        for k, v in vars(r).items():  # FX-graph and AOTAutograd cache hits/misses, whatever this torch names
            if ("cache_hit" in k or "cache_miss" in k) and isinstance(v, int) and not isinstance(v, bool):
                cache[k] = cache.get(k, 0) + v
    out["cache"] = cache
    out["provenance"] = ("computed from torch compilation metrics (nested times subtracted per record; "
                         "backward graphs' records added)")
    return out


def graphs(records: list[Any], region_of: Callable[[Any], str | None]) -> list[dict[str, Any]]:
    """One entry per successful frame compile: its compile id, code object, ops and region."""
    out = []
    for r in records:
        if getattr(r, "fail_type", None) or _is_backward(r):  # a backward graph belongs to its forward frame
            continue
        out.append({
            "compile_id": getattr(r, "compile_id", None), "function": getattr(r, "co_name", None),
            "file": getattr(r, "co_filename", None), "line": getattr(r, "co_firstlineno", None),
            "ops": getattr(r, "graph_op_count", None), "region": region_of(r),
            "recompile_reason": getattr(r, "recompile_reason", None),
        })
    return out


__all__ = ["CURRENT_REGION", "Observation", "Observer", "graphs", "phases", "raise_metrics_limit"]
