import os

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def rig():
    """One rig for the read-mostly tests; tests that move it reset it first."""
    from datafarm.sim.rig import DualArmRig

    return DualArmRig.create()


@pytest.fixture
def fresh_rig(rig):
    rig.reset()
    return rig


# Session fixtures shared by tests/farm and tests/policy.
@pytest.fixture(scope="session")
def prefect_harness():
    """Prefect's own engine against a temporary, embedded server (about 10 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def synthetic_calibration(tmp_path_factory):
    from datafarm.calibration import synth_calibration

    return synth_calibration(tmp_path_factory.mktemp("calib") / "calibration", task="apple_on_scale", seconds=2.0)


@pytest.fixture(scope="session")
def farmed_workspace(prefect_harness, synthetic_calibration, tmp_path_factory):
    """A complete farm run: apple on the scale, 2 episodes, embedded Prefect."""
    from datafarm.farm.prepare import prepare
    from datafarm.farm.settings import FarmSettings
    from flows.farm import farm_flow

    root = tmp_path_factory.mktemp("farm") / "ws"
    settings = FarmSettings(target_count=2, expert_trial_seeds=3)
    prepare(synthetic_calibration, "Put the apple on the scale.", root, settings)
    report = farm_flow(str(root))
    assert report.ok, report.problems
    return root
