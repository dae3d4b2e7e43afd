"""One farm run per workspace at a time: a lock file in the workspace naming its holder.

``<workspace>/farm.lock`` holds JSON: the holder's run (a Prefect flow run id, or "cli"), pid, host,
when it was taken and when it was last renewed. A holder renews it every ``lease_s / 4`` seconds from
a daemon thread while it runs. A crashed holder cannot keep it forever: the lock is *stale*, and the
next run takes it over, when its pid is dead on this host or when it has not been renewed for a whole
lease (a holder on another host, or a frozen one). Check-and-take happens under ``flock`` on a
guard file, so two runs starting together cannot both win.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from datafarm.errors import PermanentError

log = logging.getLogger(__name__)

LOCK_FILE = "farm.lock"
GUARD_FILE = ".farm.lock.guard"
DEFAULT_LEASE_S = 600.0  # a holder that stops renewing for this long is presumed dead


class WorkspaceLocked(PermanentError):
    """Another farm run holds the workspace. Exit code 2: wait for that run (or stop it), then rerun."""

    exit_code = 2

    def __init__(self, message: str, holder: LockHolder):
        super().__init__(message)
        self.holder = holder


@dataclass(frozen=True)
class LockHolder:
    run: str  # a Prefect flow run id, or "cli" for a run without one
    pid: int
    host: str
    taken: float
    renewed: float
    lease_s: float
    token: str  # tells this holding apart from a later one by the same run

    def describe(self) -> str:
        age = time.time() - self.taken
        return f"run {self.run} (pid {self.pid} on {self.host}, since {age:.0f} s ago)"

    def stale_because(self, now: float | None = None) -> str | None:
        """Why the lock no longer binds anyone, or None while its holder may still be running."""
        now = time.time() if now is None else now
        if self.host == socket.gethostname() and not _pid_alive(self.pid):
            return f"its process {self.pid} is gone"
        if now - self.renewed > self.lease_s:
            return f"it was not renewed for {now - self.renewed:.0f} s (lease {self.lease_s:.0f} s)"
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def read_holder(workspace_root: Path) -> LockHolder | None:
    """The lock's holder as written, or None when there is no lock (a damaged file counts as none)."""
    path = Path(workspace_root) / LOCK_FILE
    try:
        return LockHolder(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as error:
        log.warning("ignoring the damaged lock file %s (%s)", path, error)
        return None


def live_holder(workspace_root: Path) -> LockHolder | None:
    """The holder if the lock still binds (not stale), else None."""
    holder = read_holder(workspace_root)
    return holder if holder is not None and holder.stale_because() is None else None


def check_unlocked(workspace_root: Path) -> None:
    """Raise WorkspaceLocked when a live run holds the workspace (a check before starting, not a lock)."""
    holder = live_holder(workspace_root)
    if holder is not None:
        raise _locked(workspace_root, holder)


def _locked(workspace_root: Path, holder: LockHolder) -> WorkspaceLocked:
    return WorkspaceLocked(
        f"workspace {workspace_root} is being farmed by {holder.describe()}: wait for that run to finish (or "
        f"cancel it in the Prefect UI / stop pid {holder.pid}), then rerun; a crashed run's lock is taken over "
        f"by itself once its process is gone or after {holder.lease_s:.0f} s without renewal", holder)


@contextmanager
def _guarded(workspace_root: Path) -> Iterator[None]:
    with open(Path(workspace_root) / GUARD_FILE, "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)


def _write(workspace_root: Path, holder: LockHolder) -> None:
    path = Path(workspace_root) / LOCK_FILE
    tmp = path.with_name(f".{LOCK_FILE}.{holder.token}")
    tmp.write_text(json.dumps(asdict(holder)))
    os.replace(tmp, path)


def acquire(workspace_root: Path, run: str, lease_s: float = DEFAULT_LEASE_S) -> LockHolder:
    """Take the lock for `run`, or raise WorkspaceLocked naming the live holder. A stale lock is taken over."""
    root = Path(workspace_root)
    with _guarded(root):
        current = read_holder(root)
        if current is not None:
            reason = current.stale_because()
            if reason is None:
                raise _locked(root, current)
            log.warning("taking over the farm lock of %s held by %s: %s", root, current.describe(), reason)
        now = time.time()
        holder = LockHolder(run=run, pid=os.getpid(), host=socket.gethostname(), taken=now, renewed=now,
                            lease_s=lease_s, token=uuid.uuid4().hex)
        _write(root, holder)
    return holder


def renew(workspace_root: Path, holder: LockHolder) -> LockHolder | None:
    """Push the lease forward; None when the lock is no longer ours (taken over after we looked dead)."""
    root = Path(workspace_root)
    with _guarded(root):
        current = read_holder(root)
        if current is None or current.token != holder.token:
            return None
        renewed = LockHolder(**{**asdict(holder), "renewed": time.time()})
        _write(root, renewed)
    return renewed


def release(workspace_root: Path, holder: LockHolder) -> None:
    """Remove the lock if it is still ours (a run that lost it never removes its successor's)."""
    root = Path(workspace_root)
    with _guarded(root):
        current = read_holder(root)
        if current is not None and current.token == holder.token:
            (root / LOCK_FILE).unlink()


_held_here: dict[Path, LockHolder] = {}  # locks this process holds: a nested farm_lock re-enters them
_held_guard = threading.Lock()


@contextmanager
def farm_lock(workspace_root: Path, run: str, lease_s: float = DEFAULT_LEASE_S) -> Iterator[LockHolder]:
    """Hold the workspace's farm lock for the block, renewing it from a daemon thread.

    Re-entrant within a process: a flow holding the lock may run a subflow that asks for it again
    (the scheduled top-up holds it while it raises the target, then runs `farm`)."""
    root = Path(workspace_root).resolve()
    with _held_guard:
        nested = _held_here.get(root)
    if nested is not None and (current := read_holder(root)) is not None and current.token == nested.token:
        yield nested
        return
    holder = acquire(root, run, lease_s)
    with _held_guard:
        _held_here[root] = holder
    stop = threading.Event()

    def keep_renewing() -> None:
        current = holder
        while not stop.wait(lease_s / 4):
            try:
                current = renew(root, current)
            except OSError as error:  # a transient file-system hiccup: try again next time
                log.warning("could not renew the farm lock of %s: %s", root, error)
                continue
            if current is None:
                log.error("the farm lock of %s was taken over by another run; this run (%s) no longer holds it",
                          root, run)
                return

    renewer = threading.Thread(target=keep_renewing, name=f"farm-lock-{root.name}", daemon=True)
    renewer.start()
    try:
        yield holder
    finally:
        stop.set()
        renewer.join(timeout=5)
        with _held_guard:
            _held_here.pop(root, None)
        release(root, holder)
