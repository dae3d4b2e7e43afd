"""piper_sdk's real C_PiperInterface_V2 against the fake firmware on python-can's virtual bus."""

from __future__ import annotations

import time

import pytest
from piper_testkit import wait_until

from datafarm.piper.driver import open_sdk
from datafarm.piper.fake_firmware import FakePiperFirmware, rad_to_mdeg

pytestmark = pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")

POSE = (0.3, 1.0, -0.8, 0.2, -0.4, 0.5)


def sdk_joints(sdk) -> list[int]:
    s = sdk.GetArmJointMsgs().joint_state
    return [s.joint_1, s.joint_2, s.joint_3, s.joint_4, s.joint_5, s.joint_6]


@pytest.fixture
def arm(channel_name):
    fake = FakePiperFirmware(channel_name("fw")).start()
    sdk = open_sdk(fake.channel, "virtual")
    yield fake, sdk
    sdk.DisconnectPort()
    fake.stop()
    assert not fake.running  # the 200 Hz thread ended


def enable(sdk, speed_pct: int = 100) -> None:
    sdk.EnableArm(7)
    sdk.GripperCtrl(0, 1000, 0x01, 0)
    sdk.MotionCtrl_2(0x01, 0x01, speed_pct, 0x00)


def test_the_sdk_reads_the_fakes_state_back_exactly(arm):
    fake, sdk = arm
    fake.set_state(POSE, gripper_m=0.0321)
    assert wait_until(lambda: sdk_joints(sdk) == [rad_to_mdeg(q) for q in POSE])
    assert sdk_joints(sdk) == fake.encoded_joints()
    assert sdk.GetArmGripperMsgs().gripper_state.grippers_angle == 32100  # 0.001 mm
    assert sdk.GetArmStatus().arm_status.arm_status == 0 and sdk.GetArmStatus().arm_status.err_code == 0
    assert wait_until(lambda: sdk.GetArmJointMsgs().Hz >= 150)  # the SDK counts the 200 Hz stream
    assert time.time() - sdk.GetArmJointMsgs().time_stamp < 0.05


def test_a_joint_command_moves_the_fake_only_when_enabled_in_can_mode(arm):
    fake, sdk = arm
    target = [rad_to_mdeg(q) for q in POSE]
    start = fake.encoded_joints()
    sdk.JointCtrl(*target)  # negative control: not enabled, standby mode: ignored
    time.sleep(0.1)
    assert fake.encoded_joints() == start
    enable(sdk)
    assert wait_until(lambda: all(sdk.GetArmEnableStatus()))
    sdk.JointCtrl(*target)
    sdk.GripperCtrl(50_000, 1000, 0x01, 0)  # 50 mm
    assert wait_until(lambda: max(abs(a - b) for a, b in zip(fake.encoded_joints(), target)) <= 2)
    assert wait_until(lambda: abs(fake.gripper_m() - 0.05) < 1e-5)
    assert wait_until(lambda: max(abs(a - b) for a, b in zip(sdk_joints(sdk), target)) <= 2)  # and the SDK sees it


def test_motion_is_rate_limited_by_the_speed_percentage(arm):
    fake, sdk = arm
    enable(sdk, speed_pct=10)  # 10 % of 3 rad/s
    assert wait_until(lambda: fake.speed_pct == 10)
    start, began = fake.joints_rad()[0], time.monotonic()
    sdk.JointCtrl(rad_to_mdeg(start + 1.0), *fake.encoded_joints()[1:])
    time.sleep(0.3)
    moved, elapsed = fake.joints_rad()[0] - start, time.monotonic() - began
    # At most 0.3 rad/s for the time that really passed (a busy machine oversleeps), plus a tick.
    assert 0.0 < moved <= 0.3 * elapsed + 0.02


def test_emergency_stop_freezes_the_joints_and_resume_drops_the_arm(arm):
    fake, sdk = arm
    enable(sdk, speed_pct=30)
    assert wait_until(lambda: fake.enabled)
    far = [rad_to_mdeg(q) for q in POSE]
    sdk.JointCtrl(*far)
    assert wait_until(lambda: fake.joints_rad() != list(fake.config.initial_joints_rad))
    sdk.EmergencyStop(0x01)
    assert wait_until(lambda: fake.estopped)
    frozen = fake.encoded_joints()
    sdk.MotionCtrl_2(0x01, 0x01, 100, 0x00)
    sdk.JointCtrl(*far)  # ignored while stopped
    time.sleep(0.15)
    assert fake.encoded_joints() == frozen and frozen != far
    assert wait_until(lambda: sdk.GetArmStatus().arm_status.arm_status == 0x01)  # the SDK reads "emergency stop"
    assert fake.drops == 0
    sdk.EmergencyStop(0x02)  # the SDK's resume: power cut
    assert wait_until(lambda: not fake.estopped)
    assert fake.drops == 1 and not fake.enabled
    assert wait_until(lambda: not any(sdk.GetArmEnableStatus()))


def test_faults_on_demand_reach_the_sdk(arm):
    fake, sdk = arm
    fake.inject_fault(arm_status=0x07, err_code=0x0102)
    assert wait_until(lambda: sdk.GetArmStatus().arm_status.arm_status == 0x07)
    assert sdk.GetArmStatus().arm_status.err_code == 0x0102
    assert sdk.GetArmStatus().arm_status.err_status.joint_1_angle_limit
    fake.inject_fault(collision_joint=3)
    assert wait_until(lambda: sdk.GetArmLowSpdInfoMsgs().motor_3.foc_status.collision_status)
    fake.pause_feedback()
    time.sleep(0.1)
    assert time.time() - sdk.GetArmJointMsgs().time_stamp > 0.08
    fake.pause_feedback(False)
    fake.drop_frames(0.7)
    assert wait_until(lambda: 0 < sdk.GetArmJointMsgs().Hz < 120)  # ~60 Hz of 200 arrive
