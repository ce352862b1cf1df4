"""Open, migrate, write and read the results store (an embedded DuckDB file).

Concurrency: DuckDB lets one process hold a file for writing, so every writer
opens the file for one transaction and closes it again (:func:`transaction`:
one per sweep point in :func:`write_point`, one per probe of ``recstack serve
--search``), waiting out another process's transaction, and readers (:func:`read_table`, ``recstack results``)
retry briefly while a write is in progress. A whole sweep additionally holds
an exclusive ``flock`` on ``<store>.lock`` (:class:`SweepLock`), released by
the kernel even when the sweep is killed with SIGKILL, so a second sweep on
the same store is refused at once. DuckDB's write-ahead log makes a killed
transaction vanish on the next open: the file never holds half a point.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from recstack.errors import ConfigError, DataError, EnvironmentFailure, RecstackError
from recstack.store.check import FIX, check_store, check_table, read_version, tables
from recstack.store.migrations import LATER_TABLES, MIGRATIONS, latest, run_config_columns

LOCK_RETRY_S = 30.0  # how long a reader or writer waits for another process's transaction


def _is_lock_error(exc: Exception) -> bool:
    """Another process holds the file (DuckDB: 'Could not set lock on file "...": Conflicting lock ...').
    The quoted path is left out: a store named ``blocks.duckdb`` is not a lock error."""
    text = re.sub(r'"[^"]*"', "", str(exc)).lower()
    return "lock" in text or "conflicting" in text


@contextlib.contextmanager
def connect(path: str | Path, *, read_only: bool = False) -> Iterator[Any]:
    """A DuckDB connection to ``path``, retried while another process holds the file; closed on exit.

    A DuckDB error inside the block (a page that cannot be read: a truncated file) is a DataError naming the
    file; a disk that is full or refuses the write is an EnvironmentFailure (exit 5).
    """
    import duckdb

    p = Path(path)
    if read_only and not p.is_file():
        raise DataError(f"{p}: no such results store (run recstack sweep first)")
    deadline = time.monotonic() + LOCK_RETRY_S
    while True:
        try:
            con = duckdb.connect(str(p), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if not _is_lock_error(exc) or time.monotonic() > deadline:
                raise _store_error(p, exc, "cannot open the results store") from None
            time.sleep(0.05)
        except duckdb.Error as exc:
            raise _store_error(p, exc, "not a results store") from None
    try:
        yield con
    except (duckdb.ParserException, duckdb.BinderException):
        raise  # recstack's own SQL is wrong (check_store has checked the tables and columns): a bug of ours
    except duckdb.Error as exc:
        raise _store_error(p, exc, "cannot read or write the results store") from None
    finally:
        con.close()


# DuckDB's I/O messages that are the host's fault, not the file's (exit 5) -> what to do
_ENV_TEXT = {"no space left on device": "free some space", "disk quota": "free some space",
             "permission denied": "fix the permissions", "read-only file system": "write elsewhere",
             "too many open files": "raise the open-file limit (ulimit -n)"}


def _store_error(p: Path, exc: Exception, what: str) -> RecstackError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    fix = next((f for t, f in _ENV_TEXT.items() if t in first.lower()), None)
    if fix is not None:
        return EnvironmentFailure(f"{p}: {what} ({first}); {fix}, then run again (what the store holds is kept)")
    return DataError(f"{p}: {what} ({first}); the file is damaged or not a results store ({FIX})")


def schema_version(con: Any, path: str | Path = "the store") -> int:
    return read_version(con, path)


def check_version(con: Any, path: str | Path, *, empty_ok: bool = False) -> int:
    """The store's schema version, after checking the store (:func:`recstack.store.check.check_store`);
    refuses a newer one, and (unless ``empty_ok``) a file that is no store."""
    v = read_version(con, path)
    if v == 0:
        have = tables(con)
        legacy = set(have) == {"serving"}  # written by serve --search before its table joined the store
        if (have and not legacy) or not empty_ok:
            raise DataError(f"{path}: a DuckDB file but not a recstack results store (no schema version); "
                            "give a store written by recstack sweep")
        if legacy:
            check_table(con, path, "serving")
        return v
    if v > latest():
        raise DataError(
            f"{path}: the store has schema version {v}, newer than this recstack knows ({latest()}); "
            "upgrade recstack to read or write it"
        )
    check_store(con, path, v)
    return v


def migrate(path: str | Path) -> int:
    """Create or upgrade the store at ``path`` to the latest schema; returns the version.

    An existing file is checked read-only first (:func:`check_version`): nothing is migrated or written
    into a store that is damaged, foreign or newer.
    """
    if Path(path).is_file():
        with connect(path, read_only=True) as con:
            check_version(con, path, empty_ok=True)
    import duckdb

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with connect(path) as con:
        v = check_version(con, path, empty_ok=True)
        if v == 0:
            con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        for m in MIGRATIONS:
            if m.version <= v:
                continue
            con.execute("BEGIN TRANSACTION")
            try:
                if callable(m.apply):
                    m.apply(con)
                else:
                    for stmt in (s for s in m.apply.split(";") if s.strip()):
                        con.execute(stmt)
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(m.version)])
                con.execute("COMMIT")
            except Exception:
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
            v = m.version
        _add_run_config_columns(con)
        return v


def _add_run_config_columns(con: Any) -> None:
    """RunConfig fields added since the store was made become nullable columns of ``points``."""
    have = {r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'points'").fetchall()}
    for f, t in run_config_columns().items():
        if f not in have:
            con.execute(f'ALTER TABLE points ADD COLUMN "{f}" {t}')


@contextlib.contextmanager
def transaction(path: str | Path) -> Iterator[Any]:
    """The store opened for one transaction: committed and closed on exit, rolled back on an exception.

    The file is held only inside the block, so other writers and readers wait at most one transaction.
    """
    import duckdb

    with connect(path) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            # a failed COMMIT (a full disk) has ended the transaction already: the first error is the one to
            # report, not the ROLLBACK's "no transaction is active"
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise


def write_point(path: str | Path, point: dict[str, Any], stages: list[dict[str, Any]]) -> float:
    """Replace the point (and its stages) in one transaction; returns the seconds it took (open to close)."""
    t0 = time.perf_counter()
    with transaction(path) as con:
        con.execute("DELETE FROM stages WHERE point_id = ?", [point["point_id"]])
        con.execute("DELETE FROM points WHERE point_id = ?", [point["point_id"]])
        insert(con, "points", point)
        for st in stages:
            insert(con, "stages", {"point_id": point["point_id"], **st})
    return time.perf_counter() - t0


def write_sweep(path: str | Path, row: dict[str, Any]) -> None:
    with transaction(path) as con:
        con.execute("DELETE FROM sweeps WHERE sweep_id = ?", [row["sweep_id"]])
        insert(con, "sweeps", row)


def append_row(path: str | Path, table: str, columns: list[tuple[str, str]], row: dict[str, Any]) -> None:
    """One row of ``table`` (its ``columns`` as the migrations declare them) in its own transaction: columns
    missing from ``row`` are NULL, ``created_at`` is the commit's clock, dicts and lists are stored as JSON."""
    names = [n for n, _ in columns]
    marks = ", ".join("current_timestamp" if n == "created_at" else "?" for n in names)
    values = [_json_cell(row.get(n)) for n in names if n != "created_at"]
    with transaction(path) as con:
        con.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", values)


