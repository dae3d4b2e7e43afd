"""Start a Prefect server for the farm, with API authentication whenever it is reachable from outside.

    python deployments/server.py                          # 127.0.0.1:4200, no auth needed
    PREFECT_SERVER_API_AUTH_STRING='admin:<secret>' python deployments/server.py --host 0.0.0.0

Binding beyond loopback without PREFECT_SERVER_API_AUTH_STRING is refused (exit 2). Clients (workers,
`datafarm submit`, the serve script) set PREFECT_API_AUTH_STRING to the same string. The secret comes
from the environment only; never write it into the repository.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from datafarm.api_auth import check_server_auth  # noqa: E402
from datafarm.errors import DataFarmError  # noqa: E402

log = logging.getLogger("deployments.server")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4200)
    args, passed_on = parser.parse_known_args(argv)  # the rest goes to `prefect server start` (e.g. --no-ui)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        auth = check_server_auth(args.host)
    except DataFarmError as error:
        log.error("error: %s", error)
        return error.exit_code
    log.info("Prefect server on %s:%d, API auth %s", args.host, args.port, "on" if auth else "off (loopback only)")
    prefect = shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.execvp(prefect, [prefect, "server", "start", "--host", args.host, "--port", str(args.port), *passed_on])
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
