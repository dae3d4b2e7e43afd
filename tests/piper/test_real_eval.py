"""The real-robot evaluation flow, run in simulation (SimStation + the task's hidden judge as the operator).

Faithful path: the expert's own recorded actions replayed on their seed through the ArmPair (safety layer
inside) are judged success; doing nothing on the same seed is judged failure (negative control). The
flow writes trial files, one LeRobot episode per trial and a summary; a rerun skips finished trials; a
policy emitting NaN is emergency-stopped and ends the run with its trial marked "estop"; placement
cards differ between seeds."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from datafarm.errors import BadInput, SafetyStop
from datafarm.policy.controls import DoNothing
from datafarm.workspace import Workspace

# Tests taking `workspace` are slow: they need the farmed workspace (a session fixture: minutes).
pytestmark = pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def workspace(farmed_workspace, tmp_path_factory) -> Path:
    """A copy of the farmed workspace (evaluations write into it)."""
    root = tmp_path_factory.mktemp("eval-real") / "ws"
    shutil.copytree(farmed_workspace, root)
    return root


@pytest.fixture(scope="module")
def station(workspace):
    """One simulated station (judge sandbox, renderer references) for the module's library-level trials."""
    from datafarm.piper.eval_station import SimStation
    from datafarm.policy.trials import TrialJudge, trial_setup

    ws = Workspace.open(workspace)
    setup = trial_setup(ws)
    station = SimStation(setup, TrialJudge(setup.package, workspace / ".judge-test", [ws.path("expert")]),
                         owns_judge=True)
    yield station
    station.close()


def _hil_station(workspace: Path, name: str, safety=None, hidden: list[Path] = ()):
    """The real driver on fake firmwares stepping the seed's scenes, as `datafarm eval-real --station hil` opens it
    (with another safety config where a test needs one)."""
    from datafarm.piper.driver import PiperPairConfig
    from datafarm.piper.real_eval import HIL_WATCHDOG
    from datafarm.piper.rig_firmware import HilStation
    from datafarm.piper.safety import SafetyConfig
    from datafarm.policy.trials import TrialJudge, trial_setup

    setup = trial_setup(Workspace.open(workspace))
    judge = TrialJudge(setup.package, workspace / f".judge-{name}", [workspace / "expert", *hidden])
    config = PiperPairConfig(watchdog=HIL_WATCHDOG, safety=safety or SafetyConfig())
    return HilStation(setup, judge, config, owns_judge=True)


def _kept(root: Path) -> dict:
    return json.loads(min((root / "episodes").glob("*/result.json")).read_text())


def _episode_frames(root: Path) -> int:
    return json.loads((root / "meta" / "info.json").read_text())["total_frames"]


class _NaNPolicy:
    cameras: tuple[str, ...] = ()

    def reset(self) -> None:
        pass

    def act(self, frames, state):
        action = np.asarray(state, dtype=np.float64).copy()
        action[3] = np.nan
        return action


def test_the_head_camera_projects_its_target_to_the_image_centre():
    from datafarm.piper.placement_card import project_to_head
    from datafarm.sim.config import load_rig_config

    camera = load_rig_config().cameras["head"]
    target, eye = np.array(camera.target), np.array(camera.eye)
    pixels = project_to_head(np.array([target]), camera, (2 * camera.width, 2 * camera.height))
    assert np.allclose(pixels[0], [camera.width, camera.height], atol=1e-6)  # the centre of an image twice the size
    with pytest.raises(BadInput, match="behind the head camera"):
        project_to_head(np.array([eye - (target - eye)]), camera, (camera.width, camera.height))


def test_preflight_moves_the_real_pair_slowly_to_the_start_pose(fake_pair):
    from datafarm.piper.eval_station import START_TOLERANCE, check_and_home, rest_pose

    fakes, connect = fake_pair
    start = rest_pose()
    off = start[:6].copy()
    off[0] += 0.2
    fakes["left"].set_state(off)
    pair = connect()
    result = check_and_home(pair, start, 30, real_time=True)
    assert result.ticks >= 0.2 / pair.safety.config.max_step_rad  # ramped by the change cap, not one jump
    assert result.start_error < START_TOLERANCE and result.feedback_age_s < 0.1
    assert abs(fakes["left"].joints_rad()[0] - start[0]) < START_TOLERANCE
    pair.emergency_stop("test")  # negative control: a latched stop fails the preflight
    with pytest.raises(SafetyStop, match="emergency-stopped"):
        check_and_home(pair, start, 30, real_time=True)


