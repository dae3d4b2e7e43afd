"""A Prefect server, the deployments and a process worker on this machine, as subprocesses.

What the deployment tests and benchmarks/api_request.py start; also a quick local stack by hand:

    python -c "from deployments.local_stack import LocalStack; LocalStack.start('out/stack').wait()"

Each part is started the way an operator would: deployments/server.py (127.0.0.1, a free port, its own
PREFECT_HOME), deployments/deploy.py (pools, then `prefect deploy --all`), `prefect worker start`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """Terminate a process group started here (SIGTERM, then SIGKILL after 30 s)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 240,
                 auth: tuple[str, str] | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2, auth=auth).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise TimeoutError(f"{url} did not answer /health within {timeout} s")


def start_server(home: Path, extra_env: dict | None = None) -> tuple[str, subprocess.Popen]:
    """deployments/server.py on 127.0.0.1 and a free port, PREFECT_HOME=home; (API URL, process)."""
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **(extra_env or {})}
    env.pop("PREFECT_API_URL", None)
    with open(home / "server.log", "w") as log:
        process = subprocess.Popen([sys.executable, str(REPO / "deployments" / "server.py"), "--port", str(port),
                                    "--no-ui"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return f"http://127.0.0.1:{port}/api", process


@dataclass
class LocalStack:
    home: Path
    url: str
    env: dict[str, str]
    processes: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def start(cls, home: str | Path, farm_env: dict[str, str] | None = None) -> LocalStack:
        home = Path(home).resolve()
        home.mkdir(parents=True, exist_ok=True)
        url, server = start_server(home)
        stack = cls(home, url, {**os.environ, **(farm_env or {}), "PREFECT_API_URL": url, "PREFECT_HOME": str(home),
                                "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                                "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}, [server])
        try:
            wait_healthy(url, server)
        except BaseException:
            stack.close()
            raise
        return stack

    def deploy(self) -> subprocess.CompletedProcess:
        """deployments/deploy.py from outside the checkout (it finds it); the caller checks returncode."""
        return subprocess.run([sys.executable, str(REPO / "deployments" / "deploy.py")], cwd=self.home, env=self.env,
                              capture_output=True, text=True, timeout=600)

    def start_worker(self, pool: str = "datafarm-cpu") -> Path:
        """A process worker of `pool`, polling every second; returns its log file."""
        folder = self.home / f"worker-{pool}"
        folder.mkdir(exist_ok=True)
        with open(folder / "worker.log", "w") as log:
            self.processes.append(subprocess.Popen(
                [str(BIN / "prefect"), "worker", "start", "--pool", pool, "--type", "process"], cwd=folder,
                env={**self.env, "PREFECT_WORKER_QUERY_SECONDS": "1"}, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
        return folder / "worker.log"

    def close(self) -> None:
        for process in reversed(self.processes):
            stop(process)

    def wait(self) -> None:
        """Keep the stack up until Ctrl-C."""
        try:
            while all(p.poll() is None for p in self.processes):
                time.sleep(1)
        finally:
            self.close()
