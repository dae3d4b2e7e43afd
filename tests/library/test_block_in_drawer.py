"""block_in_drawer: the drawer cabinet fixture is passive and reports its interior; the judge needs both
the block inside and the drawer shut."""

import numpy as np
import pytest

from datafarm.library import get_task
from datafarm.scene.builder import Placement, build_scene
from datafarm.scene.spec import FixtureSpec, SceneSpec
from datafarm.sim.config import load_rig_config
from datafarm.sim.rig import DualArmRig
from datafarm.skills.drawer import push_drawer_closed
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.rollout import run_episode


@pytest.fixture(scope="module")
def cabinet():
    rig = DualArmRig.create(load_rig_config().model_copy(update={"cameras": {}}))
    spec = SceneSpec(fixtures=[FixtureSpec(name="drawer", kind="drawer_cabinet", xy=(0.05, 0.0),
                                           params={"opening": 0.12})])
    scene = build_scene(rig, spec, {"drawer": Placement(0.05, 0.0)})
    return rig, scene.fixtures["drawer"]


def test_drawer_starts_open_and_stays_where_it_is_left(cabinet):
    rig, drawer = cabinet
    assert set(drawer.state()) == {"opening", "interior_x", "interior_y", "interior_z", "yaw"}
    before = drawer.interior_center().copy()
    for _ in range(30):
        rig.step(rig.drive_target())
    assert drawer.opening() == pytest.approx(0.12, abs=1e-3)
    np.testing.assert_allclose(drawer.interior_center(), before, atol=1e-3)
    # Open towards the arms (-y), the interior lies wholly in front of the carcass, above the table.
    assert np.allclose(drawer.pull_direction(), [0, -1, 0])
    interior_back = drawer.interior_center()[1] + drawer.params.inner_depth / 2
    assert interior_back < drawer.pose[1, 3] + drawer.layout.front_y
    assert drawer.interior_center()[2] > rig.config.table.height


def test_judge_rejects_a_shut_drawer_without_the_block():
    class ShutOnly:
        @staticmethod
        def solve(env, skills, params):
            push_drawer_closed(skills, "right", env.fixture("drawer"))

    result = run_episode(get_task("block_in_drawer"), 0, RandomizationConfig.none(), expert=ShutOnly())
    assert result.verdict.checks["drawer_shut"], result.verdict.reason
    assert not result.success, result.verdict.reason
