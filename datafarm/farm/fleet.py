"""The farm root: where API-triggered requests put their workspaces, and the registry scheduled harvesting reads.

Layout of a farm root (``DATAFARM_FARM_ROOT``, default ``~/datafarm``)::

    calibrations/          the default allowed root for calibration episodes (DATAFARM_ALLOWED_ROOTS)
    workspaces/<name>/     workspaces the `request` deployment prepares (one folder per request)
    registry/<name>.json   one entry per registered workspace: its path and budget (written atomically,
                           one file each, so concurrent requests never write the same file)

A registered workspace is one the scheduled harvest tops up. `request` registers what it prepares;
`datafarm register WS` registers any other.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from datafarm.errors import BadInput
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

FARM_ROOT_ENV = "DATAFARM_FARM_ROOT"


def farm_root() -> Path:
    return Path(os.environ.get(FARM_ROOT_ENV) or Path.home() / "datafarm").expanduser().resolve()


@dataclass(frozen=True)
class RegistryEntry:
    name: str
    workspace: str  # absolute path
    max_usd: float | None  # the workspace's whole budget; the harvest skips it once spent
    registered: float


def entry_name(workspace_root: Path) -> str:
    """A registry file name from the workspace's folder name (letters, digits, dashes)."""
    return re.sub(r"[^a-z0-9]+", "-", Path(workspace_root).name.lower()).strip("-") or "workspace"


class Registry:
    """The registered workspaces of a farm root (``registry/<name>.json``)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.folder = self.root / "registry"

    def register(self, workspace: Workspace, max_usd: float | None = None) -> RegistryEntry:
        if max_usd is not None and not max_usd > 0:
            raise BadInput(f"budget {max_usd!r} USD: give a positive number of USD, or none for no budget")
        name = entry_name(workspace.root)
        path = self.folder / f"{name}.json"
        existing = self._read(path) if path.exists() else None
        if existing is not None and Path(existing.workspace) != workspace.root.resolve():
            raise BadInput(f"the registry name {name!r} is taken by {existing.workspace}: rename the workspace folder "
                           f"{workspace.root} (its name is the registry's key)")
        entry = RegistryEntry(name, str(workspace.root.resolve()), max_usd, time.time())
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(asdict(entry), indent=2))
        os.replace(tmp, path)
        log.info("registered workspace %s as %s in %s", workspace.root, name, self.folder)
        return entry

    def entries(self) -> list[RegistryEntry]:
        if not self.folder.is_dir():
            return []
        entries = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                entries.append(self._read(path))
            except BadInput as error:  # one damaged entry must not stop the others' harvest
                log.warning("%s", error)
        return entries

    @staticmethod
    def _read(path: Path) -> RegistryEntry:
        try:
            return RegistryEntry(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as error:
            raise BadInput(f"registry entry {path} cannot be read ({error}): delete it and register the workspace "
                           "again (`datafarm register WS`)") from error
