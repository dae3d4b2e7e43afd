"""Run agent-written code (scene builders, experts, judges) in a bubblewrap sandbox.

What the sandboxed process gets:

- the whole system read-only (``--ro-bind / /``), a private ``/dev``, ``/proc`` and a size-capped
  ``/tmp`` tmpfs; ``workdir`` is the only host folder it can write, bound read-write at its own path;
- no network at all (new network namespace: no loopback, no DNS), new PID/IPC/UTS/user namespaces,
  an unprivileged uid, no capabilities, no nested user namespaces, a new terminal session;
- ``hidden`` paths masked (an empty read-only tmpfs over a folder, ``/dev/null`` over a file), and by
  default the host user's home masked too (API keys live there);
- only the environment given here (PATH, HOME=workdir, TMPDIR=/tmp, plus ``env``);
- rlimits: address space (``memory_bytes``), CPU seconds per process, written file size; a wall-clock
  limit kills the whole sandbox (bwrap ``--die-with-parent`` plus the PID namespace take every
  descendant with it);
- a cap on processes and threads alive at once (``max_processes``): a pids cgroup of its own as
  root (RLIMIT_NPROC does not bind root, whom the sandbox's uid maps back to), RLIMIT_NPROC otherwise.

Long-lived workers (one start-up for many jobs) are datafarm.agent.sandbox_worker.SandboxWorker.

Mounts are applied parents first, so the most specific path wins: a readable folder inside a hidden
one is visible, a hidden file inside the workdir or a readable folder is not.

The outcome is a :class:`SandboxResult`; ``violation`` says why a run did not finish normally. A
misbehaving script never raises here, so a caller can carry on with its next attempt. Only a broken
set-up raises (:class:`SandboxError` when bwrap is missing, ``FileNotFoundError`` for a missing bind).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field

from datafarm.errors import Unavailable

log = logging.getLogger(__name__)

Violation = Literal["timeout", "memory", "killed", "error"]
"""timeout: wall or CPU limit; memory: the address-space limit; killed: ended by a signal;
error: exited with a non-zero status (including bwrap failing to set the sandbox up)."""

_UNPRIVILEGED_ID = "65534"  # nobody / nogroup inside the sandbox's user namespace
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")

# Runs outside the sandbox, in place of a preexec_fn (unsafe with threads): join the process-count
# cgroup, set rlimits, exec bwrap. Arguments: AS CPU FSIZE NPROC CGROUP_PROCS_FILE, then bwrap's argv.
_LIMITER = (
    "import os, resource, sys\n"
    "a = sys.argv[1:]\n"
    "if a[4] != '-':\n"
    "    open(a[4], 'w').write(str(os.getpid()))\n"
    "for r, v in zip((resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE, resource.RLIMIT_NPROC), a[:4]):\n"
    "    if v != '-':\n"
    "        soft = int(v)\n"
    "        resource.setrlimit(r, (soft, soft + 1 if r == resource.RLIMIT_CPU else soft))\n"
    "os.execv(a[5], a[5:])\n"
)
_PIDS_V1 = Path("/sys/fs/cgroup/pids")  # cgroup v1 pids hierarchy
_CGROUP_V2 = Path("/sys/fs/cgroup")
_warned_no_process_cap = False


class SandboxError(Unavailable, RuntimeError):
    """The sandbox cannot be set up (bubblewrap missing)."""


class SandboxLimits(BaseModel):
    """Resource limits of one sandboxed run (None: no limit of that kind)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    wall_seconds: float = Field(60.0, gt=0, description="wall clock; the whole sandbox is killed after it")
    memory_bytes: int | None = Field(2 << 30, gt=0, description="address space (RLIMIT_AS) of each process")
    cpu_seconds: int | None = Field(None, gt=0, description="CPU time of each process (RLIMIT_CPU)")
    max_output_bytes: int = Field(1 << 20, gt=0, description="stdout and stderr each kept to this (head + tail)")
    file_bytes: int | None = Field(1 << 30, gt=0, description="largest file a process may write (RLIMIT_FSIZE)")
    tmp_bytes: int = Field(256 << 20, gt=0, description="size of the private /tmp tmpfs")
    max_processes: int | None = Field(512, gt=0, description="processes and threads alive at once in the sandbox "
                                                            "(a cgroup's pids.max as root, RLIMIT_NPROC otherwise)")


