"""Facts about the machine and software a profile was taken on."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

import torch


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


def environment(contention: dict[str, Any] | None = None) -> dict[str, Any]:
    """Versions, CPU and host; ``contention`` (from :mod:`recstack.profiling.contention`) is stored as given."""
    from recstack import __version__

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "recstack": __version__,
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "native_bf16": native_bf16(),
        "cuda": torch.cuda.is_available(),
    }
    try:
        import torchrec

        env["torchrec"] = getattr(torchrec, "__version__", "unknown")
    except Exception:
        env["torchrec"] = None
    try:
        import fbgemm_gpu

        env["fbgemm_gpu"] = getattr(fbgemm_gpu, "__version__", "unknown")
    except Exception:
        env["fbgemm_gpu"] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    if contention is not None:
        env["contention"] = contention
    return env
