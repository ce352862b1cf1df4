"""A multi-rank profile: launch the ranks, then gather their trees into one Profile.

The gathered profile:

* ``ranks``: one entry per rank (``rank``, ``root``: that rank's whole tree,
  ``shards``: the shards it holds with their lookups and bytes);
* ``root``: the critical path: the tree of the rank the others wait for, the
  one with the most compute (run time minus communication) per step. Ranks
  synchronise every step in their collectives, so every rank's step takes
  about as long; what differs is how much of it is compute and how much is
  waiting, and the slowest rank's compute is the step's critical path;
* every tree has a stage ``communication`` (:mod:`recstack.distributed.communication`);
* ``distributed``: world size, sharding, per-rank figures, imbalance and the
  planner's estimates against the measurement (:mod:`recstack.distributed.imbalance`);
* the rest (run, environment, overhead, cost model, memory, machine,
  findings) is the critical rank's; ``embedding_tables`` is rank 0's batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recstack.config.run import RunConfig, usable_cores
from recstack.distributed.collective_timing import stage_split, transfer_vs_benchmark
from recstack.distributed.comm_model import classify, phase_messages
from recstack.distributed.communication import MEASURED_PREFIX, split_communication
from recstack.distributed.imbalance import (
    imbalance,
    per_rank_figures,
    planner_vs_measured,
    shard_figures,
    thread_figures,
)
from recstack.distributed.launch import DEFAULT_TIMEOUT_S, run_ranks
from recstack.distributed.sharding import check_sharding
from recstack.errors import ConfigError
from recstack.render import progress
from recstack.tree import Node, Profile


def prepare(cfg: RunConfig, factory: bool) -> RunConfig:
    """Checks before any rank starts; a zoo model runs on the TorchRec backend (the one DMP shards).

    ``factory``: the model is a user's ``package.module:factory``."""
    if not factory:
        if "backend" in cfg.model_fields_set and cfg.backend != "torchrec":
            raise ConfigError(f"--nproc > 1 shards TorchRec tables; use torchrec (got {cfg.backend})",
                              field="backend")
        if cfg.table_dtype != "fp32":
            raise ConfigError("sharded runs use fp32 tables (TorchRec's CPU kernels)", field="table_dtype")
        if cfg.dtype != "fp32":
            raise ConfigError("sharded runs compute in fp32", field="dtype")
        from recstack.zoo import resolve_config

        names = [t.name for t in resolve_config(cfg.model, cfg.scale, cfg.tasks).resolved_tables()]
        check_sharding(cfg.sharding, names, cfg.nproc)
        cfg = cfg.updated(backend="torchrec")
    else:
        check_sharding(cfg.sharding, None, cfg.nproc)
    return cfg


