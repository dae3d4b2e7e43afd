"""Train a policy on a workspace's delivery with lerobot's own training script, resumably, offline.

``train_policy(WS, "act", "cpu")`` writes ``WS/policies/act-cpu/``:

- ``lerobot/``: lerobot-train's output dir (``checkpoints/<step>/`` and ``checkpoints/last``);
- ``preset.yaml`` (the preset trained with), ``policy.json`` (:class:`PolicySpec`), ``training.json``
  (steps, s/step, loading share, wall and CPU seconds of every run), ``metrics.jsonl`` (lerobot's
  metrics per log window), ``loss_curve.png`` and ``train.log`` (lerobot's output);

and charges the run's CPU-seconds, GPU-seconds (wall on a GPU) and wall seconds to the workspace's cost
ledger under phase ``train:<policy>-<preset>``. A run that is killed resumes from its last checkpoint
the next time the same command runs (lerobot's ``--resume=true --config_path=...``); asking for more
steps than were done continues the same run.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from datafarm.costs import CostLedger
from datafarm.errors import BadInput, PermanentError, TransientError, Unavailable
from datafarm.policy.curve import StepTiming, draw_loss_curve, read_metrics, slowed_down, step_timing
from datafarm.policy.derived import (
    TrainingData,
    delivered_data,
    derived_data,
    training_episode_seeds,
)
from datafarm.policy.lerobot_run import BACKBONE_INIT_ENV
from datafarm.policy.pose_pretraining import pretrain_backbone, report_path
from datafarm.policy.presets import Preset, load_preset, require_usable
from datafarm.policy.spec import PolicySpec, write_policy_spec
from datafarm.processes import die_with_parent, sigterm_raises
from datafarm.task.randomization import RandomizationConfig

log = logging.getLogger(__name__)

POLICIES_DIR = "policies"
LEROBOT_OUTPUT = "lerobot"
LAST_CHECKPOINT = f"{LEROBOT_OUTPUT}/checkpoints/last"
PRETRAINED_MODEL = "pretrained_model"
TRAIN_CONFIG = "train_config.json"  # lerobot's, inside pretrained_model/
METRICS_FILE = "metrics.jsonl"
TRAINING_FILE = "training.json"
LOSS_CURVE = "loss_curve.png"
LOG_FILE = "train.log"
PRESET_FILE = "preset.yaml"
POSE_BACKBONE = "pose_backbone.pt"  # the pose-pretrained ResNet a fresh run starts from (with its report .json)
PRUNE_EVERY_S = 2.0
CHARGE_EVERY_S = 60.0  # a running training is charged this often: a kill -9 of the command loses at most this much


class TrainingFailed(PermanentError):
    """lerobot's training exited with an error (its output is in the policy folder's train.log)."""

    exit_code = 70


class TrainingInterrupted(TransientError):
    """Training was killed (a signal): rerunning the same command resumes from the last checkpoint."""


@dataclass(frozen=True)
class TrainResult:
    folder: Path
    spec: PolicySpec
    steps_done: int
    resumed_from: int  # the step this run started at (0: a fresh run)
    wall_seconds: float  # this call's training wall time (0 when nothing was left to train)
    cpu_seconds: float
    gpu_seconds: float
    timing: StepTiming | None  # over every logged window of the whole run so far
    data_built_seconds: float  # time spent deriving the dataset in this call (0 when reused)
    loss_curve: Path
    final_loss: float | None


def policy_folder(workspace_root: Path, preset: Preset) -> Path:
    return Path(workspace_root) / POLICIES_DIR / preset.folder_name


def checkpoint_step(folder: Path) -> int:
    """The step of the last checkpoint in a policy folder (0 when there is none)."""
    state = Path(folder) / LAST_CHECKPOINT / "training_state" / "training_step.json"
    return int(json.loads(state.read_text())["step"]) if state.is_file() else 0


def prune_checkpoints(folder: Path, keep: int | None) -> list[int]:
    """Delete all but the newest `keep` checkpoints (with its optimizer state, the cpu ACT preset's checkpoint
    is ~180 MB, one per save_freq steps); the one `last` points to always stays. Returns the deleted steps."""
    checkpoints = Path(folder) / LEROBOT_OUTPUT / "checkpoints"
    if keep is None or not checkpoints.is_dir():
        return []
    last = (checkpoints / "last").resolve() if (checkpoints / "last").exists() else None
    steps = sorted((p for p in checkpoints.iterdir() if p.name.isdigit() and not p.is_symlink()),
                   key=lambda p: int(p.name))
    # lerobot writes <step>/ before pointing `last` at it: the newest folder may be unfinished, so only
    # checkpoints older than `last` are candidates
    old = [p for p in steps if last is not None and int(p.name) < int(last.name)]
    deleted = old[:max(0, len(old) - (keep - 1))]
    for path in deleted:
        shutil.rmtree(path, ignore_errors=True)
    if deleted:
        log.info("%s: removed checkpoints %s (keeping the newest %d)", folder.name, [p.name for p in deleted], keep)
    return [int(p.name) for p in deleted]


def training_data(workspace_root: Path, preset: Preset) -> TrainingData:
    if preset.needs_derived_dataset:
        return derived_data(workspace_root, preset.image_sizes)
    return delivered_data(workspace_root)


def _cli_value(value) -> str:
    """A value as draccus parses it on lerobot's command line."""
    if isinstance(value, str):
        return value
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def lerobot_arguments(preset: Preset, data: TrainingData, output_dir: Path, steps: int, resume: bool,
                      backbone_weights: str | None) -> list[str]:
    """lerobot-train's arguments for this preset (fresh run) or for resuming the run in output_dir."""
    run = [f"--steps={steps}", "--wandb.enable=false", f"--output_dir={output_dir}"]
    if resume:
        config = output_dir / "checkpoints" / "last" / PRETRAINED_MODEL / TRAIN_CONFIG
        return [f"--config_path={config}", "--resume=true", *run]
    policy = [f"--policy.path={Path(preset.pretrained_path).expanduser()}"] if preset.pretrained_path else \
        [f"--policy.type={preset.policy}"]
    policy.append("--policy.push_to_hub=false")
    if preset.device:
        policy.append(f"--policy.device={preset.device}")
    if preset.policy in ("act", "diffusion"):
        policy.append(f"--policy.pretrained_backbone_weights={backbone_weights or 'null'}")
    policy += [f"--policy.{key}={_cli_value(value)}" for key, value in preset.policy_options.items()]
    return [f"--dataset.repo_id={data.repo_id}", f"--dataset.root={data.root}", *policy, *run,
            f"--job_name={preset.folder_name}", f"--batch_size={preset.batch_size}",
            f"--num_workers={preset.num_workers}", f"--save_freq={preset.save_freq}", f"--log_freq={preset.log_freq}",
            f"--seed={preset.seed}", "--env_eval_freq=0"]


