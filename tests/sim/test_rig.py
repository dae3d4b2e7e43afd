import numpy as np
import pytest

from datafarm.sim.config import load_rig_config
from datafarm.sim.rig import DualArmRig
from datafarm.sim.spaces import AXIS_NAMES, arm_slice
from datafarm.sim.trajectory import quintic_trajectory


def test_rig_loads_with_named_spaces_and_three_cameras(rig):
    assert len(AXIS_NAMES) == 14
    assert AXIS_NAMES[0] == "left_joint_1" and AXIS_NAMES[-1] == "right_gripper"
    assert set(rig.cameras) == {"head", "left_wrist", "right_wrist"}
    assert rig.qpos().shape == (14,)
    assert rig.config.timing.substeps * rig.config.timing.control_hz >= 250


def test_target_beyond_a_limit_is_clipped_and_reported(fresh_rig):
    action = fresh_rig.rest_state()
    action[AXIS_NAMES.index("left_joint_2")] = 4.0  # limit 3.14
    action[AXIS_NAMES.index("right_gripper")] = -0.02  # limit 0
    report = fresh_rig.step(action)
    assert set(report.clipped) == {"left_joint_2", "right_gripper"}
    assert report.target[AXIS_NAMES.index("left_joint_2")] == pytest.approx(3.14)
    assert not fresh_rig.step(fresh_rig.rest_state()).clipped


def test_joint_velocity_limit_is_enforced(fresh_rig):
    action = fresh_rig.rest_state()
    action[0] += 1.0  # a 1 rad jump asked in one 1/30 s control period
    fresh_rig.step(action)
    moved = fresh_rig.drive_target()[0] - fresh_rig.rest_state()[0]
    assert moved == pytest.approx(3.0 / fresh_rig.config.timing.control_hz, rel=1e-3)
    travelled = fresh_rig.qpos()[0] - fresh_rig.rest_state()[0]
    assert 0 < travelled <= 3.0 / fresh_rig.config.timing.control_hz + 1e-3


def test_commanded_trajectory_is_tracked_within_a_hundredth_of_a_radian(fresh_rig):
    start = fresh_rig.rest_state()
    goal = start.copy()
    goal[arm_slice("left")] = [0.5, 1.6, -1.3, 0.4, 0.8, -0.6, 0.06]
    goal[arm_slice("right")] = [-0.5, 1.0, -0.7, -0.4, 0.5, 0.6, 0.01]
    waypoints = quintic_trajectory(start, goal, fresh_rig.control_dt, 1.5, 3.0)
    errors = []
    for waypoint in waypoints:
        fresh_rig.step(waypoint)
        errors.append(np.abs(fresh_rig.qpos() - waypoint).max())
    for _ in range(15):  # hold at the goal for half a second
        fresh_rig.step(goal)
    assert np.abs(fresh_rig.qpos() - goal).max() < 0.01
    assert max(errors) < 0.05  # and it follows along the way


def _ids(rig, names):
    legend = {name: i for i, name in rig.segmentation_legend().items()}
    return {legend[n] for n in names}


def test_head_camera_sees_both_grippers(fresh_rig):
    seen = set(np.unique(fresh_rig.capture(["head"])["head"].segmentation))
    for side in ("left", "right"):
        assert seen & _ids(fresh_rig, [f"{side}_gripper_base", f"{side}_link7", f"{side}_link8"]), side


@pytest.mark.parametrize("side,other", [("left", "right"), ("right", "left")])
def test_each_wrist_camera_sees_its_own_fingers(fresh_rig, side, other):
    frame = fresh_rig.capture([f"{side}_wrist"])[f"{side}_wrist"]
    seen = set(np.unique(frame.segmentation))
    assert _ids(fresh_rig, [f"{side}_link7", f"{side}_link8"]) <= seen
    assert not seen & _ids(fresh_rig, [f"{other}_link7", f"{other}_link8"])


