"""A long-lived sandboxed Python worker: pay the start-up (SAPIEN, torch imports) once, not per job.

The host side, :class:`SandboxWorker`, starts ``python -m MODULE ARGS`` in the bubblewrap sandbox
(datafarm.agent.sandbox: same mounts, limits and process cap as a one-shot run) and sends it one JSON
request per line; the worker answers one JSON line per request. The worker side, :func:`serve`, keeps
that channel private before any agent code runs: the request and reply pipes move to fresh file
descriptors, fd 0 reads /dev/null and fd 1 writes to stderr, so an agent's prints (or reads) never
mix with the protocol.

Every request has its own wall-clock limit: past it the whole sandbox is killed, the reply says
"timeout", and the next request starts a fresh worker. A worker that dies (memory limit, a crash, a
signal) is reported the same way, classified like a one-shot run. The memory limit is per process for
the worker's life; the CPU limit (``cpu_seconds``) too, so a worker is replaced after ``max_requests``.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel

from datafarm.agent.sandbox import (SandboxLimits, Violation, _classify, _kill_sandbox, _launch,
                                    python_readable)
from datafarm.costs import charge_worker_cpu

log = logging.getLogger(__name__)

_READY = {"ready": True}
CPU_KEY = "__cpu_seconds__"  # added to each reply by serve(): the CPU the request cost inside the sandbox
SANDBOXED_ENV = "DATAFARM_SANDBOXED"  # set by SandboxWorker; serve() ends stray processes only where it is


class WorkerReply(BaseModel):
    """One request's outcome: the worker's reply, or why there is none (violation)."""

    reply: dict[str, Any] | None = None
    violation: Violation | None = None
    returncode: int | None = None
    stderr: str = ""  # what the worker wrote to stderr during this request (the tail)
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0  # the worker's CPU for this request (its process, threads and reaped children)

    @property
    def ok(self) -> bool:
        return self.violation is None and self.reply is not None


class _Tail(threading.Thread):
    """Drains a pipe, keeping its last `limit` bytes and a running byte count."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit, self.data, self.total = stream, limit, bytearray(), 0
        self.lock = threading.Lock()

    def run(self) -> None:
        while chunk := self.stream.read1(1 << 16):
            with self.lock:
                self.total += len(chunk)
                self.data += chunk
                del self.data[:-self.limit]
        self.stream.close()

    def since(self, mark: int) -> str:
        with self.lock:
            fresh = self.data[-min(self.total - mark, len(self.data)):] if self.total > mark else b""
            return bytes(fresh).decode("utf-8", errors="replace")