def _backbone(preset: Preset) -> tuple[str | None, dict[str, str]]:
    """The pretrained backbone to start from when its file is already here (nothing is downloaded)."""
    if preset.backbone is None:
        return None, {}
    found = preset.backbone.local_file()
    if found is None:
        log.warning("%s: backbone %s is not under %s; training the backbone from scratch",
                    preset.folder_name, preset.backbone.weights, preset.backbone.torch_home)
        return None, {}
    return preset.backbone.weights, {"TORCH_HOME": str(found.parents[2])}


def _pose_backbone(workspace_root: Path, folder: Path, preset: Preset, data: TrainingData) -> Path:
    """The pose-pretrained backbone for a fresh run: reused when it learned from this delivery, else trained
    here (in this process, charged to the training's cost every minute, like the training itself)."""
    import torch

    path = folder / POSE_BACKBONE
    report = report_path(path)
    if path.is_file() and report.is_file() and \
            json.loads(report.read_text()).get("dataset_manifest_sha256") == data.manifest_sha256:
        return path
    settings = preset.pose_pretraining
    log.info("%s: pretraining the backbone on object and gripper positions, %d steps", preset.folder_name,
             settings.steps)
    if preset.torch_threads:
        torch.set_num_threads(preset.torch_threads)
    charged, cpu_before = Charged(workspace_root, preset), time.process_time()

    def progress(step: int, loss: float) -> None:
        if charged.due():
            charged.up_to(time.process_time() - cpu_before)
            log.info("%s: backbone pretraining step %d of %d, loss %.3f", preset.folder_name, step, settings.steps,
                     loss)

    try:
        pretrain_backbone(workspace_root, data, preset.cameras, path, settings.steps, settings.batch_size,
                          settings.learning_rate, seed=preset.seed, progress=progress)
    finally:
        charged.up_to(time.process_time() - cpu_before)
    return path


