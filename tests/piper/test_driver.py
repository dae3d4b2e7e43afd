"""The dual-PiPER driver on two fake firmwares: piper_sdk's real code, the safety layer, the watchdog."""

from __future__ import annotations

import time

import numpy as np
import pytest
from piper_testkit import both_estopped, run, wait_until

from datafarm.errors import SafetyStop
from datafarm.piper.fake_firmware import JOINT_CTRL_IDS, MOTION_CTRL_1_ID, rad_to_mdeg
from datafarm.sim.spaces import arm_slice

pytestmark = pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")


def test_observe_reads_both_arms_in_rad_and_m(fake_pair):
    fakes, connect = fake_pair
    pair = connect()
    left, right = (0.1, 1.1, -0.9, 0.05, 0.8, -0.1), (-0.2, 1.3, -1.1, 0.0, 1.0, 0.3)
    fakes["left"].set_state(left, 0.03)
    fakes["right"].set_state(right, 0.05)
    expected = np.array([*left, 0.03, *right, 0.05])
    assert wait_until(lambda: np.allclose(pair.observe().position, expected, atol=2e-5))  # 0.001 deg steps
    assert time.time() - pair.observe().stamp < 0.05
    assert pair.observe().as_dict()["right_gripper"] == pytest.approx(0.05)


def test_act_ramps_both_arms_toward_the_target(fake_pair):
    fakes, connect = fake_pair
    pair = connect()
    start = pair.observe().position
    target = start.copy()
    target[0] += 0.1
    target[arm_slice("right")][0] -= 0.1
    target[arm_slice("right")][-1] = 0.06  # the right gripper opens from 40 to 60 mm
    first = pair.act(target)
    assert first.command[0] == pytest.approx(start[0] + 0.02)  # the change cap: a ramp from the measured pose
    sent = (JOINT_CTRL_IDS[0], rad_to_mdeg(first.command[0]))  # what reached the arm is the capped command
    assert wait_until(lambda: [t for t in fakes["left"].joint_targets_received() if t[0] == sent[0]][-1:] == [sent])
    run(pair, target, 12)
    assert wait_until(lambda: fakes["left"].joints_rad()[0] > start[0] + 0.08)
    assert wait_until(lambda: fakes["right"].joints_rad()[0] < start[7] - 0.08)
    assert wait_until(lambda: abs(fakes["right"].gripper_m() - 0.06) < 1e-4)  # m -> 0.001 mm and back
    assert fakes["left"].speed_pct == 20  # the low default speed percentage


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_dry_run_sends_no_frame(fake_pair, dry_run):
    fakes, connect = fake_pair
    pair = connect(dry_run=dry_run)
    start = pair.observe().position
    target = start.copy()
    target[0] += 0.1
    run(pair, target, 10)
    pair.emergency_stop("end of the dry-run test")
    time.sleep(0.05)
    frames = {side: sum(fake.received.values()) for side, fake in fakes.items()}
    assert len(pair.commands) == 10 and pair.commands[-1][1][0] == pytest.approx(start[0] + 0.1)
    if dry_run:
        assert frames == {"left": 0, "right": 0}
        assert all(arm.suppressed_frames > 0 for arm in pair.arms.values())
        assert fakes["left"].encoded_joints()[0] == rad_to_mdeg(start[0]) and not both_estopped(fakes)
    else:  # the control: the same run sends commands, and the arms move
        assert all(fake.command_frames() > 30 for fake in fakes.values())
        assert both_estopped(fakes)


@pytest.mark.parametrize("bad", ["nan", "jump"])
def test_a_bad_policy_output_is_stopped_before_any_frame_carries_it(fake_pair, bad):
    fakes, connect = fake_pair
    pair = connect()
    position = pair.observe().position
    run(pair, position, 2)
    seen = len(fakes["left"].joint_targets_received())
    target = position.copy()
    if bad == "nan":
        target[2] = np.nan
    else:
        target[0] += 1.05
    with pytest.raises(SafetyStop, match="not finite" if bad == "nan" else "jump 1.05 rad"):
        pair.act(target)
    assert wait_until(lambda: both_estopped(fakes))
    after = [value for can_id, value in fakes["left"].joint_targets_received()[seen:] if can_id == JOINT_CTRL_IDS[0]]
    assert after and all(abs(value - rad_to_mdeg(position[0])) < 500 for value in after)  # only the hold went out
    assert abs(fakes["left"].joints_rad()[0] - position[0]) < 0.01
    ids = [can_id for _, can_id, _ in fakes["left"].received_log]
    last_hold = max(i for i, can_id in enumerate(ids) if can_id == JOINT_CTRL_IDS[0])
    assert ids.index(MOTION_CTRL_1_ID) > last_hold  # hold first, then the emergency stop
