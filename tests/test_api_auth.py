"""API authentication is on whenever the Prefect server can be reached from outside the machine."""

import subprocess
import sys
from pathlib import Path

import pytest

from datafarm.api_auth import check_client_auth, check_server_auth, is_loopback
from datafarm.errors import BadInput

SERVER = Path(__file__).resolve().parents[1] / "deployments" / "server.py"


def test_binding_beyond_loopback_needs_the_auth_string():
    assert check_server_auth("127.0.0.1", {}) is False and check_server_auth("::1", {}) is False
    for host in ("0.0.0.0", "192.168.1.5", "farm.example"):
        with pytest.raises(BadInput, match="PREFECT_SERVER_API_AUTH_STRING"):
            check_server_auth(host, {})
        assert check_server_auth(host, {"PREFECT_SERVER_API_AUTH_STRING": "admin:s3cret"}) is True
    with pytest.raises(BadInput):
        check_server_auth("0.0.0.0", {"PREFECT_SERVER_API_AUTH_STRING": "no-colon"})


def test_clients_need_the_auth_string_for_a_remote_api():
    check_client_auth("http://localhost:4200/api", {})
    with pytest.raises(BadInput, match="PREFECT_API_AUTH_STRING"):
        check_client_auth("http://10.0.0.2:4200/api", {})
    check_client_auth("http://10.0.0.2:4200/api", {"PREFECT_API_AUTH_STRING": "admin:s3cret"})
    assert is_loopback("localhost") and not is_loopback("0.0.0.0")


def test_the_server_script_refuses_to_bind_everywhere_without_auth():
    run = subprocess.run([sys.executable, str(SERVER), "--host", "0.0.0.0"], capture_output=True, text=True,
                         timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert run.returncode == 2 and "refusing to bind the Prefect server to 0.0.0.0" in run.stderr


@pytest.mark.slow
def test_a_server_started_with_the_auth_string_refuses_requests_without_it(tmp_path):
    import httpx

    from deployments.local_stack import start_server, stop, wait_healthy

    url, process = start_server(tmp_path, {"PREFECT_SERVER_API_AUTH_STRING": "admin:s3cret"})
    try:
        wait_healthy(url, process, auth=("admin", "s3cret"))
        assert httpx.post(f"{url}/flows/filter", json={}).status_code == 401
        assert httpx.post(f"{url}/flows/filter", json={}, auth=("admin", "wrong")).status_code == 401
        assert httpx.post(f"{url}/flows/filter", json={}, auth=("admin", "s3cret")).status_code == 200
    finally:
        stop(process)
