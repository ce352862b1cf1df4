"""CLI command ``recstack shard-sim``: predict per-rank time and imbalance for K ranks from a profile."""

from __future__ import annotations

import argparse
import json
import sys

from recstack.cli_base import add_command, int_at_least
from recstack.errors import ConfigError


def cmd_shard_sim(args: argparse.Namespace) -> int:
    from recstack.distributed.simulate import RANKS_MAX, compare, measured_costs, profile_sharding, simulate
    from recstack.hardware.machine import machine_with_file
    from recstack.render.shard_sim import format_prediction
    from recstack.tree import Profile

    if args.ranks > RANKS_MAX:
        raise ConfigError(f"must be within 1..{RANKS_MAX} (got {args.ranks})", field="--ranks")
    prof = Profile.load(args.profile)
    machine, _file = machine_with_file(args.machine)
    costs = measured_costs(prof)
    sharding = args.sharding or profile_sharding(prof)
    pred = simulate(costs, args.ranks, sharding, (machine or {}).get("collectives"))
    check = compare(pred, prof)
    if args.json:
        sys.stdout.write(json.dumps({"prediction": pred, "measured_vs_predicted": check, "inputs": {
            k: v for k, v in costs.items() if k != "measured_phases"}}, indent=1) + "\n")
        return 0
    print(format_prediction(pred, check))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "shard-sim", cmd_shard_sim, help="predict per-rank time and imbalance for K ranks from a profile",
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
