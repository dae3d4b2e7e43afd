"""A real Prefect server (deployments/server.py on 127.0.0.1, a free port, a temporary PREFECT_HOME), the
deployments built from deployments/prefect.yaml by deployments/deploy.py, and a process work-pool
worker: all subprocesses, started as an operator would (deployments/local_stack.py)."""

from __future__ import annotations

import pytest

from deployments.local_stack import LocalStack


@pytest.fixture(scope="session")
def farm_env(tmp_path_factory) -> dict[str, str]:
    """What the server's machine is configured with: its farm root and allowed calibration roots."""
    root = tmp_path_factory.mktemp("farmroot")
    (root / "calibrations").mkdir()
    return {"DATAFARM_FARM_ROOT": str(root), "DATAFARM_ALLOWED_ROOTS": str(root / "calibrations")}


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory, farm_env):
    stack = LocalStack.start(tmp_path_factory.mktemp("prefect_home"), farm_env)
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture(scope="session")
def deployed(prefect_server):
    """The README's command: deployments/deploy.py creates the pools, then `prefect deploy --all` builds
    every deployment of prefect.yaml (run from elsewhere: the script finds the checkout)."""
    run = prefect_server.deploy()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return prefect_server


@pytest.fixture(scope="session")
def worker(deployed):
    """A process worker of the datafarm-cpu pool, started from elsewhere (the pull step finds the checkout)."""
    deployed.worker_log = deployed.start_worker("datafarm-cpu")
    return deployed


@pytest.fixture
def api(deployed):
    """This process's Prefect client settings pointed at the test server."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: deployed.url}):
        yield deployed
