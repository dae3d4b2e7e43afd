"""Agent-written code out of the orchestrator: the expert simulates in one sandbox, the judge judges in another.

Sandbox A (the expert's) reads scene/ and the expert, never the judge (masked, and so are the
library's own judges and the checkout's git history); it writes the trace, and when recording the
episode's sim/ folder, into its one writable folder. Sandbox B (the judge's) reads the judge and a
copy of that trace, never the expert; it answers the verdict. Both are long-lived workers
(datafarm.agent.sandbox_worker): SAPIEN's start-up is paid once per phase, not once per seed.

Whatever the code does (raises, hangs, blows its memory, forks without end) the outcome is a
rejected episode whose error says what happened, and the next seed runs in a fresh worker.

:func:`judge_in_sandbox` judges one saved trace (closed-loop policy evaluation calls it);
:func:`expert_feedback` is all an expert's author may learn of the judge: check names and pass/fail.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from datafarm.agent.sandbox import SandboxLimits
from datafarm.agent.sandbox_worker import SandboxWorker, WorkerReply
from datafarm.paths import REPO_ROOT
from datafarm.sim.config import RigConfig
from datafarm.task.package import TaskPackage
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import EpisodeResult, SimulatedEpisode
from datafarm.task.trace import Trace
from datafarm.task.verdict import Verdict

log = logging.getLogger(__name__)

WORKER = "datafarm.task.isolated_worker"
# Address space, not resident memory: a recorded apple_on_scale episode peaks at 2.2 GiB of it (1.0 GiB
# resident) with lavapipe on 2 cores (benchmarks/sandbox_overhead.py prints the peaks).
EXPERT_LIMITS = SandboxLimits(wall_seconds=600, memory_bytes=8 << 30, cpu_seconds=4 * 3600, max_processes=512)
JUDGE_LIMITS = SandboxLimits(wall_seconds=120, memory_bytes=4 << 30, cpu_seconds=3600, max_processes=128)  # wall: a verdict
_PASSED_ENV = ("VK_", "MESA_", "LP_", "SAPIEN_", "NVIDIA_", "__EGL", "__GLX")  # how the host picks its Vulkan driver


def worker_env() -> dict[str, str]:
    """What a worker sees of the host's environment: the import path, offline switches, Vulkan choices."""
    env = {"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "XDG_CACHE_HOME": "/tmp/cache", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env |= {k: v for k, v in os.environ.items() if k.startswith(_PASSED_ENV)}
    return env


def expert_never_sees() -> list[Path]:
    """Judges that ship with the code (the library's tasks) and the checkout's history of them."""
    library = REPO_ROOT / "datafarm" / "library"
    return [*sorted(library.glob("*/judge.py")), REPO_ROOT / ".git"]


class JudgeSandbox:
    """A judge in its own long-lived sandbox: `verdict(trace_path, params)` per saved trace."""

    def __init__(self, judge_file: Path, workdir: Path, hidden: Sequence[Path] = (),
                 limits: SandboxLimits = JUDGE_LIMITS):
        self.limits = limits
        self.judge_file = Path(judge_file).resolve()
        self.workdir = Path(workdir).resolve()
        self.worker = SandboxWorker(WORKER, ["judge"], self.workdir, readable=[REPO_ROOT, self.judge_file.parent],
                                    hidden=hidden, limits=limits, env=worker_env())

    def verdict(self, trace_path: Path, params: Mapping[str, Any]) -> Verdict:
        """The judge's verdict on a saved trace; a judge that fails gives a verdict with no checks."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        inbox = self.workdir / "trace.npz"
        shutil.copyfile(trace_path, inbox)  # the judge reads a copy in its own folder, never the expert's
        outcome = self.worker.request({"op": "judge", "judge_file": str(self.judge_file), "trace_path": str(inbox),
                                       "params": dict(params)}, timeout=self.limits.wall_seconds)
        problem = _problem(outcome)
        if problem:
            log.warning("the judge %s failed: %s", self.judge_file, problem)
            return Verdict({}, {}, f"the judge failed: {problem}")
        reply = outcome.reply
        return Verdict(dict(reply["checks"]), dict(reply["values"]), str(reply["reason"]))

    def close(self) -> None:
        self.worker.close()


def judge_in_sandbox(judge_dir: Path, scene_dir: Path, trace_path: Path, workdir: Path,
                     params: dict | None = None, *, hidden: Sequence[Path] = ()) -> Verdict:
    """Judge one saved Trace (Trace.save's .npz) with judge_dir/judge.py in a sandbox of its own.

    `params` default to scene_dir/params.yaml. `workdir` is the judge's only writable folder (a copy of
    the trace goes there); `hidden` are more paths it must not read (an expert, a policy). A judge
    that fails or misbehaves gives a verdict with no checks (never a success), the reason saying why.
    """
    if params is None:
        params = yaml.safe_load((Path(scene_dir) / "params.yaml").read_text()) or {}
    sandbox = JudgeSandbox(Path(judge_dir) / "judge.py", workdir, hidden)
    try:
        return sandbox.verdict(Path(trace_path), params)
    finally:
        sandbox.close()


class IsolatedRollouts:
    """Episodes of one package, the expert in sandbox A and the judge in sandbox B (a context manager).

    `hidden` are paths neither may read (a workspace root: its scene/, expert/ and judge/ are then
    bound back one by one). `do_nothing` runs the contract's negative control instead of the expert.
    An episode's sandbox is killed `timeout_margin` seconds past its wall limit (the SIGALRM inside
    stops ordinary runaways first; this stops code that blocks it).
    """

    def __init__(self, package: TaskPackage, workdir: Path, hidden: Sequence[Path] = (), *,
                 do_nothing: bool = False, expert_limits: SandboxLimits = EXPERT_LIMITS,
                 judge_limits: SandboxLimits = JUDGE_LIMITS, timeout_margin: float = 60.0):
        self.package = package
        self.scene_dir = package.directory.resolve()
        self.expert_file = None if do_nothing else (package.expert_file or package.directory / "expert.py").resolve()
        self.judge_file = (package.judge_file or package.directory / "judge.py").resolve()
        self.workdir = Path(workdir).resolve()
        hidden = [Path(p).resolve() for p in hidden]
        readable = [REPO_ROOT, self.scene_dir] + ([self.expert_file.parent] if self.expert_file else [])
        self.expert = SandboxWorker(WORKER, ["expert"], self.workdir / "expert", readable=readable,
                                    hidden=[*hidden, *expert_never_sees(), *_own_folder(self.judge_file, readable)],
                                    limits=expert_limits, env=worker_env())
        self.judge = JudgeSandbox(self.judge_file, self.workdir / "judge",
                                  hidden=[*hidden, *_own_folder(self.expert_file, [self.scene_dir, self.judge_file.parent])],
                                  limits=judge_limits)
        self.timeout_margin = timeout_margin
        self.last_reply: dict[str, Any] = {}  # the expert worker's last reply (its memory peaks, for benchmarks)
        self._lock = threading.Lock()

    def run(self, seed: int, randomization: RandomizationConfig | None = None, rig_config: RigConfig | None = None,
            record_dir: Path | None = None, wall_limit: float | None = 120.0) -> EpisodeResult:
        """One episode, as datafarm.task.rollout.run_episode would give it, from the two sandboxes."""
        with self._lock:  # one episode at a time per worker pair
            return self._run(seed, randomization, rig_config, record_dir, wall_limit)

    def _run(self, seed, randomization, rig_config, record_dir, wall_limit) -> EpisodeResult:
        folder = self.workdir / "expert"
        folder.mkdir(parents=True, exist_ok=True)
        trace_path, staged = folder / "trace.npz", folder / "record"
        trace_path.unlink(missing_ok=True)
        shutil.rmtree(staged, ignore_errors=True)
        job = {"op": "simulate", "scene_dir": str(self.scene_dir), "seed": seed,
               "expert_file": str(self.expert_file) if self.expert_file else None,
               "randomization": randomization.model_dump(mode="json") if randomization else None,
               "rig_config": rig_config.model_dump(mode="json") if rig_config else None,
               "record_dir": str(staged) if record_dir is not None else None,
               "trace_path": str(trace_path), "wall_limit": wall_limit}
        outcome = self.expert.request(job, timeout=(wall_limit or 600.0) + self.timeout_margin)
        problem = _problem(outcome)
        if problem or not trace_path.is_file():
            problem = problem or "the expert's sandbox wrote no trace"
            traceback = (outcome.reply or {}).get("traceback")
            return EpisodeResult(self.package.name, seed, Verdict({}, {}, "not judged: the episode did not run"),
                                 0, 0.0, outcome.wall_seconds, f"Sandbox: {problem}", {}, None, traceback)
        reply = self.last_reply = outcome.reply
        simulated = SimulatedEpisode(reply["task"], reply["seed"], Trace.load(trace_path), reply["steps"],
                                     reply["sim_seconds"], reply["wall_seconds"], reply["error"], reply["traceback"],
                                     reply["sample"])
        verdict = self.judge.verdict(trace_path, self.package.params)
        if record_dir is not None:
            record_dir = Path(record_dir)
            if record_dir.exists():
                shutil.rmtree(record_dir)
            record_dir.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staged), str(record_dir))
        return simulated.judged(verdict)

    def close(self) -> None:
        self.expert.close()
        self.judge.close()

    def __enter__(self) -> IsolatedRollouts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _own_folder(path: Path | None, shared: Sequence[Path]) -> list[Path]:
    """What to mask so the other sandbox cannot read `path`: its folder, unless it shares that folder."""
    if path is None:
        return []
    return [path] if path.parent in [Path(p).resolve() for p in shared] else [path.parent]


def _problem(outcome: WorkerReply) -> str | None:
    """Why a worker's reply is not a result: the sandbox's violation, or what the code raised."""
    if not outcome.ok:
        lines = [line for line in outcome.stderr.strip().splitlines() if line.strip()]
        return f"{outcome.violation} (exit {outcome.returncode})" + (f": {lines[-1][-300:]}" if lines else "")
    if "failure" in outcome.reply:
        return str(outcome.reply["failure"])
    return None


# ----- one pair of workers per package, kept for the life of the process (rollout calls it per seed) --
_sessions: dict[tuple, IsolatedRollouts] = {}
_sessions_lock = threading.Lock()


def rollouts_for(package: TaskPackage, workdir: Path, hidden: Sequence[Path] = ()) -> IsolatedRollouts:
    """The live IsolatedRollouts of this package (started on first use). A worker's binds hold the
    folders it started with, so any sign of other files gets fresh workers: a changed expert or judge,
    or the same paths made anew (a workspace deleted and prepared again; copies keep mtimes, not
    inodes or ctimes)."""
    Path(workdir).mkdir(parents=True, exist_ok=True)
    files = [package.expert_file or package.directory / "expert.py", package.judge_file or package.directory / "judge.py"]
    folders = [package.directory, Path(workdir)]  # their ctimes move with every file written inside: inodes only
    stamp = tuple((str(f), f.stat().st_ino, f.stat().st_ctime_ns, f.stat().st_size) for f in files if f.exists())
    stamp += tuple((str(f), f.stat().st_ino) for f in folders if f.exists())
    key = (str(package.directory.resolve()), str(Path(workdir).resolve()), tuple(map(str, hidden)), stamp)
    with _sessions_lock:
        if key not in _sessions:
            for old in [k for k in _sessions if k[:3] == key[:3]]:
                _sessions.pop(old).close()
            _sessions[key] = IsolatedRollouts(package, workdir, hidden)
        return _sessions[key]


@atexit.register
def close_rollouts() -> None:
    """End every live worker pair."""
    with _sessions_lock:
        while _sessions:
            _sessions.popitem()[1].close()


# ----- what an expert's author may learn ------------------------------------------------------------
REDACTED = "[judge text removed]"


def expert_feedback(results: Sequence[EpisodeResult], judge_file: Path | None = None) -> dict[str, Any]:
    """Success statistics for the expert's author: per failure the seed, its own error and traceback,
    and the names of the checks that failed. Never the verdict's reason or values, and any text of
    the judge (whole lines of its source) is cut from what the expert's code said."""
    secret = _secret_lines(judge_file)
    frames = ["datafarm_judge"] + ([str(Path(judge_file).resolve())] if judge_file else [])  # a judge's frames

    def clean(text: str | None) -> str | None:
        if text is None:
            return None
        text = "".join(line for line in text.splitlines(True) if not any(mark in line for mark in frames))
        for line in secret:
            text = text.replace(line, REDACTED)
        return text

    failures = [{"seed": r.seed, "error": clean(r.error), "traceback": clean(r.traceback),
                 "failed_checks": sorted(k for k, ok in r.verdict.checks.items() if not ok),
                 "passed_checks": sorted(k for k, ok in r.verdict.checks.items() if ok)}
                for r in results if not r.success]
    successes = sum(r.success for r in results)
    return {"seeds": [r.seed for r in results], "successes": successes,
            "success_rate": successes / len(results) if results else 0.0, "failures": failures}


def _secret_lines(judge_file: Path | None) -> list[str]:
    if judge_file is None or not Path(judge_file).is_file():
        return []
    lines = {line.strip() for line in Path(judge_file).read_text(errors="replace").splitlines()}
    return sorted((line for line in lines if len(line) >= 12), key=len, reverse=True)
