"""What a refused command must leave alone: a digest of every file under a folder, and what changed since."""

from __future__ import annotations

import hashlib
from pathlib import Path

LOG_FOLDER = "logs"  # a workspace's log grows with every command
APPEND_ONLY = ("costs.jsonl", "timings.jsonl")  # records that may grow; what they held must stay


def tree_digest(path: Path) -> dict[str, tuple[int, str]]:
    """(size, SHA-256) of every file under `path` (or of `path` itself), by relative name; logs aside."""
    if path.is_file():
        return {".": (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())}
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(path.rglob("*")) if p.is_file() and p.relative_to(path).parts[0] != LOG_FOLDER}


def lost_files(path: Path, before: dict[str, tuple[int, str]]) -> list[str]:
    """Files under `path` that were deleted or changed since `before` (an append-only record may only grow)."""
    lost = []
    for relative, (size, digest) in before.items():
        file = path if relative == "." else path / relative
        if not file.is_file():
            lost.append(f"{relative} (deleted)")
        elif relative in APPEND_ONLY:
            if hashlib.sha256(file.read_bytes()[:size]).hexdigest() != digest:
                lost.append(f"{relative} (rewritten)")
        elif hashlib.sha256(file.read_bytes()).hexdigest() != digest:
            lost.append(f"{relative} (modified)")
    return lost
