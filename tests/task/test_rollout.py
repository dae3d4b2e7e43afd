import shutil
import textwrap

import numpy as np
import pytest

from datafarm.library import get_task
from datafarm.task.package import load_task_package
from datafarm.task.randomization import RandomizationConfig, sample_episode
from datafarm.task.rollout import run_episode


@pytest.fixture(scope="module")
def apple():
    return get_task("apple_on_scale")


def _copy_with_expert(apple, tmp_path, expert_source):
    folder = tmp_path / "pkg"
    shutil.copytree(apple.directory, folder)
    (folder / "expert.py").write_text(textwrap.dedent(expert_source))
    return load_task_package(folder)


def test_a_package_loads_from_any_folder(apple, tmp_path):
    package = _copy_with_expert(apple, tmp_path, (apple.directory / "expert.py").read_text())
    assert package.name == "apple_on_scale" and package.directory != apple.directory
    assert run_episode(package, 0, RandomizationConfig.none()).success


def test_missing_package_files_are_named(tmp_path):
    (tmp_path / "task.yaml").write_text("name: x\ninstruction: y\n")
    with pytest.raises(FileNotFoundError, match="expert.py"):
        load_task_package(tmp_path)


def test_the_expert_cannot_import_the_judge(apple, tmp_path):
    package = _copy_with_expert(apple, tmp_path, """
        import datafarm.library.apple_on_scale.judge as leaked
        def solve(env, skills, params):
            pass
    """)
    with pytest.raises(ImportError, match="may not import a judge"):
        package.load_expert()


def test_importing_the_judge_at_run_time_fails_the_episode(apple, tmp_path):
    package = _copy_with_expert(apple, tmp_path, """
        def solve(env, skills, params):
            import importlib
            importlib.import_module("datafarm.library.apple_on_scale.judge")
    """)
    result = run_episode(package, 0, RandomizationConfig.none())
    assert not result.success and "may not import a judge" in result.error


def test_a_runaway_expert_is_stopped_by_the_wall_clock_limit(apple, tmp_path):
    package = _copy_with_expert(apple, tmp_path, """
        def solve(env, skills, params):
            while True:
                pass
    """)
    result = run_episode(package, 0, RandomizationConfig.none(), wall_limit=2)
    assert not result.success and result.error.startswith("EpisodeTimeout")
    assert result.wall_seconds < 10


def test_an_expert_that_never_finishes_moving_hits_the_step_limit(apple, tmp_path):
    package = _copy_with_expert(apple, tmp_path, """
        def solve(env, skills, params):
            while True:
                skills.wait(1.0)
    """)
    result = run_episode(package, 0, RandomizationConfig.none())
    assert "EpisodeTimeout" in result.error and "steps" in result.error
    assert result.sim_seconds == pytest.approx(package.info.max_seconds, abs=0.1)


def test_skills_raise_typed_errors(apple, tmp_path):
    package = _copy_with_expert(apple, tmp_path, """
        import numpy as np
        from datafarm.skills import GraspFailed, Unreachable, pose, top_down
        def solve(env, skills, params):
            try:
                skills.move_to("left", pose([2.0, 2.0, 2.0], top_down(0.0)))
            except Unreachable as error:
                env.note("unreachable", message=str(error))
            apple = env.object("apple")
            apple.set_pose(apple.pose() @ np.diag([1, 1, 1, 1.0]))  # no-op; the apple stays
            far = apple.pose().copy()
            far[0, 3] += 0.15  # pretend it is elsewhere: the gripper closes on air
            apple.set_pose(far)
            try:
                skills.grasp("left", "apple")
            except GraspFailed as error:
                env.note("missed", message=str(error))
    """)
    result = run_episode(package, 0, RandomizationConfig.none())
    kinds = [e["kind"] for e in result.trace.events]
    assert "unreachable" in kinds, result.error
    assert result.error is None


def test_randomization_records_its_values_and_varies_with_the_seed(apple):
    a = sample_episode(apple.scene, 1, RandomizationConfig(), 20, 30).to_dict()
    b = sample_episode(apple.scene, 2, RandomizationConfig(), 20, 30).to_dict()
    again = sample_episode(apple.scene, 1, RandomizationConfig(), 20, 30).to_dict()
    assert a == again and a != b
    for key in ("placements", "start_noise", "speed", "table_color", "light_scale", "camera_jitter"):
        assert a[key], key
    none = sample_episode(apple.scene, 1, RandomizationConfig.none(), 20, 30)
    assert none.placements["apple"].x == apple.scene.item("apple").xy[0] and none.speed == 1.0


