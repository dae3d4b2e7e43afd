"""One closed-loop trial: a policy drives the simulated rig on an evaluation seed, the hidden judge decides.

A trial is a farm episode with the policy in the expert's place. The same `episode_world` builds the
seed's scene and randomization (datafarm.task.rollout), the same `TaskEnv.step` -> `DualArmRig.step`
control path applies each 14-D action at the rig's 30 Hz, and at every tick the policy sees the
three cameras rendered by the farm's own renderer, frame by frame (`CompositeStream.frame`, the
function the episode render calls), in the trial's appearance (datafarm.policy.appearances).

A trial ends at success (the judge accepts the trace so far; asked every `check_every_s`), at the
task's time limit, or on a safety stop (a non-finite action, a TCP driven below the table top).
The judge is agent-written code: every verdict comes from `judge_trace`, in its own sandbox.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from datafarm.errors import Unavailable
from datafarm.cameras import CAMERAS
from datafarm.policy.appearances import trial_appearance
from datafarm.policy.controls import Policy
from datafarm.render.composite import CompositeRenderer, legend_classes, live_frame
from datafarm.sim.config import RigConfig
from datafarm.sim.recorder import DEPTH_SCALE
from datafarm.sim.spaces import SIDES
from datafarm.task.env import TaskEnv
from datafarm.task.package import TaskPackage
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import episode_world
from datafarm.task.trace import Trace
from datafarm.task.verdict import Verdict
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

TABLE_MARGIN_M = 0.01  # a TCP this far below the table top has gone through it: safety stop
VIDEO_SCALE = 0.5  # trial videos: the three views side by side at half size


@dataclass(frozen=True)
class TrialSetup:
    """What every trial of one workspace shares: task package, randomization, rig, references, cloths."""

    workspace_root: Path
    package: TaskPackage
    randomization: RandomizationConfig
    rig_config: RigConfig
    references: dict[str, list[np.ndarray]] = field(repr=False)
    texture_pool: object = field(repr=False)
    seed_start: int = 0  # the fixed look's seed when the appearance family is off (datafarm.farm.episodes)


def trial_setup(workspace: Workspace) -> TrialSetup:
    """The workspace's task (scene/, expert/, judge/), its settings' randomization and its surveyed cameras."""
    from datafarm.farm.authoring import workspace_package
    from datafarm.farm.episodes import calibration_references, texture_pool
    from datafarm.farm.prepare import calibrated_rig_config, settings_of

    settings = settings_of(workspace)
    if settings.renderer != "composite":
        raise Unavailable(f"closed-loop evaluation renders frame by frame, which only the 'composite' renderer "
                          f"does; this workspace renders with {settings.renderer!r}: evaluate a composite workspace")
    return TrialSetup(workspace.root, workspace_package(workspace), settings.randomization,
                      calibrated_rig_config(workspace), calibration_references(workspace), texture_pool(),
                      settings.seed_start)


@dataclass
class TrialResult:
    task: str
    policy: str
    appearance: str  # "original" | "unseen"
    seed: int
    success: bool
    end: str  # "success" | "time_limit" | "safety_stop"
    verdict: dict  # Verdict.to_dict(): success, checks, values, reason
    steps: int
    sim_seconds: float
    wall_seconds: float
    appearance_detail: dict = field(default_factory=dict)
    error: str | None = None
    video: str | None = None  # path of the trial's video, relative to the workspace

    def to_dict(self) -> dict:
        return asdict(self)


class TrialJudge:
    """The workspace's hidden judge in a long-lived sandbox (datafarm.task.isolation.JudgeSandbox)."""

    def __init__(self, package: TaskPackage, workdir: Path, hidden: list[Path] | None = None):
        from datafarm.task.isolation import JudgeSandbox

        self.package = package
        self.workdir = Path(workdir)
        judge_file = package.judge_file or package.directory / "judge.py"
        self._sandbox = JudgeSandbox(judge_file, self.workdir / "sandbox", hidden=hidden or [])

    def judge_trace(self, trace: Trace) -> Verdict:
        """The ONE way a trial is judged: the trace saved, judged by the agent's judge in its sandbox."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=self.workdir, suffix=".npz") as handle:
            trace.save(handle.name)
            return self._sandbox.verdict(Path(handle.name), self.package.params)

    def close(self) -> None:
        self._sandbox.close()

    def __enter__(self) -> TrialJudge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def safety_problem(action: np.ndarray, env: TaskEnv, table_height: float) -> str | None:
    """Why this action (or the state it led to) must stop the trial, or None."""
    if action.shape != (14,) or not np.all(np.isfinite(action)):
        return f"the policy's action is not 14 finite numbers: {np.array2string(action, precision=3)}"
    for side in SIDES:
        z = float(env.rig.tcp_pose(side)[2, 3])
        if z < table_height - TABLE_MARGIN_M:
            return f"the {side} TCP went {table_height - z:.3f} m below the table top"
    return None


class Trial:
    """One trial, step by step: `observe()` the rendered cameras, `apply(action)` until `done`, then `result()`.

    `run_trial` drives it with a policy; the lerobot-eval environment (lerobot_env_datafarm) drives it
    from lerobot's own rollout loop. `time_limit_s` caps the task's own limit (smoke runs); `cameras`
    are the views rendered (default all; empty for a blind control: nothing is rendered).
    """

    def __init__(self, setup: TrialSetup, seed: int, appearance: str, judge: TrialJudge, check_every_s: float = 1.0,
                 time_limit_s: float | None = None, cameras: tuple[str, ...] | None = None):
        self.started = time.perf_counter()
        self.setup, self.seed, self.appearance, self.judge = setup, seed, appearance, judge
        self.world = episode_world(setup.package, seed, setup.randomization, setup.rig_config)
        self.rig = self.world.rig
        self.env = TaskEnv(self.rig, self.world.scene, self.world.max_steps, None, self.world.sample.perturbations)
        self.env.record_initial_state()
        self.look = trial_appearance(appearance, seed, setup.texture_pool, setup.randomization, setup.seed_start)
        wanted = CAMERAS if cameras is None else cameras
        self.cameras = [c for c in self.rig.cameras if c in wanted]
        hz = self.rig.config.timing.control_hz
        self.check_every = max(1, round(check_every_s * hz))
        self.max_steps = self.world.max_steps if time_limit_s is None else min(self.world.max_steps,
                                                                               round(time_limit_s * hz))
        self._lookup = legend_classes(self.rig.segmentation_legend())
        self._heights = {name: obj.height for name, obj in self.world.scene.objects.items()}
        self._stream = None
        self.end: str | None = None  # "success" | "time_limit" | "safety_stop" once done
        self.error: str | None = None
        self.verdict: Verdict | None = None

    @property
    def done(self) -> bool:
        return self.end is not None

    def state(self) -> np.ndarray:
        return self.rig.qpos()

    def observe(self) -> dict[str, np.ndarray]:
        """The trial's cameras now, rendered as the training data was (empty for a blind control)."""
        if not self.cameras:
            return {}
        captured = self.rig.capture(self.cameras)
        if self._stream is None:
            specs = {c: {"width": self.rig.config.cameras[c].width, "height": self.rig.config.cameras[c].height,
                         "intrinsics": self.rig.intrinsics(c).tolist()} for c in self.cameras}
            self._stream = CompositeRenderer().start_stream(specs, self.rig.segmentation_legend(), captured,
                                                            self.setup.references, self.look, DEPTH_SCALE)
        return self._stream.frame({c: live_frame(captured[c], self._lookup) for c in self.cameras})

    def apply(self, action) -> bool:
        """Step the rig with a 14-D action (the expert's control path); returns whether the trial is over."""
        if self.done:
            raise RuntimeError("the trial is over; start a new one")
        action = np.asarray(action, dtype=np.float64).reshape(-1)
        problem = safety_problem(action, self.env, self.rig.config.table.height)
        if problem:
            self.end, self.error = "safety_stop", problem
            self.verdict = self.judge.judge_trace(self.trace())
            return True
        self.env.step(action)
        if self.rig.step_count % self.check_every == 0:
            self.verdict = self.judge.judge_trace(self.trace())
            if self.verdict.success:
                self.end = "success"
                return True
        if self.rig.step_count >= self.max_steps:
            self.verdict = self.judge.judge_trace(self.trace())
            self.end = "success" if self.verdict.success else "time_limit"
        return self.done

    def trace(self) -> Trace:
        return self.env.trace.freeze(self._heights, info=self.world.sample.to_dict())

    def result(self, policy_name: str, video: str | None = None) -> TrialResult:
        if self.verdict is None:  # stopped from outside before any verdict
            self.verdict = self.judge.judge_trace(self.trace())
        end = self.end or ("success" if self.verdict.success else "stopped")
        result = TrialResult(self.setup.package.name, policy_name, self.appearance, self.seed, end == "success", end,
                             self.verdict.to_dict(), self.rig.step_count, self.rig.time,
                             time.perf_counter() - self.started, self.look.to_dict(), self.error, video)
        log.info("trial %s seed %d (%s): %s after %.1f s simulated (%s)", policy_name, self.seed, self.appearance, end,
                 self.rig.time, self.verdict.reason)
        return result


