"""The watchdog of the dual-PiPER driver on two fake firmwares: each trigger stops both arms; no auto-resume."""

from __future__ import annotations

import time

import numpy as np
import pytest
from piper_testkit import both_estopped, run, wait_until

from datafarm.errors import SafetyStop

pytestmark = pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")


def pause_right(fakes, pair):
    fakes["right"].pause_feedback()


def error_left(fakes, pair):
    fakes["left"].inject_fault(err_code=0x0004)


def collision_left(fakes, pair):
    fakes["left"].inject_fault(arm_status=0x07)


def motor_collision_right(fakes, pair):
    fakes["right"].inject_fault(collision_joint=2)


def lose_frames_left(fakes, pair):
    fakes["left"].drop_frames(0.8)


def miss_deadline(fakes, pair):
    pair.act(pair.observe().position)
    time.sleep(0.25)


@pytest.mark.parametrize("cause, message", [
    (pause_right, "ms old"),
    (error_left, "error code 0x0004"),
    (collision_left, "collision"),
    (motor_collision_right, "joint 2 collision"),
    (lose_frames_left, "Hz|ms old"),
    (miss_deadline, "deadline"),
])
@pytest.mark.parametrize("background", [True, False], ids=["thread", "inline"])
def test_each_watchdog_trigger_stops_both_arms(fake_pair, cause, message, background):
    fakes, connect = fake_pair
    pair = connect(watchdog={"check_hz": 100.0 if background else 0.0})
    run(pair, pair.observe().position, 3)
    assert not both_estopped(fakes) and pair.estopped is None  # negative control: a healthy loop runs
    pair.stop()  # the loop ends normally: holding still is no missed deadline
    time.sleep(0.15)
    assert pair.estopped is None
    cause(fakes, pair)
    if background:  # the thread stops the arms while nobody calls the pair
        assert wait_until(lambda: both_estopped(fakes), timeout=1.0)
    else:  # checks run only when the pair is called: let the fault develop (the SDK counts rates per 0.1 s)
        time.sleep(0.25)
        assert not both_estopped(fakes)
    with pytest.raises(SafetyStop, match=message):
        pair.act(pair.observe().position) if not background else pair.observe()
    assert wait_until(lambda: both_estopped(fakes), timeout=1.0)


def test_the_emergency_stop_never_resumes_on_its_own(fake_pair):
    fakes, connect = fake_pair
    pair = connect(watchdog={})  # the real thresholds
    fakes["left"].inject_fault(err_code=0x0100)
    assert wait_until(lambda: both_estopped(fakes))  # the watchdog thread
    with pytest.raises(SafetyStop, match="error code 0x0100"):
        pair.observe()
    fakes["left"].inject_fault(err_code=0)  # the cause is gone ...
    time.sleep(0.3)
    assert both_estopped(fakes) and pair.estopped  # ... and both stay stopped
    with pytest.raises(SafetyStop, match="operator_confirmed=True"):
        pair.act(np.zeros(14))
    with pytest.raises(SafetyStop, match="support both arms"):
        pair.resume_after_estop()
    assert both_estopped(fakes) and all(fake.drops == 0 for fake in fakes.values())
    pair.resume_after_estop(operator_confirmed=True)
    assert wait_until(lambda: not any(fake.estopped for fake in fakes.values()))
    assert all(fake.drops == 1 for fake in fakes.values())  # the SDK's resume cut the motors: the operator held them
    position = pair.observe().position
    target = position.copy()
    target[1] += 0.05
    run(pair, target, 5)
    assert wait_until(lambda: fakes["left"].joints_rad()[1] > position[1] + 0.03)
