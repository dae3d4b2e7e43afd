"""What a farm run ends with, for the Prefect UI: one markdown report and the figures the scheduled harvest sums.

Everything is read from the workspace's records (the cost ledger, attempts, reviews), so a rerun shows
the workspace's totals again, never the same costs added twice.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from datafarm.costs import CostLedger
from datafarm.farm import episodes
from datafarm.farm.prepare import settings_of
from datafarm.farm.summary import phase_costs, recorded_seconds
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

EPISODE_ROWS = 20  # per-episode costs listed in the report; the rest are summed


@dataclass(frozen=True)
class WorkspaceFigures:
    admitted: int
    tried: int
    target: int
    total_usd: float


def figures(workspace: Workspace) -> WorkspaceFigures:
    return WorkspaceFigures(admitted=len(episodes.admitted_episodes(workspace)),
                            tried=len(episodes.attempts(workspace)),
                            target=settings_of(workspace).target_count,
                            total_usd=CostLedger(workspace.root).total())


def first_admitted_sheet(workspace: Workspace) -> Path | None:
    """The contact sheet (sim beside rendered) of the first admitted episode, written once; None before any."""
    admitted = episodes.admitted_episodes(workspace)
    if not admitted:
        return None
    sheet = workspace.path("reports", f"episode_{admitted[0]:06d}_sheet.png")
    if not sheet.exists():
        from datafarm.farm.show import show_episode

        started = time.perf_counter()
        sheet, _ = show_episode(workspace, admitted[0])
        workspace.log_timing("report", time.perf_counter() - started)  # library time, not orchestration
    return sheet


def run_report(workspace: Workspace, sheet: Path | None) -> str:
    """Markdown: episodes admitted/tried, cost per phase and per episode, the first admitted episode's sheet."""
    numbers = figures(workspace)
    per_episode = CostLedger(workspace.root).by_episode()
    hours = recorded_seconds(workspace, episodes.admitted_episodes(workspace)) / 3600
    lines = [f"# Farm run of `{workspace.root.name}`", "",
             f"- request: {workspace.path('request.txt').read_text().strip()[:300]}",
             f"- episodes admitted / tried: **{numbers.admitted} / {numbers.tried}** (target {numbers.target})",
             f"- total cost: **${numbers.total_usd:.4f}**, ${numbers.total_usd / max(1, numbers.admitted):.4f} "
             "per admitted episode",
             f"- per hour of three-view data: ${numbers.total_usd / max(hours, 1e-9):.2f} "
             f"({hours * 3600:.0f} s recorded)",
             f"- workspace: `{workspace.root.resolve()}`", "",
             "## Cost per phase", "", "| phase | cpu USD | gpu USD | llm USD | total USD |", "|---|---|---|---|---|"]
    for phase, items in phase_costs(workspace):
        llm = sum(v for k, v in items.items() if k.startswith("llm"))
        lines.append(f"| {phase} | {items.get('cpu', 0):.5f} | {items.get('gpu', 0):.5f} | {llm:.5f} | "
                     f"{items['total']:.5f} |")
    lines += ["", "## Cost per episode (rollout + render + review)", ""]
    if per_episode:
        shown = sorted(per_episode.items())[:EPISODE_ROWS]
        lines += ["| episode | USD |", "|---|---|"] + [f"| {index} | {usd:.5f} |" for index, usd in shown]
        rest = sorted(per_episode.items())[EPISODE_ROWS:]
        if rest:
            lines.append(f"| {len(rest)} more | {sum(usd for _, usd in rest):.5f} |")
    else:
        lines.append("no episode has been simulated yet")
    lines += ["", "## First admitted episode", ""]
    if sheet is None:
        lines.append("no episode admitted yet")
    else:
        lines += [f"![contact sheet]({sheet.resolve().as_uri()})", "", f"contact sheet: `{sheet.resolve()}`"]
    return "\n".join(lines)
