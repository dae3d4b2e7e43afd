"""Closed-loop evaluation of a policy (or a control) on a workspace's task: seeds, resumable trial files, workers.

    evaluate(workspace, "WS/policies/act-cpu", episodes=50, appearance="unseen", workers=2)

Seeds: evaluation seeds are `seed_start, seed_start + 1, ...` (EVAL_SEED_START by default, far above
the farm's seeds, which count up from the workspace's seed_start). Before any trial runs they are
checked against every training seed (the policy's `train_episode_seeds`, every seed in
rollout/attempts.jsonl and every kept episode's seed); an overlap is refused. The seeds used are
recorded in the run's eval.json.

Layout: WS/evals/<policy>/<appearance>/eval.json (what was asked, the seeds, the policy's facts) and
trials/<seed>.json, one file per finished trial, written atomically: a rerun skips done trials.
videos/<seed>.mp4 for the first `videos` seeds. Evaluating a policy trained further since moves the
earlier checkpoint's trials to evals/<policy>-<steps>steps/ (a report row of their own), never resumes them. `workers` > 1 splits the seeds over that many
processes (each loads the policy, the renderer's references and the judge's sandbox once).

Policies: a trained policy folder (policy.json + lerobot checkpoint, loaded with
datafarm.policy.inference.load_lerobot_policy), or a control: "do-nothing", "blind-replay" (the
actions of the workspace's first kept training episode, open-loop) or "expert" (the task's expert on
the same seeds, sandboxed like the farm's rollouts: the ceiling; it reads privileged state, so its
appearance changes nothing).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from datafarm.costs import CostLedger
from datafarm.errors import BadInput, Refused
from datafarm.farm import episodes
from datafarm.policy.appearances import APPEARANCES, check_held_out
from datafarm.policy.trials import (
    TrialJudge,
    TrialResult,
    TrialSetup,
    run_trial,
    trial_setup,
)
from datafarm.processes import die_with_parent
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

EVAL_SEED_START = 1_000_000
CONTROLS = ("do-nothing", "blind-replay", "expert")
EVALS = "evals"


@dataclass(frozen=True)
class EvalRun:
    """One (policy, appearance) evaluation and where its files live."""

    workspace_root: Path
    policy: str  # a policy folder or a control name
    name: str  # the folder name under evals/
    appearance: str
    seeds: tuple[int, ...]
    videos: int = 2
    check_every_s: float = 1.0
    time_limit_s: float | None = None  # caps the task's limit (smoke runs)
    n_action_steps: int | None = None  # actions run per prediction; None: the checkpoint's
    temporal_ensemble: float | None = None  # ACT: ensemble the chunks with this coefficient

    @property
    def folder(self) -> Path:
        return Path(self.workspace_root) / EVALS / self.name / self.appearance

    def trial_file(self, seed: int) -> Path:
        return self.folder / "trials" / f"{seed}.json"

    def video_file(self, seed: int) -> Path:
        return self.folder / "videos" / f"{seed}.mp4"

    def pending(self) -> list[int]:
        return [seed for seed in self.seeds if not self.trial_file(seed).exists()]

    def results(self) -> list[dict]:
        return [json.loads(self.trial_file(s).read_text()) for s in self.seeds if self.trial_file(s).exists()]


def run_batch_in_process(run: EvalRun, seeds: list[int], torch_threads: int | None = None) -> int:
    """run_batch in a fresh process of its own (what a Prefect task calls, so batches run in parallel)."""
    context = multiprocessing.get_context("spawn")  # SAPIEN and torch do not survive a fork
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=die_with_parent) as pool:
        return pool.submit(run_batch, run, seeds, torch_threads).result()


def policy_name(policy: str, n_action_steps: int | None = None, temporal_ensemble: float | None = None) -> str:
    """The evaluation's folder name: the control, or the policy folder's name (+ `-replan<K>` when it acts
    K steps per prediction instead of its checkpoint's default, `-ensemble<C>` when it ensembles its chunks)."""
    if policy in CONTROLS:
        return policy
    suffix = f"-replan{n_action_steps}" if n_action_steps else ""
    suffix += f"-ensemble{temporal_ensemble:g}" if temporal_ensemble is not None else ""
    # the name as given, not a link's target: a link to another workspace's act-cpu is not this one's act-cpu
    return Path(os.path.abspath(policy)).name + suffix


def training_seeds(workspace: Workspace, policy: str) -> set[int]:
    """Every seed the farm simulated for this workspace, and every seed the policy was trained on."""
    seeds = {attempt.seed for attempt in episodes.attempts(workspace)}
    seeds |= {workspace.read_json(f"{episodes.episode_dir(i)}/result.json")["seed"]
              for i in episodes.kept_episodes(workspace)}
    if policy not in CONTROLS:
        from datafarm.policy.spec import load_policy_spec

        seeds |= set(load_policy_spec(policy).train_episode_seeds)
    return seeds


def evaluation_seeds(workspace: Workspace, policy: str, count: int, seed_start: int = EVAL_SEED_START) -> list[int]:
    """`count` evaluation seeds from `seed_start`; refused if any was ever a training seed."""
    if count <= 0:
        raise BadInput(f"--episodes must be positive, got {count}")
    seeds = list(range(seed_start, seed_start + count))
    overlap = sorted(set(seeds) & training_seeds(workspace, policy))
    if overlap:
        raise Refused(f"evaluation seeds {overlap[:5]}{'...' if len(overlap) > 5 else ''} were used for training "
                      f"(rollout/attempts.jsonl or the policy's train_episode_seeds): evaluate on unseen seeds, "
                      f"e.g. --seed-start {max(training_seeds(workspace, policy)) + 1_000}")
    return seeds


def evaluate(workspace: Workspace, policy: str, episodes_count: int = 50, appearance: str = "original",
             workers: int = 1, seed_start: int = EVAL_SEED_START, videos: int = 2,
             check_every_s: float = 1.0, time_limit_s: float | None = None,
             n_action_steps: int | None = None, temporal_ensemble: float | None = None) -> list[dict]:
    """Run (or resume) the evaluation; returns every trial's result (dicts of TrialResult)."""
    if appearance not in APPEARANCES:
        raise BadInput(f"unknown appearance {appearance!r}; choose one of {', '.join(APPEARANCES)}")
    if policy not in CONTROLS and not (Path(policy) / "policy.json").is_file():
        raise BadInput(f"{policy} is neither a trained policy folder (no policy.json) nor a control "
                       f"({', '.join(CONTROLS)}); train one with `datafarm train WS --policy act --preset cpu`")
    if appearance == "unseen" and policy not in CONTROLS:
        from datafarm.farm.prepare import settings_of
        from datafarm.policy.spec import load_policy_spec

        gains = load_policy_spec(policy).training_light_gains  # None: trained before it was recorded
        check_held_out(gains or settings_of(workspace).randomization.light_gains)
    run = plan_run(workspace, policy, episodes_count, appearance, seed_start, videos, check_every_s, time_limit_s,
                   n_action_steps, temporal_ensemble)
    pending = run.pending()
    log.info("eval %s (%s): %d of %d trials to run on %d worker(s)", run.name, appearance, len(pending),
             len(run.seeds), workers)
    if len(pending) and workers > 1:
        context = multiprocessing.get_context("spawn")  # SAPIEN and torch do not survive a fork
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=die_with_parent) as pool:
            # one torch thread per core each: more threads than free cores make small tensor ops wait
            threads = max(1, (os.cpu_count() or 1) // workers)
            for finished in pool.map(run_batch, [run] * workers, split(pending, workers), [threads] * workers):
                log.info("a worker finished %d trials", finished)
    elif pending:
        run_batch(run, pending)
    return run.results()


def plan_run(workspace: Workspace, policy: str, episodes_count: int, appearance: str,
             seed_start: int = EVAL_SEED_START, videos: int = 2, check_every_s: float = 1.0,
             time_limit_s: float | None = None, n_action_steps: int | None = None,
             temporal_ensemble: float | None = None) -> EvalRun:
    """Check the seeds and write eval.json (what this evaluation is); nothing is simulated."""
    seeds = evaluation_seeds(workspace, policy, episodes_count, seed_start)
    if (n_action_steps is not None or temporal_ensemble is not None) and policy in CONTROLS:
        raise BadInput(f"--n-action-steps and --temporal-ensemble apply to a trained policy, not to the control "
                       f"{policy!r}")
    run = EvalRun(workspace.root, policy, policy_name(policy, n_action_steps, temporal_ensemble), appearance,
                  tuple(seeds), videos, check_every_s, time_limit_s, n_action_steps, temporal_ensemble)
    record = {"policy": str(policy), "name": run.name, "appearance": appearance, "seed_start": seed_start,
              "seeds": seeds, "task": task_name(workspace),
              "training_seed_count": len(training_seeds(workspace, policy)), "time_limit_s": time_limit_s,
              "n_action_steps": n_action_steps, "temporal_ensemble": temporal_ensemble}
    if policy not in CONTROLS:
        from datafarm.policy.spec import load_policy_spec

        record["spec"] = load_policy_spec(policy).model_dump(mode="json", exclude={"train_episode_seeds"})
        record["spec"]["train_episodes"] = len(load_policy_spec(policy).train_episode_seeds)
        set_aside_older_checkpoint(workspace, run, record)
    if policy == "blind-replay":
        record["replayed_episode"] = blind_replay_source(workspace)
    workspace.write_json(str(run.folder.relative_to(workspace.root) / "eval.json"), record)
    return run


def set_aside_older_checkpoint(workspace: Workspace, run: EvalRun, record: dict) -> None:
    """Trials of an earlier checkpoint of the same policy (trained further since) must not be resumed as
    this one's: they move to evals/<name>-<steps>steps/, where the report shows them as a row of their own."""
    old_path = run.folder / "eval.json"
    if not old_path.is_file():
        return
    old = json.loads(old_path.read_text())
    identity = ("steps", "dataset_manifest_sha256")
    if all(old.get("spec", {}).get(key) == record["spec"].get(key) for key in identity):
        return
    name = f"{run.name}-{old.get('spec', {}).get('steps', 'older')}steps"
    target = workspace.path(EVALS, name, run.appearance)
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    run.folder.rename(target)
    workspace.write_json(str(target.relative_to(workspace.root) / "eval.json"), {**old, "name": name})
    log.info("%s held trials of an earlier checkpoint (%s steps): moved to %s", run.folder, old["spec"].get("steps"),
             target)


def task_name(workspace: Workspace) -> str:
    return yaml.safe_load(workspace.path("scene", "task.yaml").read_text())["name"]


def split(seeds: list[int], workers: int) -> list[list[int]]:
    """Interleaved batches, one per worker (each gets early and late seeds alike)."""
    workers = max(1, min(workers, len(seeds)))
    return [seeds[i::workers] for i in range(workers)]


def blind_replay_source(workspace: Workspace) -> str:
    """The training episode whose actions blind replay plays: the first kept one."""
    kept = episodes.kept_episodes(workspace)
    if not kept:
        raise BadInput(f"{workspace.root} has no kept episode to replay blindly: run `datafarm farm {workspace.root}`")
    return f"{episodes.episode_dir(kept[0])}/sim"


def run_batch(run: EvalRun, seeds: list[int], torch_threads: int | None = None) -> int:
    """Run these trials of `run` in this process, writing one trial file each; returns how many ran."""
    if torch_threads:
        import torch

        torch.set_num_threads(torch_threads)
    workspace = Workspace.open(run.workspace_root)
    setup = trial_setup(workspace)
    video_seeds = set(run.seeds[:run.videos])
    done = 0
    with CostLedger(workspace.root).measure_cpu("eval"):
        if run.policy == "expert":
            # each batch its own sandbox: parallel workers sharing one would overwrite each other's trace
            sandbox = run.folder / ".expert-sandbox" / str(min(seeds, default=0))
            for seed in seeds:
                _write(run, expert_trial(workspace, setup, seed, run.appearance, sandbox))
                done += 1
            return done
        policy = load_policy(workspace, setup, run)
        hidden = [workspace.path("expert")] + ([Path(run.policy).resolve()] if run.policy not in CONTROLS else [])
        with TrialJudge(setup.package, run.folder / ".judge" / str(min(seeds, default=0)), hidden) as judge:
            for seed in seeds:
                video = run.video_file(seed) if seed in video_seeds else None
                _write(run, run_trial(setup, policy, run.name, seed, run.appearance, judge, run.check_every_s, video,
                                           run.time_limit_s))
                done += 1
    return done


def load_policy(workspace: Workspace, setup: TrialSetup, run: EvalRun):
    from datafarm.policy.controls import ActionReplay, DoNothing, recorded_actions

    if run.policy == "do-nothing":
        return DoNothing()
    if run.policy == "blind-replay":
        return ActionReplay(recorded_actions(workspace.path(blind_replay_source(workspace))))
    from datafarm.policy.inference import load_lerobot_policy

    return load_lerobot_policy(run.policy, instruction=setup.package.info.instruction,
                               n_action_steps=run.n_action_steps, temporal_ensemble=run.temporal_ensemble)


def expert_trial(workspace: Workspace, setup: TrialSetup, seed: int, appearance: str, sandbox: Path) -> TrialResult:
    """The task's expert on an evaluation seed, in the farm's sandboxes under `sandbox` (expert in one, judge
    in another)."""
    from datafarm.task.isolation import rollouts_for

    rollouts = rollouts_for(setup.package, sandbox, hidden=[workspace.root])
    result = rollouts.run(seed, setup.randomization, setup.rig_config)
    end = "success" if result.success else ("expert_error" if result.error else "judge_rejected")
    return TrialResult(setup.package.name, "expert", appearance, seed, result.success, end, result.verdict.to_dict(),
                       result.steps, result.sim_seconds, result.wall_seconds, {"note": "the expert reads privileged "
                       "state: appearance does not reach it"}, result.error)


def _write(run: EvalRun, result: TrialResult) -> None:
    path = run.trial_file(result.seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".partial")
    temporary.write_text(json.dumps(result.to_dict(), indent=2, default=str))
    temporary.replace(path)
