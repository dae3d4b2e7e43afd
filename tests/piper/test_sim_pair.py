"""The simulated PiPER pair on the SAPIEN rig: the same safety layer, deadline watchdog and latched e-stop
as the real pair (one rig for the session: tests/conftest.py's `fresh_rig`)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from datafarm.errors import SafetyStop
from datafarm.piper.sim_pair import SimPair, SimPairConfig
from datafarm.sim.spaces import arm_slice


@pytest.fixture
def sim_pair(fresh_rig):
    pairs = []

    def connect(**overrides) -> SimPair:
        pair = SimPair(SimPairConfig(**overrides), rig=fresh_rig)
        pairs.append(pair)
        pair.connect()
        return pair

    yield fresh_rig, connect
    for pair in pairs:
        pair.disconnect()


def run(pair: SimPair, target: np.ndarray, ticks: int) -> None:
    for _ in range(ticks):
        pair.act(target)


def test_observe_is_the_rigs_state_at_the_rigs_time(sim_pair):
    rig, connect = sim_pair
    pair = connect()
    observation = pair.observe()
    assert np.array_equal(observation.position, rig.qpos()) and observation.stamp == rig.time == 0.0
    pair.act(observation.position)
    assert pair.observe().stamp == pytest.approx(rig.control_dt)  # one control period of simulated time


def test_a_far_target_is_ramped_and_the_rig_follows(sim_pair):
    rig, connect = sim_pair
    pair = connect()
    start = pair.observe().position
    target = start.copy()
    target[0] += 0.3
    target[arm_slice("right")][0] -= 0.3
    first = pair.act(target)
    assert first.command[0] == pytest.approx(start[0] + 0.02)  # the change cap: a ramp from the measured pose
    assert np.allclose(rig.drive_target(), first.command, atol=1e-6)  # the rig was given the capped command
    assert any("change capped" in event for event in first.events)
    run(pair, target, 9)
    moved = pair.observe().position
    assert abs(moved[0] - (start[0] + 0.2)) < 0.03  # 10 ticks x 0.02 rad: on the ramp, not at the target
    assert abs(moved[7] - (start[7] - 0.2)) < 0.03
    run(pair, target, 10)
    assert abs(pair.observe().position[0] - target[0]) < 0.01
    assert rig.step_count == 20


@pytest.mark.parametrize("bad", ["nan", "jump"])
def test_a_bad_policy_output_never_reaches_the_rig(sim_pair, bad):
    rig, connect = sim_pair
    pair = connect()
    position = pair.observe().position
    run(pair, position, 2)
    steps, drive = rig.step_count, rig.drive_target()
    target = position.copy()
    if bad == "nan":
        target[9] = np.nan
    else:
        target[0] += 1.05
    with pytest.raises(SafetyStop, match="not finite" if bad == "nan" else "jump 1.05 rad"):
        pair.act(target)
    assert rig.step_count == steps and np.array_equal(rig.drive_target(), drive)
    assert pair.estopped
    with pytest.raises(SafetyStop, match="emergency-stopped"):
        pair.act(position)  # latched: even a harmless command does not go through
    assert rig.step_count == steps


def test_a_large_but_allowed_jump_is_ramped_not_stopped(sim_pair):
    """The control for the jump stop: 0.9 rad (under the 1 rad stop) moves, 0.02 rad at a time."""
    rig, connect = sim_pair
    pair = connect()
    target = pair.observe().position.copy()
    target[0] += 0.9
    safe = pair.act(target)
    assert pair.estopped is None and rig.step_count == 1
    assert safe.command[0] == pytest.approx(target[0] - 0.88)


def test_the_emergency_stop_latches_until_the_operator_confirms(sim_pair):
    rig, connect = sim_pair
    pair = connect()
    start = pair.observe().position
    target = start.copy()
    target[1] += 0.1
    run(pair, target, 3)
    pair.emergency_stop("operator pressed stop")
    frozen = rig.drive_target()
    steps = rig.step_count
    for call in (pair.observe, lambda: pair.act(target)):
        with pytest.raises(SafetyStop, match="operator pressed stop"):
            call()
    with pytest.raises(SafetyStop, match="support both arms"):
        pair.resume_after_estop()
    assert pair.estopped and rig.step_count == steps and np.array_equal(rig.drive_target(), frozen)
    pair.resume_after_estop(operator_confirmed=True)
    assert pair.estopped is None
    measured = pair.observe().position
    resumed = pair.act(target)  # ramps again from the measured pose, not from the last command
    assert resumed.command[1] == pytest.approx(min(target[1], measured[1] + 0.02))
    assert rig.step_count == steps + 1


def test_a_missed_deadline_stops_and_a_stopped_loop_does_not(sim_pair):
    rig, connect = sim_pair
    pair = connect(deadline_s=0.05)
    position = pair.observe().position
    run(pair, position, 3)  # a loop faster than the deadline runs
    pair.stop()  # the loop ends normally: holding still is no missed deadline
    time.sleep(0.08)
    pair.observe()
    run(pair, position, 1)
    assert pair.estopped is None
    time.sleep(0.08)
    steps = rig.step_count
    with pytest.raises(SafetyStop, match="missed its deadline"):
        pair.act(position)
    assert rig.step_count == steps and "deadline" in pair.estopped


def test_a_dry_run_does_not_step_the_rig(sim_pair):
    rig, connect = sim_pair
    pair = connect(dry_run=True)
    target = pair.observe().position.copy()
    target[0] += 0.1
    run(pair, target, 5)
    assert rig.step_count == 0 and len(pair.commands) == 5
    assert pair.commands[-1][1][0] == pytest.approx(target[0])  # the layer ran: 5 x 0.02 rad
