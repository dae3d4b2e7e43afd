"""fold_towel: the towel fixture (a drive-joined tile grid with tabs) and the judge's fold checks."""

import numpy as np
import pytest

from datafarm.library import get_task
from datafarm.scene.builder import Placement
from datafarm.scene.fixtures import build_fixture
from datafarm.scene.fixtures.towel import CORNERS
from datafarm.scene.spec import FixtureSpec
from datafarm.sim.config import load_rig_config
from datafarm.sim.rig import DualArmRig
from datafarm.skills.cloth import fold_arc
from datafarm.task.trace import Trace

DT = 1 / 30


@pytest.fixture(scope="module")
def package():
    return get_task("fold_towel")


@pytest.fixture(scope="module")
def judge_module(package):
    return package.load_judge()


def test_towel_lies_flat_and_still_and_reports_its_corners():
    rig = DualArmRig.create(load_rig_config().model_copy(update={"cameras": {}}))
    towel = build_fixture(rig, FixtureSpec(name="towel", kind="towel", xy=(0.0, -0.2)), Placement(0.0, -0.2, 0.1).matrix(0.75))
    before = towel.state()
    for _ in range(30):
        rig.step(rig.drive_target())
    after = towel.state()
    assert {f"{c}_{a}" for c in CORNERS for a in "xyz"} <= set(after)
    assert after["height_span"] < 1e-3
    assert max(abs(after[k] - before[k]) for k in after if k[-2:] in ("_x", "_y", "_z")) < 1e-3
    # 7 pitches between corner-tile centres, and the towel turned by its yaw
    span = np.array([after["far_right_x"] - after["near_left_x"], after["far_right_y"] - after["near_left_y"]])
    assert np.isclose(np.linalg.norm(span), 7 * towel.params.pitch * np.sqrt(2), atol=2e-3)
    assert len(towel.entity_names()) == 8 * 8 + 4


def test_fold_arc_turns_over_about_the_midline():
    path = fold_arc([0, 0, 0.8], [0.2, 0, 0.8], height=0.1)
    assert np.allclose(path[-1], [0.2, 0, 0.8])
    assert np.isclose(path[:, 2].max(), 0.9, atol=0.005)
    assert np.all(np.diff(path[:, 0]) > 0)


def _trace(corners_over_time: dict[str, np.ndarray], tcp_height: float = 0.3) -> Trace:
    """A synthetic towel trace from corner paths (T, 3); flat at the start, TCPs far above."""
    count = len(next(iter(corners_over_time.values())))
    columns = {f"{c}_{a}": corners_over_time[c][:, i] for c in CORNERS for i, a in enumerate("xyz")}
    centre = np.mean([corners_over_time[c] for c in CORNERS], axis=0)
    columns.update({f"center_{a}": centre[:, i] for i, a in enumerate("xyz")})
    columns["height_span"] = np.zeros(count)
    columns["max_tile_speed"] = np.zeros(count)
    tcp = np.tile([[-0.3, -0.1, 0.75 + tcp_height], [0.3, -0.1, 0.75 + tcp_height]], (count, 1, 1))
    return Trace(np.arange(count) * DT, np.zeros((count, 14)), tcp, {}, {"towel": columns}, {}, [], {})


def _path(*stops, hold=30):
    """Piecewise-constant-then-linear corner path through (x, y, z) stops, `hold` steps each."""
    points = [np.asarray(s, dtype=float) for s in stops]
    out = []
    for a, b in zip(points, points[1:]):
        out += [a + (b - a) * k / hold for k in range(hold)]
    return np.array(out + [points[-1]] * hold)


NL, NR, FL, FR = (-0.11, -0.31, 0.752), (0.11, -0.31, 0.752), (-0.11, -0.09, 0.752), (0.11, -0.09, 0.752)


def test_judge_accepts_two_folds(judge_module, package):
    up = (0, 0, 0.006)
    trace = _trace({"near_left": _path(NL, NL, np.add(NR, up)), "near_right": _path(NR, NR, NR),
                    "far_left": _path(FL, np.add(NL, up), np.add(NR, up)), "far_right": _path(FR, np.add(NR, up), np.add(NR, up))})
    verdict = judge_module.judge(trace, package.params)
    assert verdict.success, verdict.reason


def test_judge_rejects_only_the_first_fold(judge_module, package):
    trace = _trace({"near_left": _path(NL, NL, NL), "near_right": _path(NR, NR, NR),
                    "far_left": _path(FL, NL, NL), "far_right": _path(FR, NR, NR)})
    verdict = judge_module.judge(trace, package.params)
    assert verdict.checks["first_fold"] and not verdict.checks["folded_in_quarters"]
    assert not verdict.success


def test_judge_rejects_a_towel_that_started_folded(judge_module, package):
    pile = {c: _path(NR, NR, NR) for c in CORNERS}
    verdict = judge_module.judge(_trace(pile), package.params)
    assert not verdict.checks["flat_at_start"]
