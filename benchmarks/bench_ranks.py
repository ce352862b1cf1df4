"""Multi-rank profiles (issue 17): imbalance, planner error, communication against the benchmark, shard-sim error.

Profiles RMC1 and RMC2 (scaled) at 2 ranks table-wise, column-wise and row-wise (a hand-built plan: the
planner has no row-wise kernel for CPU), and RMC1 at 4 ranks
once (on a 2-core host: planned oversubscription), each rank one torch thread, every run classified
against a machine file with the collective benchmark (``recstack machine --quick --collectives``).
Then shard-sim predicts each measured run from its own profile (same world size) and the 4-rank run
from the 2-rank table-wise profile, and the errors are printed. Each profile also carries the
collective pass's split of its communication (waiting for the last rank, transfer, other), the
transfer against the size-sweep benchmark at the collectives' own bytes and against the replay of the
model's own collectives (per phase and per collective, with the skewed and fresh-buffer replays that
say what the rest is), the shard-sim terms beside the measured split, and the planner's communication
estimate beside the replay (docs/distributed.md). Prints markdown tables; results go to --out as JSON.

    python benchmarks/bench_ranks.py --scale 0.01 --batch-size 256 --out /tmp/ranks-bench
    python benchmarks/bench_ranks.py --scale 0.001 --batch-size 32 --iters 4 --runs rmc1:table_wise:2 --out /tmp/x
    python benchmarks/bench_ranks.py --runs rmc1:table_wise:2,rmc1:column_wise:2 --placements os,pin --rounds 5 \
        --out /tmp/ab          # rank placement A/B, alternating
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

from recstack.cli import main
from recstack.distributed.simulate import compare, measured_costs, simulate
from recstack.outputs import atomic_write_text
from recstack.tree import Profile

RUNS = ["rmc1:table_wise:2", "rmc1:column_wise:2", "rmc1:row_wise:2", "rmc2:table_wise:2", "rmc2:column_wise:2",
        "rmc2:row_wise:2", "rmc1:table_wise:4"]


def _cli(argv: list[str]) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return main(argv)


def _machine(out: Path, world_sizes: str) -> Path:
    """A quick machine file with the collective benchmark (cached per host, measured once)."""
    path = out / "machine.json"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["machine", "--quick", "--collectives", "--world-sizes", world_sizes, "--json"])
    assert rc == 0
    data = json.loads(buf.getvalue())
    data.pop("counters", None)
    atomic_write_text(path, json.dumps(data))
    return path


def _profile(model: str, sharding: str, nproc: int, args: argparse.Namespace, machine: Path, out: Path,
             placement: str = "pin", tag: str = "") -> Path:
    path = out / f"{model}-{sharding}-{nproc}{tag}.json"
    rc = _cli(["profile", model, "--nproc", str(nproc), "--sharding", sharding, "--scale", str(args.scale),
               "--batch-size", str(args.batch_size), "--iters", str(args.iters), "--warmup", "5",
               "--op-iters", "3", "--mode", args.mode, "--machine", str(machine), "--rank-placement", placement,
               "-o", str(path), "--quiet"])
    assert rc == 0, f"{model} {sharding} {nproc} {placement}: exit {rc}"
    return path


def _placement_ab(runs: list[list[str]], args: argparse.Namespace, machine: Path, out: Path) -> str:
    """Each run with every --placements value in turn, --rounds times (alternating, so host drift hits every
    placement alike); per phase the medians over rounds and [min-max] of the per-round figures."""
    places = args.placements.split(",")
    got: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for rnd in range(args.rounds):
        for model, sharding, n in runs:
            for place in places:
                prof = Profile.load(_profile(model, sharding, int(n), args, machine, out, place, f"-{place}-{rnd}"))
                got.setdefault((model, sharding, n, place), []).append(_ab_figures(prof))
    head = ["| model | sharding | ranks | placement | phase | stage ms | collective ms | torchrec_overhead ms | "
            "in-model transfer ms | replay ms | skewed replay ms | transfer / replay [min-max] | "
            "transfer / size sweep [min-max] |", "|" + "---|" * 13]
    for (model, sharding, n, place), rounds in got.items():
        for phase in rounds[0]["phases"]:
            vals = [r["phases"].get(phase, {}) for r in rounds]
            head.append(f"| {model} | {sharding} | {n} | {place} | {phase} | " + " | ".join(
                _med(vals, k) for k in ("stage_s", "collective_s", "torchrec_overhead_s", "transfer_s", "replay_s",
                                        "replay_skewed_s")) + f" | {_spread(vals, 'ratio')} | "
                f"{_spread(vals, 'transfer_ratio')} |")
        steps = [r["step_s"] for r in rounds]
        head.append(f"| {model} | {sharding} | {n} | {place} | step (slowest rank) | "
                    f"{_med([{'x': s} for s in steps], 'x')} | | | | | | | |")
    head += ["", f"Paired by round: each placement over {places[0]} in the same round, median [min-max]:", "",
             "| model | sharding | ranks | placement | figure | ratio |", "|" + "---|" * 6]
    for model, sharding, n in runs:
        base = got[(model, sharding, n, places[0])]
        for place in places[1:]:
            other = got[(model, sharding, n, place)]
            pairs = {"step": [o["step_s"] / b["step_s"] for o, b in zip(other, base, strict=True)]}
            for phase in base[0]["phases"]:
                for key in ("stage_s", "collective_s", "transfer_s", "replay_s"):
                    xs = [o["phases"][phase][key] / b["phases"][phase][key] for o, b in zip(other, base, strict=True)
                          if o["phases"].get(phase, {}).get(key) and b["phases"].get(phase, {}).get(key)]
                    pairs[f"{phase} {key.removesuffix('_s')}"] = xs
            for fig, xs in pairs.items():
                head.append(f"| {model} | {sharding} | {n} | {place} / {places[0]} | {fig} | "
                            f"{_spread([{'x': x} for x in xs], 'x')} |")
    return "\n".join(head)


def _ab_figures(prof: Profile) -> dict[str, Any]:
    """Per phase of the critical rank: the stage and its split, the in-model transfer, replays, ratios."""
    dist = prof.extra["distributed"]
    rep = (dist.get("collective_replay") or {}).get("phases") or {}
    roof = {c["phase"]: c for c in dist.get("communication_roofline") or []}
    comm = prof.root.child("communication")
    out: dict[str, Any] = {}
    for ph in comm.children if comm is not None else []:
        parts = {c.name: c.time_s for c in ph.children}
        r = rep.get(ph.name, {})
        out[ph.name] = {"stage_s": ph.time_s, "collective_s": parts.get("collective"),
                        "torchrec_overhead_s": parts.get("torchrec_overhead"), "transfer_s": r.get("transfer_s"),
                        "replay_s": r.get("replay_s"), "replay_skewed_s": r.get("replay_skewed_s"),
                        "ratio": r.get("ratio"), "transfer_ratio": roof.get(ph.name, {}).get("transfer_ratio")}
    return {"phases": out, "step_s": max(r["time_s"] for r in dist["per_rank"])}


def _med(rows: list[dict[str, Any]], key: str) -> str:
    xs = sorted(r[key] for r in rows if r.get(key) is not None)
    return "-" if not xs else f"{xs[len(xs) // 2] * 1e3:.3f}"


def _spread(rows: list[dict[str, Any]], key: str) -> str:
    xs = sorted(r[key] for r in rows if r.get(key) is not None)
    return "-" if not xs else f"{xs[len(xs) // 2]:.2f} [{xs[0]:.2f}-{xs[-1]:.2f}]"


def _row(prof: Profile, machine: dict[str, Any]) -> dict[str, Any]:
    dist = prof.extra["distributed"]
    imb = dist["imbalance"]
    costs = measured_costs(prof)
    sim_sharding = dist["sharding"] if dist["sharding"] in ("table_wise", "column_wise", "row_wise") else "table_wise"
    pred = simulate(costs, dist["world_size"], sim_sharding, machine.get("collectives"))
    check = compare(pred, prof) or {"per_rank": []}
    return {
        "model": prof.run["model"], "sharding": dist["sharding"], "ranks": dist["world_size"],
        "oversubscribed": dist["oversubscribed"],
        "step_ms": [round(r["time_s"] * 1e3, 3) for r in dist["per_rank"]],
        "compute_ms": [round(r["compute_s"] * 1e3, 3) for r in dist["per_rank"]],
        "communication_ms": [round(r["communication_s"] * 1e3, 3) for r in dist["per_rank"]],
        "wait_ms": [round(r["wait_s"] * 1e3, 3) for r in dist["per_rank"]],
        "peer_wait_ms": [_ms(r.get("peer_wait_s")) for r in dist["per_rank"]],
        "transfer_ms": [_ms(r.get("transfer_measured_s")) for r in dist["per_rank"]],
        "other_ms": [_ms(r.get("communication_other_s")) for r in dist["per_rank"]],
        "sim_fixed_ms": _ms(pred.get("communication_fixed_s")),
        "imbalance": {"compute": imb["totals"].get("compute_s"), "embedding": imb["by_stage"].get("embedding"),
                      "communication": imb["totals"].get("communication_s"), "lookups": imb["totals"].get("lookups")},
        "planner_error": (dist.get("planner") or {}).get("error_by_sharding"),
        "planner_comm": (dist.get("planner") or {}).get("communication_by_rank"),
        "planner_bandwidth": [(dist.get("planner") or {}).get(k) for k in ("comms_bandwidth_bytes_per_s",
                                                                           "replay_bandwidth_bytes_per_s")],
        "replay": dist.get("collective_replay"),
        "sim_comm_model": pred.get("comm_model"),
        "communication_roofline": dist.get("communication_roofline"),
        "stage_pass_overhead": prof.overhead.get("stage_pass_ratio"),
        "stage_pass_overhead_per_rank": [r.get("stage_pass_ratio") for r in dist["per_rank"]],
        "comm_thread_cores": [r.get("comm_thread_cores") for r in dist["per_rank"]],
        "threads_waiting_cores": [r.get("waiting_cores") for r in dist["per_rank"]],
        "threads": [r.get("threads") for r in dist["per_rank"]],
        "forward_phases": _forward_phases(prof),
        "sim": check["per_rank"],
        "load": os.getloadavg(),
    }


def _forward_phases(prof: Profile) -> dict[str, Any]:
    """The critical rank's forward phases: time, where it comes from, the op pass's apportioning factor."""
    comm = prof.root.child("communication")
    return {ph.name: {k: ph.extra.get(k) for k in ("source", "measured_s", "moved_s", "apportion_factor")}
            | {"time_s": ph.time_s} for ph in (comm.children if comm is not None else [])
            if ph.name in ("input_dist", "output_dist")}


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1e3, 3)


def _tables(rows: list[dict[str, Any]], scaled: dict[str, Any] | None) -> str:
    out = ["| model | sharding | ranks | step ms per rank | compute ms | comm ms | wait ms | imbalance compute | "
           "imbalance embedding | planner measured/estimated |", "|" + "---|" * 10]
    for r in rows:
        pe = ", ".join(f"{k} {v:.2f}" for k, v in (r["planner_error"] or {}).items() if v) or "no planner (hand-built)"
        imb = r["imbalance"]
        out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']}{' (oversubscribed)' if r['oversubscribed'] else ''}"
                   f" | {r['step_ms']} | {r['compute_ms']} | {r['communication_ms']} | {r['wait_ms']} | "
                   f"{imb['compute'] or 0:.3f} | {imb['embedding'] or 0:.3f} | {pe} |")
    out += ["", "| model | sharding | ranks | waiting for the last rank ms | transfer ms | other ms | "
            "stage-pass overhead per rank | gloo threads' cores | threads waiting for a core |", "|" + "---|" * 9]
    r2 = (lambda vs: "-" if not vs or None in vs else "[" + ", ".join(f"{v:.2f}" for v in vs) + "]")  # noqa: E731
    for r in rows:
        out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']} | {r['peer_wait_ms']} | {r['transfer_ms']} | "
                   f"{r['other_ms']} | {r2(r['stage_pass_overhead_per_rank'])} | {r2(r['comm_thread_cores'])} | "
                   f"{r2(r['threads_waiting_cores'])} |")
    f = (lambda v, d=3: "-" if v is None else f"{v * 1e3:.{d}f}")  # noqa: E731
    x = (lambda v: "-" if v is None else f"{v:.2f}")  # noqa: E731
    us = (lambda v: "-" if v is None else f"{v * 1e6:.0f}")  # noqa: E731
    out += ["", "| model | sharding | ranks | phase | bytes | stage ms | size-sweep benchmark ms | stage/size sweep | "
            "waiting ms | transfer ms | other ms | size sweep at those bytes ms (kind) | transfer/size sweep | "
            "replay ms | transfer/replay | bound | collective ms | torchrec_overhead ms | collective/size sweep |",
            "|" + "---|" * 19]
    for r in rows:
        for c in r["communication_roofline"] or []:
            out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']} | {c['phase']} | {c['bytes']:.0f} | "
                       f"{f(c['measured_s'])} | {f(c['benchmark_s'])} | {c['ratio'] or 0:.1f} | {f(c.get('wait_s'))} | "
                       f"{f(c.get('transfer_s'))} | {f(c.get('other_s'))} | {f(c.get('transfer_benchmark_s'))} "
                       f"({(c.get('transfer_benchmark') or '-').removeprefix('size sweep: ')}) | "
                       f"{x(c.get('transfer_ratio'))} | {f(c.get('replay_s'))} | {x(c.get('replay_ratio'))} | "
                       f"{c['bound']} | {f(c.get('collective_s'))} | {f(c.get('torchrec_overhead_s'))} | "
                       f"{x(c.get('collective_ratio'))} |")
    out += ["", "Per collective (the timing pass's records, replayed bare; ms, medians over steps): in the model, "
            "replayed blocking, replayed with the model's compute gaps (skewed), replayed on fresh buffers; "
            "time inside the call in the model / replay", "",
            "| model | sharding | ranks | # | collective | phase | dtype | bytes | in model | replay | transfer/replay | "
            "skewed | fresh | issue model / replay |", "|" + "---|" * 14]
    for r in rows:
        for c in (r["replay"] or {}).get("per_collective", []):
            out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']} | {c['index']} | {c['collective']} | "
                       f"{c['phase']} | {c['dtype']} | {max(c['bytes']):.0f} | {f(c['transfer_s'])} | "
                       f"{f(c['replay_s'])} | {x(c['ratio'])} | {f(c.get('replay_skewed_s'))} | "
                       f"{f(c.get('replay_fresh_s'))} | {f(c.get('issue_s'))} / {f(c.get('replay_issue_s'))} |")
    out += ["", "Per phase: in-model transfer against the replay modes (ms):", "",
            "| model | sharding | ranks | phase | in model | replay blocking | issued together | skewed | fresh | "
            "transfer/replay |", "|" + "---|" * 10]
    for r in rows:
        for ph, c in ((r["replay"] or {}).get("phases") or {}).items():
            out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']} | {ph} | {f(c['transfer_s'])} | "
                       f"{f(c.get('replay_s'))} | {f(c.get('replay_issued_s'))} | {f(c.get('replay_skewed_s'))} | "
                       f"{f(c.get('replay_fresh_s'))} | {x(c.get('ratio'))} |")
        tot = (r["replay"] or {}).get("total")
        if tot:
            out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']} | all phases | {f(tot['transfer_s'])} | "
                       f"{f(tot['replay_s'])} | | | | {x(tot['ratio'])} |")
    out += ["", "| model | sharding | ranks | rank | step measured / predicted ms (error) | "
            "compute measured / predicted ms (error) | wait measured / predicted ms | "
            "transfer in model / predicted ms | sim fixed comm ms | comm model |", "|" + "---|" * 10]
    for r in rows:
        for s in r["sim"]:
            out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']} | {s['rank']} | "
                       f"{s['time_s_measured_s'] * 1e3:.3f} / {s['time_s_predicted_s'] * 1e3:.3f} "
                       f"({s['time_s_error']:+.0%}) | {s['compute_s_measured_s'] * 1e3:.3f} / "
                       f"{s['compute_s_predicted_s'] * 1e3:.3f} ({s['compute_s_error']:+.0%}) | "
                       f"{f(s.get('wait_measured_s'))} / {f(s.get('wait_predicted_s'))} | "
                       f"{f(s.get('transfer_measured_s'))} / {f(s.get('transfer_predicted_s'))} | "
                       f"{r['sim_fixed_ms']} | {r['sim_comm_model']} |")
    out += ["", "| model | sharding | ranks | rank | planner comm estimate us | at the replay's bandwidth us | "
            "replay ms | communication stage ms | planner GB/s | replay GB/s |", "|" + "---|" * 10]
    for r in rows:
        bw = [None if v is None else f"{v / 1e9:.2f}" for v in r["planner_bandwidth"]]
        for c in r["planner_comm"] or []:
            out.append(f"| {r['model']} | {r['sharding']} | {r['ranks']} | {c['rank']} | {c['estimated_s'] * 1e6:.2f} | "
                       f"{us(c.get('estimated_at_replay_bandwidth_s'))}"
                       f" | {f(c.get('replay_s'))} | {f(c['measured_s'])} | {bw[0]} | {bw[1]} |")
    if scaled:
        out += ["", f"shard-sim from the 2-rank table-wise RMC1 profile to 4 ranks: {scaled}"]
    return "\n".join(out)


def run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--mode", choices=["inference", "train"], default="inference")
    ap.add_argument("--runs", default=",".join(RUNS), help="model:sharding:ranks, comma-separated")
    ap.add_argument("--out", required=True)
    ap.add_argument("--placements", default="", help="A/B of --rank-placement, e.g. os,pin: alternate them "
                    "over --rounds rounds of --runs and print only that comparison")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = [r.split(":") for r in args.runs.split(",")]
    world_sizes = ",".join(sorted({n for _m, _s, n in runs}, key=int))
    machine_path = _machine(out, world_sizes)
    machine = json.loads(machine_path.read_text())
    if args.placements:
        print(_placement_ab(runs, args, machine_path, out))
        return 0
    rows, paths = [], {}
    for model, sharding, n in runs:
        path = _profile(model, sharding, int(n), args, machine_path, out)
        paths[(model, sharding, int(n))] = path
        rows.append(_row(Profile.load(path), machine))
        print(json.dumps(rows[-1]), flush=True)
    scaled = None
    if ("rmc1", "table_wise", 2) in paths and ("rmc1", "table_wise", 4) in paths:
        p2, p4 = Profile.load(paths[("rmc1", "table_wise", 2)]), Profile.load(paths[("rmc1", "table_wise", 4)])
        pred = simulate(measured_costs(p2), 4, "table_wise", machine.get("collectives"))
        meas = p4.extra["distributed"]["per_rank"]
        scaled = {"predicted_step_ms": round(pred["step_s"] * 1e3, 3),
                  "measured_step_ms": [round(r["time_s"] * 1e3, 3) for r in meas],
                  "predicted_compute_ms": sorted(round(r["compute_s"] * 1e3, 3) for r in pred["per_rank"]),
                  "measured_compute_ms": sorted(round(r["compute_s"] * 1e3, 3) for r in meas)}
    atomic_write_text(out / "bench_ranks.json", json.dumps({"rows": rows, "scaled": scaled}, indent=1))
    print(_tables(rows, scaled))
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
