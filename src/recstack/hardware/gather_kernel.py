"""Build, load and call recstack's own pooled gather kernel (``gather.c``).

The kernel is compiled at first use with the host's C compiler (``$CC``,
else ``cc``/``gcc``/``clang``) as ``-O3 -march=native`` and cached as a
shared library under ``$RECSTACK_CACHE_DIR/kernels`` (default
``~/.cache/recstack/kernels``), keyed by a hash of the source, the compiler's
version, the flags and the CPU model, so a changed host or source rebuilds.
It is loaded with :mod:`ctypes` (no torch headers, no Python extension ABI).
The build tries ``-fopenmp`` first (persistent worker threads) and, where the
compiler has no OpenMP, builds with one POSIX thread per range and call.

The same library carries ``recstack_chase``, the dependent-load walk of the
memory-latency benchmark (:func:`chase`).

Setting ``RECSTACK_NO_NATIVE=1`` disables the native build (as if no compiler
existed), so the fallbacks can be exercised on any host.

Where no compiler works, :func:`load` raises :class:`KernelUnavailable` with
the reason; the machine measurement then falls back to ``torch.index_select``
and records the reason in the machine file (that kernel is slower than the
embedding operators on large tables, so profiles can then exceed 100% of the
gather roof; the report says so).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from recstack.hardware import sysinfo

FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-pthread", "-std=c11"]
OPENMP_FLAG = "-fopenmp"  # tried first; without it the kernel starts POSIX threads per call
DEFAULT_DISTANCE = 24  # rows of read-ahead per thread (best or within noise of best for 64..512 B rows here)
SYMBOL = "recstack_gather_sum_f32"
CHASE_SYMBOL = "recstack_chase"
DISABLE_ENV = "RECSTACK_NO_NATIVE"  # "1": behave as if no C compiler existed (tests, comparisons)


class KernelUnavailable(RuntimeError):
    """The gather kernel could not be built or loaded here (the message says why)."""


def _source() -> str:
    return resources.files("recstack.hardware").joinpath("gather.c").read_text()


def _compiler() -> list[str]:
    """The compiler command (``$CC`` may carry arguments, e.g. ``ccache gcc``)."""
    if os.environ.get(DISABLE_ENV) == "1":
        raise KernelUnavailable(f"native kernels disabled ({DISABLE_ENV}=1)")
    env = os.environ.get("CC")
    if env:
        cmd = shlex.split(env)
        if cmd and shutil.which(cmd[0]):
            return cmd
    for cand in ("cc", "gcc", "clang"):
        if shutil.which(cand):
            return [cand]
    raise KernelUnavailable("no C compiler found (set CC or install gcc, e.g. `apt-get install gcc`)")


def _compiler_version(cc: list[str]) -> str:
    try:
        res = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise KernelUnavailable(f"C compiler {cc!r} does not run: {exc}") from exc
    return (res.stdout or res.stderr).splitlines()[0] if (res.stdout or res.stderr) else " ".join(cc)


def kernel_dir() -> Path:
    return sysinfo.cache_dir() / "kernels"


_LOADED: list[tuple[ctypes.CDLL, dict[str, str]]] = []  # the process's one loaded build


def _compile(cc: list[str], flags: list[str], src: str, lib: Path) -> str | None:
    """Compile ``src`` into ``lib`` atomically; None on success, else the compiler's last message line."""
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        c_file = Path(tmp) / "gather.c"
        c_file.write_text(src)
        tmp_lib = Path(tmp) / lib.name
        cmd = [*cc, *flags, str(c_file), "-o", str(tmp_lib)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{' '.join(cmd[:-3])}: {exc}"
        if res.returncode != 0:
            msg = (res.stderr or res.stdout).strip().splitlines()
            return f"{' '.join(cmd[:-3])}: {msg[-1] if msg else f'exit {res.returncode}'}"
        os.replace(tmp_lib, lib)  # atomic: a concurrent build never sees half a library
    return None


def builds() -> Iterator[tuple[Path, dict[str, str]]]:
    """Compiled variants in order of preference (OpenMP, then plain threads), building each on demand
    (or reusing the cached build); raises KernelUnavailable when none compiles."""
    cc = _compiler()
    version = _compiler_version(cc)
    src = _source()
    out_dir = kernel_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KernelUnavailable(f"cannot create the kernel cache {out_dir}: {exc}") from exc
    errors = []
    built = 0
    for flags in ([*FLAGS, OPENMP_FLAG], FLAGS):
        key = hashlib.sha256("\0".join([src, version, " ".join(flags), sysinfo.cpu_model()]).encode()).hexdigest()
        lib = out_dir / f"gather-{key[:16]}.so"
        info = {"compiler": version, "flags": " ".join(flags), "library": str(lib)}
        err = None if lib.exists() else _compile(cc, flags, src, lib)
        if err is None:
            built += 1
            yield lib, info
        else:
            errors.append(err)
    if not built:
        raise KernelUnavailable(f"compiling the gather kernel failed ({errors[-1]})")


def _bind(lib_path: Path, info: dict[str, str]) -> tuple[ctypes.CDLL, dict[str, str]]:
    try:
        lib = ctypes.CDLL(str(lib_path))
        fn = getattr(lib, SYMBOL)
        openmp = lib.recstack_gather_openmp
        chase_fn = getattr(lib, CHASE_SYMBOL)
    except (OSError, AttributeError) as exc:
        raise KernelUnavailable(f"loading {lib_path} failed: {exc}") from exc
    fn.restype = ctypes.c_int
    fn.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int,
    ]
    openmp.restype = ctypes.c_int
    chase_fn.restype = ctypes.c_int64
    chase_fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    info = {**info, "threads": "openmp" if openmp() else "pthreads (one per range and call; no OpenMP)"}
    return lib, info


