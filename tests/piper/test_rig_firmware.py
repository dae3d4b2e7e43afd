"""Hardware in the loop, simulated: piper_sdk's real code (PiperPair, virtual CAN) against two fake
firmwares whose joints are one SAPIEN rig's arms, stepped at 30 Hz by one owner.

Fast: a command over CAN moves that arm of the rig (the other stays), the feedback reports the rig's
joints; after an emergency stop the loop keeps stepping and the arms hold (negative control).
Slow (the farmed workspace): ``run_real_trials`` in REAL mode on the seed's scene: the expert's recorded
actions replayed are judged success by the task's hidden judge, doing nothing is judged failure."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from piper_testkit import LOADED_FEEDBACK, wait_until

from datafarm.errors import SafetyStop
from datafarm.piper.driver import PiperPair, PiperPairConfig
from datafarm.piper.fake_firmware import FakePiperFirmware
from datafarm.piper.rig_firmware import RigLoop
from datafarm.piper.safety import SafetyLayer
from datafarm.sim.config import load_rig_config
from datafarm.workspace import Workspace

pytestmark = pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")

# Here SAPIEN steps beside the two firmwares too: the command deadline gets a wider margin as well (the
# safety layer's limits are the defaults).
LOADED_MACHINE = LOADED_FEEDBACK.model_copy(update={"deadline_s": 0.5})
# With the judge as the operator, its sandboxed verdict (every second) runs inside the control loop.
JUDGED_LOOP = LOADED_MACHINE.model_copy(update={"deadline_s": 3.0})


def test_can_commands_drive_the_rig_and_the_feedback_reports_it(channel_name):
    from datafarm.sim.rig import DualArmRig

    rig = DualArmRig.create(load_rig_config().model_copy(update={"cameras": {}}))
    loop = RigLoop(rig)
    fakes = {side: FakePiperFirmware(channel_name(f"rig-{side}"), backend=loop.backend(side)).start()
             for side in ("left", "right")}
    loop.start()
    config = PiperPairConfig(left_can=fakes["left"].channel, right_can=fakes["right"].channel, bustype="virtual",
                             watchdog=LOADED_MACHINE)
    pair = PiperPair(config, SafetyLayer(config.safety, rig=rig.config, model=rig.model))
    try:
        pair.connect()
        start = pair.observe().position
        assert np.allclose(start, rig.rest_state(), atol=1e-3)  # the feedback is the rig's pose
        target = start.copy()
        target[0] += 0.15  # left joint 1
        target[6] = min(start[6] + 0.01, 0.07)  # left gripper
        steps_before = loop.steps
        for _ in range(45):  # 1.5 s at 30 Hz
            pair.act(target)
            time.sleep(1 / 30)
        assert wait_until(lambda: abs(loop.measured_arm("left")[0] - target[0]) < 0.02, 2.0)
        with loop.lock:
            moved = rig.qpos()
        assert abs(moved[0] - target[0]) < 0.02 and abs(moved[6] - target[6]) < 0.004
        assert np.allclose(moved[7:], start[7:], atol=0.01)  # the right arm was told to stay
        assert loop.steps - steps_before >= 20  # stepped at (about) its control rate meanwhile
        assert np.allclose(pair.observe().position, loop.measured_arm("left").tolist() + loop.measured_arm(
            "right").tolist(), atol=2e-3)  # the SDK reads the simulated joints
        # negative control: stopped arms hold while the loop keeps stepping
        pair.emergency_stop("end of the hardware-in-the-loop test")
        assert wait_until(lambda: all(f.estopped for f in fakes.values()))
        held, steps = rig_qpos(loop), loop.steps
        time.sleep(0.4)
        assert loop.steps > steps and np.allclose(rig_qpos(loop), held, atol=2e-3)
        with pytest.raises(SafetyStop):
            pair.act(target)
    finally:
        pair.disconnect()
        loop.stop()
        for fake in fakes.values():
            fake.stop()
    assert not loop.running


def rig_qpos(loop: RigLoop) -> np.ndarray:
    with loop.lock:
        return loop.rig.qpos()


@pytest.fixture(scope="module")
def hil_workspace(farmed_workspace, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("eval-hil") / "ws"
    shutil.copytree(farmed_workspace, root)
    return root


@pytest.mark.slow
def test_real_mode_trials_on_the_rig_replay_succeeds_and_doing_nothing_fails(hil_workspace):
    from datafarm.piper.real_eval import JudgeOperator, RealEvalRun, run_real_trials
    from datafarm.piper.rig_firmware import HilStation
    from datafarm.policy.controls import ActionReplay, DoNothing, recorded_actions
    from datafarm.policy.trials import TrialJudge, trial_setup

    workspace = hil_workspace
    ws = Workspace.open(workspace)
    setup = trial_setup(ws)
    station = HilStation(setup, TrialJudge(setup.package, workspace / ".judge-hil", [ws.path("expert")]),
                         PiperPairConfig(watchdog=JUDGED_LOOP), owns_judge=True)
    try:
        episode = json.loads(min((workspace / "episodes").glob("*/result.json")).read_text())
        seed = episode["seed"]  # the expert's recorded actions belong to their own seed
        actions = recorded_actions(workspace / "episodes" / f"{episode['index']:06d}" / "sim")
        operator = JudgeOperator(station)
        replay = RealEvalRun(workspace, "hil-replay", "hil-expert-replay", (seed,), time_limit_s=30.0)
        [result] = run_real_trials(replay, station, ActionReplay(actions), operator)
        assert not result["simulated"] and result["estop"] is None, result  # the real driver's path
        assert result["success"] and result["end"] == "judge", result
        assert station.loop.steps >= result["steps"] * 0.8  # the rig was stepped at its rate, not per command
        nothing = RealEvalRun(workspace, "hil-nothing", "hil-do-nothing", (seed,), time_limit_s=1.0)
        [control] = run_real_trials(nothing, station, DoNothing(), operator)
        assert not control["success"] and control["end"] == "time_limit" and control["notes"].startswith("judge:")
    finally:
        station.close()


def test_a_dead_rig_loop_reports_an_error_and_the_watchdog_stops_the_arms(channel_name):
    from datafarm.piper.rig_firmware import RIG_FAILURE_ERR_CODE
    from datafarm.sim.rig import DualArmRig

    rig = DualArmRig.create(load_rig_config().model_copy(update={"cameras": {}}))

    def step_limited(action):  # a scene with a step limit, as a trial's TaskEnv.step has
        if rig.step_count >= 10:
            raise RuntimeError("episode reached its limit of 10 steps")
        return rig.step(action)

    loop = RigLoop(rig, step_limited)
    fakes = {side: FakePiperFirmware(channel_name(f"dead-{side}"), backend=loop.backend(side)).start()
             for side in ("left", "right")}
    loop.on_failure.append(lambda _: [f.inject_fault(err_code=RIG_FAILURE_ERR_CODE) for f in fakes.values()])
    config = PiperPairConfig(left_can=fakes["left"].channel, right_can=fakes["right"].channel, bustype="virtual",
                             watchdog=LOADED_MACHINE)
    pair = PiperPair(config, SafetyLayer(config.safety, rig=rig.config, model=rig.model))
    try:
        pair.connect()  # before the loop runs: the rig is still alive (negative control)
        assert pair.estopped is None and loop.failure is None
        loop.start()
        assert wait_until(lambda: pair.estopped is not None, 3.0), "the watchdog did not stop the arms"
        assert "10 steps" in loop.failure and f"0x{RIG_FAILURE_ERR_CODE:04X}" in pair.estopped
        assert rig.step_count == 10 and not loop.running
    finally:
        pair.disconnect()
        loop.stop()
        for fake in fakes.values():
            fake.stop()
