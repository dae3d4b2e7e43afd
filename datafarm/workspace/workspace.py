"""A farm workspace on disk (see README, "The workspace").

Every write is atomic (a temporary file in the same folder, then a rename), so a killed process
never leaves a half-written file under its final name. A phase records the hash of its inputs and
the SHA-256 of each output; a rerun skips a phase whose inputs are unchanged and whose outputs are
all still there, unmodified.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from datafarm.errors import BadInput
from datafarm.workspace.jsonl import append_jsonl, read_jsonl

LAYOUT_VERSION = 1
_UMASK = os.umask(0)
os.umask(_UMASK)
META_FILE = "workspace.json"


class WorkspaceError(BadInput, RuntimeError):
    """The workspace is missing, malformed, or cannot serve the request."""


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_json(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def this_process() -> str:
    """`host:pid`: where a piece of work ran."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class PhaseRecord:
    phase: str
    inputs_hash: str
    outputs: dict[str, str]  # path relative to the workspace -> sha256
    started: float
    finished: float
    details: dict = field(default_factory=dict)


class Workspace:
    def __init__(self, root: Path, meta: dict):
        self.root = root
        self.meta = meta

    # ----- creation and opening ----------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path) -> Workspace:
        root = Path(root)
        meta_path = root / META_FILE
        if not meta_path.exists():
            raise WorkspaceError(f"{root} is not a DataFarm workspace ({META_FILE} missing): create one with "
                                 "`datafarm prepare --episode CALIB --request-file request.txt --output WS`")
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise WorkspaceError(f"{meta_path} cannot be read ({error}): it is damaged; restore it from a backup, or "
                                 "prepare a new workspace (`datafarm prepare ... --output NEW`)") from error
        if not isinstance(meta, dict) or "settings" not in meta:
            raise WorkspaceError(f"{meta_path} is not a DataFarm workspace record (no settings): restore it from a "
                                 "backup, or prepare a new workspace (`datafarm prepare ... --output NEW`)")
        return cls(root, meta)

    @classmethod
    def initialise(cls, root: str | Path, meta: dict) -> Workspace:
        root = Path(root)
        if (root / META_FILE).exists():
            raise WorkspaceError(f"{root} already holds a workspace; choose a new --output or delete it")
        if root.exists() and not root.is_dir():
            raise WorkspaceError(f"--output {root} is a file, not a folder: choose a new folder for the workspace")
        workspace = cls(root, {"layout_version": LAYOUT_VERSION, "created": time.time(), **meta})
        try:
            root.mkdir(parents=True, exist_ok=True)
            workspace.save_meta()
        except OSError as error:
            raise WorkspaceError(f"cannot create the workspace in {root} ({error.strerror or error}): choose an "
                                 "--output folder you can write to") from error
        return workspace

    def save_meta(self) -> None:
        self.write_json(META_FILE, self.meta)

    # ----- files ---------------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def relative(self, path: Path) -> str:
        return str(Path(path).resolve().relative_to(self.root.resolve()))

    def write_bytes(self, relative: str, data: bytes) -> Path:
        target = self.path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; deliveries are for other people too
        os.replace(tmp, target)
        return target

    def write_text(self, relative: str, text: str) -> Path:
        return self.write_bytes(relative, text.encode())

    def write_json(self, relative: str, data) -> Path:
        return self.write_text(relative, json.dumps(data, indent=2, sort_keys=True, default=str))

    def read_json(self, relative: str):
        path = self.path(relative)
        if not path.exists():
            raise WorkspaceError(f"{path} is missing: run the phase that writes it (`datafarm farm {self.root}`)")
        return json.loads(path.read_text())

    def copy_in(self, source: Path, relative: str) -> Path:
        """Copy a file or folder into the workspace atomically (staged, then renamed)."""
        target = self.path(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{target.name}.staging")
        if staging.exists():
            shutil.rmtree(staging) if staging.is_dir() else staging.unlink()
        if Path(source).is_dir():
            shutil.copytree(source, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
        else:
            shutil.copy2(source, staging)
        if target.exists():
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        staging.rename(target)
        return target

    def files_under(self, relative: str) -> list[str]:
        base = self.path(relative)
        if base.is_file():
            return [relative]
        return sorted(self.relative(p) for p in base.rglob("*") if p.is_file() and not p.name.startswith("."))

    # ----- phases ----------------------------------------------------------------------------------
    def _record_path(self, phase: str) -> str:
        return f"phases/{phase}.json"

    def phase_record(self, phase: str) -> PhaseRecord | None:
        path = self.path(self._record_path(phase))
        return PhaseRecord(**json.loads(path.read_text())) if path.exists() else None

    def phase_is_current(self, phase: str, inputs_hash: str) -> bool:
        """Done before with the same inputs, and every output still there, unmodified."""
        record = self.phase_record(phase)
        if record is None or record.inputs_hash != inputs_hash:
            return False
        return all(self.path(p).exists() and sha256_file(self.path(p)) == h for p, h in record.outputs.items())

    def record_phase(self, phase: str, inputs_hash: str, outputs: list[str], started: float,
                     details: dict | None = None) -> PhaseRecord:
        files = sorted({f for relative in outputs for f in self.files_under(relative)})
        record = PhaseRecord(phase, inputs_hash, {f: sha256_file(self.path(f)) for f in files},
                             started, time.time(), details or {})
        self.write_json(self._record_path(phase), asdict(record))
        return record

    def output_hash(self, phase: str) -> str:
        """A hash over a finished phase's outputs (the input hash of the phases after it)."""
        record = self.phase_record(phase)
        if record is None:
            raise WorkspaceError(f"phase {phase!r} has not run in {self.root}")
        return sha256_json(record.outputs)

    def log_timing(self, phase: str, seconds: float, episode: int | None = None, end: float | None = None,
                   process: str | None = None) -> None:
        """Wall time of one library call, ending now or at `end`, and the process that ran it (this one by
        default; timings.jsonl): what the orchestration overhead is measured against, and on a cluster
        which machine did what."""
        append_jsonl(self.path("timings.jsonl"), {"phase": phase, "episode": episode, "seconds": seconds,
                                                  "end": end or time.time(), "process": process or this_process()})

    def timings(self) -> list[dict]:
        return read_jsonl(self.path("timings.jsonl"))

    def invalidate(self, phase: str) -> None:
        path = self.path(self._record_path(phase))
        if path.exists():
            path.unlink()
