"""Typed choices: renderer, fixture kinds, task params and counts are checked when settings or specs load,
before any work, and an unknown name lists the known ones."""

import shutil

import pytest

from datafarm.errors import BadInput, Unavailable
from datafarm.farm.prepare import prepare, settings_of
from datafarm.library import LIBRARY_DIR
from datafarm.render import get_renderer
from datafarm.scene.spec import load_scene_spec
from datafarm.task.package import load_task_package
from datafarm.workspace import Workspace

NOWHERE = "/nonexistent/calibration"  # never read: the settings are refused first


@pytest.mark.parametrize("renderer", ["nonsense", "Composite", ""])
def test_prepare_refuses_an_unknown_renderer_before_any_work(tmp_path, renderer):
    with pytest.raises(BadInput, match=r"renderer: unknown renderer .*known renderers: composite, wan-vace") as caught:
        prepare(NOWHERE, "put the apple on the scale", tmp_path / "ws", {"target_count": 2, "renderer": renderer})
    assert "\n" not in str(caught.value) and "--renderer" in str(caught.value)
    assert not (tmp_path / "ws").exists()


def test_prepare_says_what_to_install_for_a_known_renderer_that_is_not_here(tmp_path):
    with pytest.raises(Unavailable, match="render_model .* or render_worker"):
        prepare(NOWHERE, "put the apple on the scale", tmp_path / "ws", {"target_count": 2, "renderer": "wan-vace"})
    with pytest.raises(Unavailable, match="missing: model_index.json"):
        prepare(NOWHERE, "put the apple on the scale", tmp_path / "ws",
                {"target_count": 2, "renderer": "wan-vace", "render_model": str(tmp_path)})
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("count, problem", [(0, "greater than 0"), (-5, "greater than 0"),
                                            (10**9, "less than or equal to 100000"), ("many", "valid integer")])
def test_prepare_refuses_a_bad_target_count_in_one_line(tmp_path, count, problem):
    with pytest.raises(BadInput, match=f"target_count: .*{problem}.*--target-count") as caught:
        prepare(NOWHERE, "x", tmp_path / "ws", {"target_count": count})
    assert "\n" not in str(caught.value)


def test_an_unknown_review_limit_is_refused_listing_the_known_ones():
    from datafarm.farm.settings import SettingsError, load_settings

    with pytest.raises(SettingsError, match=r"review: .*\['min_robot_ioux'\].*'min_robot_iou'.*ReviewThresholds"):
        load_settings({"target_count": 1, "review": {"min_robot_ioux": 0.5}})
    assert load_settings({"target_count": 1, "review": {"max_bad_frames": 2}}).review == {"max_bad_frames": 2}


def test_a_workspace_whose_renderer_was_edited_names_the_file_and_the_known_ones(tmp_path):
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1, "renderer": "composite"}})
    assert settings_of(workspace).renderer == "composite"  # control
    workspace.meta["settings"]["renderer"] = "nonsense"
    with pytest.raises(BadInput, match=r"workspace.json settings: renderer: unknown renderer 'nonsense'.*composite"):
        settings_of(workspace)


def test_get_renderer_refuses_an_unknown_name_listing_the_known_ones():
    with pytest.raises(BadInput, match="known renderers: composite, wan-vace"):
        get_renderer("nonsense")


@pytest.fixture
def package(tmp_path):
    target = tmp_path / "block_in_drawer"
    shutil.copytree(LIBRARY_DIR / "block_in_drawer", target)
    return target


def test_an_unknown_fixture_kind_lists_the_known_kinds(package):
    load_scene_spec(package / "scene.yaml")  # control: the shipped spec loads
    scene = package / "scene.yaml"
    scene.write_text(scene.read_text().replace("kind: drawer_cabinet", "kind: wardrobe"))
    with pytest.raises(BadInput, match=r"scene.yaml: fixtures.0.kind: unknown fixture kind 'wardrobe'; known kinds: "
                                       r"drawer_cabinet, drum, scale, towel"):
        load_scene_spec(scene)


def test_a_scene_naming_a_missing_mesh_file_is_refused(package):
    scene = package / "scene.yaml"
    scene.write_text(scene.read_text() + "\n")
    text = scene.read_text().replace("objects:\n", "objects:\n  - name: vase\n    xy: [0.0, 0.3]\n    mass: 0.1\n"
                                     "    geometry: {shape: mesh, file: vase.obj}\n", 1)
    scene.write_text(text)
    with pytest.raises(BadInput, match="mesh file 'vase.obj'"):
        load_scene_spec(scene)


@pytest.mark.parametrize("params, problem", [
    ("- 1\n- 2\n", "must hold a mapping"),
    ("lift height: 0.1\n", "'lift height' is not an identifier"),
    ("1: 0.1\n", "1 is not an identifier"),
    ("when: 2024-01-01\n", "has a date value"),
    ("lift: [0.1\n", "not valid YAML"),
])
def test_bad_params_name_the_file_and_the_fix(package, params, problem):
    assert load_task_package(package).params  # control: the shipped params load
    (package / "params.yaml").write_text(params)
    with pytest.raises(BadInput, match=f"params.yaml: .*{problem}"):
        load_task_package(package)
