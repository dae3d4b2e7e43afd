"""The reliability campaign's two farm checks, shared by the tests and `benchmarks/reliability.py`.

- `tamper_campaign`: change one byte at a time at random positions across a delivery (every file
  the manifest lists, and the manifest itself), run verify, restore the byte. Every change must be
  found.
- `kill_resume_campaign`: kill -9 `datafarm farm` (its whole process group, as a lost machine would)
  at random points of the rollout, render, review and harvest phases and while a file is being
  written, resume with `datafarm farm` each time, then compare with a run that was never killed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bad_inputs import command_env, datafarm_command, run_datafarm

# ----- tamper -------------------------------------------------------------------------------------------------
MANIFEST = "manifest.json"


def delivery_files(workspace: Path) -> list[str]:
    """What a delivery is: every file its manifest lists, and the manifest."""
    manifest = json.loads((workspace / MANIFEST).read_text())
    return sorted(manifest["files"]) + [MANIFEST]


def tamper_positions(workspace: Path, count: int, seed: int = 0) -> list[tuple[str, int]]:
    """`count` (file, byte offset) pairs: one in every file first (up to `count`), the rest uniform over
    all the delivery's bytes (so the large videos get most of them)."""
    rng = random.Random(seed)
    files = delivery_files(workspace)
    sizes = {f: (workspace / f).stat().st_size for f in files}
    files = [f for f in files if sizes[f] > 0]
    positions = [(f, rng.randrange(sizes[f])) for f in rng.sample(files, min(count, len(files)))]
    total = sum(sizes[f] for f in files)
    while len(positions) < count:
        offset = rng.randrange(total)
        for f in files:
            if offset < sizes[f]:
                positions.append((f, offset))
                break
            offset -= sizes[f]
    return positions


@dataclass
class TamperResult:
    positions: int = 0
    detected: int = 0
    missed: list[tuple[str, int]] = field(default_factory=list)
    files: int = 0
    delivery_bytes: int = 0
    seconds: float = 0.0
    verified_before: bool = False
    verified_after: bool = False


def tamper_campaign(workspace: Path, count: int = 200, seed: int = 0) -> TamperResult:
    """Each position: flip its byte to a random other value, verify, restore. Works in place (give it a copy)."""
    from datafarm.farm.deliver import verify
    from datafarm.workspace import Workspace

    rng = random.Random(seed + 1)
    started = time.perf_counter()
    result = TamperResult(verified_before=verify(Workspace.open(workspace)).ok)
    files = delivery_files(workspace)
    result.files, result.delivery_bytes = len(files), sum((workspace / f).stat().st_size for f in files)
    for relative, offset in tamper_positions(workspace, count, seed):
        path = workspace / relative
        with open(path, "r+b") as f:
            f.seek(offset)
            original = f.read(1)
            f.seek(offset)
            f.write(bytes([original[0] ^ rng.randrange(1, 256)]))
        try:
            report = verify(Workspace.open(workspace))
        finally:
            with open(path, "r+b") as f:
                f.seek(offset)
                f.write(original)
        result.positions += 1
        if report.ok:
            result.missed.append((relative, offset))
        else:
            result.detected += 1
    result.verified_after = verify(Workspace.open(workspace)).ok
    result.seconds = time.perf_counter() - started
    return result


# ----- kill -9 and resume --------------------------------------------------------------------------------------
EPISODE_OUTPUTS = ("episodes", "rollout", "dataset", ".dataset-staging", MANIFEST)
EPISODE_PHASE_RECORDS = ("rollout", "render", "review", "harvest", "verify")
STAGES = ("rollout", "render", "review", "harvest")


def reset_to_episodes(workspace: Path) -> None:
    """Forget everything from the rollout on (keeps the survey, scene, contract, judge and expert)."""
    for name in EPISODE_OUTPUTS:
        path = workspace / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for phase in EPISODE_PHASE_RECORDS:
        (workspace / "phases" / f"{phase}.json").unlink(missing_ok=True)


