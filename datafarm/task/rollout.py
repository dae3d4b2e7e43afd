"""Run one seeded episode of a task package and judge it (the seed search is datafarm.farm.collect).

An episode never hangs collection: its simulated time is capped by the task's max_seconds and its
wall time by `wall_limit` (SIGALRM interrupts a runaway expert). Expert failures (skill errors,
exceptions, time-outs) make a rejected episode with the error recorded, not a crash.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from datafarm.scene.builder import BuiltScene, build_scene
from datafarm.sim.config import RigConfig, load_rig_config
from datafarm.sim.recorder import EpisodeRecorder
from datafarm.sim.rig import DualArmRig
from datafarm.skills import Skills
from datafarm.task.env import EpisodeTimeout, TaskEnv
from datafarm.task.package import TaskPackage, judge_hidden
from datafarm.scene.spec import footprint_radius
from datafarm.task.randomization import EpisodeSample, RandomizationConfig, apply_to_rig_config, sample_episode
from datafarm.task.recovery import Disturbed, Disturber, Obstacle
from datafarm.task.trace import Trace
from datafarm.task.verdict import Verdict

log = logging.getLogger(__name__)


@dataclass
class EpisodeResult:
    task: str
    seed: int
    verdict: Verdict
    steps: int
    sim_seconds: float
    wall_seconds: float
    error: str | None = None  # "ExceptionType: message" when the expert failed
    sample: dict = field(default_factory=dict)
    trace: Trace | None = None
    traceback: str | None = None  # the expert's, when it failed (never the judge's: it runs apart)

    @property
    def success(self) -> bool:
        return self.verdict.success

    @property
    def recovery(self) -> dict | None:
        """What a recovery episode's disturbance did (datafarm.task.recovery), from the trace's events."""
        return recovery_of(self.trace)

    def to_dict(self) -> dict:
        return {"task": self.task, "seed": self.seed, "verdict": self.verdict.to_dict(), "steps": self.steps,
                "sim_seconds": self.sim_seconds, "wall_seconds": self.wall_seconds, "error": self.error,
                "sample": self.sample, "recovery": self.recovery}


def recovery_of(trace: Trace | None) -> dict | None:
    """The disturbance a trace records (TaskEnv.record_disturbance), or None."""
    return next((e["recovery"] for e in (trace.events if trace else []) if e["kind"] == "disturbance"), None)


@contextlib.contextmanager
def wall_clock_limit(seconds: float | None) -> Iterator[None]:
    """Raise EpisodeTimeout in this thread after `seconds` (main thread only; a no-op elsewhere)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expired(signum, frame):
        raise EpisodeTimeout(f"episode ran past its wall-clock limit of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _episode_spec(package: TaskPackage, object_colors: dict[str, list[float]]):
    if not object_colors:
        return package.scene
    objects = [o.model_copy(update={"color": tuple(object_colors.get(o.name, o.color))}) for o in package.scene.objects]
    return package.scene.model_copy(update={"objects": objects})


@dataclass
class SimulatedEpisode:
    """An episode before any judge saw it: what the expert did, as the trace records it."""

    task: str
    seed: int
    trace: Trace
    steps: int
    sim_seconds: float
    wall_seconds: float
    error: str | None = None  # "ExceptionType: message" when the expert failed
    traceback: str | None = None  # the expert's traceback (its last frames) when it failed
    sample: dict = field(default_factory=dict)

    def judged(self, verdict: Verdict) -> EpisodeResult:
        if self.error and verdict.success:
            # the judge sees the outcome only; an expert that crashed after succeeding still succeeded
            log.info("seed %d: expert raised %s but the judge accepts the outcome", self.seed, self.error)
        return EpisodeResult(self.task, self.seed, verdict, self.steps, self.sim_seconds, self.wall_seconds,
                             self.error, self.sample, self.trace, self.traceback)


@dataclass
class EpisodeWorld:
    """A seeded episode's simulated world, ready for its first action (the expert's or a policy's)."""

    rig: DualArmRig
    scene: BuiltScene
    sample: EpisodeSample
    max_steps: int


def episode_world(package: TaskPackage, seed: int, randomization: RandomizationConfig,
                  rig_config: RigConfig) -> EpisodeWorld:
    """Sample `seed`'s randomization, create the rig (cameras as `rig_config` has them), build the scene."""
    sample = sample_episode(package.scene, seed, randomization, package.info.max_seconds, rig_config.timing.control_hz,
                            package.info.recovery)
    config = apply_to_rig_config(rig_config, sample)
    rig = DualArmRig.create(config)
    rig.reset(rig.rest_state() + np.asarray(sample.start_noise))
    scene = build_scene(rig, _episode_spec(package, sample.object_colors), sample.placements, package.directory,
                        sample.fixture_params)
    return EpisodeWorld(rig, scene, sample, int(package.info.max_seconds * config.timing.control_hz))


def simulate_episode(package: TaskPackage, seed: int, randomization: RandomizationConfig | None = None,
                     rig_config: RigConfig | None = None, record_dir: str | Path | None = None,
                     wall_limit: float | None = 120.0, expert=None) -> SimulatedEpisode:
    """Simulate one episode with the expert and judge nothing. With `record_dir`, cameras are recorded
    there (EpisodeRecorder layout); without, the same physics runs faster (seed search)."""
    randomization = randomization or RandomizationConfig()
    base_config = rig_config or load_rig_config()
    if record_dir is None:
        base_config = base_config.model_copy(update={"cameras": {}})
    expert = expert or package.load_expert()
    started = time.perf_counter()
    world = episode_world(package, seed, randomization, base_config)
    rig, scene, sample, max_steps = world.rig, world.scene, world.sample, world.max_steps
    error = failure_trace = None
    recorder = None
    if record_dir is not None:
        recorder = EpisodeRecorder(rig, record_dir, metadata={"task": package.name, "seed": seed,
                                                              "instruction": package.info.instruction,
                                                              "sample": sample.to_dict()})
    env = TaskEnv(rig, scene, max_steps, recorder, sample.perturbations, _disturber(package, sample, rig.config))
    env.record_initial_state()
    skills = Skills(env, speed=sample.speed)
    with recorder or contextlib.nullcontext():
        try:
            with wall_clock_limit(wall_limit), judge_hidden():
                _solve(expert, env, skills, package.params)
                env.disturber = None  # the expert is done: nothing disturbs the world while it settles
                skills.wait(0.5)  # let things come to rest before judging
        except EpisodeTimeout as exc:
            error = f"EpisodeTimeout: {exc}"
        except Exception as exc:  # an expert's failure is a rejected episode, not a crash
            error = f"{type(exc).__name__}: {exc}"
            failure_trace = "".join(traceback.format_exc().splitlines(True)[-12:])
            log.debug("expert failed on seed %d:\n%s", seed, failure_trace)
    heights = {name: obj.height for name, obj in scene.objects.items()}
    trace = env.trace.freeze(heights, info=sample.to_dict())
    return SimulatedEpisode(package.name, seed, trace, len(trace) - 1, rig.time, time.perf_counter() - started,
                            error, failure_trace, sample.to_dict())


def _solve(expert, env: TaskEnv, skills: Skills, params: dict) -> None:
    """The expert's solve; after a disturbance, the expert again from where it left the world."""
    while True:
        try:
            expert.solve(env, skills, params)
            return
        except Disturbed as disturbed:
            skills.held = dict.fromkeys(skills.held)  # nothing was handled before a disturbance
            if disturbed.record["kind"] == "misgrasp":
                # The recovery's first move: open the empty fingers and back off from where the object was.
                skills.release(disturbed.record["side"])


def _disturber(package: TaskPackage, sample: EpisodeSample, config: RigConfig) -> Disturber | None:
    if sample.disturbance is None:
        return None
    placed = sample.placements
    obstacles = {item.name: Obstacle(placed[item.name].x, placed[item.name].y, footprint_radius(item))
                 for item in [*package.scene.fixtures, *package.scene.objects]}
    (cx, cy), (sx, sy) = config.table.center, config.table.size
    margin = 0.05  # an object set down this far inside the table's edge
    return Disturber(sample.disturbance, obstacles, (cx - sx / 2 + margin, cx + sx / 2 - margin,
                                                     cy - sy / 2 + margin, cy + sy / 2 - margin))


def run_episode(package: TaskPackage, seed: int, randomization: RandomizationConfig | None = None,
                rig_config: RigConfig | None = None, record_dir: str | Path | None = None,
                wall_limit: float | None = 120.0, expert=None, judge=None) -> EpisodeResult:
    """Simulate one episode and judge it, both IN THIS PROCESS: for built-in, trusted code and tests.

    Agent-written code runs in the sandbox instead (datafarm.task.isolation). Replaying a seed with
    cameras gives the same episode.
    """
    judge = judge or package.load_judge()
    simulated = simulate_episode(package, seed, randomization, rig_config, record_dir, wall_limit, expert)
    return simulated.judged(judge.judge(simulated.trace, package.params))