def _offline_env(folder: Path, extra: dict[str, str]) -> dict[str, str]:
    cache = folder / ".cache"
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled",
            "HF_DATASETS_CACHE": str(cache / "hf-datasets"), "HF_HOME": os.environ.get("HF_HOME", str(cache / "hf")),
            **extra}


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def train_policy(workspace_root: Path | str, policy: str, preset_name: str, steps: int | None = None,
                 preset: Preset | None = None, folder: Path | None = None,
                 torch_threads: int | None = None) -> TrainResult:
    """Train (or resume, or extend) ``WS/policies/<policy>-<preset>`` up to ``steps`` (the preset's by default).

    ``preset`` replaces the named preset file (tests, benchmarks); ``folder`` the policy folder;
    ``torch_threads`` the preset's."""
    workspace_root = Path(workspace_root)
    preset = preset or load_preset(policy, preset_name)
    if torch_threads:
        preset = preset.model_copy(update={"torch_threads": torch_threads})
    require_usable(preset)
    if preset.pretrained_path and not Path(preset.pretrained_path).expanduser().is_dir():
        raise Unavailable(f"{preset.folder_name} starts from {preset.pretrained_path}, which is not here: copy the "
                          f"pretrained policy folder there or edit configs/policy/{preset.folder_name}.yaml")
    target_steps = steps or preset.steps
    folder = Path(folder) if folder else policy_folder(workspace_root, preset)
    data = training_data(workspace_root, preset)
    _check_same_delivery(folder, data)
    seeds = training_episode_seeds(workspace_root, data.root)

    done = checkpoint_step(folder)
    output_dir = folder / LEROBOT_OUTPUT
    if done == 0 and output_dir.exists():
        log.info("%s: no checkpoint from the previous run; starting again", output_dir)
        shutil.rmtree(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PRESET_FILE).write_text(yaml.safe_dump(preset.model_dump(mode="json"), sort_keys=False))

    wall = cpu = gpu = 0.0
    if done < target_steps:
        weights, env = _backbone(preset)
        if preset.pose_pretraining and done == 0:  # a resumed run's checkpoint already holds the backbone
            env[BACKBONE_INIT_ENV] = str(_pose_backbone(workspace_root, folder, preset, data))
        arguments = lerobot_arguments(preset, data, output_dir.resolve(), target_steps, resume=done > 0,
                                      backbone_weights=weights)
        log.info("%s: training steps %d..%d with lerobot (%s)", preset.folder_name, done, target_steps,
                 "resumed" if done else "fresh")
        if preset.torch_threads:
            env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(preset.torch_threads)
        charged, on_gpu = Charged(workspace_root, preset), (preset.device or "").startswith("cuda")
        try:
            _run_lerobot(folder, arguments, _offline_env(folder, env), preset, charged)
        except BaseException as stopped:  # what ran is on record, so training.json's runs add up to the cost
            reason = str(stopped) or type(stopped).__name__
            _record_run(folder, _run_entry(done, checkpoint_step(folder), charged.wall, charged.cpu,
                                           charged.wall if on_gpu else 0.0, data, stopped=reason))
            raise
        wall, cpu = charged.wall, charged.cpu
        gpu = wall if on_gpu else 0.0
    steps_done = checkpoint_step(folder)
    return _finish(workspace_root, folder, preset, data, seeds, done, steps_done, wall, cpu, gpu)


