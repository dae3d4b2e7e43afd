"""Append-only JSON-lines files (rollout/attempts.jsonl, costs.jsonl, timings.jsonl, agent transcripts).

A kill can stop a process in the middle of an append, leaving a last line without its newline. Such
a torn tail is the only damage an append can do, so:

- :func:`append_jsonl` writes a record as one line with one ``write`` (under an exclusive lock, so
  concurrent appenders do not interleave); when the file's last byte is not a newline, the torn tail
  is cut off first, so the new line starts clean.
- :func:`read_jsonl` ignores a torn last line (logged at DEBUG); a damaged line *before* the last one
  is not a kill's doing, and raises BadInput naming the file, the line and the fix.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datafarm.errors import BadInput

log = logging.getLogger(__name__)


def append_jsonl(path: str | Path, record: Mapping[str, Any]) -> None:
    """Append `record` as one JSON line (created with its folder if missing)."""
    path = Path(path)
    line = (json.dumps(dict(record), default=str) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _cut_torn_tail(fd, path)
        written = 0
        while written < len(line):  # one write for any line a regular file takes whole
            written += os.write(fd, line[written:])
    finally:
        os.close(fd)  # closing releases the lock


def _cut_torn_tail(fd: int, path: Path) -> None:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - (1 << 20))
    tail = os.pread(fd, size - start, start)
    keep = start + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
    log.debug("%s: cutting a torn last line of %d bytes (a killed write) before appending", path, size - keep)
    os.ftruncate(fd, keep)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSON-lines file ([] when it does not exist), a torn last line left out."""
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines[-1]:  # no newline at the end: the last append was cut off by a kill
        log.debug("%s: ignoring a torn last line (%d bytes; a killed write)", path, len(lines[-1]))
    records = []
    for number, raw in enumerate(lines[:-1], 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise BadInput(f"{path}, line {number}: not a JSON record ({error}); the file is append-only and only "
                           f"its last line can be torn by a kill, so it was edited or damaged: delete that line "
                           f"(or restore the file) and rerun") from None
        if not isinstance(record, dict):
            raise BadInput(f"{path}, line {number}: expected a JSON object, got {type(record).__name__}: "
                           f"delete that line (or restore the file) and rerun")
        records.append(record)
    return records