class SandboxResult(BaseModel):
    """What a sandboxed run did. Output is decoded UTF-8 (invalid bytes replaced)."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_seconds: float
    violation: Violation | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.violation is None


def find_bwrap(bwrap: str | Path | None = None) -> str:
    """The bwrap executable to use (`bwrap` on PATH by default); SandboxError if there is none."""
    candidate = str(bwrap) if bwrap is not None else "bwrap"
    found = shutil.which(candidate)
    if found is None:
        raise SandboxError(f"bubblewrap ({candidate}) is not installed or not executable: agent code runs only "
                           "in its sandbox. Install it with `apt-get install bubblewrap` or `make setup`.")
    return found


def _within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _mount_args(workdir: Path, readable: Sequence[Path], hidden: Sequence[Path], hide_home: bool) -> list[str]:
    """bwrap mount options after the fixed base, parents before children (the most specific wins)."""
    ops: list[tuple[int, int, Path, str]] = []  # (depth, order at equal depth, path, kind)
    for path in readable:
        if not path.exists():
            raise FileNotFoundError(f"readable path {path} does not exist")
        ops.append((len(path.parts), 0, path, "ro"))
    ops.append((len(workdir.parts), 1, workdir, "rw"))
    masks = list(hidden)
    home = Path.home().resolve()
    if hide_home and home != Path("/") and not _within(home, [workdir]):
        masks.append(home)
    for path in masks:
        if not path.exists():
            log.debug("hidden path %s does not exist: nothing to hide", path)
            continue
        ops.append((len(path.parts), 2, path, "dir" if path.is_dir() else "file"))
    args: list[str] = []
    remount = []
    for _, _, path, kind in sorted(ops, key=lambda op: (op[0], op[1])):
        if kind == "ro":
            args += ["--ro-bind", str(path), str(path)]
        elif kind == "rw":
            args += ["--bind", str(path), str(path)]
        elif kind == "dir":
            args += ["--size", str(1 << 20), "--tmpfs", str(path)]
            remount += ["--remount-ro", str(path)]  # after the binds placed inside it
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    return args + remount


class _ProcessCap:
    """Bounds how many processes and threads a sandbox runs at once (a fork bomb stops at the cap).

    RLIMIT_NPROC does not bind root (the sandbox's uid maps back to the host's root, which the kernel
    exempts), so as root each sandbox gets a pids cgroup of its own (v1 pids hierarchy, or v2 below
    ours) with pids.max; as any other user RLIMIT_NPROC = the user's tasks now + the cap. Where root
    can create no cgroup the cap is missing and a warning says so.
    """

    def __init__(self, max_processes: int | None) -> None:
        self.max_processes = max_processes
        self.cgroup: Path | None = None
        self.nproc: int | None = None

    @property
    def mechanism(self) -> str:
        return "cgroup pids.max" if self.cgroup else "RLIMIT_NPROC" if self.nproc else "none"

    def acquire(self) -> _ProcessCap:
        global _warned_no_process_cap
        if self.max_processes is None:
            return self
        if os.geteuid() != 0:
            self.nproc = _tasks_of_uid(os.getuid()) + self.max_processes
            return self
        for parent in (_PIDS_V1, _own_v2_cgroup()):
            if parent is None or not (parent / "cgroup.procs").exists():
                continue
            _sweep_orphans(parent)
            folder = parent / f"datafarm-sandbox-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
            try:
                folder.mkdir()
                (folder / "pids.max").write_text(str(self.max_processes))
            except OSError as error:
                log.debug("no pids cgroup under %s: %s", parent, error)
                with contextlib.suppress(OSError):
                    folder.rmdir()
                continue
            self.cgroup = folder
            return self
        if not _warned_no_process_cap:
            _warned_no_process_cap = True
            log.warning("sandboxes run WITHOUT a process-count limit: as root RLIMIT_NPROC does not bind and no "
                        "pids cgroup could be created (mount a writable cgroup, or run the farm as a normal user)")
        return self

    def limiter_args(self) -> list[str]:
        return [str(self.nproc) if self.nproc else "-", str(self.cgroup / "cgroup.procs") if self.cgroup else "-"]

    def release(self) -> None:
        """Remove the cgroup (its processes are gone once bwrap is: the PID namespace died with it)."""
        if self.cgroup is None:
            return
        for _ in range(250):
            try:
                self.cgroup.rmdir()
                break
            except OSError:  # still emptying: the kernel tears the PID namespace down asynchronously
                for pid in (self.cgroup / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.02)
        else:
            log.warning("could not remove the sandbox cgroup %s", self.cgroup)
        self.cgroup = None


def _sweep_orphans(parent: Path) -> None:
    """Remove the empty cgroups of farms that died without releasing them (kill -9)."""
    for folder in parent.glob("datafarm-sandbox-*"):
        try:
            os.kill(int(folder.name.split("-")[2]), 0)
        except ProcessLookupError:  # its farm is gone; rmdir fails harmlessly while processes remain
            with contextlib.suppress(OSError):
                folder.rmdir()
        except (ValueError, IndexError, PermissionError):
            continue


def _own_v2_cgroup() -> Path | None:
    try:
        line = next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    except (OSError, StopIteration):
        return None
    own = _CGROUP_V2 / line[3:].lstrip("/")
    try:
        return own if "pids" in (own / "cgroup.subtree_control").read_text().split() else None
    except OSError:
        return None


def _tasks_of_uid(uid: int) -> int:
    """Threads of every process the user runs now (what RLIMIT_NPROC counts)."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1 0").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count


