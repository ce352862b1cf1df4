"""`recstack best` and the sweep report read the store's `advice` table: real DuckDB files written by the
store's own writers (sweep points, `recstack.advisor.store.write_advice`), no measuring."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from recstack.cli import main
from recstack.config.run import RunConfig
from recstack.store import db, migrations

EVIL = "</script><img src=x onerror=alert(1)>"
HOST = socket.gethostname()  # what write_advice records


def _point(i: int, batch: int, throughput: float, host: str = HOST) -> dict:
    cfg = RunConfig(model="rmc1", scale=0.01, batch_size=batch, workload="uniform")
    return {"point_id": f"p{i}", "config_hash": f"h{i}", "sweep_id": "s1", "recstack_version": "t", "host": host,
            "status": "ok", "contended": False, "throughput": throughput, "step_p50_s": batch / throughput,
            "step_p99_s": 1.2 * batch / throughput, **cfg.model_dump(mode="json")}


def _lever(name: str, change: dict, speedup: float, what_if_s: float, **extra: object) -> dict:
    step = {"speedup": speedup, "interval": [speedup * 0.9, speedup * 1.1], "verdict": "improvement",
            "base_s": what_if_s * speedup, "what_if_s": what_if_s}
    return {"name": name, "kind": "batch_size", "stage": "step", "change": change, "options": {},
            "exact_change": f"--{name}", "recommended": True, "reason": "beyond noise", "step": step,
            "stage_result": {"speedup": speedup}, "build_s": 0.1, "within_tolerance": None,
            "resident": {"baseline_bytes": 1, "what_if_bytes": 1}, **extra}


def _advice(ranking: list[dict], scale: float = 0.01) -> dict:
    base = RunConfig(model="rmc1", scale=scale, batch_size=256, workload="uniform").model_dump(mode="json")
    return {"model": "rmc1", "baseline": base, "goal": "throughput", "tolerance": 0.01, "contended": False,
            "winner": ranking[0]["name"], "ranking": ranking}


def _store(path: Path, *, with_advice: bool = True) -> Path:
    """rmc1 at batch 64 (10k samples/s) and 256 (20k/s); advice: batch 1024 measured at 30k/s (the best),
    batch 512 at 25k/s, and three what-ifs that must not be ranked (another scale, another host, contended)."""
    from recstack.advisor.store import write_advice

    db.migrate(path)
    for i, (b, t) in enumerate([(64, 10e3), (256, 20e3)]):
        db.write_point(path, _point(i, b, t), [])
    if not with_advice:
        return path
    write_advice(_advice([_lever("batch_size=1024", {"batch_size": 1024}, 1.5, 1 / 30e3),
                          _lever("batch_size=512", {"batch_size": 512}, 1.25, 1 / 25e3, exact_change=EVIL)]), path)
    write_advice(_advice([_lever("batch_size=2048", {"batch_size": 2048}, 9.0, 1 / 90e3)], scale=0.5), path)
    write_advice(_advice([_lever("batch_size=4096", {"batch_size": 4096}, 9.0, 1 / 90e3)]), path)
    write_advice(_advice([_lever("batch_size=8192", {"batch_size": 8192}, 9.0, 1 / 90e3)]), path)
    with db.connect(path) as con:
        con.execute("UPDATE advice SET host = 'elsewhere' WHERE name = 'batch_size=4096'")
        con.execute("UPDATE advice SET contended = true WHERE name = 'batch_size=8192'")
    return path


def _cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    rc = main(["--quiet", *args])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_best_ranks_comparable_what_ifs_beside_the_points_and_says_so(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    store = _store(tmp_path / "results.duckdb")
    rc, out = _cli(capsys, "best", str(store), "--json")
    assert rc == 0, out
    (row,) = json.loads(out)
    top = row["best"]
    assert top["source"] == "advise" and top["lever"] == "batch_size=1024" and top["batch_size"] == 1024
    assert top["throughput"] == pytest.approx(30e3) and top["step_p50_s"] == pytest.approx(1024 / 30e3)
    assert top["advice_id"] in top["from"] and top["what_if_config"]["batch_size"] == 1024
    assert row["speedup_vs_worst"] == pytest.approx(3.0)  # over the sweep's 10k/s point
    assert row["advice_ranked"] == 2 and row["advice_rows"] == 5
    left = row["advice_left_out"]
    assert left["contended"] == 1 and left["another host (elsewhere)"] == 1
    assert left["scale 0.5, workload uniform, mode inference: not in the sweep"] == 1
    rc, out = _cli(capsys, "best", str(store))
    assert rc == 0 and "advise " + top["advice_id"] + ": batch_size=1024" in out and "the best is advise run" in out
    # a sweep point better than every comparable what-if stays the best, and says it is a sweep point
    db.write_point(store, _point(2, 1024, 40e3), [])
    rc, out = _cli(capsys, "best", str(store), "--json")
    (row,) = json.loads(out)
    assert row["best"]["source"] == "sweep" and row["best"]["from"] == "sweep s1, point p2"


def test_a_store_without_the_advice_table_still_ranks_and_reports(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    store = tmp_path / "v3.duckdb"
    later = migrations.MIGRATIONS[3:]
    del migrations.MIGRATIONS[3:]
    try:
        _store(store, with_advice=False)
    finally:
        migrations.MIGRATIONS.extend(later)
    rc, out = _cli(capsys, "best", str(store), "--json")
    assert rc == 0, out
    (row,) = json.loads(out)
    assert row["best"]["source"] == "sweep" and row["best"]["batch_size"] == 256 and row["advice_rows"] == 0
    assert _cli(capsys, "sweep-report", str(store), "-o", str(tmp_path / "r.html"))[0] == 0
    with db.connect(store, read_only=True) as con:
        assert db.schema_version(con) == 3  # readers do not migrate


def test_sweep_report_lists_the_advice_rows_as_text(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = _store(tmp_path / "results.duckdb")
    page = tmp_path / "sweep.html"
    assert _cli(capsys, "sweep-report", str(store), "-o", str(page))[0] == 0
    text = page.read_text()
    assert EVIL not in text  # escaped inside the embedded JSON, drawn as text by the page
    data = re.search(r'<script type="application/json" id="recstack-data">(.*?)</script>', text, re.S)
    figs = json.loads(data.group(1))["figures"]
    names = [(r["name"], r["rank"]) for r in figs["advice"]]
    assert len(names) == 5 and ("batch_size=1024", 1) in names and ("batch_size=512", 2) in names
    assert next(r for r in figs["advice"] if r["rank"] == 2 and r["name"] == "batch_size=512")["exact_change"] == EVIL
    assert figs["best"][0]["best"]["source"] == "advise"


from test_report import _open, browser  # noqa: E402,F401  (the headless Chromium fixture and page checks)


def test_sweep_report_draws_the_advice_section(tmp_path: Path, browser, capsys: pytest.CaptureFixture) -> None:  # noqa: F811
    store = _store(tmp_path / "results.duckdb")
    page = tmp_path / "sweep.html"
    assert _cli(capsys, "sweep-report", str(store), "-o", str(page))[0] == 0
    _open(browser, page)  # no script error, no alert: the hostile reason stays text
    q = browser.execute_script
    rows = q("return [...document.querySelectorAll('#advice-table tbody tr')].map(r => r.cells[3].textContent)")
    assert len(rows) == 5 and "batch_size=1024 (winner)" in rows
    assert EVIL in q("return document.getElementById('advice-table').textContent")
    assert q("return document.querySelector('#best-table tbody tr').cells[7].textContent").startswith("advise ")