def _episode_dirs(workspace: Path) -> list[Path]:
    root = workspace / "episodes"
    return sorted(p for p in root.iterdir() if p.name.isdigit()) if root.exists() else []


def stage_of(workspace: Path) -> str:
    """Which phase the farm is in, from the workspace alone."""
    if (workspace / ".dataset-staging").exists() or (workspace / "dataset").exists():
        return "harvest"
    episodes = _episode_dirs(workspace)
    if any((e / "review.json").exists() for e in episodes):
        return "review"
    if any((e / "render").exists() or (e / ".render-staging").exists() for e in episodes):
        return "render"
    if (workspace / "rollout").exists() or episodes:
        return "rollout"
    return "starting"


def progress_of(workspace: Path) -> int:
    """A number that grows whenever the farm makes progress on the episodes or the delivery."""
    try:
        attempts = workspace / "rollout" / "attempts.jsonl"
        lines = attempts.read_bytes().count(b"\n") if attempts.exists() else 0
        files = sum(1 for folder in ("episodes", ".dataset-staging") for _ in (workspace / folder).rglob("*"))
    except OSError:  # a folder renamed or removed while we looked
        return -1
    return lines + files + (workspace / MANIFEST).exists()


def _growing_file(workspace: Path, sizes: dict[Path, int]) -> Path | None:
    """A file in a staging folder or an episode's sim folder that grew since the last look."""
    try:
        candidates = list((workspace / ".dataset-staging").rglob("*"))
        for episode in _episode_dirs(workspace):
            candidates += list((episode / ".render-staging").glob("*")) + list((episode / "sim").rglob("*"))
    except OSError:  # a folder renamed or removed while we looked
        return None
    grown = None
    for path in candidates:
        try:
            size = path.stat().st_size if path.is_file() else None
        except FileNotFoundError:
            continue
        if size is not None and sizes.get(path, size) < size:
            grown = path
        if size is not None:
            sizes[path] = size
    return grown


@dataclass
class Kill:
    target: str  # a stage or "write"
    stage: str  # the stage the workspace was in when the kill landed ("finished": the run ended first)
    after_seconds: float
    detail: str = ""


def _start_farm(workspace: Path, log) -> subprocess.Popen:
    return subprocess.Popen([*datafarm_command(), "farm", str(workspace)], stdout=log, stderr=subprocess.STDOUT,
                            env=command_env(), start_new_session=True)  # its own group: kill it whole


def kill_farm_at(workspace: Path, target: str, rng: random.Random, log, timeout: float) -> Kill:
    """Start `datafarm farm`, wait for the target (a stage, plus a random delay, or a file being written),
    then kill -9 its process group."""
    started = time.perf_counter()
    progress_at_start = progress_of(workspace)
    process = _start_farm(workspace, log)
    sizes: dict[Path, int] = {}
    fire_at, detail = None, ""
    while process.poll() is None and time.perf_counter() - started < timeout:
        now = time.perf_counter()
        if fire_at is None:
            if target == "write":
                grown = _growing_file(workspace, sizes)
                if grown is not None:
                    fire_at, detail = now, f"while writing {grown.relative_to(workspace)}"
            elif stage_of(workspace) == target and progress_of(workspace) > progress_at_start:
                fire_at = now + rng.uniform(0.0, 3.0)  # a random point once this run works on the target
        if fire_at is not None and now >= fire_at:
            stage = stage_of(workspace)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return Kill(target, stage, now - started, detail)
        time.sleep(0.02 if target == "write" else 0.1)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return Kill(target, "timeout", time.perf_counter() - started)
    return Kill(target, "finished", time.perf_counter() - started, f"exit {process.returncode}")