def _bwrap_command(bwrap: str, command: Sequence[str], workdir: Path, readable: Sequence[Path],
                   hidden: Sequence[Path], limits: SandboxLimits, hide_home: bool, cap: _ProcessCap) -> list[str]:
    def limit(value: int | None) -> str:
        return "-" if value is None else str(value)

    launcher = [sys.executable, "-I", "-S", "-c", _LIMITER,
                limit(limits.memory_bytes), limit(limits.cpu_seconds), limit(limits.file_bytes), *cap.limiter_args()]
    sandbox = [bwrap, "--unshare-all", "--unshare-net", "--unshare-user", "--disable-userns",
               "--uid", _UNPRIVILEGED_ID, "--gid", _UNPRIVILEGED_ID, "--cap-drop", "ALL",
               "--die-with-parent", "--new-session",
               "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
               "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    sandbox += _mount_args(workdir, readable, hidden, hide_home)
    sandbox += ["--chdir", str(workdir), "--", *command]
    return launcher + sandbox


class _Capture(threading.Thread):
    """Drains a pipe, keeping the first and last `limit // 2` bytes (tracebacks sit at the end)."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.head_limit, self.tail_limit = stream, limit // 2, limit - limit // 2
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def run(self) -> None:
        while chunk := self.stream.read1(1 << 16):
            self.total += len(chunk)
            room = self.head_limit - len(self.head)
            self.head += chunk[:room]
            self.tail += chunk[room:] if room > 0 else chunk
            del self.tail[:-self.tail_limit]
        self.stream.close()

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {cut} bytes cut ...]\n".encode() if cut else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", errors="replace")


def _classify(returncode: int, stderr: str, limits: SandboxLimits, timed_out: bool) -> Violation | None:
    if timed_out:
        return "timeout"
    if returncode == 0:
        return None
    signum = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if signum == signal.SIGXCPU:
        return "timeout"
    if limits.memory_bytes is not None and any(m in stderr[-4000:] for m in _MEMORY_MARKERS):
        return "memory"
    if 0 < signum < signal.NSIG:
        return "killed"
    return "error"


def sandbox_env(workdir: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a sandboxed process sees: a few basics, then `env` on top."""
    base = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir),
            "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return base | dict(env or {})


