"""The paper's comparison, closed loop in simulation: does farm data make a policy that works, and keeps
working when the scene looks different? Prints one table: success, Wilson 95% interval, per cell.

    python benchmarks/close_the_loop.py WS --protocol cpu      # one task, reduced ACT, 20 trials/cell (2 cores:
                                                               # ~2 h per arm: pose pretraining, training, eval)
    python benchmarks/close_the_loop.py WS --protocol full     # GPU: ACT gpu preset, 50 trials/cell, the curve
    python benchmarks/close_the_loop.py --blind-replay --seeds 10   # blind replay per reference task

WS is a farmed workspace (`datafarm farm`, composite renderer). Arms, all with the same episodes,
seeds and preset; the farm arm is WS itself, the others are DERIVED workspaces beside it (WS.arms/<arm>/:
the task, settings and rollouts linked, episodes re-rendered, then harvested with the farm's own harvest code):
- farm: the delivery as it is (composite over the calibration footage, appearance randomized);
- teleop-like: the same rollouts rendered by the same renderer in ONE fixed appearance (the first
  draw of the farm's appearance sampler), no appearance randomization (a fixed human-collected set);
- sim+DR: the simulator's own render (the rollout's RGB: table colour, light colour / intensity /
  direction and object colours randomized per episode by the task's randomization), no calibration
  conditioning. Limitation: no tablecloth textures are added to this arm.
Each arm is evaluated in `original` and `unseen` appearance; the controls (do-nothing, blind replay,
expert) run on the same seeds; the farm arm also gets a data-scale curve (subsets of its episodes).
Evaluations and trainings are resumable: a rerun continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datafarm.policy.report import wilson_interval  # noqa: E402
from datafarm.workspace import Workspace  # noqa: E402

log = logging.getLogger("close_the_loop")

PROTOCOLS = {
    "cpu": {"preset": "cpu", "arms": ("farm", "teleop-like"), "trials": 20, "curve": (), "workers": 2},
    "full": {"preset": "gpu", "arms": ("farm", "sim+DR", "teleop-like"), "trials": 50, "curve": (10, 25, 50, 100),
             "workers": 8},
}
LINKED = ("workspace.json", "request.txt", "contract.json", "survey.json", "keyframes", "scene", "expert", "judge",
          "rollout", "calibration")


def derive_workspace(source: Workspace, arm: str, episodes: list[int]) -> Workspace:
    """WS.arms/<arm>: the source's task and rollouts linked, `episodes` re-rendered for the arm, harvested."""
    from datafarm.farm.deliver import harvest
    from datafarm.farm.episodes import episode_dir

    root = source.root.parent / f"{source.root.name}.arms" / arm
    root.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if source.path(name).exists() and not (root / name).exists():
            if source.path(name).is_dir():
                (root / name).symlink_to(source.path(name).resolve(), target_is_directory=True)
            else:
                shutil.copy2(source.path(name), root / name)
    meta = json.loads((root / "workspace.json").read_text())
    meta["settings"]["target_count"] = len(episodes)
    (root / "workspace.json").write_text(json.dumps(meta, indent=2))
    workspace = Workspace.open(root)
    for index in episodes:
        folder = root / episode_dir(index)
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("sim", "trace.npz", "result.json", "review.json"):
            if not (folder / name).exists():
                (folder / name).symlink_to(source.path(episode_dir(index), name).resolve())
        if not (folder / "render" / "head.mp4").exists():
            render_for_arm(source, workspace, arm, index)
    if not workspace.path("manifest.json").exists():
        harvest(workspace)
    return workspace


