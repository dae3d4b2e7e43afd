"""Evaluate a policy on the real dual PiPER (or its simulation): placement cards, operator verdicts, trial files.

One trial (:func:`run_real_trial`)::

    placement card (the seed's object positions on the head camera's view)  ->  operator.go(card, trial)
    -> policy loop at the control rate through the ArmPair (safety layer inside)
    -> ends at the time limit, an emergency stop (SafetyStop), or when the operator asks to stop
    -> operator.verdict(trial) -> (success, notes)
    -> the trial as a one-episode LeRobot dataset (cameras, 14-D state, 14-D action) + its trial file

Stations (:data:`STATIONS`): ``real`` (the arms), ``simulated`` (the seed's scene through SimPair) and
``hil`` (hardware in the loop, simulated: the real driver, piper_sdk over virtual CAN, against fake
firmwares stepping the seed's scene: a rehearsal of the real path before the arms are plugged in). In
both rehearsals the task's hidden judge gives the verdicts.

Layout, WS/evals-real/<policy>[-simulated|-hil]/ (a rehearsal never resumes into the arms' trials): ``eval.json`` (what was asked, the seeds), ``cards/<seed>.png``,
``episodes/<seed>/`` (the trial's LeRobot dataset, written by lerobot's own writer) and
``trials/<seed>.json`` (verdict, notes, how it ended; written last and atomically: a rerun skips every
seed with a trial file, so an interrupted evaluation resumes at the next trial). An emergency stop
writes the trial as ``"end": "estop"`` and ends the run (SafetyStop propagates). Seeds come from
:func:`datafarm.policy.evaluate.evaluation_seeds`: never a training seed.

The operator is an interface (:class:`Operator`); the terminal one lives in cli/, Prefect's
pause-for-input one in flows/, and :class:`JudgeOperator` (simulation: the task's hidden judge reads the
simulated trace) here.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from datafarm.cameras import CAMERA_KEYS, CAMERAS
from datafarm.errors import SafetyStop, Unavailable
from datafarm.piper.eval_station import SimStation, Station
from datafarm.piper.driver import WatchdogConfig
from datafarm.piper.placement_card import draw_placement_card
from datafarm.policy.controls import Policy
from datafarm.sim.spaces import AXIS_NAMES, DOF
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

REAL_EVALS = "evals-real"
DEFAULT_TIME_LIMIT_S = 60.0


@dataclass(frozen=True)
class TrialInfo:
    """What the operator is told about one trial."""

    index: int  # 0-based position in the run
    seed: int
    policy: str
    time_limit_s: float
    card: str  # the placement card's path
    end: str | None = None  # set for the verdict: "time_limit" | "operator" | "judge" | "estop"
    steps: int = 0


@runtime_checkable
class Operator(Protocol):
    """The person (or judge) at the arms: places the objects, says go, gives the verdict."""

    def go(self, card_path: Path, trial: TrialInfo) -> None:
        """Return once the objects are placed as the card shows and the trial may start."""

    def verdict(self, trial: TrialInfo) -> tuple[bool, str]:
        """(success, notes) for a finished trial."""


def stop_requested(operator: Operator, trial: TrialInfo, step: int) -> bool:
    """Operators may end a trial early (``should_stop(trial, step) -> bool``, asked every tick)."""
    ask = getattr(operator, "should_stop", None)
    return bool(ask(trial, step)) if ask else False


class JudgeOperator:
    """Simulation: no one places anything (the seed's scene is built), the verdict is the task's hidden
    judge on the trial's simulated trace, asked every `check_every_s` too so a success ends the trial."""

    def __init__(self, station: Station, check_every_s: float = 1.0):
        self.station = station
        self.check_every = max(1, round(check_every_s * station.rate_hz))
        self._verdict = None

    def go(self, card_path: Path, trial: TrialInfo) -> None:
        self._verdict = None
        log.info("simulated trial %d (seed %d): the scene is the seed's own; card %s", trial.index, trial.seed,
                 card_path)

    def should_stop(self, trial: TrialInfo, step: int) -> bool:
        if step == 0 or step % self.check_every:
            return False
        self._verdict = self._judge()
        return self._verdict.success

    def verdict(self, trial: TrialInfo) -> tuple[bool, str]:
        verdict = self._verdict if (self._verdict is not None and self._verdict.success) else self._judge()
        return verdict.success, f"judge: {verdict.reason}"

    def _judge(self):
        return self.station.judge.judge_trace(self.station.trial.trace())


STATIONS = {
    "real": "the dual PiPER over CAN, cameras through lerobot; the operator places, starts and judges",
    "simulated": "each trial in its seed's simulated scene through SimPair; the task's hidden judge judges",
    "hil": "the real driver (piper_sdk, virtual CAN) against fake firmwares stepping the seed's scene; the judge judges",
}
TICK_SHARE_OF_DEADLINE = 0.8  # the most of the deadline a measured tick may take (ticks vary)
# Under HIL the scene, the policy and the sandboxed judge share the CPU with the control loop: feedback and
# command gaps far beyond the real arms' limits are normal there (measured on 2 loaded cores, see tests/piper).
HIL_WATCHDOG = WatchdogConfig(max_feedback_age_s=0.25, min_feedback_hz=40.0, deadline_s=3.0)


@dataclass(frozen=True)
class RealEvalRun:
    """One evaluation of one policy on a station and where its files live."""

    workspace_root: Path
    policy: str  # a policy folder or a control name
    name: str
    seeds: tuple[int, ...]
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    station: str = "real"  # a key of STATIONS

    @property
    def folder(self) -> Path:
        return Path(self.workspace_root) / REAL_EVALS / self.name

    def trial_file(self, seed: int) -> Path:
        return self.folder / "trials" / f"{seed}.json"

    def card_file(self, seed: int) -> Path:
        return self.folder / "cards" / f"{seed}.png"

    def episode_dir(self, seed: int) -> Path:
        return self.folder / "episodes" / str(seed)

    @property
    def dataset_dir(self) -> Path:
        """Every recorded trial as one episode of one LeRobot dataset, in trial order."""
        return self.folder / "dataset"

    def pending(self) -> list[int]:
        return [seed for seed in self.seeds if not self.trial_file(seed).exists()]

    def results(self) -> list[dict]:
        return [json.loads(self.trial_file(s).read_text()) for s in self.seeds if self.trial_file(s).exists()]


@dataclass
class RealTrialResult:
    seed: int
    index: int
    policy: str
    success: bool
    end: str  # "time_limit" | "operator" | "judge" | "estop"
    notes: str
    steps: int
    seconds: float  # control time (steps / rate)
    wall_seconds: float
    late_ticks: int
    simulated: bool
    card: str  # paths relative to the workspace
    episode: str | None
    videos: dict[str, str] = field(default_factory=dict)
    estop: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_real_eval(workspace: Workspace, policy: str, episodes_count: int, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                   station: str = "real", seed_start: int | None = None) -> RealEvalRun:
    """Pick the evaluation seeds (never a training seed) and write eval.json; moves nothing."""
    from datafarm.errors import BadInput

    from datafarm.policy.evaluate import (
        EVAL_SEED_START,
        evaluation_seeds,
        policy_name,
        task_name,
    )

    if station not in STATIONS:
        raise BadInput(f"unknown station {station!r}; choose one of {', '.join(STATIONS)}")
    start = EVAL_SEED_START if seed_start is None else seed_start
    seeds = evaluation_seeds(workspace, policy, episodes_count, start)
    name = policy_name(policy) + ("" if station == "real" else f"-{station}")
    run = RealEvalRun(workspace.root, policy, name, tuple(seeds), time_limit_s, station)
    workspace.write_json(str(run.folder.relative_to(workspace.root) / "eval.json"), {
        "policy": str(policy), "name": run.name, "seeds": seeds, "seed_start": start, "task": task_name(workspace),
        "time_limit_s": time_limit_s, "station": station})
    return run


def run_real_trials(run: RealEvalRun, station: Station, policy: Policy, operator: Operator,
                    seeds: list[int] | None = None) -> list[dict]:
    """Run every pending trial of `run` (or these `seeds`) in order; returns every finished trial's result.
    An emergency stop writes its trial ("estop") and raises SafetyStop: the run ends there."""
    workspace = Workspace.open(run.workspace_root)
    todo = [seed for seed in (run.pending() if seeds is None else seeds) if not run.trial_file(seed).exists()]
    log.info("real eval %s: %d of %d trials to run (%s)", run.name, len(todo), len(run.seeds),
             STATIONS[run.station])
    for seed in todo:
        index = run.seeds.index(seed) if seed in run.seeds else -1
        result = run_real_trial(run, workspace, station, policy, operator, seed, index)
        if result.end == "estop":
            raise SafetyStop(f"evaluation {run.name} ended: trial {index} (seed {seed}) was emergency-stopped "
                             f"({result.estop}). Fix the cause, support the arms and resume them, then rerun: "
                             "the evaluation resumes at the next trial")
    return run.results()


def check_policy_keeps_up(station: Station, policy: Policy, cameras: tuple[str, ...]) -> float:
    """Warm `policy` up, then time one control tick with a fresh inference (frames, state, a new action chunk:
    the loop's slowest tick); refuse, before anything moves, a policy too slow for the pair's deadline.
    Nothing it answers is sent. Returns the tick's seconds."""
    def tick() -> float:
        started = time.perf_counter()
        frames = station.frames()
        policy.act({c: frames[c] for c in cameras if c in frames}, station.pair.observe().position)
        return time.perf_counter() - started

    tick()  # the first inference: the model onto its device, lazy set-up (seconds on a CPU)
    policy.reset()  # the next act infers afresh
    seconds, deadline = tick(), station.pair.deadline_s
    log.info("a control tick with a fresh inference takes %.0f ms (deadline %.0f ms)", 1000 * seconds, 1000 * deadline)
    if seconds > TICK_SHARE_OF_DEADLINE * deadline:
        raise Unavailable(f"a control tick with a fresh inference of this policy takes {1000 * seconds:.0f} ms here, "
                          f"over {TICK_SHARE_OF_DEADLINE:.0%} of the arms' {1000 * deadline:.0f} ms deadline between "
                          "commands: the trial would be emergency-stopped at its first inference. Evaluate it on "
                          "a machine that infers faster (a GPU), or a lighter policy; nothing has moved")
    return seconds


def run_real_trial(run: RealEvalRun, workspace: Workspace, station: Station, policy: Policy, operator: Operator,
                   seed: int, index: int) -> RealTrialResult:
    """One trial: card, go, the policy loop, the verdict, its dataset and its trial file."""
    card = draw_placement_card(workspace, seed, run.card_file(seed),
                               f"trial {index + 1} of {len(run.seeds)}, seed {seed}: put each object on its ring")
    relative = Path(card).relative_to(run.workspace_root)
    cameras = tuple(getattr(policy, "cameras", CAMERAS))
    station.start_trial(seed, cameras)
    check_policy_keeps_up(station, policy, cameras)
    info = TrialInfo(index, seed, run.name, run.time_limit_s, str(card))
    operator.go(card, info)
    policy.reset()
    states, actions, images, started = [], [], [], time.perf_counter()
    end, estop, late = "time_limit", None, 0
    max_steps = max(1, round(run.time_limit_s * station.rate_hz))
    period, next_tick = 1.0 / station.rate_hz, time.perf_counter()
    try:
        for step in range(max_steps):
            if stop_requested(operator, info, step):
                end = "judge" if isinstance(operator, JudgeOperator) else "operator"
                break
            state = station.pair.observe().position
            frames = station.frames()
            target = np.asarray(policy.act({c: frames[c] for c in cameras if c in frames}, state), dtype=np.float64)
            sent = station.pair.act(target.reshape(-1))
            states.append(state.astype(np.float32))
            actions.append(sent.command.astype(np.float32))
            images.append(frames)
            if not station.simulated:  # the simulated rig keeps its own clock
                next_tick += period
                delay = next_tick - time.perf_counter()
                if delay < -period / 2:
                    late += 1
                    next_tick = time.perf_counter()
                time.sleep(max(0.0, delay))
    except SafetyStop as stop:
        end, estop = "estop", str(stop)
        log.error("trial %d (seed %d) emergency-stopped: %s", index, seed, stop)
    finally:
        station.end_trial()
    info = TrialInfo(index, seed, run.name, run.time_limit_s, str(card), end, len(actions))
    success, notes = (False, f"emergency stop: {estop}") if estop else operator.verdict(info)
    episode, videos = None, {}
    if actions:
        episode, videos = write_trial_episode(run, seed, states, actions, images, station.rate_hz)
    result = RealTrialResult(seed, index, run.name, bool(success), end, notes, len(actions),
                             len(actions) / station.rate_hz, time.perf_counter() - started, late, station.simulated,
                             str(relative), episode, videos, estop)
    _write_atomically(run.trial_file(seed), result.to_dict())
    log.info("trial %d (seed %d): %s, %s after %d steps (%s)", index, seed, "success" if success else "failure", end,
             len(actions), notes)
    return result


def write_trial_episode(run: RealEvalRun, seed: int, states: list[np.ndarray], actions: list[np.ndarray],
                        images: list[dict[str, np.ndarray]], fps: int) -> tuple[str, dict[str, str]]:
    """The trial as a one-episode LeRobot dataset (lerobot's own writer, the farm's feature names) at
    episodes/<seed>; returns its path and its videos' paths, relative to the workspace."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from datafarm.dataset.harvest import FASTEST_SETTINGS, ROBOT_TYPE
    from datafarm.logs import ffmpeg_kept_quiet, silence_progress_bars

    target = run.episode_dir(seed)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)  # a trial interrupted after its dataset, before its trial file
    staging.parent.mkdir(parents=True, exist_ok=True)
    silence_progress_bars()
    cameras = [c for c in CAMERAS if c in images[0]]
    features: dict[str, dict] = {CAMERA_KEYS[c]: {"dtype": "video", "shape": images[0][c].shape,
                                                  "names": ["height", "width", "channels"]} for c in cameras}
    for key in ("observation.state", "action"):
        features[key] = {"dtype": "float32", "shape": (DOF,), "names": list(AXIS_NAMES)}
    settings = FASTEST_SETTINGS
    with ffmpeg_kept_quiet():
        dataset = LeRobotDataset.create(repo_id=f"datafarm/eval-real-{run.name}", fps=fps, features=features,
                                        root=staging, robot_type=ROBOT_TYPE, use_videos=bool(cameras),
                                        rgb_encoder=settings.rgb_encoder(), encoder_threads=settings.encoder_threads)
        try:
            for state, action, frames in zip(states, actions, images):
                frame: dict[str, Any] = {"observation.state": state, "action": action, "task": f"eval seed {seed}"}
                frame.update({CAMERA_KEYS[c]: frames[c] for c in cameras})
                dataset.add_frame(frame)
            dataset.save_episode()
        finally:
            dataset.finalize()
    staging.rename(target)
    videos = {c: str(p.relative_to(run.workspace_root)) for c in cameras
              for p in sorted(target.glob(f"videos/{CAMERA_KEYS[c]}/**/*.mp4"))[:1]}
    return str(target.relative_to(run.workspace_root)), videos


TRIALS_OF_DATASET = "datafarm_trials.json"  # in the combined dataset: the seeds of its episodes, in order


def combine_trial_datasets(run: RealEvalRun) -> Path | None:
    """`run.dataset_dir`: the finished trials' one-episode datasets as one dataset (lerobot's own
    aggregate_datasets, videos stream-copied), rebuilt when the trials changed; None before any trial
    recorded frames. Each trial keeps its own dataset too: that is what makes a killed run resume cleanly."""
    from lerobot.datasets.aggregate import aggregate_datasets

    from datafarm.logs import ffmpeg_kept_quiet, silence_progress_bars

    recorded = [(r["seed"], Path(run.workspace_root) / r["episode"]) for r in run.results() if r["episode"]]
    seeds = [seed for seed, _ in recorded]
    listing = run.dataset_dir / TRIALS_OF_DATASET
    if not recorded or (listing.is_file() and json.loads(listing.read_text()) == seeds):
        return run.dataset_dir if recorded else None
    staging = run.dataset_dir.with_name(run.dataset_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    silence_progress_bars()
    # aggregate_datasets draws tqdm bars on stderr (tqdm reads its switches at import): keep the terminal quiet
    with ffmpeg_kept_quiet(), contextlib.redirect_stderr(io.StringIO()):
        aggregate_datasets([f"datafarm/eval-real-{run.name}"] * len(recorded), f"datafarm/eval-real-{run.name}",
                           roots=[root for _, root in recorded], aggr_root=staging)
    (staging / TRIALS_OF_DATASET).write_text(json.dumps(seeds))
    shutil.rmtree(run.dataset_dir, ignore_errors=True)
    staging.rename(run.dataset_dir)
    log.info("the %d recorded trials of %s are one dataset: %s", len(recorded), run.name, run.dataset_dir)
    return run.dataset_dir


def summarize(run: RealEvalRun) -> dict[str, Any]:
    """Success with its Wilson 95 % interval over the finished trials, and each trial's verdict."""
    from datafarm.policy.report import wilson_interval

    results = run.results()
    successes = sum(1 for r in results if r["success"])
    low, high = wilson_interval(successes, len(results)) if results else (0.0, 1.0)
    return {"policy": run.name, "station": run.station, "trials": len(results), "planned": len(run.seeds),
            "successes": successes, "rate": successes / len(results) if results else 0.0, "wilson_low": low,
            "wilson_high": high, "estops": sum(1 for r in results if r["end"] == "estop"),
            "results": [{k: r[k] for k in ("index", "seed", "success", "end", "notes", "steps", "episode", "videos")}
                        for r in results]}


