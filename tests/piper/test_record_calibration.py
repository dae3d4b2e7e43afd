"""`datafarm record-calibration`: the simulated recording is a calibration episode `prepare` takes unchanged;
a camera at the wrong size is refused by the preflight before anything is written."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app
from datafarm.calibration import load_calibration
from datafarm.errors import BadInput, Unavailable
from datafarm.farm.prepare import prepare
from datafarm.paths import REPO_ROOT
from datafarm.piper.preflight import load_camera_configs
from datafarm.sim.config import load_rig_config

EXAMPLE = REPO_ROOT / "configs" / "cameras.example.yaml"
REQUEST = (REPO_ROOT / "examples" / "apple_on_scale.txt").read_text()
runner = CliRunner()


def record(output: Path, cameras: Path = EXAMPLE, seconds: float = 0.5):
    return runner.invoke(app, ["record-calibration", "--simulated", "--cameras", str(cameras), "--output", str(output),
                               "--seconds", str(seconds)])


@pytest.mark.slow  # the rig's renders and lerobot's writer: about 15-30 s on a busy machine
def test_a_simulated_recording_is_a_calibration_episode_prepare_accepts(tmp_path):
    done = record(tmp_path / "calib")
    assert done.exit_code == 0, done.output
    episode = load_calibration(tmp_path / "calib")
    assert episode.num_frames == 15 and episode.fps == 30.0 and episode.synthetic  # simulated: labelled so
    assert {camera: frames.shape[1:] for camera, frames in episode.frames.items()} == {
        camera: (240, 320, 3) for camera in ("head", "left_wrist", "right_wrist")}
    assert episode.frames["head"][0].std() > 5  # a rendered view, not a blank frame
    rig = load_rig_config()
    rest = np.array([*rig.rest_qpos, rig.rest_gripper])
    assert np.allclose(episode.state[:, :7], rest, atol=0.02) and np.allclose(episode.state[:, 7:], rest, atol=0.02)
    assert episode.meta["source"] == "datafarm record-calibration" and episode.meta["preflight"]["cameras"]

    workspace = prepare(tmp_path / "calib", REQUEST, tmp_path / "ws", {"target_count": 1})
    assert workspace.meta["calibration"]["frames"] == 15 and workspace.meta["calibration"]["synthetic"]
    assert (tmp_path / "ws" / "calibration" / "meta" / "info.json").is_file()

    again = record(tmp_path / "calib")  # negative control: an existing output is refused, not overwritten
    assert again.exit_code == BadInput.exit_code and "already exists" in again.output


@pytest.mark.slow  # the rig is built and rendered once for the preflight: about 10 s
def test_a_camera_at_the_wrong_size_is_refused_before_anything_is_written(tmp_path):
    cameras = yaml.safe_load(EXAMPLE.read_text())
    cameras["head"].update(width=640, height=480)
    wrong = tmp_path / "cameras.yaml"
    wrong.write_text(yaml.safe_dump(cameras))
    done = record(tmp_path / "calib", wrong)
    assert done.exit_code == Unavailable.exit_code, done.output
    text = " ".join(done.output.split())
    assert "camera 'head' delivers 320x240, cameras.yaml asks 640x480" in text and "left_wrist" not in text
    assert not (tmp_path / "calib").exists() and not (tmp_path / "calib.partial").exists()


def test_cameras_yaml_needs_the_three_cameras_at_one_rate(tmp_path):
    assert set(load_camera_configs(EXAMPLE)) == {"head", "left_wrist", "right_wrist"}
    cameras = yaml.safe_load(EXAMPLE.read_text())
    path = tmp_path / "cameras.yaml"
    path.write_text(yaml.safe_dump({name: cameras[name] for name in ("head", "left_wrist")}))
    with pytest.raises(BadInput, match="exactly the cameras"):
        load_camera_configs(path)
    cameras["right_wrist"]["fps"] = 15
    path.write_text(yaml.safe_dump(cameras))
    with pytest.raises(BadInput, match="different frame rates"):
        load_camera_configs(path)
    cameras["right_wrist"].update(fps=30, type="kinect")
    path.write_text(yaml.safe_dump(cameras))
    with pytest.raises(BadInput, match="has type 'kinect'"):
        load_camera_configs(path)


@pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")
def test_the_preflight_refuses_an_arm_whose_feedback_is_slow(tmp_path, fake_pair):
    """Real mode on two fake firmwares (piper_sdk's own code on the virtual bus): both at 200 Hz pass; the right
    arm losing frames is named, the left is not."""
    from datafarm.calibration.record import CalibrationRecordingConfig, make_robot
    from datafarm.piper.preflight import PreflightFailed, PreflightSettings, preflight

    fakes, _ = fake_pair
    config = CalibrationRecordingConfig(cameras_file=EXAMPLE, left_can=fakes["left"].channel,
                                        right_can=fakes["right"].channel, bustype="virtual", teach=True,
                                        calibration_dir=tmp_path)
    robot = make_robot(config, cameras={})
    robot.connect()
    try:
        settings = PreflightSettings(measure_s=0.5, min_feedback_hz=150)
        report = preflight(robot, {}, settings)
        assert all(rate >= 150 for rate in report.arms.values()), report.arms
        fakes["right"].drop_frames(0.45)  # about 110 Hz: above the watchdog's 100, below the preflight's 150
        time.sleep(0.3)
        with pytest.raises(PreflightFailed, match=r"the right arm \(test-right-\w+\) sends feedback at") as refused:
            preflight(robot, {}, settings)
        assert "left arm" not in str(refused.value)
        assert sum(fakes["right"].received.values()) == 0  # teach mode (dry run): nothing was sent to the arms
    finally:
        robot.disconnect()