def _launch(argv: list[str], workdir: Path, readable: Sequence[Path], hidden: Sequence[Path],
            limits: SandboxLimits, env: Mapping[str, str] | None, bwrap: str | Path | None, hide_home: bool,
            stdin: int | None) -> tuple[subprocess.Popen, _ProcessCap]:
    workdir.mkdir(parents=True, exist_ok=True)
    found = find_bwrap(bwrap)
    cap = _ProcessCap(limits.max_processes).acquire()
    try:
        full = _bwrap_command(found, argv, workdir, [Path(p).resolve() for p in readable],
                              [Path(p).resolve() for p in hidden], limits, hide_home, cap)
        log.debug("sandbox (process cap: %s): %s", cap.mechanism, full)
        proc = subprocess.Popen(full, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=sandbox_env(workdir, env), start_new_session=True)
    except BaseException:
        cap.release()
        raise
    return proc, cap


def run_sandboxed(command: str | Sequence[str], workdir: Path, readable: Sequence[Path] = (),
                  hidden: Sequence[Path] = (), limits: SandboxLimits | None = None,
                  env: Mapping[str, str] | None = None, *, bwrap: str | Path | None = None,
                  hide_home: bool = True) -> SandboxResult:
    """Run `command` (argv, or a string run by /bin/sh -c) in the sandbox, in `workdir`.

    `workdir` (created if missing) is the only writable host folder; `readable` are extra read-only
    binds (the system is readable anyway: these matter inside /tmp, a hidden folder or the home);
    `hidden` are masked. Never raises for what the command does; see :class:`SandboxResult`.
    """
    limits = limits or SandboxLimits()
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(part) for part in command]
    workdir = Path(workdir).resolve()
    started = time.monotonic()
    proc, cap = _launch(argv, workdir, readable, hidden, limits, env, bwrap, hide_home, subprocess.DEVNULL)
    out, err = _Capture(proc.stdout, limits.max_output_bytes), _Capture(proc.stderr, limits.max_output_bytes)
    out.start()
    err.start()
    timed_out = False
    try:
        proc.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if proc.poll() is None:  # wall limit, or our caller interrupted: take the whole sandbox down
            _kill_sandbox(proc)
        cap.release()
    out.join(5)
    err.join(5)
    stderr = err.text()
    violation = _classify(proc.returncode, stderr, limits, timed_out)
    result = SandboxResult(command=argv, returncode=proc.returncode, stdout=out.text(), stderr=stderr,
                           wall_seconds=time.monotonic() - started, violation=violation,
                           stdout_truncated=out.truncated, stderr_truncated=err.truncated)
    if violation:
        log.info("sandboxed %s: %s (exit %d, %.1f s)", argv[:3], violation, proc.returncode, result.wall_seconds)
    return result


def _kill_sandbox(proc: subprocess.Popen) -> None:
    """SIGKILL bwrap's session; --die-with-parent and the PID namespace end everything inside."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_python_in_sandbox(program: str | Path, workdir: Path, args: Sequence[str] = (),
                          readable: Sequence[Path] = (), hidden: Sequence[Path] = (),
                          limits: SandboxLimits | None = None, env: Mapping[str, str] | None = None,
                          *, python: str | Path | None = None, bwrap: str | Path | None = None,
                          hide_home: bool = True) -> SandboxResult:
    """Run Python code (a str) or a script (a Path) with this venv's python in the sandbox.

    The venv, its base interpreter and the script's folder are made readable. For `python -m some.runner args`, call
    run_sandboxed([sys.executable, "-m", "some.runner", *args], ...) with the same binds.
    """
    python = str(python or sys.executable)
    workdir = Path(workdir).resolve()
    extra = python_readable(python, workdir, readable)
    if isinstance(program, Path):
        argv = [python, str(program.resolve()), *args]
        if not _within(program.resolve().parent, [workdir, *extra]):
            extra.append(program.resolve().parent)
    else:
        argv = [python, "-c", program, *args]
    return run_sandboxed(argv, workdir, extra, hidden, limits, env, bwrap=bwrap, hide_home=hide_home)


def python_readable(python: str | Path, workdir: Path, readable: Sequence[Path] = ()) -> list[Path]:
    """`readable` plus what `python` needs: this venv, the interpreter it links to (pyenv lives in
    the hidden home), and the interpreter's folder."""
    extra = [Path(p).resolve() for p in readable]
    for folder in (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(python).resolve().parent):
        if not _within(folder, [Path(workdir).resolve(), *extra]):
            extra.append(folder)
    return extra