def load() -> tuple[ctypes.CDLL, dict[str, str]]:
    """The loaded kernel library and its build info (built on first use, then kept for the process).

    A variant that compiles but does not load (e.g. an OpenMP runtime the
    loader cannot find) is skipped for the next one."""
    if os.environ.get(DISABLE_ENV) == "1":
        raise KernelUnavailable(f"native kernels disabled ({DISABLE_ENV}=1)")
    if not _LOADED:
        errors = []
        for lib_path, info in builds():
            try:
                _LOADED.append(_bind(lib_path, info))
                break
            except KernelUnavailable as exc:
                errors.append(str(exc))
        if not _LOADED:
            raise KernelUnavailable(errors[-1])
    return _LOADED[0]


def _check(t: torch.Tensor, name: str, dtype: torch.dtype, dims: int) -> None:
    if t.dtype != dtype or t.dim() != dims or not t.is_contiguous() or t.device.type != "cpu":
        raise ValueError(f"{name} must be a contiguous {dims}-D CPU {dtype} tensor (got {t.dtype}, {tuple(t.shape)})")


def gather_sum(
    table: torch.Tensor,
    idx: torch.Tensor,
    offsets: torch.Tensor,
    out: torch.Tensor,
    *,
    threads: int = 1,
    distance: int = DEFAULT_DISTANCE,
) -> torch.Tensor:
    """``out[b] = table[idx[offsets[b]:offsets[b+1]]].sum(0)`` with the native kernel.

    ``table`` fp32 ``(rows, dim)``, ``idx`` int64, ``offsets`` int64 of length
    ``bags + 1`` (ending at ``len(idx)``), ``out`` fp32 ``(bags, dim)``. Indices
    are not bounds-checked by the kernel; callers pass indices they generated.
    """
    _check(table, "table", torch.float32, 2)
    _check(idx, "idx", torch.int64, 1)
    _check(offsets, "offsets", torch.int64, 1)
    _check(out, "out", torch.float32, 2)
    bags = offsets.numel() - 1
    if out.shape != (bags, table.shape[1]):
        raise ValueError(f"out must be ({bags}, {table.shape[1]}) (got {tuple(out.shape)})")
    if bags < 0 or int(offsets[0]) < 0 or int(offsets[-1]) > idx.numel() or bool((offsets.diff() < 0).any()):
        raise ValueError(f"offsets must rise from >= 0 to <= len(idx) = {idx.numel()} (the kernel reads idx[offsets[0]:offsets[-1]])")
    if not 1 <= threads <= 256:
        raise ValueError(f"threads must be 1..256 (got {threads})")
    distance = max(0, min(int(distance), idx.numel()))
    lib, _ = load()
    rc = lib.recstack_gather_sum_f32(
        table.data_ptr(),
        table.shape[1],
        idx.data_ptr(),
        offsets.data_ptr(),
        bags,
        out.data_ptr(),
        distance,
        threads,
    )
    if rc:
        raise KernelUnavailable(f"gather kernel: thread {rc - 1} could not be started")
    return out


def chase(chain: np.ndarray, start: int, steps: int) -> int:
    """Walk ``steps`` dependent loads ``p = chain[p]`` from ``start`` in native code; the final position.

    ``chain`` must be a C-contiguous int64 array holding indices into itself
    (:func:`recstack.hardware.cpu_bench.cyclic_chain`); indices are not checked.
    """
    if chain.dtype != np.int64 or chain.ndim != 1 or not chain.flags["C_CONTIGUOUS"]:
        raise ValueError(f"chain must be a contiguous 1-D int64 array (got {chain.dtype}, {chain.shape})")
    if not 0 <= start < chain.size:
        raise ValueError(f"start must be in [0, {chain.size}) (got {start})")
    lib, _ = load()
    return int(lib.recstack_chase(chain.ctypes.data, int(start), max(0, int(steps))))
