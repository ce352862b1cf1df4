"""Facts about the machine and software a profile was taken on."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

import torch

from recstack.errors import ContendedRunError
from recstack.hardware.sysinfo import cpu_flags, cpu_model, native_bf16
from recstack.version import __version__

__all__ = ["cpu_flags", "cpu_model", "environment", "native_bf16", "strict_check"]


def environment(contention: dict[str, Any] | None = None) -> dict[str, Any]:
    """Versions, CPU and host; ``contention`` (from :mod:`recstack.hardware.contention`) is stored as given."""
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


def strict_check(prof: Any, written: Path | None) -> None:
    """``--strict``: a contended run (``environment.contention.detected``), or one classified against a
    machine file measured under contention (``machine.contended``), is an error (exit 3), after writing."""
    contention = prof.environment.get("contention") or {}
    where = f" (the profile is written to {written})" if written else ""
    if isinstance(contention, dict) and contention.get("detected"):
        evidence = "; ".join(str(e) for e in contention.get("evidence", [])[:2]) or "see environment.contention"
        raise ContendedRunError(f"--strict: the run was contended: {evidence}{where}")
    machine = prof.machine
    if isinstance(machine, dict) and machine.get("contended"):
        raise ContendedRunError(f"--strict: the machine file {machine.get('file') or ''} was measured under "
                                f"contention: its roofs are suspect{where}; `recstack machine --remeasure` on a "
                                "quiet host")
