"""CLI command ``recstack shard-sim``: predict per-rank time and imbalance for K ranks from a profile."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from recstack.cli_types import int_at_least
from recstack.errors import ConfigError


def cmd_shard_sim(args: argparse.Namespace) -> int:
    from recstack.distributed.simulate import RANKS_MAX, compare, measured_costs, simulate
    from recstack.hardware.machine import machine_with_file
    from recstack.tree import Profile

    if args.ranks > RANKS_MAX:
        raise ConfigError(f"must be within 1..{RANKS_MAX} (got {args.ranks})", field="--ranks")
    prof = Profile.load(args.profile)
    machine, _file = machine_with_file(args.machine)
    costs = measured_costs(prof)
    sharding = args.sharding or _profile_sharding(prof)
    pred = simulate(costs, args.ranks, sharding, (machine or {}).get("collectives"))
    check = compare(pred, prof)
    if args.json:
        sys.stdout.write(json.dumps({"prediction": pred, "measured_vs_predicted": check, "inputs": {
            k: v for k, v in costs.items() if k != "measured_phases"}}, indent=1) + "\n")
        return 0
    print(_format(pred, check))
    return 0


def _profile_sharding(prof: Any) -> str:
    sharding = (prof.distributed or {}).get("sharding", "table_wise")
    return sharding if sharding in ("table_wise", "column_wise", "row_wise", "data_parallel") else "table_wise"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:8.3f}"


def _format(pred: dict[str, Any], check: dict[str, Any] | None) -> str:
    out = [f"shard-sim: {pred['ranks']} ranks, {pred['sharding']}: predicted step {_ms(pred['step_s'])} ms, "
           f"compute imbalance (max/mean) {pred['imbalance_compute']:.3f}, longest wait {_ms(pred['max_wait_s'])} ms "
           f"(communication model: {pred['comm_model']}; formulas in docs/distributed.md)",
           "rank  shards  embedding ms  dense ms  compute ms  transfer ms  wait ms"]
    shown = pred["per_rank"] if len(pred["per_rank"]) <= 16 else pred["per_rank"][:8] + pred["per_rank"][-8:]
    for r in shown:
        out.append(f"{r['rank']:4d}  {r['shards']:6d}  {_ms(r['embedding_s'])}      {_ms(r['dense_s'])}  "
                   f"{_ms(r['compute_s'])}    {_ms(r['transfer_s'])}   {_ms(r['wait_s'])}")
    if len(pred["per_rank"]) > 16:
        out.append(f"({len(pred['per_rank']) - 16} ranks not shown; --json has all)")
    if check:
        out.append("measured vs predicted (ranks matched by compute order):")
        for r in check["per_rank"]:
            out.append("  rank {}: step {} vs {} ms ({}), compute {} vs {} ms ({})".format(
                r["rank"], _ms(r["time_s_measured_s"]), _ms(r["time_s_predicted_s"]), _pct(r["time_s_error"]),
                _ms(r["compute_s_measured_s"]), _ms(r["compute_s_predicted_s"]), _pct(r["compute_s_error"])))
            out.append("          wait {} vs {} ms, transfer {} (in the model) vs {} ms, fixed {} ms".format(
                _ms(r.get("wait_measured_s")), _ms(r.get("wait_predicted_s")), _ms(r.get("transfer_measured_s")),
                _ms(r.get("transfer_predicted_s")), _ms(r.get("fixed_predicted_s"))))
    return "\n".join(out)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.0%}"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("shard-sim", help="predict per-rank time and imbalance for K ranks from a profile",
                       description="From a profile's measured per-table embedding costs and dense time, and the "
                       "communication model (the machine file's collective benchmark, else the profile's own "
                       "communication), predict each rank's time for K ranks; see docs/distributed.md.")
    p.add_argument("profile", help="profile JSON (single- or multi-rank; a zoo model's)")
    p.add_argument("--ranks", type=int_at_least("--ranks", 1), required=True, help="ranks to predict (1..1024)")
    p.add_argument("--sharding", choices=["table_wise", "column_wise", "row_wise", "data_parallel"], default=None,
                   help="sharding to predict (default: the profile's, else table_wise)")
    p.add_argument("--machine", default="auto", metavar="FILE|auto|none",
                   help="machine file with collectives (recstack machine --collectives); 'auto' (default) for this "
                        "host's machine file")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")
    p.set_defaults(func=cmd_shard_sim)
