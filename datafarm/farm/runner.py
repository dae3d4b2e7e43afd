"""Run a workspace phase once: skip it when its inputs are unchanged and its outputs intact; charge its CPU.

The phase record (phases/<phase>.json: the hash of its inputs, the SHA-256 of each output) is what a
rerun resumes from; nothing else stands in for the files.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass

from datafarm.costs import CostLedger
from datafarm.errors import BadInput, BudgetSpent
from datafarm.farm.registry import get_phase
from datafarm.farm.settings import NOT_HASHED
from datafarm.logs import NOTABLE
from datafarm.workspace import Workspace
from datafarm.workspace.workspace import sha256_json

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PhaseOutcome:
    phase: str
    skipped: bool
    details: dict
    seconds: float


@contextmanager
def accounted(workspace: Workspace, phase: str, episode: int | None = None, thread_only: bool = False):
    """Charge the block's CPU to the cost ledger (`thread_only`: see CostLedger.measure_cpu) and log its
    wall time (timings.jsonl)."""
    started = time.perf_counter()
    with CostLedger(workspace.root).measure_cpu(phase, episode=episode, thread_only=thread_only):
        yield
    workspace.log_timing(phase, time.perf_counter() - started, episode)


class WorkspaceBudgetSpent(BudgetSpent):
    """The workspace's whole budget (its max_usd setting) is spent: no more work is started."""


def check_budget(workspace: Workspace) -> None:
    """Raise WorkspaceBudgetSpent once the ledger's total reaches the workspace's max_usd (before new work)."""
    from datafarm.farm.prepare import settings_of

    settings = settings_of(workspace)
    if settings.max_usd is None:
        return
    spent = CostLedger(workspace.root).total()
    if spent >= settings.max_usd:
        raise WorkspaceBudgetSpent(
            f"{workspace.root} has spent ${spent:.4f} of its ${settings.max_usd:.4f} budget (max_usd): no more work "
            f"was started and everything done is kept. Raise it (`datafarm farm {workspace.root} --max-usd N`) or "
            "lower the target (`--target-count`), then rerun")


def phase_inputs_hash(workspace: Workspace, phase: str, extra=None) -> str:
    upstream = get_phase(phase).reads
    settings = {name: value for name, value in workspace.meta["settings"].items() if name not in NOT_HASHED}
    return sha256_json({"upstream": {p: workspace.output_hash(p) for p in upstream},
                        "settings": settings, "extra": extra})


def run_phase(workspace: Workspace, phase: str, force: bool = False) -> PhaseOutcome:
    """Run the registry's work function of `phase` on the workspace, unless it is up to date."""
    spec = get_phase(phase)
    if spec.per_episode or spec.flow is None:
        raise BadInput(f"{phase} is not a whole-workspace phase of the farm; run it with `datafarm farm --phase {phase}`"
                       if spec.per_episode else f"{phase} is its own command: `datafarm {phase}`")
    inputs_hash = phase_inputs_hash(workspace, phase)
    if not force and workspace.phase_is_current(phase, inputs_hash):
        log.info("%s: up to date, skipped", phase, extra=NOTABLE)
        return PhaseOutcome(phase, True, workspace.phase_record(phase).details, 0.0)
    check_budget(workspace)
    started = time.time()
    with accounted(workspace, phase):
        details = spec.work_function()(workspace) or {}
    workspace.record_phase(phase, inputs_hash, list(spec.writes), started, details)
    log.info("%s: done in %.1f s", phase, time.time() - started, extra=NOTABLE)
    return PhaseOutcome(phase, False, details if isinstance(details, dict) else {}, time.time() - started)
