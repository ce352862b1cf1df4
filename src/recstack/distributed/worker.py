"""One rank of a multi-rank profile: ``python -m recstack.distributed.worker SPEC.json`` under torchrun.

Every rank joins the gloo process group, builds the zoo model (or calls the
user's factory with ``rank``, ``world_size`` and ``device``), shards it with
DistributedModelParallel under the run's plan, runs the normal passes
(:func:`recstack.session.profile_module`) on its own batches and writes
``rank<R>.json`` (its profile) and ``rank<R>.info.json`` (its shards, one
batch's per-table figures, the planner's estimates) to the spec's folder. A
rank that fails writes ``rank<R>.error.json`` (its error) and exits non-zero;
torchrun then stops the others and the launcher reports the rank.

Every rank runs the same collectives in the same order: the passes and the
cost model run the step the same number of times everywhere, and the
hardware-counter replay (a per-host measurement that may be skipped) is off.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from recstack.hardware.placement import place_rank

NUM_BATCHES = 4  # distinct batches per rank, cycled by the passes


def main(argv: list[str]) -> int:
    from recstack.schema.documents import check
    from recstack.schema.launch_model import RankLaunchSpec

    spec = check(RankLaunchSpec, json.loads(Path(argv[0]).read_text()), source=argv[0])
    out = Path(spec["out_dir"])
    rank = int(os.environ["RANK"])
    try:
        _run_rank(spec, rank, int(os.environ["WORLD_SIZE"]), out)
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the launcher, then re-raised
        code = getattr(exc, "exit_code", 1)
        err = {"rank": rank, "error": f"{type(exc).__name__}: {exc}", "exit_code": code,
               "traceback": traceback.format_exc(limit=12)}
        from recstack.outputs import atomic_write_text

        # atomic: torchrun may stop this rank while it writes (a peer died first); a half file is never read
        atomic_write_text(out / f"rank{rank}.error.json", json.dumps(err))
        return code if isinstance(code, int) and code else 1
    return 0


def _run_rank(spec: dict[str, Any], rank: int, world_size: int, out: Path) -> None:
    import torch
    import torch.distributed as dist

    from recstack.config.run import RunConfig
    from recstack.hardware.contention import planned_processes

    cfg = RunConfig.build(spec["config"])
    torch.set_num_threads(cfg.threads or 1)
    placement = place_rank(cfg.rank_placement, int(os.environ.get("LOCAL_RANK", rank)),
                           int(os.environ.get("LOCAL_WORLD_SIZE", world_size)), cfg.threads or 1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=spec.get("collective_timeout_s", 600)))
    try:
        pids: list[Any] = [None] * world_size
        dist.all_gather_object(pids, os.getpid())
        siblings = [p for p in pids if p != os.getpid()] + [os.getppid()]  # the other ranks and torchrun's agent
        with planned_processes(siblings):  # the ranks' own load is planned, not contention
            prof, info = _profile_rank(cfg, rank, world_size, spec.get("trace"))
        info["placement"] = placement
        (out / f"rank{rank}.info.json").write_text(json.dumps(info))
        prof.save(out / f"rank{rank}.json")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _profile_rank(cfg: Any, rank: int, world_size: int, trace: str | None) -> tuple[Any, dict[str, Any]]:
    import torch
    import torch.distributed as dist
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel

    from recstack.distributed.sharding import make_plan, shards_of
    from recstack.usercode import is_factory

    device = "cpu"
    tables: list[dict[str, Any]] = []
    global_tables: list[dict[str, Any]] = []
    if is_factory(cfg.model or ""):
        model, batches, info = _factory_model(cfg, rank, world_size, device)
    else:
        model, batches, info, tables, global_tables = _zoo_model(cfg, rank, world_size)
    dense_bytes = _dense_param_bytes(model)
    if isinstance(model, DistributedModelParallel):
        dmp, plan, estimates = model, model.plan, []
    else:
        pooling = {t["table"]: t["pooling_factor"] for t in tables}
        plan, estimates = make_plan(model, cfg.sharding, world_size=world_size, batch_size=cfg.batch_size,
                                    pooling=pooling, device=device, pg=dist.GroupMember.WORLD)
        dmp = DistributedModelParallel(model, device=torch.device(device), plan=plan,
                                       sharders=[EmbeddingBagCollectionSharder()])
    dmp.supports_inference_mode = False  # FBGEMM's sharded lookups refuse inference tensors: no_grad instead
    info.update({"rank": rank, "world_size": world_size, "sharding": cfg.sharding})
    from recstack.distributed.collective_timing import waits_recorded
    from recstack.distributed.comm_regions import TorchRecCommRegions
    from recstack.distributed.ranks import rank_trace

    regions = TorchRecCommRegions()  # the forward distribution timed as stages of their own
    try:
        with waits_recorded():  # the op pass sees the rank blocked in each collective's wait
            prof = _profile(dmp, batches, cfg, info, rank_trace(trace, rank) if trace else None, regions)
    finally:
        regions.close()
    timing = _time_collectives(dmp, batches, cfg)  # a collective pass: every rank runs it
    rank_info = {"collective_timing": timing if rank == 0 else None, "rank": rank, "shards": shards_of(plan, rank), "tables": tables, "global_tables": global_tables,
                 "planner_estimates": estimates, "threads": torch.get_num_threads(),
                 "dense_param_bytes": dense_bytes, "batch_size": cfg.batch_size}
    return prof, rank_info


def _time_collectives(model: Any, batches: list[Any], cfg: Any) -> dict[str, Any] | None:
    """Every rank's collectives timed on their own (:mod:`recstack.distributed.collective_timing`); every rank
    runs it, rank 0 keeps the split (None: the ranks' collectives did not line up)."""
    from recstack.distributed.collective_timing import split, time_collectives
    from recstack.profiling.runner import ProfileOptions, Step

    records = time_collectives(Step(model, ProfileOptions(cfg), None), batches)
    try:
        timing = split(records)
    except ValueError:
        return None
    timing["replay"] = _replay(records)
    return timing


def _replay(records: list[Any]) -> dict[str, Any] | None:
    """The pass's collectives replayed bare on every rank (:mod:`recstack.distributed.replay`)."""
    import torch.distributed as dist

    from recstack.distributed.replay import MODES, REPEATS, compare, replay, skew

    rank = dist.get_rank()
    delays = skew(records, rank)
    try:  # every rank records the same kinds, so a kind with no replay fails on every rank, before any call
        replays = {m: replay(records[rank], m, delays=delays if m == "skewed" else None) for m in MODES}
    except ValueError:
        return None
    return {"repeats": REPEATS, **compare(records, replays)}


def _dense_param_bytes(model: Any) -> int:
    """Bytes of the parameters outside every TorchRec embedding collection: what DDP all-reduces."""
    from torchrec.modules.embedding_modules import EmbeddingBagCollection, EmbeddingCollection

    sparse = {id(p) for m in model.modules() if isinstance(m, (EmbeddingBagCollection, EmbeddingCollection))
              for p in m.parameters()}
    return sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in sparse and p.requires_grad)