def test_rendering_on_the_cpu_gives_rgb_depth_and_segmentation(fresh_rig):
    frames = fresh_rig.capture()
    head = frames["head"]
    assert head.rgb.shape == (240, 320, 3) and head.rgb.dtype == np.uint8
    assert head.rgb.std() > 10  # not a blank image
    table = head.segmentation == _ids(fresh_rig, ["table"]).pop()
    assert table.mean() > 0.2
    depth = head.depth[table]
    assert 0.5 < np.median(depth) < 1.5  # metres from the head camera to the table
    assert np.allclose(head.extrinsic_cv[3], [0, 0, 0, 1])
    np.testing.assert_allclose(fresh_rig.intrinsics("head")[1, 1], 240 / 2 / np.tan(np.deg2rad(55.6) / 2), rtol=1e-3)


def test_wrist_camera_follows_the_wrist(fresh_rig):
    before = fresh_rig.capture(["left_wrist"])["left_wrist"].extrinsic_cv
    action = fresh_rig.rest_state()
    action[0] += 0.3
    for _ in range(10):
        fresh_rig.step(action)
    after = fresh_rig.capture(["left_wrist"])["left_wrist"].extrinsic_cv
    assert np.abs(after - before).max() > 0.05


def test_640x480_is_selectable():
    rig = DualArmRig.create(load_rig_config(resolution=(640, 480)))
    frame = rig.capture(["left_wrist"])["left_wrist"]
    assert frame.rgb.shape == (480, 640, 3)


def test_bad_actions_are_refused_with_the_names(rig):
    with pytest.raises(ValueError, match="14 values"):
        rig.step(np.zeros(7))
    bad = rig.rest_state()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="left_joint_4"):
        rig.step(bad)


def test_timing_must_divide(tmp_path):
    from datafarm.sim.config import Timing

    with pytest.raises(ValueError, match="whole multiple"):
        Timing(control_hz=30, sim_hz=250)


def test_arm_and_finger_drives_get_their_own_gains(rig):
    joints = rig.arms["left"].articulation.active_joints
    assert [j.stiffness for j in joints] == [1e4] * 6 + [1e3] * 2
    assert joints[7].force_limit == pytest.approx(10.0)


def test_the_lean_shader_draws_what_sapiens_minimal_shader_draws():
    """Our one-pass shader (the default) against SAPIEN's two-pass "minimal": the same depth and
    segmentation, and colours within one level of 255 on nearly every pixel, under a bright, slanted
    light (where the specular sheen shows) at several poses of the arms."""
    from datafarm.sim.show import scripted_actions

    base = load_rig_config()
    lights = [light.model_copy(update={"color": tuple(1.3 * c for c in light.color), "direction": (0.4, 0.7, -1.0)})
              for light in base.lighting.directional]
    base = base.model_copy(update={"lighting": base.lighting.model_copy(update={"directional": lights})})
    rigs = {shader: DualArmRig.create(base.model_copy(update={"render": base.render.model_copy(update={"shader": shader})}))
            for shader in ("lean", "minimal")}
    actions = scripted_actions(rigs["lean"])
    differing, pixels = 0, 0
    for action in actions[::max(1, len(actions) // 4)][:4]:
        frames = {}
        for shader, rig in rigs.items():
            for _ in range(10):
                rig.step(action)
            frames[shader] = rig.capture()
        for camera, lean in frames["lean"].items():
            minimal = frames["minimal"][camera]
            np.testing.assert_array_equal(lean.segmentation, minimal.segmentation)
            np.testing.assert_array_equal(lean.depth, minimal.depth)
            difference = np.abs(lean.rgb.astype(int) - minimal.rgb)
            assert difference.max() <= 1, camera
            differing, pixels = differing + int((difference > 0).any(-1).sum()), pixels + difference[..., 0].size
    assert differing / pixels < 0.001


def test_shadows_need_a_shader_that_draws_them():
    from datafarm.sim.config import RenderSettings

    with pytest.raises(ValueError, match='"lean" draws no shadows'):
        RenderSettings(shader="lean", shadows=True)
    assert RenderSettings(shader="minimal", shadows=True).shadows
