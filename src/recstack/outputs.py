"""Safe outputs: every one-shot file recstack writes goes through here.

* :func:`check_writable` runs *before* the work (before torch is imported or a
  model is built): an output that cannot be written (a folder, a path under a
  file, a read-only or pseudo file system such as ``/proc``) fails at once with
  a :class:`~recstack.errors.ConfigError` naming the option, instead of after
  minutes of profiling.
* :func:`atomic_output` (and the ``atomic_write_*`` helpers) write to a
  temporary file in the target's folder, flush and fsync it, then rename it
  over the target. A crash, a full disk or an interrupt leaves the old file
  intact and no partial file behind; overwriting an existing output stays
  allowed (the Unix habit).
* :func:`write_with_fallback` is for results that took long to measure: if the
  requested path fails at the end anyway (the disk filled up meanwhile), the
  result goes to a fallback path in the temp folder, and the caller says where;
  :func:`write_result` does that for every computed output (a serve or search
  result, a correlate or sweep report) and says where on stderr.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recstack.errors import ConfigError

_TMP_PREFIX = ".recstack-tmp-"


def _nearest_existing(p: Path) -> Path:
    cur = p
    while not cur.exists():
        if cur.parent == cur:
            break
        cur = cur.parent
    return cur


def check_writable(path: str | Path, field: str) -> Path:
    """Fail now (ConfigError naming ``field``) if ``path`` cannot be written as a file; return it.

    Missing parent folders are allowed (they are created at write time) as long
    as the nearest existing ancestor is a folder we can create files in. The
    check really creates (and removes) a temporary file there, because
    permission bits do not tell the whole story (root ignores them; ``/proc``
    and read-only mounts refuse anyway).
    """
    p = Path(path)
    if str(path) == "" or p.name in ("", ".", ".."):
        raise ConfigError(f"{str(path)!r} is not a file name; give a file path", field=field)
    if p.is_dir():
        raise ConfigError(f"{p} is a folder; give a file path inside it", field=field)
    if p.exists() and not p.is_file():
        raise ConfigError(f"{p} exists and is not a regular file; choose another path", field=field)
    base = _nearest_existing(p.parent if str(p.parent) else Path("."))
    if not base.is_dir():
        raise ConfigError(f"{base} is a file, so {p} cannot be created under it; choose another path", field=field)
    try:
        fd, probe = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=base)
    except OSError as exc:
        raise ConfigError(f"cannot write in {base} ({exc.strerror or exc}); choose a writable folder", field=field) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    if p.exists() and not os.access(p, os.W_OK) and os.geteuid() != 0:
        raise ConfigError(f"{p} is read-only; choose another path or make it writable", field=field)
    return p


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on normal exit it is fsynced and renamed over ``path``.

    On any exception (including KeyboardInterrupt) the temporary file is
    removed and ``path`` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=target.suffix, dir=target.parent)
    except OSError as exc:
        exc.filename = str(target)
        raise
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        mode = 0o666 & ~_umask()
        with contextlib.suppress(OSError):
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(target)  # a full disk names the output, not a temporary file
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_output`)."""
    with atomic_output(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_output`)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def fallback_path(path: str | Path) -> Path:
    """Where a result goes when ``path`` cannot be written: the temp folder, a unique name."""
    p = Path(path)
    fd, name = tempfile.mkstemp(prefix=f"recstack-{p.stem}-", suffix=p.suffix or ".out")
    os.close(fd)
    return Path(name)


def write_with_fallback(path: str | Path, write: Callable[[Path], object]) -> tuple[Path, str | None]:
    """``write(path)`` (an atomic writer); if it raises OSError, ``write(fallback)`` instead.

    Returns (the path written, None) or (the fallback path, why the first path failed).
    An OSError from the fallback too propagates: there is nowhere left to write.
    """
    try:
        write(Path(path))
        return Path(path), None
    except OSError as exc:
        reason = f"{exc.strerror or exc}"
        alt = fallback_path(path)
        write(alt)
        return alt, reason


def write_result(path: str | Path, write: Callable[[Path], object], what: str = "result") -> Path:
    """Write a computed ``what`` (an atomic ``write(path)``) to ``path``, or where it fails, to a fallback file.

    The fallback is the profile's (:func:`write_with_fallback`): a full disk or a refused write at the end
    of a long run does not lose the result; a ``warning:`` line on stderr says where it went. Only when
    the fallback fails too is it an error (exit 5, :class:`~recstack.errors.EnvironmentFailure`).
    """
    import sys

    from recstack.errors import EnvironmentFailure, environment_error

    try:
        written, why = write_with_fallback(path, write)
    except OSError as exc:
        err = environment_error(exc, str(path))
        raise EnvironmentFailure(f"{path}: cannot write the {what} nor a fallback file in {tempfile.gettempdir()} "
                                 f"({err or exc})") from None
    if why is not None:
        sys.stderr.write(f"warning: cannot write {path} ({why}); the {what} is written to {written} instead\n")
        sys.stderr.flush()
    return written


def beside(profile: str, suffix: str) -> Path:
    """The default output of a command reading ``profile``: its name, ``.json`` replaced by ``suffix``."""
    p = Path(profile)
    stem = p.name[: -len(".json")] if p.name.endswith(".json") else p.stem
    return p.with_name(stem + suffix)


def save_atomic(obj: Any, path: Path) -> None:
    """``obj.save(path)`` (a profile's), atomically: the file appears whole or not at all."""
    with atomic_output(path) as tmp:
        obj.save(tmp)
