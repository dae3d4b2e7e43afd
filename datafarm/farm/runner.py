"""Run a phase once: skip it when its inputs are unchanged and its outputs intact; charge its CPU."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from datafarm.costs import CostLedger
from datafarm.workspace import Workspace
from datafarm.workspace.workspace import sha256_json

log = logging.getLogger(__name__)

# phase -> (the phases whose outputs it reads, the outputs it writes)
PHASE_IO: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "survey": (("prepare",), ("survey.json", "keyframes")),
    "build": (("prepare", "survey"), ("scene", ".authoring")),
    "contract": (("build",), ("contract.json", "render_contract.json")),
    "review_contract": (("contract",), ("review/contract.json",)),
    "judge": (("build", "review_contract"), ("judge",)),
    "expert": (("build", "judge"), ("expert",)),
}


@dataclass(frozen=True)
class PhaseOutcome:
    phase: str
    skipped: bool
    details: dict
    seconds: float


def phase_inputs_hash(workspace: Workspace, phase: str, extra=None) -> str:
    upstream, _ = PHASE_IO[phase]
    return sha256_json({"upstream": {p: workspace.output_hash(p) for p in upstream},
                        "settings": workspace.meta["settings"], "extra": extra})


def run_phase(workspace: Workspace, phase: str, work: Callable[[], dict], force: bool = False) -> PhaseOutcome:
    inputs_hash = phase_inputs_hash(workspace, phase)
    if not force and workspace.phase_is_current(phase, inputs_hash):
        log.info("%s: up to date, skipped", phase)
        return PhaseOutcome(phase, True, workspace.phase_record(phase).details, 0.0)
    started = time.time()
    with CostLedger(workspace.root).measure_cpu(phase):
        details = work() or {}
    workspace.record_phase(phase, inputs_hash, list(PHASE_IO[phase][1]), started, details)
    log.info("%s: done in %.1f s", phase, time.time() - started)
    return PhaseOutcome(phase, False, details, time.time() - started)