def _check_same_delivery(folder: Path, data: TrainingData) -> None:
    """A checkpoint trained on another delivery must not be resumed on this one."""
    training = folder / TRAINING_FILE
    if training.is_file() and checkpoint_step(folder) > 0:
        recorded = json.loads(training.read_text()).get("dataset_manifest_sha256")
        if recorded and recorded != data.manifest_sha256:
            raise BadInput(f"{folder} was trained on another delivery (manifest {recorded[:12]}, now "
                           f"{data.manifest_sha256[:12]}): move or delete {folder} to train on this one")


def _tree_cpu_seconds(pid: int) -> float:
    """CPU seconds so far of a live process and its descendants (its loader workers), from Linux's /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    processes = {}  # pid -> (parent pid, CPU seconds including its reaped children)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        except OSError:  # ended while listed
            continue
        processes[int(stat.parent.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / tick)
    tree, newest = set(), {pid}
    while newest:
        tree |= newest
        newest = {child for child, (parent, _) in processes.items() if parent in newest} - tree
    return sum(processes[member][1] for member in tree if member in processes)


def _run_lerobot(folder: Path, arguments: list[str], env: dict[str, str], preset: Preset, charged: Charged) -> None:
    """Run lerobot's training as a child process, charging its cost as it goes (`charged`), even if it fails."""
    command = [sys.executable, "-m", "datafarm.policy.lerobot_run", str(folder / METRICS_FILE), "--", *arguments]
    cpu_before = _children_cpu_seconds()
    with open(folder / LOG_FILE, "a") as out:
        out.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=folder,
                                   preexec_fn=die_with_parent)  # a killed `datafarm train` leaves no trainer behind
        stopped = (f"training {preset.folder_name} was stopped (SIGTERM); rerun the same command to resume from its "
                   "last checkpoint")
        try:
            with sigterm_raises(lambda: TrainingInterrupted(stopped)):  # a plain `kill` is charged (kill -9 cannot be)
                warned = False
                while (returncode := process.poll()) is None:
                    time.sleep(PRUNE_EVERY_S)
                    prune_checkpoints(folder, preset.keep_checkpoints)
                    if not warned and (slow := slowed_down(read_metrics(folder / METRICS_FILE))):
                        warned = True
                        log.warning("training %s slowed from %.2f to %.2f s/step: other work is sharing the cores "
                                    "(torch's threads wait on each other); it speeds up again once they are free",
                                    preset.folder_name, *slow)
                    if charged.due():
                        charged.up_to(_tree_cpu_seconds(process.pid))
        except BaseException:  # our own interruption: stop lerobot too (its last checkpoint stays)
            process.terminate()
            process.wait()
            raise
        finally:
            charged.up_to(_children_cpu_seconds() - cpu_before)
            prune_checkpoints(folder, preset.keep_checkpoints)
    if returncode < 0:
        raise TrainingInterrupted(f"training {preset.folder_name} was killed by signal {-returncode}; rerun the same "
                                  "command to resume from its last checkpoint")
    if returncode != 0:
        tail = (folder / LOG_FILE).read_text().splitlines()[-5:]
        raise TrainingFailed(f"lerobot training of {preset.folder_name} failed (exit {returncode}): "
                             f"{' | '.join(tail)}; see {folder / LOG_FILE}")


