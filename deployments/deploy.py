"""Deploy every flow of deployments/prefect.yaml to the server PREFECT_API_URL names, pools included.

    PREFECT_API_URL=http://127.0.0.1:4200/api python deployments/deploy.py

Creates the work pools prefect.yaml names that the server lacks (process type; `prefect deploy` refuses
a pool that does not exist), then runs `prefect --no-prompt deploy --all --prefect-file
deployments/prefect.yaml` from the repository root. A remote server needs PREFECT_API_AUTH_STRING.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from prefect.settings import PREFECT_API_URL  # noqa: E402

from datafarm.api_auth import check_client_auth  # noqa: E402
from datafarm.errors import DataFarmError  # noqa: E402
from flows.deploy_steps import ensure_work_pools, pools_of  # noqa: E402

log = logging.getLogger("deployments.deploy")
PREFECT_FILE = Path("deployments") / "prefect.yaml"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if not PREFECT_API_URL.value():
            raise DataFarmError("PREFECT_API_URL is not set: point it at the Prefect server to deploy to, e.g. "
                                "http://127.0.0.1:4200/api")
        check_client_auth(PREFECT_API_URL.value())
        created = ensure_work_pools(pools_of(REPO / PREFECT_FILE))["created_pools"]
    except DataFarmError as error:
        log.error("error: %s", error)
        return error.exit_code
    log.info("work pools created: %s", ", ".join(created) or "none (all there)")
    os.chdir(REPO)
    prefect = shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"
    os.execvp(prefect, [prefect, "--no-prompt", "deploy", "--all", "--prefect-file", str(PREFECT_FILE)])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
