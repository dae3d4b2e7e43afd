"""The dual PiPER as a lerobot Robot, found by name through lerobot's own plugin registration and factory:
simulated on the SAPIEN rig, and real against two fake firmwares on python-can's virtual bus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from lerobot.cameras.opencv import OpenCVCameraConfig
from lerobot.robots.config import RobotConfig
from lerobot.robots.utils import make_robot_from_config
from lerobot.utils.feature_utils import hw_to_dataset_features
from lerobot.utils.import_utils import register_third_party_plugins
from piper_testkit import both_estopped, wait_until

from datafarm.dataset.harvest import dataset_features
from datafarm.errors import BadInput, SafetyStop
from datafarm.sim.spaces import AXIS_NAMES

pytestmark = pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")

SIZES = {"head": (96, 128), "left_wrist": (60, 80), "right_wrist": (60, 80)}  # (height, width)


def by_name(tmp_path, **fields):
    """The robot as lerobot's tools make it: plugins registered, the config class looked up by its type name."""
    register_third_party_plugins()
    config_class = RobotConfig.get_choice_class("datafarm_piper")
    return make_robot_from_config(config_class(calibration_dir=tmp_path, **fields))


@pytest.mark.slow  # a fresh interpreter imports lerobot and its plugins: about 5-10 s
def test_lerobot_finds_the_robot_by_name_only_after_plugin_registration():
    """In a fresh interpreter, as lerobot-record starts: the name is unknown, then registered from the
    installed distribution's name (the negative control is the same process before registering)."""
    script = (
        "import json, draccus\n"
        "from dataclasses import dataclass\n"
        "from lerobot.robots.config import RobotConfig\n"
        "from lerobot.robots.utils import make_robot_from_config\n"
        "from lerobot.utils.import_utils import register_third_party_plugins\n"
        "before = 'datafarm_piper' in RobotConfig.get_known_choices()\n"
        "register_third_party_plugins()\n"
        "@dataclass\n"
        "class Cli:\n"
        "    robot: RobotConfig\n"
        "cli = draccus.parse(Cli, args=['--robot.type=datafarm_piper', '--robot.simulated=true',\n"
        "                               '--robot.safety.max_step_rad=0.01', '--robot.calibration_dir=/tmp'])\n"
        "robot = make_robot_from_config(cli.robot)\n"
        "print(json.dumps({'before': before, 'after': 'datafarm_piper' in RobotConfig.get_known_choices(),\n"
        "                  'class': type(robot).__name__, 'step': cli.robot.safety.max_step_rad,\n"
        "                  'features': list(robot.action_features)}))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120,
                          env=env, cwd="/")  # outside the repo: the package comes from the installed distribution
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"before": False, "after": True, "class": "DatafarmPiper", "step": 0.01,
                     "features": list(AXIS_NAMES)}


def test_the_features_are_the_farm_datasets(tmp_path):
    cameras = {name: OpenCVCameraConfig(index_or_path=0, width=w, height=h, fps=30) for name, (h, w) in SIZES.items()}
    robot = by_name(tmp_path, simulated=True, cameras=cameras)
    farm = dataset_features(SIZES)
    made = {**hw_to_dataset_features(robot.observation_features, "observation"),
            **hw_to_dataset_features(robot.action_features, "action")}
    assert sorted(made) == sorted(farm)
    for key, feature in farm.items():
        assert tuple(made[key]["shape"]) == tuple(feature["shape"]) and made[key]["names"] == feature["names"], key
    assert robot.is_calibrated and not robot.is_connected
    with pytest.raises(BadInput, match="unknown camera names"):
        by_name(tmp_path, simulated=True, cameras={"front": cameras["head"]})