def profile_ranks(cfg: RunConfig, *, factory: bool = False, trace: str | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> Profile:
    """Run ``cfg.nproc`` ranks and gather them (see the module docstring); ``trace``: every rank writes its
    op pass's trace to :func:`rank_trace` of it."""
    cfg = prepare(cfg, factory)
    with progress.phase(f"{cfg.nproc} ranks (torchrun, gloo)"):
        profiles, infos = run_ranks(cfg.model_dump(mode="json"), cfg.nproc, timeout_s=timeout_s, trace=trace)
    return gather(cfg, profiles, infos)


def rank_trace(trace: str, rank: int) -> str:
    """Rank ``rank``'s trace file for ``--trace trace``: ``out.json`` -> ``out.rank1.json``."""
    p = Path(trace)
    return str(p.with_name(f"{p.stem}.rank{rank}{p.suffix}"))


def gather(cfg: RunConfig, profiles: list[dict[str, Any]], infos: list[dict[str, Any]]) -> Profile:
    profs = [Profile.from_dict(p, source=f"rank {r}") for r, p in enumerate(profiles)]
    for p in profs:
        split_communication(p.root)
        _drop_phase_findings(p)
    g_tables = {t["table"]: t for t in infos[0].get("global_tables", [])}
    shards = [shard_figures(info["shards"], {t["table"]: t for t in info.get("tables", [])}, g_tables)
              for info in infos]
    roots = [p.root for p in profs]
    per_rank = per_rank_figures(roots, shards)
    for pr, p in zip(per_rank, profs, strict=True):  # each rank's own profiler overhead (its timing pass)
        pr["stage_pass_ratio"] = p.overhead.get("stage_pass_ratio")
        pr.update(thread_figures((p.environment.get("contention") or {}).get("own_threads")))
    timing = next((i["collective_timing"] for i in infos if i.get("collective_timing")), None)
    split = stage_split(timing, roots) if timing else None
    for pr, root, sp in zip(per_rank, roots, split or [None] * len(per_rank), strict=True):
        if sp:
            _collective_pass_figures(root, sp)
        for key, field in (("peer_wait_s", "wait_s"), ("transfer_measured_s", "transfer_s")):
            vals = [ph[field] for ph in sp["phases"].values() if ph[field] is not None] if sp else []
            pr[key] = sum(vals) if vals else None
        pr["communication_other_s"] = None if pr["transfer_measured_s"] is None else max(
            0.0, pr["communication_s"] - pr["transfer_measured_s"] - max(pr["peer_wait_s"] or 0.0, pr["wait_s"]))
    crit = max(range(len(profs)), key=lambda r: per_rank[r]["compute_s"])
    top = profs[crit]
    estimates = next((i["planner_estimates"] for i in infos if i.get("planner_estimates")), [])
    phases = _phase_messages(cfg, shards[crit], infos[crit])
    cores = usable_cores()
    threads = sum(int(i.get("threads", 1)) for i in infos)
    top.ranks = [{"rank": r, "root": roots[r].to_dict(), "shards": shards[r]} for r in range(len(profs))]
    top.root = _copy(roots[crit])
    top.run = {**top.run, "nproc": cfg.nproc, "sharding": cfg.sharding, "critical_rank": crit}
    top.run.pop("rank", None)
    top.run.pop("world_size", None)
    top.distributed = {
        "world_size": cfg.nproc,
        "sharding": cfg.sharding,
        "backend": "gloo",
        "critical_rank": crit,
        "threads_per_rank": [int(i.get("threads", 1)) for i in infos],
        "placement": [{"rank": r, **i["placement"]} if i.get("placement") else None for r, i in enumerate(infos)],
        "dense_param_bytes": int(infos[0].get("dense_param_bytes", 0)),
        "oversubscribed": threads > cores,
        "oversubscription_note": (f"{threads} rank threads on {cores} usable cores: planned oversubscription, "
                                  "times include waiting for a core" if threads > cores else None),
        "per_rank": per_rank,
        "imbalance": imbalance(per_rank),
        "planner": planner_vs_measured(roots, shards, estimates, cfg.mode == "train"),
        "communication_bytes": {p: float(sum(m)) for p, m in phases.items()},
        "communication_messages": phases,
        "communication_roofline": _comm_roofline(cfg, roots[crit], phases, timing, split[crit] if split else None),
        "collective_split": None if timing is None else {
            "steps": timing["steps"], "per_rank": split,
            "method": "collective timing pass: each collective's start and finish on every rank "
                      "(time.perf_counter, one clock per host); wait = start until the last rank's start, "
                      "transfer = then until it finished; other = the stage's time beyond both (see "
                      "docs/distributed.md)"},
        "collective_replay": None if timing is None else timing.get("replay"),
    }
    _planner_communication(top.distributed, estimates)
    if top.embedding_tables is None and infos[0].get("tables"):
        top.embedding_tables = infos[0]["tables"]
    return top


def _collective_pass_figures(root: Node, split: dict[str, Any]) -> None:
    """Each phase's ``collective`` node gets the collective pass's waiting and transfer of that phase beside its
    own op-pass time (the two passes differ: that one makes every collective blocking)."""
    comm = root.child("communication")
    for phase in comm.children if comm is not None else []:
        node, got = phase.child("collective"), split["phases"].get(phase.name)
        if node is not None and got is not None and got.get("wait_s") is not None:
            node.collective_pass_wait_s = got["wait_s"]
            node.collective_pass_transfer_s = got["transfer_s"]


def _planner_communication(dist: dict[str, Any], estimates: list[dict[str, Any]]) -> None:
    """The planner's communication estimate beside the measurement, with why they differ: the bandwidth it
    assumed (TorchRec's default intra-host figure, whatever the compute device) against the replay's
    (the model's own collectives, bytes / time), and its estimate re-scaled to the replay's bandwidth
    (what is left is the per-collective latency the planner does not model)."""
    planner, rep = dist.get("planner"), dist.get("collective_replay")
    assumed = next((e.get("comms_bandwidth_bytes_per_s") for e in estimates), None)
    if not planner or not assumed:
        return
    replay_s = rep["total"]["replay_s"] if rep else 0.0
    replay_bytes = float(sum(max(r["bytes"]) for r in rep["per_collective"])) if rep else 0.0
    measured_bw = replay_bytes / replay_s if replay_s > 0 else None
    planner["comms_bandwidth_bytes_per_s"] = assumed
    planner["replay_bandwidth_bytes_per_s"] = measured_bw
    for row in planner["communication_by_rank"]:
        row["replay_s"] = replay_s or None
        row["estimated_at_replay_bandwidth_s"] = row["estimated_s"] * assumed / measured_bw if measured_bw else None
    planner["communication_note"] = (
        f"units agree (TorchRec's perf is in ms, converted to s); the planner assumes {assumed / 1e9:.0f} GB/s "
        "between ranks of one host (its default intra-host bandwidth, a GPU interconnect figure, used for compute "
        "device cpu too) and no per-collective latency" + (
            f"; the replay of this run's collectives moved {measured_bw / 1e9:.2f} GB/s" if measured_bw else ""))


def _phase_messages(cfg: RunConfig, shards: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, list[float]]:
    """The collectives of each communication phase of the rank, as bytes (computed: distributed.comm_model)."""
    return phase_messages(local_lookups=sum(t["lookups"] for t in info.get("tables", [])),
                       tables=len(info.get("tables", [])), batch_size=int(info.get("batch_size", cfg.batch_size)),
                       world_size=cfg.nproc,
                       output_columns=sum(s.get("columns", 0) for s in shards if not s.get("replica")),
                       dense_param_bytes=float(info.get("dense_param_bytes", 0)), train=cfg.mode == "train")


def _comm_roofline(cfg: RunConfig, root: Node, phases: dict[str, list[float]], timing: dict[str, Any] | None,
                   split: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The critical rank's communication phases against the machine's collective benchmark, if it has one:
    the whole phase (modelled bytes) and, where the collective pass timed it, its transfer alone (the
    collectives' own bytes) with the rank's waiting and other time beside it."""
    from recstack.hardware.machine import machine_with_file

    machine, _file = machine_with_file(cfg.machine)
    collectives = (machine or {}).get("collectives")
    comm = root.child("communication")
    if not collectives or comm is None:
        return None
    rows = classify(phases, {c.name: c.time_s for c in comm.children}, collectives, cfg.nproc)
    measured = transfer_vs_benchmark(timing, collectives, cfg.nproc) if timing else {}
    for row in rows or []:
        got = measured.get(row["phase"], {})
        mine = (split or {}).get("phases", {}).get(row["phase"], {})
        phase = comm.child(row["phase"])
        parts = {c.name: c.time_s for c in phase.children} if phase is not None else {}
        bench = got.get("transfer_benchmark_s")
        row.update({"collective_s": parts.get("collective"), "torchrec_overhead_s": parts.get("torchrec_overhead"),
                    "collective_ratio": parts["collective"] / bench if bench and "collective" in parts else None})
        row.update({"transfer_s": got.get("transfer_s"), "transfer_bytes": got.get("bytes"),
                    "transfer_collectives": got.get("collectives"),
                    "transfer_benchmark_s": got.get("transfer_benchmark_s"),
                    "transfer_ratio": got.get("transfer_ratio"),
                    "transfer_benchmark": got.get("transfer_benchmark"), "replay_s": got.get("replay_s"),
                    "replay_ratio": got.get("replay_ratio"), "wait_s": mine.get("wait_s"),
                    "other_s": mine.get("other_s")})
    return rows


def _drop_phase_findings(prof: Profile) -> None:
    """The rank's analyses classified its timed communication phases as stages against the compute roofs;
    gathered, they are phases of ``communication``, which its own roofline classifies: those findings go."""
    findings = prof.findings
    if isinstance(findings, list):
        prof.findings = [f for f in findings if not (isinstance(f, dict) and str(
            f.get("stage", "")).startswith(MEASURED_PREFIX))]


def _copy(node: Node) -> Node:
    return Node.from_dict(node.to_dict())
