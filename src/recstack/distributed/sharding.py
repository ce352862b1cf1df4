"""The sharding plan of a multi-rank run: one sharding type for every table, TorchRec's planner, or a plan file.

* a sharding type (``table_wise``, ``column_wise``, ...): TorchRec's
  ``EmbeddingShardingPlanner`` restricted to that type for every table (it
  also places the shards and estimates their cost);
* ``auto``: the planner with no restriction;
* ``row_wise`` and ``table_row_wise`` on CPU: the planner offers no kernel for
  them there, so the plan is built by hand for every table (as a plan file would);
* a plan YAML: per table its sharding type and ranks, built with
  ``torchrec.distributed.sharding_plan`` (no planner, so no estimates)::

      tables:
        t_0: {sharding: table_wise, ranks: [1]}
        t_1: {sharding: column_wise, ranks: [0, 1]}
        t_2: {sharding: row_wise}            # all ranks
        t_3: {sharding: data_parallel}

The planner's estimates (per shard: perf in seconds, split into forward and
backward compute and communication; storage in bytes) are returned with the
plan so that the run can set them beside its measurements.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recstack.config.loading import load_yaml_file, parse_config
from recstack.config.run import SHARDING_TYPES
from recstack.errors import ConfigError

# TorchRec's planner offers no row-wise kernel for compute device cpu ("No available sharding type and
# compute kernel combination"), but the sharded modules run row-wise on CPU and gloo: these types get a
# plan built by hand for every table (no planner, so no estimates).
HAND_BUILT_ON_CPU = ("row_wise", "table_row_wise")


RANKS_IGNORED = ("row_wise", "table_row_wise", "data_parallel")  # sharding types whose placement is fixed


class TablePlan(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sharding: Literal["table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel"] = Field(
        description="sharding type of this table")
    ranks: list[int] | None = Field(None, description="ranks holding it (table_wise: one; column_wise: "
                                    "one per column shard; default: rank 0 / all ranks)")


class PlanFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    tables: dict[str, TablePlan] = Field(description="table name -> its sharding")


def load_plan_file(path: str) -> PlanFile:
    return parse_config(PlanFile, load_yaml_file(path), source=path)


def check_sharding(sharding: str, tables: list[str] | None, world_size: int) -> None:
    """Refuse what cannot run before any rank starts: unknown tables, ranks out of range."""
    if sharding in SHARDING_TYPES or sharding == "auto":
        return
    plan = load_plan_file(sharding)
    for name, tp in plan.tables.items():
        if tables is not None and name not in tables:
            raise ConfigError(f"table {name!r} is not in the model (tables: {', '.join(tables or [])})",
                              source=sharding, field=f"tables.{name}")
        bad = [r for r in tp.ranks or [] if not 0 <= r < world_size]
        if bad:
            raise ConfigError(f"rank {bad[0]} is outside 0..{world_size - 1} (--nproc {world_size})",
                              source=sharding, field=f"tables.{name}.ranks")
        if tp.sharding == "table_wise" and tp.ranks is not None and len(tp.ranks) != 1:
            raise ConfigError("table_wise takes exactly one rank", source=sharding, field=f"tables.{name}.ranks")
        if tp.sharding in RANKS_IGNORED and tp.ranks is not None:  # would be silently dropped
            raise ConfigError(f"{tp.sharding} places the table on every rank and takes no ranks; drop ranks "
                              "(or use table_wise / column_wise to choose them)", source=sharding,
                              field=f"tables.{name}.ranks")


def _generator(tp: TablePlan, world_size: int) -> Any:
    from torchrec.distributed import sharding_plan as sp

    if tp.sharding == "table_wise":
        return sp.table_wise(rank=(tp.ranks or [0])[0])
    if tp.sharding == "column_wise":
        return sp.column_wise(ranks=tp.ranks or list(range(world_size)))
    if tp.sharding == "row_wise":
        return sp.row_wise()
    if tp.sharding == "table_row_wise":
        return sp.table_row_wise(host_index=0)
    return sp.data_parallel()


def make_plan(model: Any, sharding: str, *, world_size: int, batch_size: int, pooling: dict[str, float],
              device: str, pg: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The ShardingPlan for ``model`` (collective: every rank calls it) and the planner's per-shard estimates.

    ``pooling``: mean lookups per sample of each table (the planner's pooling factors; a user's model may
    give none).
    """
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan
    from torchrec.distributed.types import ShardingPlan

    sharder = EmbeddingBagCollectionSharder()
    ebc_path, ebc = _find_ebc(model)
    names = [c.name for c in ebc.embedding_bag_configs()]
    if sharding in HAND_BUILT_ON_CPU and device == "cpu":
        plan_file = PlanFile(tables={name: TablePlan(sharding=sharding) for name in names})
    elif sharding not in SHARDING_TYPES and sharding != "auto":
        plan_file = load_plan_file(sharding)
    else:
        plan_file = None
    if plan_file is not None:
        per_param = {name: _generator(tp, world_size) for name, tp in plan_file.tables.items()}
        for name in names:  # tables a plan file does not list are data parallel
            per_param.setdefault(name, _generator(TablePlan(sharding="data_parallel"), world_size))
        module_plan = construct_module_sharding_plan(ebc, per_param, sharder=sharder, local_size=world_size,
                                                     world_size=world_size, device_type=device)
        return ShardingPlan({ebc_path: module_plan}), []
    only = None if sharding == "auto" else [sharding]
    constraints = {t: ParameterConstraints(sharding_types=only, pooling_factors=[max(pf, 1e-3)])
                   for t, pf in pooling.items()}
    topology = Topology(world_size=world_size, compute_device=device)
    planner = EmbeddingShardingPlanner(topology=topology, batch_size=batch_size, constraints=constraints)
    plan = planner.collective_plan(model, [sharder], pg)
    bandwidth = float(topology.comms_bandwidths.intra_host_bw) * 1e3  # TorchRec's bytes/ms, as bytes/s
    return plan, [{**e, "comms_bandwidth_bytes_per_s": bandwidth}
                  for e in _estimates(getattr(planner, "_best_plan", None) or [])]


