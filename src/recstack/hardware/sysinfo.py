"""Facts about the host that the machine measurements are keyed and sized by.

Everything here is read from the OS (``/proc/cpuinfo``, ``/sys/devices/system/cpu``,
``/proc/meminfo``), never guessed: where a file is missing the caller gets an
empty list or ``None`` and sizes its benchmarks from documented defaults.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
from pathlib import Path
from typing import Any

SYS_CPU = Path("/sys/devices/system/cpu")
DEFAULT_LLC_BYTES = 32 << 20  # used only when the OS reports no cache sizes
BF16_FLAGS = ("avx512_bf16", "amx_bf16")

__all__ = [
    "BF16_FLAGS",
    "available_memory_bytes",
    "bf16_flags",
    "cache_dir",
    "cache_levels",
    "cpu_flags",
    "cpu_hash",
    "cpu_model",
    "host",
    "llc_bytes",
    "native_bf16",
    "parse_size",
    "usable_cpus",
]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_bf16() -> bool:
    """True when the CPU has bf16 arithmetic (AVX512-BF16 or AMX-BF16); otherwise PyTorch emulates it."""
    flags = cpu_flags()
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def cache_dir() -> Path:
    """Where recstack keeps what it measured or built for this host: ``$RECSTACK_CACHE_DIR``, else ``~/.cache/recstack``."""
    env = os.environ.get("RECSTACK_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "recstack"


def host() -> str:
    return socket.gethostname() or "unknown-host"


def usable_cpus() -> int:
    """CPUs this process may run on (affinity mask), the upper end of the thread sweep."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cpu_hash(model: str | None = None, cpus: int | None = None) -> str:
    """A short stable hash of the CPU model and usable CPU count: the cache key beside the host name."""
    text = f"{model if model is not None else cpu_model()}|{cpus if cpus is not None else usable_cpus()}"
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def bf16_flags() -> list[str]:
    """The native-bf16 flags present in /proc/cpuinfo (empty when bf16 is emulated)."""
    flags = cpu_flags()
    return [f for f in BF16_FLAGS if f in flags]


def parse_size(text: str) -> int | None:
    """``"32K"`` / ``"1024K"`` / ``"32M"`` / ``"512"`` (sysfs cache sizes) -> bytes; ``None`` if unreadable."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, flags=re.IGNORECASE)
    if not m:
        return None
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(m.group(1)) * mult


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def cache_levels(root: Path = SYS_CPU) -> list[dict[str, Any]]:
    """Every cache of the machine from ``cpu*/cache/index*``: level, type, size and instance count.

    Caches are deduplicated by (level, type, shared_cpu_list), so ``instances``
    says how many separate caches of that kind exist (an L3 per socket or CCX)
    and ``total_bytes`` is their sum.
    """
    seen: dict[tuple[int, str, str], dict[str, Any]] = {}
    for cpu_dir in sorted(root.glob("cpu[0-9]*")):
        for idx in sorted((cpu_dir / "cache").glob("index*")):
            level, ctype, size = _read(idx / "level"), _read(idx / "type"), _read(idx / "size")
            if level is None or ctype is None or size is None:
                continue
            nbytes = parse_size(size)
            if nbytes is None or not level.isdigit():
                continue
            shared = _read(idx / "shared_cpu_list") or cpu_dir.name
            key = (int(level), ctype, shared)
            if key not in seen:
                seen[key] = {
                    "level": int(level),
                    "type": ctype,
                    "size_bytes": nbytes,
                    "shared_cpu_list": shared,
                }
    merged: dict[tuple[int, str], dict[str, Any]] = {}
    for (level, ctype, _shared), c in sorted(seen.items()):
        m = merged.setdefault(
            (level, ctype),
            {"level": level, "type": ctype, "size_bytes": c["size_bytes"], "instances": 0, "total_bytes": 0},
        )
        m["instances"] += 1
        m["total_bytes"] += c["size_bytes"]
    return [merged[k] for k in sorted(merged)]


def llc_bytes(caches: list[dict[str, Any]]) -> int:
    """Total last-level cache (all instances of the highest level) or DEFAULT_LLC_BYTES when unknown."""
    data = [c for c in caches if c["type"] in ("Unified", "Data")]
    if not data:
        return DEFAULT_LLC_BYTES
    top = max(c["level"] for c in data)
    return sum(c["total_bytes"] for c in data if c["level"] == top)


def level_bytes(caches: list[dict[str, Any]], level: int) -> int | None:
    """Size of one instance of the data/unified cache at ``level`` (what one core sees), or None."""
    for c in caches:
        if c["level"] == level and c["type"] in ("Unified", "Data"):
            return int(c["size_bytes"])
    return None


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (benchmarks cap their arrays by a fraction of it)."""
    text = _read(Path("/proc/meminfo"))
    if not text:
        return None
    m = re.search(r"^MemAvailable:\s+(\d+)\s*kB", text, flags=re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None