def _write_atomically(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".partial")
    temporary.write_text(json.dumps(data, indent=2, default=str))
    temporary.replace(path)


def open_station(workspace: Workspace, run: RealEvalRun, left_can: str = "can0", right_can: str = "can1",
                 cameras_file: Path | None = None) -> Station:
    """The station `run` drives: the real pair (connected through lerobot's robot), or the seeds' simulated
    scenes (through SimPair, or through the real driver and fake firmwares) with the task's hidden judge (the
    expert folder and the policy hidden from it)."""
    if run.station == "real":
        from datafarm.piper.eval_station import RealStation

        return RealStation.connect(left_can, right_can, cameras_file)
    from datafarm.policy.evaluate import CONTROLS
    from datafarm.policy.trials import TrialJudge, trial_setup

    setup = trial_setup(workspace)
    hidden = [workspace.path("expert")] + ([Path(run.policy).resolve()] if run.policy not in CONTROLS else [])
    judge = TrialJudge(setup.package, run.folder / ".judge", hidden)
    if run.station == "hil":
        from datafarm.piper.driver import PiperPairConfig
        from datafarm.piper.rig_firmware import HilStation

        return HilStation(setup, judge, PiperPairConfig(watchdog=HIL_WATCHDOG), owns_judge=True)
    return SimStation(setup, judge, owns_judge=True)


