"""The farm's phases, declared once. The runner, the flows, the command line's help, the cost report
and the roles all read this table; nothing else lists phases.

A phase's `work` is the library function that does it, named "module:function" so that reading the
table (for `datafarm --help`) does not import the simulator. Per-episode phases name the function
that handles one episode; `datafarm.farm.collect` loops over the episodes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from datafarm.errors import BadInput


@dataclass(frozen=True)
class Phase:
    name: str
    work: str  # "module:function" of the library function doing the work
    reads: tuple[str, ...]  # the phases whose outputs it reads (their output hashes are its inputs)
    writes: tuple[str, ...]  # workspace paths it writes (NNNNNN: each episode's folder)
    flow: str | None  # the Prefect flow it runs in (None: a command of its own, `datafarm prepare`)
    role: str | None  # the agent role (datafarm/agent/roles.py) an LLM author uses for it
    description: str
    per_episode: bool = False

    def work_function(self) -> Callable:
        module, name = self.work.split(":")
        return getattr(importlib.import_module(module), name)


_F = "datafarm.farm."
_EP = "episodes/NNNNNN/"
REGISTRY: tuple[Phase, ...] = (
    #     name               work                          reads                          writes
    #     flow        role                 description
    Phase("prepare",         _F + "prepare:prepare",       (),                            ("request.txt", "calibration"),
          None,       None,                "bind the calibration episode and the request to a new workspace"),
    Phase("survey",          _F + "prepare:survey",        ("prepare",),                  ("survey.json", "keyframes"),
          "survey",   "surveyor",          "read the calibration: keyframes, plates, cameras, table plane"),
    Phase("build",           _F + "authoring:build",       ("prepare", "survey"),         ("scene", ".authoring"),
          "build",    "scene_builder",     "write the simulated scene; ground it against the calibration frames"),
    Phase("contract",        _F + "authoring:contract",    ("build",),          ("contract.json", "render_contract.json"),
          "contract", "contract_author",   "state what will be produced: criteria, randomization, prompts"),
    Phase("review_contract", _F + "authoring:review_contract", ("contract",),             ("review/contract.json",),
          "contract", "contract_reviewer", "an independent reviewer accepts or rejects the contract"),
    Phase("judge",           _F + "authoring:write_judge", ("build", "review_contract"),  ("judge",),
          "judge",    "judge_author",      "write the hidden success checks (the expert's author never sees them)"),
    Phase("expert",          _F + "authoring:write_expert", ("build", "judge"),           ("expert",),
          "expert",   "expert_author",     "write the expert; try it on seeds against the hidden judge"),
    Phase("rollout",         _F + "episodes:rollout_seed",    ("expert",),
          ("rollout/attempts.jsonl", _EP + "sim", _EP + "trace.npz", _EP + "result.json"),
          "episodes", None,                "simulate seeded, randomized episodes; keep those the judge accepts", True),
    Phase("render",          _F + "episodes:render_episode", ("rollout",),                (_EP + "render",),
          "episodes", None,                "re-render each kept episode as photographic three-view video", True),
    Phase("review",          _F + "episodes:review_episode", ("render",),                 (_EP + "review.json",),
          "episodes", "episode_reviewer",  "automated video checks admit or reject each rendered episode", True),
    Phase("harvest",         _F + "deliver:harvest",       ("review",),                   ("dataset", "manifest.json"),
          "harvest",  None,                "write the admitted episodes into a LeRobot dataset and its manifest"),
    Phase("verify",          _F + "deliver:verify",        ("harvest",),                  (),
          "verify",   None,                "recompute every hash; check completeness and every review"),
)
PHASES: tuple[str, ...] = tuple(p.name for p in REGISTRY)
FARMED: tuple[str, ...] = tuple(p.name for p in REGISTRY if p.flow is not None)  # what `datafarm farm` runs
FLOWS: tuple[str, ...] = tuple(dict.fromkeys(p.flow for p in REGISTRY if p.flow is not None))  # in order


def get_phase(name: str) -> Phase:
    for phase in REGISTRY:
        if phase.name == name:
            return phase
    raise BadInput(f"unknown phase {name!r}; the phases are: {', '.join(PHASES)}")


def selected_phases(phase: str | None = None, until: str | None = None) -> tuple[str, ...]:
    """What `datafarm farm` runs: every farmed phase, only `phase`, or those up to and including `until`."""
    for name in (phase, until):
        if name is not None and name not in FARMED:
            raise BadInput(f"unknown phase {name!r} for `datafarm farm`; choose one of: {', '.join(FARMED)}")
    if phase is not None:
        return (phase,)
    return FARMED[: FARMED.index(until) + 1] if until is not None else FARMED


def phases_of_flow(flow: str) -> tuple[str, ...]:
    return tuple(p.name for p in REGISTRY if p.flow == flow)
