"""``recstack shard-sim``'s text: the predicted per-rank times, and measured vs predicted."""

from __future__ import annotations

from typing import Any

from recstack.units import milliseconds, percent


def _ms(v: float | None) -> str:  # the table's column: milliseconds, 8 wide
    return milliseconds(v, width=8)


def format_prediction(pred: dict[str, Any], check: dict[str, Any] | None) -> str:
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
                r["rank"], _ms(r["time_s_measured_s"]), _ms(r["time_s_predicted_s"]), percent(r["time_s_error"], signed=True),
                _ms(r["compute_s_measured_s"]), _ms(r["compute_s_predicted_s"]), percent(r["compute_s_error"], signed=True)))
            out.append("          wait {} vs {} ms, transfer {} (in the model) vs {} ms, fixed {} ms".format(
                _ms(r.get("wait_measured_s")), _ms(r.get("wait_predicted_s")), _ms(r.get("transfer_measured_s")),
                _ms(r.get("transfer_predicted_s")), _ms(r.get("fixed_predicted_s"))))
    return "\n".join(out)


__all__ = ["format_prediction"]
