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
from datafarm.farm.episodes import CAMERAS
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
                      calibrated_rig_config(workspace), calibration_references(workspace), texture_pool())


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


def run_trial(setup: TrialSetup, policy: Policy, policy_name: str, seed: int, appearance: str, judge: TrialJudge,
              check_every_s: float = 1.0, video_path: Path | None = None) -> TrialResult:
    """Run one trial of `policy` on `seed` rendered in `appearance` ("original" | "unseen")."""
    started = time.perf_counter()
    world = episode_world(setup.package, seed, setup.randomization, setup.rig_config)
    rig = world.rig
    env = TaskEnv(rig, world.scene, world.max_steps, None, world.sample.perturbations)
    env.record_initial_state()
    look = trial_appearance(appearance, seed, setup.texture_pool)
    cameras = [c for c in rig.cameras if c in CAMERAS]
    specs = {c: {"width": rig.config.cameras[c].width, "height": rig.config.cameras[c].height,
                 "intrinsics": rig.intrinsics(c).tolist()} for c in cameras}
    lookup = legend_classes(rig.segmentation_legend())
    heights = {name: obj.height for name, obj in world.scene.objects.items()}
    table_height = rig.config.table.height
    check_every = max(1, round(check_every_s * rig.config.timing.control_hz))
    policy.reset()
    stream, writer, error, end, verdict = None, None, None, "time_limit", None
    try:
        while rig.step_count < world.max_steps:
            captured = rig.capture(cameras)
            if stream is None:
                stream = CompositeRenderer().start_stream(specs, rig.segmentation_legend(), captured,
                                                          setup.references, look, DEPTH_SCALE)
            frames = stream.frame({c: live_frame(captured[c], lookup) for c in cameras})
            if video_path is not None:
                writer = writer or _open_video(video_path, rig.config.timing.control_hz)
                writer.write(_video_frame([frames[c] for c in cameras]))
            action = np.asarray(policy.act(frames, rig.qpos()), dtype=np.float64).reshape(-1)
            problem = safety_problem(action, env, table_height)
            if problem:
                end, error = "safety_stop", problem
                break
            env.step(action)
            if rig.step_count % check_every == 0:
                verdict = judge.judge_trace(env.trace.freeze(heights, info=world.sample.to_dict()))
                if verdict.success:
                    end = "success"
                    break
    finally:
        if writer is not None:
            writer.__exit__(None, None, None)
    if end != "success":
        verdict = judge.judge_trace(env.trace.freeze(heights, info=world.sample.to_dict()))
        if verdict.success and end == "time_limit":
            end = "success"
    relative_video = None
    if video_path is not None and Path(video_path).exists():
        relative_video = str(Path(video_path).resolve().relative_to(Path(setup.workspace_root).resolve()))
    result = TrialResult(setup.package.name, policy_name, appearance, seed, verdict.success and end == "success", end,
                         verdict.to_dict(), rig.step_count, rig.time, time.perf_counter() - started, look.to_dict(),
                         error, relative_video)
    log.info("trial %s seed %d (%s): %s after %.1f s simulated (%s)", policy_name, seed, appearance, end, rig.time,
             verdict.reason)
    return result


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
