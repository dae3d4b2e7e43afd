"""Prefect API authentication: on whenever the server can be reached from outside the machine.

Prefect's own basic auth: the server checks ``PREFECT_SERVER_API_AUTH_STRING`` ("user:password"), clients
send ``PREFECT_API_AUTH_STRING`` (the same string). Both come from the environment only, never from the
repository. `deployments/server.py` refuses to bind beyond loopback without the server's string; the serve
script and `datafarm submit/status` refuse to talk to a remote API without the client's.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlparse

from datafarm.errors import BadInput

SERVER_AUTH_ENV = "PREFECT_SERVER_API_AUTH_STRING"
CLIENT_AUTH_ENV = "PREFECT_API_AUTH_STRING"


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost: assume it is reachable from outside


def _auth_string_ok(value: str | None) -> bool:
    return bool(value) and ":" in value and all(value.split(":", 1))


def check_server_auth(host: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether auth is on for a server bound to `host`; BadInput when it would be reachable without it."""
    if _auth_string_ok(environ.get(SERVER_AUTH_ENV)):
        return True
    if is_loopback(host):
        return False
    raise BadInput(f"refusing to bind the Prefect server to {host} without authentication: set {SERVER_AUTH_ENV}="
                   f"'user:password' in the environment (clients then set {CLIENT_AUTH_ENV} to the same), or bind "
                   "to 127.0.0.1")


def check_client_auth(api_url: str, environ: Mapping[str, str] = os.environ) -> None:
    """A remote API is only spoken to with the auth string; BadInput naming the variable otherwise."""
    host = urlparse(api_url).hostname or ""
    if not is_loopback(host) and not _auth_string_ok(environ.get(CLIENT_AUTH_ENV)):
        raise BadInput(f"PREFECT_API_URL={api_url} is not on this machine and {CLIENT_AUTH_ENV} is not set: set it "
                       "to the server's 'user:password' (its PREFECT_SERVER_API_AUTH_STRING) in the environment")