def load_eval_policy(workspace: Workspace, policy: str) -> Policy:
    """A trained policy folder (lerobot checkpoint) or a control: do-nothing, blind-replay."""
    from datafarm.errors import BadInput
    from datafarm.farm.authoring import workspace_package
    from datafarm.policy.controls import ActionReplay, DoNothing, recorded_actions
    from datafarm.policy.evaluate import blind_replay_source

    if policy == "do-nothing":
        return DoNothing()
    if policy == "blind-replay":
        return ActionReplay(recorded_actions(workspace.path(blind_replay_source(workspace))))
    if not (Path(policy) / "policy.json").is_file():
        raise BadInput(f"{policy} is neither a trained policy folder (no policy.json) nor a control (do-nothing, "
                       "blind-replay); train one with `datafarm train WS --policy act --preset cpu`")
    from datafarm.policy.inference import load_lerobot_policy

    return load_lerobot_policy(policy, instruction=workspace_package(workspace).info.instruction)


__all__ = ["DEFAULT_TIME_LIMIT_S", "HIL_WATCHDOG", "REAL_EVALS", "STATIONS", "JudgeOperator", "Operator", "RealEvalRun", "RealTrialResult",
           "TrialInfo", "check_policy_keeps_up", "combine_trial_datasets", "load_eval_policy", "open_station", "plan_real_eval", "run_real_trial", "run_real_trials",
           "summarize", "write_trial_episode"]