def kill_plan(kills: int) -> list[str]:
    """Targets in the farm's order, so each kill can still land: rollout, write, render, review, harvest."""
    base = ["rollout", "rollout", "write", "render", "review", "harvest", "rollout", "write", "render", "review"]
    plan = (base * (kills // len(base) + 1))[:kills]
    order = {"rollout": 0, "write": 1, "render": 2, "review": 3, "harvest": 4}
    return sorted(plan, key=order.__getitem__)


@dataclass
class KillResumeResult:
    kills: list[Kill]
    resume_exit: int
    verify_exit: int
    episodes: int
    reference_episodes: int
    lost: list[int]  # seeds the reference delivered and the killed run did not
    duplicated: list[int]  # seeds delivered more than once
    frames_compared: int
    frames_differing: int
    resume_seconds: float
    seconds: float

    @property
    def passed(self) -> bool:
        return (self.resume_exit == 0 and self.verify_exit == 0 and not self.lost and not self.duplicated
                and self.episodes == self.reference_episodes and self.frames_compared > 0
                and self.frames_differing == 0)


def delivered_seeds(workspace: Path) -> list[int]:
    manifest = json.loads((workspace / MANIFEST).read_text())
    return [json.loads((workspace / "episodes" / f"{i:06d}" / "review.json").read_text())["seed"]
            for i in manifest["episodes"]]


def dataset_frames(workspace: Path) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """(episode, frame) -> (action, observation.state) from the dataset's own parquet files."""
    import pyarrow.parquet as pq

    frames = {}
    for file in sorted((workspace / "dataset" / "data").rglob("*.parquet")):
        table = pq.read_table(file, columns=["episode_index", "frame_index", "action", "observation.state"]).to_pydict()
        for e, f, a, s in zip(table["episode_index"], table["frame_index"], table["action"], table["observation.state"]):
            frames[(e, f)] = (np.asarray(a), np.asarray(s))
    return frames


def compare_datasets(killed: Path, reference: Path) -> tuple[int, int]:
    """(frames compared, frames whose action or state differ in any bit, or that one side lacks)."""
    a, b = dataset_frames(killed), dataset_frames(reference)
    differing = len(set(a) ^ set(b))
    for key in set(a) & set(b):
        if not (np.array_equal(a[key][0], b[key][0]) and np.array_equal(a[key][1], b[key][1])):
            differing += 1
    return len(set(a) | set(b)), differing


def kill_resume_campaign(workspace: Path, reference: Path, kills: int, seed: int = 0, log_path: Path | None = None,
                         kill_timeout: float = 1800) -> KillResumeResult:
    """Kill `datafarm farm` on `workspace` `kills` times, resume it to the end, compare with `reference`
    (the same workspace farmed without a kill)."""
    rng = random.Random(seed)
    started = time.perf_counter()
    log_path = log_path or workspace.with_name(workspace.name + "-farm.log")
    done = []
    with open(log_path, "ab") as log:
        for target in kill_plan(kills):
            done.append(kill_farm_at(workspace, target, rng, log, kill_timeout))
            if done[-1].stage == "finished":
                break  # the farm finished before the kill: the remaining targets cannot land
        resumed_at = time.perf_counter()
        resume = subprocess.run([*datafarm_command(), "farm", str(workspace)], stdout=log, stderr=subprocess.STDOUT,
                                env=command_env())
        resume_seconds = time.perf_counter() - resumed_at
    checked = run_datafarm(["verify", str(workspace)], cwd=workspace.parent)
    seeds, reference_seeds = delivered_seeds(workspace), delivered_seeds(reference)
    compared, differing = compare_datasets(workspace, reference)
    return KillResumeResult(
        kills=done, resume_exit=resume.returncode, verify_exit=checked.returncode, episodes=len(seeds),
        reference_episodes=len(reference_seeds), lost=sorted(set(reference_seeds) - set(seeds)),
        duplicated=sorted({s for s in seeds if seeds.count(s) > 1}), frames_compared=compared,
        frames_differing=differing, resume_seconds=resume_seconds, seconds=time.perf_counter() - started)
