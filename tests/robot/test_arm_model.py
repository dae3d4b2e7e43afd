import numpy as np
import pytest
from piper_sdk.kinematics.piper_fk import C_PiperForwardKinematics
from xml.etree import ElementTree as ET

from datafarm.geometry import rotation_angle, rpy_to_matrix
from datafarm.robot import arm_urdf, load_arm_model
from datafarm.robot.config import ArmModel
from datafarm.robot.kinematics import flange_pose


@pytest.fixture(scope="module")
def model():
    return load_arm_model()


def _limits(model):
    return (np.array([j.limit[0] for j in model.arm_joints]), np.array([j.limit[1] for j in model.arm_joints]))


def test_forward_kinematics_matches_piper_sdk(model):
    sdk = C_PiperForwardKinematics(dh_is_offset=1)  # the new zero convention we model
    lower, upper = _limits(model)
    rng = np.random.default_rng(7)
    configs = [np.zeros(6)] + [rng.uniform(lower, upper) for _ in range(250)]
    position_errors, angle_errors = [], []
    for q in configs:
        ours = flange_pose(model, q)
        theirs = sdk.CalFK(list(q))[-1]  # link6: x, y, z (mm), roll, pitch, yaw (deg)
        position_errors.append(np.linalg.norm(ours[:3, 3] - np.array(theirs[:3]) / 1000))
        angle_errors.append(rotation_angle(ours[:3, :3], rpy_to_matrix(np.deg2rad(theirs[3:]))))
    assert max(position_errors) < 1e-3
    assert np.rad2deg(max(angle_errors)) < 0.5


def test_old_zero_convention_is_detectably_different(model):
    """Negative control: the SDK's old zeros (2 deg off at joints 2 and 3) must not match."""
    old = C_PiperForwardKinematics(dh_is_offset=0)
    q = np.array([0.2, 1.0, -1.0, 0.1, 0.5, 0.0])
    theirs = np.array(old.CalFK(list(q))[-1][:3]) / 1000
    assert np.linalg.norm(flange_pose(model, q)[:3, 3] - theirs) > 5e-3


def test_flange_zero_pose_matches_published_numbers(model):
    position = flange_pose(model, np.zeros(6))[:3, 3] * 1000
    np.testing.assert_allclose(position, [56.128, 0.0, 213.266], atol=0.2)


def test_urdf_carries_limits_masses_and_stroke(model):
    root = ET.fromstring(arm_urdf(model, "left_"))
    joints = {j.get("name"): j for j in root.iter("joint")}
    assert float(joints["left_joint1"].find("limit").get("upper")) == pytest.approx(2.618)
    assert float(joints["left_joint3"].find("limit").get("lower")) == pytest.approx(-2.967)
    assert float(joints["left_joint7"].find("limit").get("upper")) == pytest.approx(0.035)
    assert float(joints["left_joint1"].find("limit").get("velocity")) == pytest.approx(3.0)
    masses = {link.get("name"): float(link.find("inertial/mass").get("value")) for link in root.iter("link")}
    assert masses["left_link2"] == pytest.approx(1.17)
    assert sum(masses.values()) == pytest.approx(4.67, abs=0.01)
    assert model.gripper.stroke == pytest.approx(0.07)
    # every link a camera should see has geometry
    assert all(link.find("visual") is not None for link in root.iter("link"))


def test_invalid_model_names_the_problem(model):
    data = model.model_dump()
    data["joints"][2]["parent"] = "no_such_link"
    with pytest.raises(ValueError, match="joint3: parent link no_such_link"):
        ArmModel.model_validate(data)


def test_unknown_model_name_lists_known(model):
    with pytest.raises(FileNotFoundError, match="piper.yaml"):
        load_arm_model("no_such_robot")