@dataclass
class Charged:
    """What the ledger already has of a running piece of training: each charge adds only what is new, so it
    can be charged as it goes (a kill -9 loses at most CHARGE_EVERY_S of its cost)."""

    workspace_root: Path
    preset: Preset
    started: float = field(default_factory=time.perf_counter)
    wall: float = 0.0
    cpu: float = 0.0

    def due(self) -> bool:
        return time.perf_counter() - self.started - self.wall >= CHARGE_EVERY_S

    def up_to(self, cpu: float) -> None:
        """Charge the wall time until now and the CPU seconds up to `cpu` (both counted from the start)."""
        wall, cpu = time.perf_counter() - self.started, max(cpu, self.cpu)
        ledger, phase = CostLedger(self.workspace_root), f"train:{self.preset.folder_name}"
        ledger.add_cpu(phase, cpu - self.cpu)
        if (self.preset.device or "").startswith("cuda"):
            ledger.add_gpu(phase, wall - self.wall)
        ledger.add(phase, "wall", wall - self.wall, "s", 0.0)  # for the record; wall time itself is not billed
        self.wall, self.cpu = wall, cpu


def _run_entry(from_step: int, to_step: int, wall: float, cpu: float, gpu: float, data: TrainingData,
               stopped: str | None = None) -> dict:
    """training.json's record of one training run: how far it got, what it cost (and why it stopped early)."""
    run = {"from_step": from_step, "to_step": to_step, "wall_seconds": wall, "cpu_seconds": cpu, "gpu_seconds": gpu,
           "data_built_seconds": data.built_seconds, "finished": time.time()}
    return {**run, "stopped": stopped} if stopped else run


def _record_run(folder: Path, run: dict | None, facts: dict | None = None) -> None:
    """Add `run` (one training run) and `facts` to the policy's training.json."""
    path = folder / TRAINING_FILE
    record = json.loads(path.read_text()) if path.is_file() else {"runs": []}
    if run is not None:
        record["runs"].append(run)
    record.update(facts or {})
    path.write_text(json.dumps(record, indent=2))


def _finish(workspace_root: Path, folder: Path, preset: Preset, data: TrainingData, seeds: list[int], started_at: int,
            steps_done: int, wall: float, cpu: float, gpu: float) -> TrainResult:
    if steps_done == 0:
        raise TrainingFailed(f"{folder} holds no checkpoint after training; see {folder / LOG_FILE}")
    meta = json.loads((workspace_root / "workspace.json").read_text())
    spec = PolicySpec(policy_type=preset.policy, preset=preset.name, checkpoint=f"{LAST_CHECKPOINT}/{PRETRAINED_MODEL}",
                      cameras=list(preset.cameras), image_sizes={c: data.image_sizes[c] for c in preset.cameras},
                      dataset_manifest_sha256=data.manifest_sha256, train_episode_seeds=seeds,
                      task=str(meta.get("task", "")), steps=steps_done, fps=data.fps,
                      training_light_gains=RandomizationConfig.model_validate(
                          meta.get("settings", {}).get("randomization", {})).light_gains)
    write_policy_spec(folder, spec)
    # Windows logged after the last checkpoint were lost with the run that logged them (a resume redoes them).
    metrics = [row for row in read_metrics(folder / METRICS_FILE) if row["steps"] <= steps_done]
    timing = step_timing(metrics)
    curve = draw_loss_curve(metrics, folder / LOSS_CURVE, f"{preset.folder_name} on {workspace_root.name}: "
                            f"{steps_done} steps")
    final_loss = metrics[-1]["loss"] if metrics else None
    _record_run(folder, _run_entry(started_at, steps_done, wall, cpu, gpu, data) if wall > 0 else None,
                {"dataset_manifest_sha256": data.manifest_sha256, "dataset": str(data.root), "derived": data.derived,
                 "steps": steps_done, "final_loss": final_loss, "timing": asdict(timing) if timing else None})
    log.info("%s: %d steps; final loss %s; %s", preset.folder_name, steps_done, final_loss,
             f"{timing.seconds_per_step:.2f} s/step, {timing.loading_share:.0%} loading" if timing else "no timing")
    return TrainResult(folder, spec, steps_done, started_at, wall, cpu, gpu, timing, data.built_seconds, curve,
                       final_loss)