def render_for_arm(source: Workspace, workspace: Workspace, arm: str, index: int) -> None:
    from datafarm.farm.episodes import CAMERAS, calibration_references, episode_dir, texture_pool
    from datafarm.render import get_renderer, sample_appearance
    from datafarm.sim.recorder import RecordedEpisode

    target = workspace.path(episode_dir(index), "render")
    if arm.startswith("farm"):  # the delivery as it is (the curve's subsets too)
        target.symlink_to(source.path(episode_dir(index), "render").resolve(), target_is_directory=True)
        return
    staging = workspace.path(episode_dir(index), ".render-staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    sim = source.path(episode_dir(index), "sim")
    if arm == "sim+DR":  # the simulator's own (randomized) render, no calibration conditioning
        for camera in CAMERAS:
            shutil.copy2(sim / "cameras" / camera / "rgb.mp4", staging / f"{camera}.mp4")
    else:  # teleop-like: one fixed appearance for every episode
        appearance = sample_appearance(0, texture_pool())
        get_renderer("composite").render(RecordedEpisode.load(sim), calibration_references(source), appearance, staging)
        (staging / "appearance.json").write_text(json.dumps(appearance.to_dict(), default=str))
    staging.rename(target)


def run_arm(workspace: Workspace, arm: str, preset: str, trials: int, workers: int,
            n_action_steps: int | None = None) -> list[dict]:
    from datafarm.policy.evaluate import evaluate, policy_name
    from datafarm.policy.train import train_policy

    folder = train_policy(workspace.root, "act", preset).folder
    for appearance in ("original", "unseen"):
        evaluate(workspace, str(folder), trials, appearance, workers=workers, n_action_steps=n_action_steps)
    return table_rows(workspace, arm, lambda policy: policy == policy_name(str(folder), n_action_steps))


def table_rows(workspace: Workspace, arm: str, wanted) -> list[dict]:
    from datafarm.policy.report import cells

    return [{"arm": arm, **c.__dict__} for c in cells(workspace) if wanted(c.policy)]


def print_table(rows: list[dict]) -> None:
    print(f"{'arm':14s} {'policy':20s} {'appearance':10s} {'success':>9s} {'rate':>6s}  Wilson 95%")
    for r in rows:
        print(f"{r['arm']:14s} {r['policy']:20s} {r['appearance']:10s} {r['successes']:>4d}/{r['trials']:<4d} "
              f"{100 * r['rate']:5.0f}%  [{100 * r['low']:.0f}%, {100 * r['high']:.0f}%]")


def comparison(args) -> None:
    from datafarm.farm.episodes import admitted_episodes
    from datafarm.policy.evaluate import CONTROLS, evaluate

    protocol = PROTOCOLS[args.protocol]
    source = Workspace.open(args.workspace)
    episodes = admitted_episodes(source)
    trials = args.trials or protocol["trials"]
    rows = []
    for control in ("do-nothing", "blind-replay", "expert"):
        for appearance in ("original", "unseen") if control != "expert" else ("original",):
            evaluate(source, control, trials, appearance, workers=protocol["workers"])
    rows += table_rows(source, "control", lambda policy: policy in CONTROLS)
    for arm in protocol["arms"]:
        # the farm arm IS the delivery: its policy trains in WS itself (`datafarm train WS` shares it)
        workspace = source if arm == "farm" else derive_workspace(source, arm, episodes)
        rows += run_arm(workspace, arm, protocol["preset"], trials, protocol["workers"], args.n_action_steps)
    for size in protocol["curve"]:
        if size < len(episodes):
            subset = derive_workspace(source, f"farm-{size}", episodes[:size])
            rows += run_arm(subset, f"farm-{size}", protocol["preset"], trials, protocol["workers"], args.n_action_steps)
    print_table(rows)


def blind_replay(args) -> None:
    """Per reference task: one expert episode's actions replayed open-loop on `seeds` new seeds."""
    import tempfile

    from datafarm.library import available_tasks, get_task
    from datafarm.policy.controls import ActionReplay, recorded_actions
    from datafarm.policy.trials import TrialJudge, TrialSetup, run_trial
    from datafarm.sim.config import load_rig_config
    from datafarm.task.randomization import RandomizationConfig
    from datafarm.task.rollout import run_episode

    for name in args.tasks or available_tasks():
        package = get_task(name)
        with tempfile.TemporaryDirectory() as tmp:
            recorded = Path(tmp) / "sim"
            source = next(seed for seed in range(20) if run_episode(package, seed, record_dir=recorded).success)
            setup = TrialSetup(Path(tmp), package, RandomizationConfig(),
                               load_rig_config().model_copy(update={"cameras": {}}), {}, None)
            replay = ActionReplay(recorded_actions(recorded))
            with TrialJudge(package, Path(tmp) / "judge") as judge:
                wins = sum(run_trial(setup, replay, "blind-replay", 5_000 + i, "original", judge).success
                           for i in range(args.seeds))
        low, high = wilson_interval(wins, args.seeds)
        print(f"blind replay {name:16s} (expert seed {source}): {wins}/{args.seeds} "
              f"[{100 * low:.0f}%, {100 * high:.0f}%]", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workspace", nargs="?", type=Path)
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="cpu")
    parser.add_argument("--trials", type=int, default=None, help="trials per cell (default: the protocol's)")
    parser.add_argument("--n-action-steps", type=int, default=None,
                        help="actions run per prediction in evaluation (default: the checkpoint's)")
    parser.add_argument("--blind-replay", action="store_true", help="only measure blind replay per reference task")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--tasks", nargs="*")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if os.environ.get("VERBOSE") else logging.WARNING)
    if args.blind_replay:
        blind_replay(args)
    elif args.workspace is None:
        parser.error("give a farmed workspace (or --blind-replay)")
    else:
        comparison(args)


if __name__ == "__main__":
    main()
