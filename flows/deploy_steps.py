"""Deployment steps of deployments/prefect.yaml (Prefect imports the pull step by its dotted name).

- `ensure_work_pools` (run by deployments/deploy.py before `prefect deploy`, which refuses a pool that
  does not exist): creates the work pools prefect.yaml names when the server lacks them.
- `enter_repository` (the pull step, run before every flow run): the working directory becomes the
  checkout the flows are loaded from: $DATAFARM_REPO when set, else the checkout this package is
  installed from (an editable install, or the image's copy). Prefect's own templates have no default
  filter, so the fallback lives here.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from datafarm.errors import BadInput

log = logging.getLogger(__name__)

REPO_ENV = "DATAFARM_REPO"


def repository() -> Path:
    configured = os.environ.get(REPO_ENV)
    root = Path(configured) if configured else Path(__file__).resolve().parent.parent
    if not (root / "flows" / "farm.py").is_file():
        raise BadInput(f"{root} is not a DataFarm checkout (flows/farm.py missing): set {REPO_ENV} to the folder the "
                       "deployments' entrypoints are in, on the worker's machine")
    return root


def enter_repository() -> dict[str, str]:
    root = repository()
    os.chdir(root)
    return {"directory": str(root)}


def pools_of(prefect_yaml: Path) -> list[str]:
    """The work pools the deployments of a prefect.yaml name, in order."""
    import yaml

    deployments = yaml.safe_load(prefect_yaml.read_text()).get("deployments") or []
    return list(dict.fromkeys(d["work_pool"]["name"] for d in deployments if d.get("work_pool", {}).get("name")))


def ensure_work_pools(pools: list[str], type: str = "process") -> dict[str, list[str]]:
    """Create each named work pool (of `type`) that the server does not have yet; report what was created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.utilities.asyncutils import run_coro_as_sync
    from prefect.workers.utilities import get_default_base_job_template_for_infrastructure_type

    template = run_coro_as_sync(get_default_base_job_template_for_infrastructure_type(type))
    if template is None:
        raise BadInput(f"work pool type {type!r} is not one this Prefect knows: use 'process' (or install its worker)")
    created = []
    with get_client(sync_client=True) as client:
        for name in pools:
            try:
                client.read_work_pool(name)
            except ObjectNotFound:
                client.create_work_pool(WorkPoolCreate(name=name, type=type, base_job_template=template))
                created.append(name)
                log.info("created work pool %s (%s)", name, type)
    return {"created_pools": created}
