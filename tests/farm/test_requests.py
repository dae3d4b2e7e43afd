"""A request over the API is checked whole before any work; the workspaces it makes are registered."""

import pytest

from datafarm.errors import BadInput, Unavailable
from datafarm.farm.fleet import Registry
from datafarm.farm.requests import plan_request, storage_available, workspace_name
from datafarm.workspace import Workspace


@pytest.fixture
def roots(tmp_path, monkeypatch):
    allowed = tmp_path / "calibrations"
    (allowed / "calib").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("DATAFARM_FARM_ROOT", str(tmp_path / "farm"))
    monkeypatch.setenv("DATAFARM_ALLOWED_ROOTS", str(allowed))
    monkeypatch.delenv("DATAFARM_BINDINGS", raising=False)
    return tmp_path


def _request(roots, **changes):
    return {"request": "Put the apple on the scale.", "episode": str(roots / "calibrations" / "calib"),
            "target_count": 2, **changes}


def test_a_good_request_plans_a_new_workspace_under_the_farm_root(roots):
    plan = plan_request(_request(roots, max_usd=3.0, phase_caps={"expert": 1.5}))
    assert plan.workspace.parent == roots / "farm" / "workspaces"
    assert plan.workspace.name.startswith("put-the-apple-on-the-scale-")
    assert plan.settings.target_count == 2 and plan.phase_caps == {"expert": 1.5} and plan.settings.max_usd == 3.0
    assert not (roots / "farm").exists()  # nothing written by the checks


@pytest.mark.parametrize("changes, message", [
    ({"request": "  \n"}, "request is empty"),
    ({"episode": "/etc"}, "outside the allowed roots"),
    ({"episode": "{root}/calibrations/../elsewhere"}, "outside the allowed roots"),
    ({"episode": "calibrations/calib"}, "relative path"),
    ({"episode": "{root}/calibrations/missing"}, "does not exist"),
    ({"target_count": 0}, "target_count"),
    ({"target_count": 10**9}, "target_count"),
    ({"renderer": "photoreal"}, "unknown renderer 'photoreal'; known renderers"),
    ({"max_usd": -1.0}, "max_usd"),
    ({"max_usd": float("nan")}, "max_usd"),
    ({"phase_caps": {"rollout": 1.0}}, "unknown phases"),
    ({"phase_caps": {"expert": -2.0}}, "USD >= 0"),
    ({"settings": {"colour": "red"}}, "colour"),
    ({"settings": {"expert_trial_seeds": 0}}, "expert_trial_seeds"),
])
def test_bad_parameters_are_refused_before_any_work(roots, changes, message):
    changes = {k: v.replace("{root}", str(roots)) if isinstance(v, str) else v for k, v in changes.items()}
    with pytest.raises(BadInput, match=message):
        plan_request(_request(roots, **changes))
    assert not (roots / "farm").exists()


def test_a_symlink_out_of_the_allowed_roots_is_refused(roots):
    (roots / "calibrations" / "link").symlink_to(roots / "elsewhere")
    with pytest.raises(BadInput, match="outside the allowed roots"):
        plan_request(_request(roots, episode=str(roots / "calibrations" / "link")))


def test_phase_caps_are_refused_when_a_bindings_file_would_override_them(roots, monkeypatch):
    monkeypatch.setenv("DATAFARM_BINDINGS", str(roots / "b.json"))
    with pytest.raises(BadInput, match="DATAFARM_BINDINGS"):
        plan_request(_request(roots, phase_caps={"expert": 1.0}))
    plan_request(_request(roots))  # without caps the bindings file simply applies


def test_an_s3_episode_without_the_storage_package_is_refused_naming_it(roots, monkeypatch):
    if storage_available():
        with pytest.raises(BadInput, match="s3://"):
            plan_request(_request(roots, episode="s3://"))
    else:
        with pytest.raises(Unavailable, match="storage package"):
            plan_request(_request(roots, episode="s3://bucket/calib"))


def test_names_are_unique_and_readable():
    names = {workspace_name("Stack the cups, please!", now=0) for _ in range(20)}
    assert len(names) == 20 and all(n.startswith("stack-the-cups-please-19700101-000000-") for n in names)
    assert workspace_name("!!!", now=0).startswith("request-")


def test_the_registry_keeps_one_entry_per_workspace(tmp_path):
    registry = Registry(tmp_path / "farm")
    first = Workspace.initialise(tmp_path / "a" / "ws-one", {"settings": {"target_count": 1}})
    registry.register(first, max_usd=2.0)
    registry.register(first, max_usd=3.0)  # again: updated, not doubled
    assert [e.name for e in registry.entries()] == ["ws-one"]
    assert Workspace.open(first.root).meta["settings"]["max_usd"] == 3.0  # the budget is the workspace's own
    clash = Workspace.initialise(tmp_path / "b" / "ws-one", {"settings": {"target_count": 1}})
    with pytest.raises(BadInput, match="taken by"):
        registry.register(clash)
    with pytest.raises(BadInput, match="max_usd.*positive"):
        registry.register(first, max_usd=0)
