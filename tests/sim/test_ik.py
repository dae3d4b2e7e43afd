import numpy as np
import pytest

from datafarm.sim.ik import ArmIK, IKError, tcp_pose


@pytest.mark.parametrize("side", ["left", "right"])
def test_ik_reaches_poses_of_random_in_limit_configurations(rig, side):
    ik = ArmIK.for_arm(rig, side)
    rng = np.random.default_rng(3)
    rest = np.array(rig.config.rest_qpos)
    for _ in range(40):
        # targets near the working pose, as skills ask for them; seeded from the rest pose
        q_true = np.clip(rest + rng.uniform(-0.5, 0.5, 6), ik.lower, ik.upper)
        target = ik.fk(q_true)
        solution = ik.solve(target, seed=rest)
        reached = ik.fk(solution.qpos)
        assert np.linalg.norm(reached[:3, 3] - target[:3, 3]) < 1e-3
        assert np.all(solution.qpos >= ik.lower) and np.all(solution.qpos <= ik.upper)


def test_fk_agrees_with_the_simulated_links(fresh_rig):
    ik = ArmIK.for_arm(fresh_rig, "right")
    np.testing.assert_allclose(ik.fk(fresh_rig.qpos()[7:13])[:3, 3], fresh_rig.tcp_pose("right")[:3, 3], atol=1e-4)


def test_unreachable_target_raises_a_typed_error(rig):
    ik = ArmIK.for_arm(rig, "left")
    far = tcp_pose([2.0, 2.0, 2.0], np.eye(3))
    with pytest.raises(IKError, match="left arm cannot reach"):
        ik.solve(far)
