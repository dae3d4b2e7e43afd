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