@pytest.mark.slow
def test_placement_cards_differ_between_seeds(workspace, tmp_path):
    from PIL import Image

    from datafarm.piper.placement_card import draw_placement_card

    ws = Workspace.open(workspace)
    first = np.asarray(Image.open(draw_placement_card(ws, 1_000_000, tmp_path / "a.png")))
    again = np.asarray(Image.open(draw_placement_card(ws, 1_000_000, tmp_path / "b.png")))
    other = np.asarray(Image.open(draw_placement_card(ws, 1_000_001, tmp_path / "c.png")))
    plate = np.asarray(Image.open(workspace / "keyframes" / "head_plate.png"))
    assert first.shape[1] >= plate.shape[1] and first.shape[0] > plate.shape[0]  # the view, enlarged, plus a legend
    assert np.array_equal(first, again)  # a seed's card is its own draw, reproducibly
    assert np.abs(first.astype(int) - other.astype(int)).sum() > 0


@pytest.mark.slow
def test_expert_replay_is_judged_success_and_doing_nothing_failure(workspace, station):
    from datafarm.piper.real_eval import JudgeOperator, RealEvalRun, run_real_trials
    from datafarm.policy.controls import ActionReplay, DoNothing, recorded_actions

    episode = _kept(workspace)
    seed = episode["seed"]  # a training seed: the library directly (plan_real_eval would refuse it)
    actions = recorded_actions(workspace / "episodes" / f"{episode['index']:06d}" / "sim")
    operator = JudgeOperator(station)
    replay = RealEvalRun(workspace, "expert-replay", "expert-replay", (seed,), time_limit_s=30.0, station="simulated")
    [result] = run_real_trials(replay, station, ActionReplay(actions), operator)
    assert result["success"] and result["end"] == "judge", result
    looking = DoNothing()
    looking.cameras = ("head",)  # render and record one view
    nothing = RealEvalRun(workspace, "do-nothing", "do-nothing-on-a-training-seed", (seed,), time_limit_s=1.0,
                          station="simulated")
    [control] = run_real_trials(nothing, station, looking, operator)
    assert not control["success"] and control["end"] == "time_limit" and control["steps"] == 30, control
    assert control["notes"].startswith("judge:")
    dataset = workspace / control["episode"]
    assert _episode_frames(dataset) == 30 and _episode_frames(workspace / result["episode"]) == result["steps"]
    assert set(control["videos"]) == {"head"} and (workspace / control["videos"]["head"]).stat().st_size > 0
    assert (workspace / control["card"]).is_file()


class _SlowHold(DoNothing):
    """Holds the first tick's joints, taking 60 ms a tick: a control loop slower than the wall clock."""

    def act(self, frames, state):
        time.sleep(0.06)
        return super().act(frames, state)


@pytest.mark.slow
def test_a_control_loop_slower_than_the_wall_clock_ends_its_trial_on_its_ticks_in_the_loop(workspace, monkeypatch):
    """In the loop the rig steps on the wall clock; a trial whose ticks come late must still end on its own
    ticks, not on the scene's step budget (cut here to the trial's 30 ticks) running out beneath it."""
    import dataclasses

    import datafarm.policy.trials as trials
    from datafarm.piper.real_eval import JudgeOperator, RealEvalRun, run_real_trials

    world = trials.episode_world
    monkeypatch.setattr(trials, "episode_world", lambda *a, **k: dataclasses.replace(world(*a, **k), max_steps=30))
    station = _hil_station(workspace, "slow")
    try:
        run = RealEvalRun(workspace, "slow", "slow-hil", (1_000_200,), time_limit_s=1.0, station="hil")
        [result] = run_real_trials(run, station, _SlowHold(), JudgeOperator(station))
    finally:
        station.close()
    assert result["end"] == "time_limit" and result["steps"] == 30 and result["late_ticks"] > 0, result


@pytest.mark.slow
def test_a_policy_too_slow_for_the_deadline_is_refused_before_anything_moves(workspace):
    from datafarm.errors import Unavailable
    from datafarm.piper.eval_station import SimStation
    from datafarm.piper.real_eval import JudgeOperator, RealEvalRun, run_real_trials
    from datafarm.policy.trials import TrialJudge, trial_setup

    class Slow(_SlowHold):
        def act(self, frames, state):
            time.sleep(0.25)
            return super().act(frames, state)

    setup = trial_setup(Workspace.open(workspace))
    station = SimStation(setup, TrialJudge(setup.package, workspace / ".judge-deadline", [workspace / "expert"]),
                         deadline_s=0.25, owns_judge=True)
    run = RealEvalRun(workspace, "slow", "slow-deadline", (1_000_300,), time_limit_s=1.0, station="simulated")
    try:
        with pytest.raises(Unavailable, match=r"takes \d+ ms here, over 80% of the arms' 250 ms deadline"):
            run_real_trials(run, station, Slow(), JudgeOperator(station))
        assert station.trial.rig.step_count == 0 and not run.trial_file(1_000_300).exists()  # rerun starts here
        [result] = run_real_trials(run, station, _SlowHold(), JudgeOperator(station))  # 60 ms a tick fits
        assert result["end"] == "time_limit" and result["steps"] == 30, result
    finally:
        station.close()


