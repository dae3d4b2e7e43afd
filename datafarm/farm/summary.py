"""What a farm run cost, in the registry's phase order: per phase, per item, and the run's summary."""

from __future__ import annotations

from datafarm.costs import CostLedger
from datafarm.farm import episodes
from datafarm.farm.prepare import settings_of
from datafarm.farm.registry import PHASES
from datafarm.workspace import Workspace


def phase_costs(workspace: Workspace) -> list[tuple[str, dict[str, float]]]:
    """(phase, {item: USD, "total": USD}) in the registry's order; phases it does not know come last."""
    by_phase = CostLedger(workspace.root).by_phase()
    order = {name: i for i, name in enumerate(PHASES)}
    return sorted(by_phase.items(), key=lambda item: order.get(item[0], len(order)))


def phase_cost_rows(workspace: Workspace, phase: str) -> list[dict]:
    """One row per item a phase paid for: what, quantity, unit, unit price, USD."""
    rows: dict[str, dict] = {}
    for entry in CostLedger(workspace.root).entries():
        if entry.phase != phase:
            continue
        row = rows.setdefault(entry.item, {"what": entry.item, "quantity": 0.0, "unit": entry.unit,
                                           "unit_price_usd": entry.unit_price, "usd": 0.0})
        row["quantity"] += entry.quantity
        row["usd"] += entry.usd
    return [{**r, "quantity": round(r["quantity"], 3), "usd": round(r["usd"], 6)} for r in rows.values()]


def recorded_seconds(workspace: Workspace, indices: list[int]) -> float:
    seconds = 0.0
    for index in indices:
        meta = workspace.read_json(f"{episodes.episode_dir(index)}/sim/episode.json")
        seconds += meta["frames"] / meta["fps"]
    return seconds


def farm_summary(workspace: Workspace) -> str:
    """Markdown: $ per admitted episode and per hour of three-view data, and each phase's USD."""
    ledger = CostLedger(workspace.root)
    admitted = episodes.admitted_episodes(workspace)
    seconds = recorded_seconds(workspace, admitted)
    total = ledger.total()
    lines = [f"# DataFarm run: {workspace.meta.get('task', '?')}", "",
             f"- admitted episodes: {len(admitted)} of target {settings_of(workspace).target_count}",
             f"- total cost: ${total:.4f}",
             f"- per admitted episode: ${total / max(1, len(admitted)):.4f}",
             f"- per hour of three-view data: ${total / max(seconds / 3600, 1e-9):.2f} ({seconds:.0f} s recorded)",
             "", "| phase | USD |", "|---|---|"]
    lines += [f"| {phase} | {items['total']:.5f} |" for phase, items in phase_costs(workspace)]
    return "\n".join(lines)
