"""The client side of the deployments: trigger a request on a Prefect server and follow its run.

`datafarm submit` and `datafarm status` call these. They need PREFECT_API_URL (and, for a server on
another machine, PREFECT_API_AUTH_STRING); every failure to reach or use the server is one DataFarm
error naming the fix.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import httpx
from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL

from datafarm.api_auth import check_client_auth
from datafarm.errors import BadInput, TransientError

REQUEST_DEPLOYMENT = "request/request"


@dataclass(frozen=True)
class RunStatus:
    id: str
    name: str
    deployment: str | None
    state: str
    message: str
    final: bool
    url: str
    reports: list[str] = field(default_factory=list)  # the farm reports' markdown, once published


def api_url() -> str:
    url = PREFECT_API_URL.value()
    if not url:
        raise BadInput("PREFECT_API_URL is not set: point it at the farm's Prefect server, e.g. "
                       "PREFECT_API_URL=http://127.0.0.1:4200/api (start one with `python deployments/server.py`)")
    check_client_auth(url)
    return url


def run_url(run_id: str) -> str:
    ui = PREFECT_UI_URL.value() or api_url().removesuffix("/").removesuffix("/api")
    return f"{ui.rstrip('/')}/runs/flow-run/{run_id}"


def _server_errors(action: str):
    """Translate what the client raises into our errors (unreachable: transient; refused: bad input)."""
    from contextlib import contextmanager

    from prefect.exceptions import ObjectNotFound

    @contextmanager
    def translating():
        try:
            yield
        except ObjectNotFound as error:
            raise BadInput(f"{action}: the server has no such object ({error}); deploy the flows first "
                           "(`prefect --no-prompt deploy --all --prefect-file deployments/prefect.yaml`) or check "
                           "the run id") from error
        except httpx.HTTPStatusError as error:
            if error.response.status_code in (401, 403):
                raise BadInput(f"{action}: the server refused the credentials ({error.response.status_code}): set "
                               "PREFECT_API_AUTH_STRING to its PREFECT_SERVER_API_AUTH_STRING") from error
            raise TransientError(f"{action}: the server answered {error.response.status_code}: retry") from error
        except (httpx.TransportError, ConnectionError) as error:
            raise TransientError(f"{action}: the Prefect server at {PREFECT_API_URL.value()} cannot be reached "
                                 f"({error}): start it, or fix PREFECT_API_URL, then retry") from error

    return translating()


def submit_request(parameters: dict, deployment: str = REQUEST_DEPLOYMENT) -> RunStatus:
    """Create a run of the request deployment and return at once (the server's worker runs it)."""
    from prefect.deployments import run_deployment

    api_url()
    with _server_errors(f"triggering {deployment}"):
        run = run_deployment(deployment, parameters=parameters, timeout=0, as_subflow=False)
    return RunStatus(str(run.id), run.name, deployment, run.state.name if run.state else "Scheduled", "", False,
                     run_url(str(run.id)))


def run_status(run_id: str) -> RunStatus:
    """The run's state (and message), and once it is final the farm reports its subflows published."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterType,
                                                FlowRunFilter, FlowRunFilterParentFlowRunId)

    try:
        run_uuid = uuid.UUID(run_id)
    except ValueError:
        raise BadInput(f"{run_id!r} is not a flow run id: use the id `datafarm submit` printed") from None
    api_url()
    with _server_errors(f"reading run {run_id}"), get_client(sync_client=True) as client:
        run = client.read_flow_run(run_uuid)
        deployment = client.read_deployment(run.deployment_id).name if run.deployment_id else None
        state = run.state
        final = bool(state and state.is_final())
        reports = []
        if final:
            children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run_uuid])))
            ids = [run_uuid, *(child.id for child in children)]
            artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=ids), type=ArtifactFilterType(any_=["markdown"])))
            reports = [a.data for a in artifacts if a.key and a.key.startswith("farm-report") and a.data]
    return RunStatus(str(run.id), run.name, deployment, state.name if state else "unknown",
                     (state.message or "") if state else "", final, run_url(str(run.id)), reports)