@pytest.mark.slow
def test_a_nan_policy_is_estopped_and_ends_the_run(workspace, station):
    from datafarm.piper.real_eval import JudgeOperator, RealEvalRun, run_real_trials

    seeds = (1_000_100, 1_000_101)
    run = RealEvalRun(workspace, "nan", "nan", seeds, time_limit_s=1.0, station="simulated")
    with pytest.raises(SafetyStop, match="emergency-stopped"):
        run_real_trials(run, station, _NaNPolicy(), JudgeOperator(station))
    trial = json.loads(run.trial_file(seeds[0]).read_text())
    assert trial["end"] == "estop" and not trial["success"] and "not finite at ['left_joint_4']" in trial["estop"]
    assert trial["steps"] == 0 and trial["episode"] is None  # stopped before anything reached the rig
    assert not run.trial_file(seeds[1]).exists()  # the run ended at the stop
    assert station.trial.rig.step_count == 0


@pytest.mark.slow
def test_real_eval_flow_runs_trials_and_a_rerun_skips_them(workspace, prefect_harness):
    from flows.real_eval import real_eval_flow

    summary = real_eval_flow(str(workspace), "do-nothing", episodes=2, station="simulated", time_limit_s=1.0)
    assert summary["trials"] == 2 and summary["successes"] == 0 and summary["wilson_high"] < 0.9
    folder = workspace / "evals-real" / "do-nothing-simulated"  # a rehearsal never resumes into the arms' trials
    trials = sorted(folder.glob("trials/*.json"))
    assert [int(p.stem) for p in trials] == json.loads((folder / "eval.json").read_text())["seeds"]
    assert all((folder / "episodes" / p.stem / "meta" / "info.json").is_file() for p in trials)
    assert all((folder / "cards" / f"{p.stem}.png").is_file() for p in trials)
    from prefect.artifacts import Artifact

    artifact = Artifact.get(f"eval-real-{workspace.name}-do-nothing-simulated")
    assert artifact is not None and "Wilson 95%" in artifact.data and "| failure | time_limit |" in artifact.data
    # every trial is also an episode of one dataset, in trial order (lerobot's own aggregation)
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    combined = LeRobotDataset("datafarm/eval-real-do-nothing-simulated", root=workspace / summary["dataset"])
    assert combined.num_episodes == 2 and combined.num_frames == sum(r["steps"] for r in summary["results"])
    listing = folder / "dataset" / "datafarm_trials.json"
    assert json.loads(listing.read_text()) == [r["seed"] for r in summary["results"]]
    assert "one LeRobot dataset" in artifact.data
    written = [p.stat().st_mtime_ns for p in [*trials, listing]]
    again = real_eval_flow(str(workspace), "do-nothing", episodes=2, station="simulated", time_limit_s=1.0)
    assert again["trials"] == 2 and [p.stat().st_mtime_ns for p in [*trials, listing]] == written

    # the same flow on the real driver's path: piper_sdk over virtual CAN, fake firmwares stepping the scene
    hil = real_eval_flow(str(workspace), "do-nothing", episodes=1, station="hil", time_limit_s=1.0)
    [trial] = hil["results"]
    assert hil["station"] == "hil" and trial["end"] == "time_limit" and not trial["success"]
    assert not json.loads((workspace / "evals-real" / "do-nothing-hil" / "trials" / f"{trial['seed']}.json")
                          .read_text())["simulated"]  # the real driver's clock and checks, not the sim pair's
    with pytest.raises(BadInput, match="unknown station 'arms'; choose one of real, simulated, hil"):
        real_eval_flow(str(workspace), "do-nothing", episodes=1, station="arms")