@pytest.mark.slow  # the rig's first render in a process (the CPU renderer's shaders): about 5-10 s
def test_simulated_round_trip(tmp_path):
    cameras = {name: OpenCVCameraConfig(index_or_path=0, width=w, height=h, fps=30) for name, (h, w) in SIZES.items()}
    robot = by_name(tmp_path, simulated=True, cameras=cameras, deadline_s=5.0)
    robot.connect()
    try:
        assert robot.is_connected
        observation = robot.get_observation()
        assert set(observation) == set(robot.observation_features)
        for name, (h, w) in SIZES.items():
            key = {"head": "cam_high", "left_wrist": "cam_left_wrist", "right_wrist": "cam_right_wrist"}[name]
            image = observation[key]
            assert image.shape == (h, w, 3) and image.dtype == np.uint8 and image.std() > 5  # a rendered view
        start = np.array([observation[name] for name in AXIS_NAMES])
        action = dict(zip(AXIS_NAMES, start))
        action["left_joint_1"] += 0.1
        action["right_gripper"] = 0.06
        sent = robot.send_action(action)
        assert sent["left_joint_1"] == pytest.approx(start[0] + 0.02)  # the safety layer's ramp
        for _ in range(9):
            robot.send_action(action)
        after = robot.get_observation()
        assert after["left_joint_1"] == pytest.approx(start[0] + 0.1, abs=0.02)
        assert after["right_gripper"] > start[13] + 0.01
        assert after["left_joint_2"] == pytest.approx(start[1], abs=0.005)  # the other joints stay
        with pytest.raises(BadInput, match="lacks"):
            robot.send_action({"left_joint_1": 0.0})
        action["left_joint_3"] = float("nan")
        with pytest.raises(SafetyStop, match="not finite"):
            robot.send_action(action)
        with pytest.raises(SafetyStop, match="operator_confirmed"):
            robot.get_observation()  # latched
    finally:
        robot.disconnect()
    assert not robot.is_connected


def fake_robot(tmp_path, fake_pair, **fields):
    fakes, _ = fake_pair
    robot = by_name(tmp_path, left_can=fakes["left"].channel, right_can=fakes["right"].channel, bustype="virtual",
                    **fields)
    robot.connect()
    return fakes, robot


def test_real_round_trip_on_the_fake_firmware(tmp_path, fake_pair):
    fakes, robot = fake_robot(tmp_path, fake_pair)
    try:
        observation = robot.get_observation()
        assert set(observation) == set(AXIS_NAMES)  # no cameras configured
        start = np.array([observation[name] for name in AXIS_NAMES])
        assert np.allclose(start[:6], fakes["left"].joints_rad(), atol=1e-4)
        action = dict(zip(AXIS_NAMES, start))
        action["right_joint_2"] += 0.1
        for _ in range(10):
            robot.send_action(action)
            robot.get_observation()
            time.sleep(1 / 50)
        assert wait_until(lambda: fakes["right"].joints_rad()[1] > start[8] + 0.08)
        assert abs(robot.get_observation()["right_joint_2"] - (start[8] + 0.1)) < 0.02
        assert not both_estopped(fakes)
    finally:
        robot.disconnect()


def test_a_paused_loop_holds_and_a_stalled_one_stops(tmp_path, fake_pair):
    """Two observations without an action (lerobot-record's reset phase) hold the arms; an action that
    comes late (a stalled policy) misses the deadline and stops both."""
    fakes, robot = fake_robot(tmp_path, fake_pair)
    try:
        position = robot.get_observation()
        robot.send_action(position)
        robot.get_observation()
        robot.get_observation()  # no action between: the loop paused
        time.sleep(0.25)  # longer than the 0.1 s deadline
        robot.get_observation()
        assert not both_estopped(fakes) and robot.pair.estopped is None
        robot.send_action(position)
        robot.get_observation()
        time.sleep(0.25)  # the policy stalls
        assert wait_until(lambda: both_estopped(fakes), timeout=1.0)
        with pytest.raises(SafetyStop, match="deadline"):
            robot.send_action(position)
    finally:
        robot.disconnect()
