"""Scheduled harvesting: what each registered workspace needs tonight, decided from its own records.

For every workspace in the farm root's registry (:mod:`datafarm.farm.fleet`) one decision:

- skip: it is missing or damaged, another run holds it (its farm lock), or its budget (``max_usd``) is spent;
- skip as complete: it has admitted its target and no growth was asked;
- farm: resume it to its target, or, with ``episodes_per_run`` N, raise a complete workspace's target by N
  first (an unfinished one is farmed to its target). The count is outside the phases' input hashes:
  a raised target only adds episodes (nothing is authored again, with any author).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from datafarm.costs import CostLedger
from datafarm.errors import DataFarmError
from datafarm.farm import episodes
from datafarm.farm.fleet import RegistryEntry
from datafarm.farm.prepare import settings_of
from datafarm.farm.settings import MAX_TARGET_COUNT, load_settings
from datafarm.workspace import Workspace
from datafarm.workspace.lock import live_holder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopUpDecision:
    name: str
    workspace: str
    action: Literal["farm", "skip"]
    reason: str
    admitted: int = 0
    target: int = 0  # the target to farm to (raised when growth was asked)
    spent_usd: float = 0.0


def decide(entry: RegistryEntry, episodes_per_run: int | None = None) -> TopUpDecision:
    def skip(reason: str, **figures) -> TopUpDecision:
        return TopUpDecision(entry.name, entry.workspace, "skip", reason, **figures)

    try:
        workspace = Workspace.open(entry.workspace)
        settings = settings_of(workspace)
    except DataFarmError as error:
        return skip(f"cannot be opened: {error}")
    holder = live_holder(workspace.root)
    spent = CostLedger(workspace.root).total()
    admitted = len(episodes.admitted_episodes(workspace))
    figures = {"admitted": admitted, "target": settings.target_count, "spent_usd": spent}
    if holder is not None:
        return skip(f"running: held by {holder.describe()}", **figures)
    if settings.max_usd is not None and spent >= settings.max_usd:
        return skip(f"over budget: ${spent:.4f} spent of ${settings.max_usd:.4f}", **figures)
    if admitted < settings.target_count:
        return TopUpDecision(entry.name, entry.workspace, "farm", f"{settings.target_count - admitted} to go",
                             **figures)
    if not episodes_per_run:
        return skip("complete: its target is admitted", **figures)
    target = min(MAX_TARGET_COUNT, settings.target_count + episodes_per_run)
    return TopUpDecision(entry.name, entry.workspace, "farm", f"target raised by {target - settings.target_count}",
                         **{**figures, "target": target})


def set_target_count(workspace: Workspace, target: int) -> None:
    """Set the workspace's target count (validated like every setting) before farming it. No phase before
    the rollouts reads it, so none runs again; the episodes already admitted stay."""
    settings = settings_of(workspace)
    if target == settings.target_count:
        return
    values = {**workspace.meta["settings"], "target_count": target}
    load_settings(values, f"{workspace.path('workspace.json')} settings")
    workspace.meta["settings"] = values
    workspace.save_meta()
    log.info("%s: target count set from %d to %d", workspace.root, settings.target_count, target)