def _json_cell(v: Any) -> Any:
    return json.dumps(v, default=str) if isinstance(v, (dict, list)) else v


def insert(con: Any, table: str, row: dict[str, Any]) -> None:
    cols = list(row)
    vals = [json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in row.values()]
    con.execute(f'INSERT INTO {table} ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
                f'VALUES ({", ".join("?" for _ in cols)})', vals)


def done_points(path: str | Path) -> dict[str, str]:
    """point_id -> status of every point the store holds."""
    with connect(path, read_only=True) as con:
        check_version(con, path)
        return dict(con.execute("SELECT point_id, status FROM points").fetchall())


TABLES = ("points", "stages", "sweeps", "serving", "compile", "advice")


def read_table(path: str | Path, table: str = "points") -> Any:
    """A table of the store as a pandas DataFrame (read-only; waits out a writer's transaction).

    A table that a later migration adds reads as no rows from an older store (read-only: not migrated).
    """
    if table not in TABLES:
        raise ConfigError(f"unknown table {table!r}; the tables are {', '.join(TABLES)}", field="table")
    with connect(path, read_only=True) as con:
        check_version(con, path)
        have = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if table not in have and table in LATER_TABLES:
            cols = ", ".join(f"CAST(NULL AS {t}) AS {n}" for n, t in LATER_TABLES[table])
            return con.execute(f"SELECT {cols} LIMIT 0").df()
        return con.execute(f"SELECT * FROM {table}").df()


class SweepLock:
    """An exclusive lock on ``<store>.lock`` for one sweep's life; a second sweep is refused (exit 2)."""

    def __init__(self, store: str | Path) -> None:
        # the resolved path: a symlink (or another spelling) of a held store finds the same lock
        self.path = Path(os.path.realpath(store) + ".lock")
        self.store = Path(store)
        self.fd: int | None = None

    def __enter__(self) -> SweepLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            exc.filename = exc.filename or str(self.path)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigError(
                f"{self.store}: another sweep (pid {holder}) is writing this store; "
                "wait for it or give another -o", field="store",
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError as exc:  # a full disk: the lock is held but cannot name its holder
            os.close(fd)
            exc.filename = str(self.path)
            raise
        self.fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


__all__ = ["TABLES", "SweepLock", "check_version", "connect", "done_points", "insert", "migrate", "read_table",
           "schema_version", "transaction", "write_point", "write_sweep"]