@pytest.mark.slow
def test_a_policy_trained_on_farm_data_drives_the_real_driver_path(workspace):
    """Hardware in the loop with a trained policy: lerobot's ACT, trained (smoke preset) on this farm's delivery,
    drives piper_sdk over virtual CAN through the safety layer into fake firmwares stepping the seed's scene.

    Four training steps leave ACT's targets near the data's mean, which puts the left wrist's roll 1 rad from the
    start pose: the default jump stop rightly ends such a trial at once (the NaN test covers that stop), so this
    rehearsal widens it to see the policy's targets ramp through the rest of the path."""
    import pandas as pd

    from datafarm.piper.real_eval import JudgeOperator, RealEvalRun, load_eval_policy, run_real_trials
    from datafarm.piper.safety import SafetyConfig
    from datafarm.policy.train import train_policy

    policy = train_policy(workspace, "act", "smoke").folder
    station = _hil_station(workspace, "act", SafetyConfig(stop_jump_rad=np.pi), hidden=[policy])
    try:
        station.preflight()
        run = RealEvalRun(workspace, str(policy), "act-smoke-hil", (1_000_300,), time_limit_s=1.0, station="hil")
        [trial] = run_real_trials(run, station, load_eval_policy(Workspace.open(workspace), str(policy)),
                                  JudgeOperator(station))
    finally:
        station.close()
    assert trial["end"] == "time_limit" and trial["steps"] == 30, trial
    record = workspace / "evals-real" / "act-smoke-hil" / "trials" / f"{trial['seed']}.json"
    assert not json.loads(record.read_text())["simulated"]  # the real driver's clock and checks
    assert set(trial["videos"]) == set(json.loads((policy / "policy.json").read_text())["cameras"])
    frames = pd.read_parquet(next((workspace / trial["episode"] / "data").rglob("*.parquet")))
    commands = np.stack(frames["action"].to_numpy())
    states = np.stack(frames["observation.state"].to_numpy())
    # the policy's targets were sent, ramped by the change cap: the commands leave the start pose
    assert np.abs(commands - states[0]).max() > 1e-3


def test_the_operator_is_a_person_on_the_arms_and_the_judge_only_in_a_rehearsal():
    from flows.real_eval import operator_kind

    assert operator_kind(None, "real") == "person" and operator_kind(None, "hil") == "judge"
    assert operator_kind("person", "simulated") == "person"  # a person rehearses their part
    with pytest.raises(BadInput, match="the judge needs a simulated scene"):
        operator_kind("judge", "real")
    with pytest.raises(BadInput, match="unknown operator 'robot'; choose one of person, judge"):
        operator_kind("robot", "simulated")


def _wait_until(ready, what: str, timeout_s: float = 180.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := ready():
            return found
        time.sleep(0.01)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.mark.slow
def test_a_person_answers_through_the_flow_runs_forms(workspace, prefect_harness):
    """The operator in Prefect's UI: each trial pauses the flow run for the go, then for the verdict (Prefect's own
    pause-for-input); what the person submits is what the trial records, against the judge's own view."""
    import threading

    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType
    from prefect.flow_runs import resume_flow_run

    from flows.real_eval import real_eval_flow

    def paused():
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))))
        return runs[0] if runs else None

    summary: dict = {}
    flow_run = threading.Thread(target=lambda: summary.update(real_eval_flow(
        str(workspace), "blind-replay", episodes=1, station="simulated", time_limit_s=1.0, operator="person")))
    flow_run.start()
    resume_flow_run(_wait_until(paused, "the go's form").id, run_input={"objects_placed": True})
    resume_flow_run(_wait_until(paused, "the verdict's form").id,
                    run_input={"success": True, "notes": "a person's verdict"})
    flow_run.join(timeout=180)
    [trial] = summary["results"]
    assert trial["success"] and trial["notes"] == "a person's verdict" and trial["end"] == "time_limit", trial


@pytest.mark.slow
def test_a_person_answers_at_the_terminal(workspace, prefect_harness, monkeypatch, tmp_path):
    """`datafarm eval-real --operator person`'s terminal operator on a rehearsal: Enter starts, Enter during the
    trial ends it (stdin polled by the control loop), then the verdict and notes are asked."""
    import io
    import os
    import sys
    import threading

    from rich.console import Console

    import cli.real_eval as terminal
    from flows.real_eval import real_eval_flow

    read_end, write_end = os.pipe()
    monkeypatch.setattr(sys, "stdin", os.fdopen(read_end, "r"))
    shown = io.StringIO()
    monkeypatch.setattr(terminal, "console", Console(file=shown, width=200))

    def person():
        for cue, answer in (("press Enter to start", "\n"), ("press Enter to end the trial early", "\n"),
                            ("did the policy do the task?", "n\nit never moved\n")):
            _wait_until(lambda: cue in shown.getvalue(), repr(cue))
            os.write(write_end, answer.encode())

    own = tmp_path / "ws"  # its own do-nothing evaluation, beside the flow test's
    shutil.copytree(workspace, own, ignore=shutil.ignore_patterns("evals-real"))
    threading.Thread(target=person, daemon=True).start()
    summary = real_eval_flow(str(own), "do-nothing", episodes=1, station="simulated", time_limit_s=30.0,
                             operator=terminal.TerminalOperator())
    [trial] = summary["results"]
    assert trial["end"] == "operator" and trial["steps"] < 900 and not trial["success"], trial
    assert trial["notes"] == "it never moved"
