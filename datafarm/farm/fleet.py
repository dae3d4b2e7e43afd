"""The farm root: where API-triggered requests put their workspaces, and the registry scheduled harvesting reads.

Layout of a farm root (``DATAFARM_FARM_ROOT``, default ``~/datafarm``)::

    calibrations/          the default allowed root for calibration episodes (DATAFARM_ALLOWED_ROOTS)
    workspaces/<name>/     workspaces the `request` deployment prepares (one folder per request)
    registry/<name>.json   one entry per registered workspace: its path (written atomically, one file
                           each, so concurrent requests never write the same file); the budget is the
                           workspace's own max_usd setting

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
    registered: float


def entry_name(workspace_root: Path) -> str:
    """A registry file name from the workspace's folder name (letters, digits, dashes)."""
    return re.sub(r"[^a-z0-9]+", "-", Path(workspace_root).name.lower()).strip("-") or "workspace"


def set_budget(workspace: Workspace, max_usd: float) -> None:
    """Set the workspace's whole budget (validated like every setting); the farm starts no work past it."""
    from datafarm.farm.settings import load_settings

    values = {**workspace.meta["settings"], "max_usd": max_usd}
    load_settings(values, f"{workspace.path('workspace.json')} settings")
    workspace.meta["settings"] = values
    workspace.save_meta()
    log.info("%s: budget set to $%.4f", workspace.root, max_usd)


class Registry:
    """The registered workspaces of a farm root (``registry/<name>.json``)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.folder = self.root / "registry"

    def register(self, workspace: Workspace, max_usd: float | None = None) -> RegistryEntry:
        """Register `workspace` (and, given `max_usd`, set its budget: the workspace's max_usd setting)."""
        name = entry_name(workspace.root)
        path = self.folder / f"{name}.json"
        existing = self._read(path) if path.exists() else None
        if existing is not None and Path(existing.workspace) != workspace.root.resolve():
            raise BadInput(f"the registry name {name!r} is taken by {existing.workspace}: rename the workspace folder "
                           f"{workspace.root} (its name is the registry's key)")
        if max_usd is not None:
            set_budget(workspace, max_usd)
        entry = RegistryEntry(name, str(workspace.root.resolve()), time.time())
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
            data = json.loads(path.read_text())
            if isinstance(data, dict) and data.pop("max_usd", None) is not None:  # from before budgets moved
                raise BadInput(f"registry entry {path} holds a budget, which is now the workspace's own max_usd "
                               f"setting: register it again with `datafarm register {data.get('workspace')} "
                               "--max-usd N`")
            return RegistryEntry(**data)
        except (OSError, ValueError, TypeError) as error:
            raise BadInput(f"registry entry {path} cannot be read ({error}): delete it and register the workspace "
                           "again (`datafarm register WS`)") from error
