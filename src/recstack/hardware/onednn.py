"""Which oneDNN kernels ran: parse oneDNN's verbose output, and capture it around a piece of work.

With ``ONEDNN_VERBOSE=1`` (or ``torch.backends.mkldnn.verbose``), oneDNN
prints one line per primitive execution, e.g.::

    onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,
        src:bf16::blocked:ab::f0 wei:bf16::blocked:ab::f0 dst:bf16::blocked:ab::f0,
        attr-scratchpad:user,,1024x1024:1024x1024,7.92505

Fields after ``exec``: engine, primitive kind, implementation
(``<kernel>:<isa>``), propagation kind, memory descriptors, attributes,
auxiliary, problem description, time in ms. Older oneDNN versions print the
same fields without ``v1,primitive`` (and ``dnnl_verbose`` as the prefix);
both parse. Ops that torch runs outside oneDNN (on that Intel host, fp32
``torch.mm`` goes to MKL/its own kernels) print nothing: no line is no
evidence either way.

:func:`parse` -> executions; :func:`summarize` -> one row per (primitive,
implementation, source dtype) with calls, time and the ISA class
(``amx``, ``avx512_bf16`` or ``other``); :func:`capture` runs a callable
with verbose output on and returns what oneDNN printed (file descriptor 1,
where oneDNN writes, is redirected to a temporary file meanwhile).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable
from typing import Any

PREFIXES = ("onednn_verbose", "dnnl_verbose")
_MD = re.compile(r"(\w+):(\w+):")


def isa_class(implementation: str) -> str:
    """``amx`` (AMX tiles), ``avx512_bf16`` (AVX512-BF16 / AVX10 with bf16 dot products) or ``other``."""
    impl = implementation.lower()
    if "amx" in impl:
        return "amx"
    if "bf16" in impl or "avx10" in impl:
        return "avx512_bf16"
    return "other"


def _dtypes(mds: str) -> dict[str, str]:
    """``{"src": "bf16", "wei": "bf16", "dst": "bf16"}`` from the memory-descriptor field."""
    out: dict[str, str] = {}
    for md in mds.split():
        m = _MD.match(md)
        if m:
            out.setdefault(m.group(1), m.group(2))
        elif "_" in md.split(":", 1)[0]:  # older format: src_bf16::blocked:ab:f0
            arg, _, dt = md.split(":", 1)[0].partition("_")
            out.setdefault(arg, dt)
    return out


def parse(text: str) -> list[dict[str, Any]]:
    """Every primitive execution line of ``text`` as a dict (other lines are skipped)."""
    execs = []
    for line in text.splitlines():
        if not line.startswith(PREFIXES):
            continue
        fields = line.strip().split(",")
        if "exec" not in fields:
            continue
        f = fields[fields.index("exec") + 1 :]
        if len(f) < 9:
            continue
        impl = f[2]
        kernel, _, isa = impl.partition(":")
        try:
            ms = float(f[-1])
        except ValueError:
            ms = None
        execs.append(
            {
                "engine": f[0],
                "primitive": f[1],
                "implementation": impl,
                "kernel": kernel,
                "isa": isa,
                "isa_class": isa_class(impl),
                "prop_kind": f[3],
                "dtypes": _dtypes(f[4]),
                "problem": f[-2],
                "time_ms": ms,
            }
        )
    return execs


def info(text: str) -> dict[str, str]:
    """oneDNN's header lines: ``version``, ``isa`` (what it detected), ``runtime``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith(PREFIXES) or ",info," not in line:
            continue
        body = line.split(",info,", 1)[1]
        if body.startswith("oneDNN"):
            out["version"] = body
        elif body.startswith("cpu,isa:"):
            out["isa"] = body[len("cpu,isa:") :]
        elif body.startswith("cpu,runtime:"):
            out["runtime"] = body[len("cpu,") :]
    return out


def summarize(execs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (primitive, implementation, source dtype): calls, summed ms, ISA class; most time first."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in execs:
        src = e["dtypes"].get("src", "?")
        key = (e["primitive"], e["implementation"], src)
        r = rows.setdefault(
            key,
            {"primitive": key[0], "implementation": key[1], "src_dtype": src, "isa_class": e["isa_class"], "calls": 0, "time_ms": 0.0},
        )
        r["calls"] += 1
        r["time_ms"] += e["time_ms"] or 0.0
    return sorted(rows.values(), key=lambda r: -r["time_ms"])


def evidence(text: str) -> dict[str, Any]:
    """What the verbose output shows: header, per-kernel summary, and whether AMX / AVX512-BF16 ran."""
    execs = parse(text)
    rows = summarize(execs)
    return {
        **info(text),
        "executions": len(execs),
        "kernels": rows,
        "amx": any(r["isa_class"] == "amx" for r in rows),
        "avx512_bf16": any(r["isa_class"] == "avx512_bf16" for r in rows),
    }


def capture(fn: Callable[[], Any]) -> str:
    """Run ``fn`` with oneDNN verbose output on; return what oneDNN printed.

    oneDNN writes to the C ``stdout`` (file descriptor 1), so fd 1 is pointed
    at a temporary file while ``fn`` runs and restored afterwards. Returns ""
    when torch has no oneDNN (``torch.backends.mkldnn.is_available()`` false).
    """
    import torch

    if not torch.backends.mkldnn.is_available():
        fn()
        return ""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            os.dup2(tmp.fileno(), 1)
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                fn()
        finally:
            try:
                import ctypes

                ctypes.CDLL(None).fflush(None)  # oneDNN's C stdio buffer, before fd 1 goes back
            except (OSError, AttributeError):
                pass
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")