def _find_ebc(model: Any) -> tuple[str, Any]:
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    for path, mod in model.named_modules():
        if isinstance(mod, EmbeddingBagCollection):
            return path, mod
    raise ConfigError("the model has no TorchRec EmbeddingBagCollection to shard; use --backend torchrec",
                      field="backend")


def _estimates(best_plan: list[Any]) -> list[dict[str, Any]]:
    """The planner's per-shard estimates: perf (ms in TorchRec) as seconds, storage in bytes."""
    out = []
    for opt in best_plan:
        for sh in opt.shards:
            perf, storage = sh.perf, sh.storage
            out.append({
                "table": opt.name,
                "sharding": str(opt.sharding_type),
                "compute_kernel": str(opt.compute_kernel),
                "rank": sh.rank,
                "size": list(sh.size),
                "offset": list(sh.offset),
                "fwd_compute_s": perf.fwd_compute * 1e-3 if perf else None,
                "fwd_comms_s": (perf.fwd_comms + perf.input_dist_comms) * 1e-3 if perf else None,
                "bwd_compute_s": perf.bwd_compute * 1e-3 if perf else None,
                "bwd_comms_s": perf.bwd_comms * 1e-3 if perf else None,
                "storage_bytes": (storage.hbm + storage.ddr) if storage else None,
            })
    return out


def shards_of(plan: Any, rank: int) -> list[dict[str, Any]]:
    """The shards ``rank`` holds under ``plan``: table, sharding type, offsets and sizes (rows, columns)."""
    out = []
    for module_plan in plan.plan.values():
        for table, ps in module_plan.items():
            stype = str(ps.sharding_type)
            if ps.sharding_spec is None:  # data parallel: a full replica on every rank
                out.append({"table": table, "sharding": stype, "offset": None, "size": None, "replica": True})
                continue
            for sm in ps.sharding_spec.shards:
                placement_rank = sm.placement.rank() if sm.placement is not None else None
                if placement_rank == rank:
                    out.append({"table": table, "sharding": stype, "offset": list(sm.shard_offsets),
                                "size": list(sm.shard_sizes), "replica": False})
    return out
