"""The safety layer every command to the arms passes: each rule, and its place in the order."""

from __future__ import annotations

import numpy as np
import pytest

from datafarm.errors import SafetyStop
from datafarm.piper.safety import GRIPPER_RANGE_M, SafetyConfig, SafetyLayer, joint_limits, sdk_joint_limits
from datafarm.sim.config import load_rig_config
from datafarm.sim.spaces import AXIS_NAMES, arm_slice


@pytest.fixture(scope="module")
def layer_args():
    rig = load_rig_config()
    return rig


def rest(rig) -> np.ndarray:
    arm = np.append(rig.rest_qpos, rig.rest_gripper)
    return np.concatenate([arm, arm])


def test_limits_are_the_sdks_intersected_with_the_urdfs():
    from datafarm.robot import load_arm_model

    model = load_arm_model("piper")
    sdk, urdf = sdk_joint_limits(), np.array([j.limit for j in model.arm_joints])
    limits = joint_limits(model)
    assert np.all(limits[:, 0] >= np.maximum(sdk[:, 0], urdf[:, 0]) - 1e-12)
    assert np.all(limits[:, 1] <= np.minimum(sdk[:, 1], urdf[:, 1]) + 1e-12)
    assert limits[0, 1] == pytest.approx(2.6179, abs=1e-3)  # j1: the SDK's value, not upstream's 2.168 typo


def test_a_still_target_passes_unchanged(layer_args):
    layer = SafetyLayer(rig=layer_args)
    state = rest(layer_args)
    out = layer.filter(state, state)
    assert np.array_equal(out.command, state) and not out.changed


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_command_stops(layer_args, bad):
    layer = SafetyLayer(rig=layer_args)
    target = rest(layer_args)
    target[3] = bad
    with pytest.raises(SafetyStop, match="not finite"):
        layer.filter(target, rest(layer_args))


def test_a_jump_of_a_radian_stops_before_anything_is_sent(layer_args):
    layer = SafetyLayer(rig=layer_args)
    target = rest(layer_args)
    target[8] += 1.05
    with pytest.raises(SafetyStop, match="right_joint_2 to jump 1.05 rad"):
        layer.filter(target, rest(layer_args))


def test_the_first_motion_is_a_ramp_at_the_change_cap(layer_args):
    config = SafetyConfig(max_step_rad=0.02)
    layer = SafetyLayer(config, rig=layer_args)
    measured = rest(layer_args)
    layer.reset(measured)
    target = measured.copy()
    target[0] += 0.3
    commands = [layer.filter(target, measured).command for _ in range(20)]
    assert commands[0][0] == pytest.approx(measured[0] + 0.02)
    assert all(abs(b[0] - a[0]) <= 0.02 + 1e-12 for a, b in zip(commands, commands[1:]))
    assert commands[-1][0] == pytest.approx(target[0])  # 15 ticks of 0.02 reach it


def test_limits_clip_and_are_reported(layer_args):
    layer = SafetyLayer(SafetyConfig(max_step_rad=1.0, max_gripper_step_m=1.0), rig=layer_args)
    measured = rest(layer_args)
    measured[arm_slice("left")][4] = 1.2  # left joint 5 near its 1.22 rad limit
    target = measured.copy()
    target[4] = 1.5
    target[6] = 0.09  # the gripper past 70 mm
    out = layer.filter(target, measured)
    assert out.command[4] == pytest.approx(1.22, abs=1e-3) and out.command[6] == GRIPPER_RANGE_M[1]
    assert any(AXIS_NAMES[4] in e for e in out.events) and any(AXIS_NAMES[6] in e for e in out.events)


def test_the_workspace_box_holds_then_stops(layer_args):
    layer = SafetyLayer(SafetyConfig(max_step_rad=1.0, stop_after_box_holds=3), rig=layer_args)
    measured = rest(layer_args)
    down = measured.copy()
    down[1] += 0.9  # left shoulder forward and down: the TCP goes through the table top
    assert layer.tcp_position("left", down[:6])[2] < layer_args.table.height
    held = layer.filter(down, measured)
    assert np.array_equal(held.command, measured) and "workspace box" in held.events[-1]
    layer.filter(down, measured)
    with pytest.raises(SafetyStop, match="workspace box"):
        layer.filter(down, measured)


@pytest.mark.slow
def test_forward_kinematics_matches_the_simulated_rig(layer_args):
    from datafarm.sim.rig import DualArmRig

    layer = SafetyLayer(rig=layer_args)
    rig = DualArmRig.create()
    rng = np.random.default_rng(0)
    for _ in range(3):
        state = rest(layer_args) + np.concatenate([np.append(rng.uniform(-0.3, 0.3, 6), 0.0)] * 2)
        rig.reset(state)
        for side in ("left", "right"):
            assert np.allclose(layer.tcp_position(side, state[arm_slice(side)][:6]), rig.tcp_pose(side)[:3, 3],
                               atol=2e-3)