def _profile(model: Any, batches: list[Any], cfg: Any, info: dict[str, Any], trace: str | None,
             regions: Any) -> Any:
    """The normal passes on this rank (as :func:`recstack.session.profile_module`, without the counter replay)."""
    from recstack.hardware.machine import machine_with_file
    from recstack.profiling.rules import rules_of
    from recstack.profiling.runner import ProfileOptions, profile_model

    rules = rules_of(cfg.stage_rules)
    machine, machine_file = machine_with_file(cfg.machine)
    run_info = {**info, "config": cfg.model_dump(mode="json"), "config_key": cfg.key()}
    opts = ProfileOptions(cfg, stage_rules=rules, machine=machine, machine_file=machine_file, run_info=run_info,
                          counters=False, trace_path=trace, regions=regions)
    return profile_model(model, batches, opts, batch_size=cfg.batch_size)


def _zoo_model(cfg: Any, rank: int, world_size: int) -> tuple[Any, list[Any], dict[str, Any], list[Any], list[Any]]:
    """The zoo model (TorchRec backend), this rank's own batches (batch indices rank*4 ... rank*4+3), the
    per-table figures of its first batch and of the global batch (every rank's first batch together)."""
    from recstack.workload import bind
    from recstack.zoo.build import build_for_run
    from recstack.zoo.embedding import table_stats

    net, spec = build_for_run(cfg, backend="torchrec")
    bound = bind(spec, net.features(), net.num_dense, net.num_tasks)
    batches = [bound.batch(cfg.batch_size, rank * NUM_BATCHES + i) for i in range(NUM_BATCHES)]
    tables = table_stats(net.sparse_arch, batches[0], table_dtype=cfg.table_dtype)
    global_tables = _global_table_stats(net.sparse_arch, [bound.batch(cfg.batch_size, r * NUM_BATCHES)
                                                          for r in range(world_size)])
    info = {"model": net.cfg.name, "backend": "torchrec", "table_dtype": cfg.table_dtype, "scale": net.cfg.scale,
            "workload": cfg.workload, "model_config": net.cfg.model_dump(), "workload_config": bound.describe()}
    return net, batches, info, tables, global_tables


def _global_table_stats(backend: Any, batches: list[Any]) -> list[dict[str, Any]]:
    """Lookups and distinct rows per table over several ranks' batches together (what a sharded table serves)."""
    import torch

    out = []
    for t in backend.tables:
        ids = torch.cat([backend._hashed(b, t)[0] for b in batches])
        out.append({"table": t.name, "lookups": int(ids.numel()), "unique_rows": int(torch.unique(ids).numel())})
    return out


def _factory_model(cfg: Any, rank: int, world_size: int, device: str) -> tuple[Any, list[Any], dict[str, Any]]:
    """The user's ``factory(batch_size, seed, *, rank, world_size, device)``, called after the group is up;
    its ``batch_fn(i)`` gives this rank's batch ``i`` (or it returns a list of batches)."""
    from recstack.usercode import call_user, load_factory, name_of

    factory = load_factory(cfg.model)
    bound = functools.partial(factory, rank=rank, world_size=world_size, device=device)
    model, batch_fn = call_user(bound, cfg.batch_size, cfg.seed, what=f"your factory {cfg.model}")
    what = f"your batch function {name_of(batch_fn)}"
    batches = list(batch_fn) if isinstance(batch_fn, list) else [call_user(batch_fn, i, what=what)
                                                                  for i in range(NUM_BATCHES)]
    return model, batches, {"model": cfg.model, "backend": "user"}


if __name__ == "__main__":
    from recstack.hardware.torchrun import exit_rank

    exit_rank(main(sys.argv[1:]))  # not sys.exit: gloo can abort a finished rank at interpreter teardown