def run_trial(setup: TrialSetup, policy: Policy, policy_name: str, seed: int, appearance: str, judge: TrialJudge,
              check_every_s: float = 1.0, video_path: Path | None = None,
              time_limit_s: float | None = None) -> TrialResult:
    """Run one trial of `policy` on `seed` rendered in `appearance` ("original" | "unseen").

    Only the cameras the policy looks at are rendered (and filmed); a blind control gets no frames and no video.
    """
    trial = Trial(setup, seed, appearance, judge, check_every_s, time_limit_s, getattr(policy, "cameras", CAMERAS))
    video_path = video_path if trial.cameras else None
    writer = None
    policy.reset()
    try:
        while not trial.done:
            frames = trial.observe()
            if video_path is not None:
                writer = writer or _open_video(video_path, trial.rig.config.timing.control_hz)
                writer.write(_video_frame([frames[c] for c in trial.cameras]))
            trial.apply(policy.act(frames, trial.state()))
    finally:
        if writer is not None:
            writer.__exit__(None, None, None)
    video = None
    if video_path is not None and Path(video_path).exists():
        video = str(Path(video_path).resolve().relative_to(Path(setup.workspace_root).resolve()))
    return trial.result(policy_name, video)


def _open_video(path: Path, fps: int):
    from datafarm.media import VideoWriter

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return VideoWriter(path, fps).__enter__()


def _video_frame(views: list[np.ndarray]) -> np.ndarray:
    from PIL import Image

    from datafarm.viz import tile_views

    tiled = tile_views(views)
    height, width = tiled.shape[:2]
    size = (2 * round(width * VIDEO_SCALE / 2), 2 * round(height * VIDEO_SCALE / 2))
    return np.asarray(Image.fromarray(tiled).resize(size, Image.BILINEAR))