def test_an_episode_replays_exactly_from_its_seed(apple):
    first = run_episode(apple, 4)
    second = run_episode(apple, 4)
    np.testing.assert_array_equal(first.trace.qpos, second.trace.qpos)
    np.testing.assert_array_equal(first.trace.poses["apple"], second.trace.poses["apple"])


@pytest.mark.slow
def test_a_replay_with_cameras_is_the_same_episode(apple, tmp_path):
    search = run_episode(apple, 3)
    recorded = run_episode(apple, 3, record_dir=tmp_path / "ep")
    assert recorded.success == search.success
    np.testing.assert_allclose(recorded.trace.poses["apple"][-1], search.trace.poses["apple"][-1], atol=1e-5)
    assert (tmp_path / "ep" / "cameras" / "head" / "rgb.mp4").exists()


def test_a_hanging_expert_is_stopped_at_its_wall_limit_and_the_next_seed_runs(apple, tmp_path):
    package = _copy_with_expert(apple, tmp_path, """
        import importlib.util, pathlib
        spec = importlib.util.spec_from_file_location("real", pathlib.Path(__file__).with_name("real_expert.py"))
        real = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(real)
        calls = []
        def solve(env, skills, params):
            calls.append(1)
            while len(calls) == 1:  # the first seed hangs
                pass
            real.solve(env, skills, params)
    """)
    shutil.copy(apple.directory / "expert.py", package.directory / "real_expert.py")
    expert, judge = package.load_expert(), package.load_judge()  # one module: its `calls` persists
    hung = run_episode(package, 0, wall_limit=3, expert=expert, judge=judge)
    assert hung.error.startswith("EpisodeTimeout") and not hung.success
    after = [run_episode(package, seed, wall_limit=60, expert=expert, judge=judge) for seed in (1, 2)]
    assert any(r.success for r in after), [r.verdict.reason for r in after]


def test_an_untouched_object_is_nudged_and_the_expert_goes_for_it_where_it_now_is(apple):
    config = RandomizationConfig(perturbation_probability=0.0, object_nudge_probability=1.0,
                                 perturbation_window=(0.3, 0.4), appearance=False, camera=False)
    result = run_episode(apple, 1, config)
    applied = [e for e in result.trace.events if e["kind"] == "perturbation"]
    assert applied and applied[0]["applied"]["kind"] == "object", result.trace.events
    step = applied[0]["applied"]["at_step"]
    moved = result.trace.position("apple")[step + 1, :2] - result.trace.position("apple")[step - 1, :2]
    np.testing.assert_allclose(moved, applied[0]["applied"]["offset"], atol=2e-3)
    assert result.success, result.verdict.reason


def test_fixture_params_are_sampled_per_episode_and_recorded():
    drawer = get_task("block_in_drawer")
    openings = {sample_episode(drawer.scene, seed, RandomizationConfig(), 30, 30).fixture_params["drawer"]["opening"]
                for seed in range(5)}
    assert len(openings) == 5 and all(0.12 <= o <= 0.15 for o in openings)
    nominal = sample_episode(drawer.scene, 0, RandomizationConfig.none(), 30, 30).fixture_params["drawer"]["opening"]
    assert nominal == drawer.scene.item("drawer").params["opening"]


FAMILY_FIELDS = {"geometry": {"placements", "fixture_params"},
                 "execution": {"start_noise", "speed", "perturbations", "disturbance"},
                 "appearance": {"table_color", "light_scale", "light_direction", "object_colors"},
                 "camera": {"camera_jitter"}}


@pytest.mark.parametrize("family", sorted(FAMILY_FIELDS))
def test_a_family_switched_off_changes_its_own_draws_and_nothing_else(family):
    drawer = get_task("block_in_drawer")  # objects, a fixture with sampled params, movable things
    full = RandomizationConfig(recovery_fraction=1.0)
    off = full.model_copy(update={family: False})
    for seed in range(5):
        on = sample_episode(drawer.scene, seed, full, 30, 30, ["push"]).to_dict()
        without = sample_episode(drawer.scene, seed, off, 30, 30, ["push"]).to_dict()
        changed = {key for key in on if on[key] != without[key]}
        assert changed <= FAMILY_FIELDS[family], (seed, changed)
        assert changed, f"seed {seed}: switching {family} off changed nothing"
