"""A task request that arrives over the API: checked whole before any work, then a new workspace's plan.

What the `request` deployment receives: the request text, where the calibration episode is (a path under
an allowed root, or an ``s3://`` URI when the storage package is installed), the target count, the
renderer and the budget (``max_usd`` for the whole workspace, ``phase_caps`` for an LLM author's phases).
:func:`plan_request` refuses every bad one with a message naming the parameter and the fix, before
anything is read, written or downloaded; it returns where the workspace will be and the settings.

Allowed roots: ``DATAFARM_ALLOWED_ROOTS`` (paths separated by ``:``), default ``<farm root>/calibrations``.
A path is resolved (symlinks and ``..`` followed) before it is compared, so no spelling escapes them.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from datafarm.errors import BadInput, Unavailable
from datafarm.farm.fleet import Registry, farm_root
from datafarm.farm.prepare import check_request
from datafarm.farm.settings import FarmSettings, load_settings
from datafarm.workspace import Workspace

ALLOWED_ROOTS_ENV = "DATAFARM_ALLOWED_ROOTS"
NAME_WORDS = 6  # words of the request in the workspace's name


class RequestParameters(BaseModel):
    """The `request` deployment's parameters, as received."""

    model_config = ConfigDict(extra="forbid")
    request: str
    episode: str = Field(description="a calibration episode folder under an allowed root, or s3://bucket/prefix")
    target_count: int = 10
    renderer: str = "composite"
    max_usd: float | None = Field(None, description="the workspace's whole budget (USD); none: no budget")
    phase_caps: dict[str, float] | None = Field(None, description="USD cap per LLM phase, e.g. {'expert': 2.0}")
    settings: dict[str, Any] | None = Field(None, description="other farm settings, e.g. {'expert_trial_seeds': 3}")


@dataclass(frozen=True)
class RequestPlan:
    """A request that passed every check: where its workspace goes and what it is prepared with."""

    request: str
    episode: str  # a local folder, or the s3:// URI to fetch
    workspace: Path
    settings: FarmSettings  # the budget (max_usd) among them
    phase_caps: dict[str, float]

    @property
    def from_s3(self) -> bool:
        return self.episode.startswith("s3://")


def allowed_roots() -> list[Path]:
    configured = [p for p in os.environ.get(ALLOWED_ROOTS_ENV, "").split(os.pathsep) if p.strip()]
    return [Path(p).expanduser().resolve() for p in configured] or [farm_root() / "calibrations"]


def check_local_episode(episode: str) -> Path:
    """The episode's resolved folder if it is under an allowed root and exists, else BadInput saying why."""
    roots = allowed_roots()
    if not episode.strip():
        raise BadInput("episode: empty; give the calibration episode's folder under an allowed root "
                       f"({', '.join(map(str, roots))})")
    path = Path(episode).expanduser()
    if not path.is_absolute():
        raise BadInput(f"episode {episode!r} is a relative path: give the absolute path of the calibration episode's "
                       f"folder under an allowed root ({', '.join(map(str, roots))})")
    resolved = path.resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise BadInput(f"episode {episode} is outside the allowed roots ({', '.join(map(str, roots))}): copy the "
                       f"calibration episode under one of them, or have the server's operator add its folder to "
                       f"{ALLOWED_ROOTS_ENV}")
    if not resolved.is_dir():
        raise BadInput(f"episode {episode} does not exist on the farm's machine (or is not a folder): copy the "
                       "calibration episode (a LeRobot dataset or a folder of 3 mp4s + joints.csv) there first")
    return resolved


def storage_available() -> bool:
    return importlib.util.find_spec("datafarm.storage") is not None


def check_episode(episode: str) -> str:
    if episode.startswith("s3://"):
        if not storage_available():
            raise Unavailable(f"episode {episode}: calibration episodes from S3 need the storage package "
                              "(datafarm.storage), which this installation lacks: copy the episode under an allowed "
                              f"root and give its path ({', '.join(map(str, allowed_roots()))})")
        from datafarm.storage import parse_s3_uri

        parse_s3_uri(episode)  # a malformed URI is a BadInput naming the fix
        return episode
    return str(check_local_episode(episode))


def check_phase_caps(phase_caps: dict[str, float] | None) -> dict[str, float]:
    from datafarm.agent.roles import PHASES as LLM_PHASES

    caps = dict(phase_caps or {})
    unknown = sorted(set(caps) - set(LLM_PHASES))
    if unknown:
        raise BadInput(f"phase_caps names unknown phases {unknown}: the phases with an LLM role are "
                       f"{', '.join(LLM_PHASES)}")
    bad = {k: v for k, v in caps.items() if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0)}
    if bad:
        raise BadInput(f"phase_caps {bad}: each cap is a number of USD >= 0")
    if caps and os.environ.get("DATAFARM_BINDINGS"):
        raise BadInput(f"phase_caps cannot apply: this farm's bindings come from DATAFARM_BINDINGS="
                       f"{os.environ['DATAFARM_BINDINGS']}, which a workspace's bindings.json does not override; "
                       "leave phase_caps empty (the file's caps apply) or ask the operator to unset DATAFARM_BINDINGS")
    return {k: float(v) for k, v in caps.items()}


def workspace_name(request: str, now: float | None = None) -> str:
    """`place-the-apple-on-the-scale-20261203-171500-1a2b`: the request's first words, the time, a few
    random hex digits (two requests of the same text in the same second still differ)."""
    words = re.findall(r"[a-z0-9]+", request.lower())[:NAME_WORDS]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    salt = os.urandom(2).hex()
    return "-".join([*words, stamp, salt]) if words else f"request-{stamp}-{salt}"


def plan_request(parameters: RequestParameters | dict) -> RequestPlan:
    """Every check of a request, in the order a user fixes them; nothing is read, written or fetched."""
    if not isinstance(parameters, RequestParameters):
        parameters = RequestParameters.model_validate(parameters)
    check_request(parameters.request)
    values = {**(parameters.settings or {}), "target_count": parameters.target_count, "renderer": parameters.renderer,
              "max_usd": parameters.max_usd}
    settings = load_settings(values, "request", {"target_count": "give target_count as a whole number from 1 to 100000",
                                         "renderer": "give one of them as renderer (composite runs on the CPU)",
                                         "max_usd": "give the workspace's budget as a positive number of USD, or "
                                                    "leave it empty for no budget"})
    from datafarm.render.registry import check_renderer_available

    check_renderer_available(settings.renderer)
    caps = check_phase_caps(parameters.phase_caps)
    episode = check_episode(parameters.episode)
    workspace = farm_root() / "workspaces" / workspace_name(parameters.request)
    return RequestPlan(parameters.request, episode, workspace, settings, caps)


def prepare_request(plan: RequestPlan) -> Workspace:
    """Prepare the request's workspace, bind its phase caps, and register it for the scheduled harvest."""
    from datafarm.farm.prepare import prepare

    started = time.perf_counter()
    workspace = prepare(plan.episode, plan.request, plan.workspace, plan.settings)  # s3: storage's download
    workspace.log_timing("prepare", time.perf_counter() - started)
    if plan.phase_caps:
        from datafarm.agent.bindings import BINDINGS_FILE, load_bindings

        bindings = load_bindings(register=False)  # what applies on this machine, with the request's caps
        data = bindings.model_dump(mode="json", exclude={"source"})
        workspace.write_json(BINDINGS_FILE, {**data, "caps": {**data["caps"], **plan.phase_caps}})
    Registry(farm_root()).register(workspace)
    return workspace