class SandboxWorker:
    """``python -m module *args`` in the sandbox, serving JSON requests until closed (a context manager)."""

    def __init__(self, module: str, args: Sequence[str], workdir: Path, readable: Sequence[Path] = (),
                 hidden: Sequence[Path] = (), limits: SandboxLimits | None = None,
                 env: Mapping[str, str] | None = None, *, start_timeout: float = 180.0, max_requests: int = 50):
        self.module, self.args = module, [str(a) for a in args]
        self.workdir = Path(workdir).resolve()
        self.readable, self.hidden = list(readable), list(hidden)
        self.limits = limits or SandboxLimits()
        self.env = {**dict(env or {}), SANDBOXED_ENV: "1"}
        self.start_timeout, self.max_requests = start_timeout, max_requests
        self.starts = 0  # how many sandboxes this worker has started (start-ups are the cost it saves)
        self._proc: subprocess.Popen | None = None
        self._cap = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: _Tail | None = None
        self._served = 0
        self._lock = threading.Lock()

    # ----- life cycle ------------------------------------------------------------------------------
    def _start(self) -> WorkerReply | None:
        """Start the sandbox and wait for its ready line; a WorkerReply says why it did not come up."""
        argv = [sys.executable, "-m", self.module, *self.args]
        readable = python_readable(sys.executable, self.workdir, self.readable)
        started = time.monotonic()
        self._proc, self._cap = _launch(argv, self.workdir, readable, self.hidden, self.limits, self.env,
                                        None, True, subprocess.PIPE)
        self.starts += 1
        self._served = 0
        self._lines = queue.Queue()
        threading.Thread(target=self._read_lines, args=(self._proc.stdout, self._lines), daemon=True).start()
        self._stderr = _Tail(self._proc.stderr, self.limits.max_output_bytes)
        self._stderr.start()
        outcome = self._receive(0, self.start_timeout, started)
        if outcome.ok and outcome.reply == _READY:
            return None
        self._stop()
        return outcome if not outcome.ok else WorkerReply(violation="error", stderr=f"no ready line: {outcome.reply}")

    @staticmethod
    def _read_lines(stream: IO[bytes], lines: queue.Queue) -> None:
        for line in iter(lambda: stream.readline(64 << 20), b""):
            lines.put(line)
        lines.put(None)  # end of stream: the worker is gone

    def _stop(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                _kill_sandbox(self._proc)
            for stream in (self._proc.stdin,):
                try:
                    stream.close()
                except OSError:
                    pass
            self._cap.release()
        self._proc = None

    def close(self) -> None:
        """End the worker (its sandbox and everything in it)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                try:  # a clean goodbye first, so the worker's files are complete
                    self._proc.stdin.close()
                    self._proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._stop()

    def __enter__(self) -> SandboxWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----- requests --------------------------------------------------------------------------------
    def request(self, message: Mapping[str, Any], timeout: float) -> WorkerReply:
        """Send one request and wait at most `timeout` seconds for its reply (start-up not counted)."""
        with self._lock:
            if self._proc is not None and (self._proc.poll() is not None or self._served >= self.max_requests):
                self._stop()
            if self._proc is None:
                failed = self._start()
                if failed is not None:
                    return failed
            started = time.monotonic()
            mark = self._stderr.total
            try:
                self._proc.stdin.write(json.dumps(dict(message)).encode() + b"\n")
                self._proc.stdin.flush()
            except OSError:  # the worker died between requests
                pass
            self._served += 1
            outcome = self._receive(mark, timeout, started)
            if not outcome.ok:
                self._stop()
            return outcome

    def _receive(self, mark: int, timeout: float, started: float) -> WorkerReply:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            _kill_sandbox(self._proc)
            self._stderr.join(2)
            log.info("sandboxed %s: timeout after %.0f s", self.module, timeout)
            return WorkerReply(violation="timeout", returncode=self._proc.returncode,
                               stderr=self._stderr.since(mark), wall_seconds=time.monotonic() - started)
        if line is None:
            self._proc.wait()
            self._stderr.join(2)
            stderr = self._stderr.since(mark)
            violation = _classify(self._proc.returncode, stderr, self.limits, False) or "error"
            log.info("sandboxed %s: %s (exit %d)", self.module, violation, self._proc.returncode)
            return WorkerReply(violation=violation, returncode=self._proc.returncode, stderr=stderr,
                               wall_seconds=time.monotonic() - started)
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            return WorkerReply(violation="error", stderr=f"unreadable reply: {line[:200]!r}",
                               wall_seconds=time.monotonic() - started)
        cpu = float(reply.pop(CPU_KEY, 0.0)) if isinstance(reply, dict) else 0.0
        charge_worker_cpu(cpu)
        return WorkerReply(reply=reply, stderr=self._stderr.since(mark), wall_seconds=time.monotonic() - started,
                           cpu_seconds=cpu)


def serve(handle: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """The worker's side: answer each request line with handle(request) until stdin closes.

    Call it before importing or running agent code: it moves the protocol off fds 0 and 1.
    """
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # agent prints land on stderr
    sys.stdin = open(os.devnull)

    def send(reply: dict[str, Any]) -> None:
        replies.write(json.dumps(reply, default=str).encode() + b"\n")
        replies.flush()

    send({**_READY, CPU_KEY: _process_cpu_seconds()})  # the start-up (imports) is charged too
    worker = os.getpid()
    for line in requests:
        if line.strip():
            cpu_before = _process_cpu_seconds()
            reply = handle(json.loads(line))
            if os.getpid() != worker:  # a process the agent's code forked got here: it must not answer
                os._exit(0)
            _end_strays()  # nothing a request started outlives it (a daemon, a fork bomb's leftovers)
            send({**reply, CPU_KEY: _process_cpu_seconds() - cpu_before})


def _process_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _end_strays() -> None:
    """SIGKILL every other process in this sandbox's PID namespace, then reap our own children.

    Only inside the sandbox: kill(-1) spares the namespace's init (bwrap) and the caller, but outside
    a PID namespace it would reach every process the user owns, so both guards must hold.
    """
    if os.environ.get(SANDBOXED_ENV) != "1" or Path("/proc/1/comm").read_text().strip() != "bwrap":
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # there were none
    while True:  # every child of ours was just killed: wait for each (zombies would keep their pids)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
