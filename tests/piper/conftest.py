"""Fixtures for the PiPER tests: fresh virtual CAN channels (the SDK keeps one interface per name) and a
pair of fake firmwares with a factory of connected driver pairs."""

from __future__ import annotations

import uuid

import pytest
from piper_testkit import LOADED_FEEDBACK

from datafarm.piper.driver import PiperPair, PiperPairConfig
from datafarm.piper.fake_firmware import FakePiperFirmware
from datafarm.piper.safety import SafetyLayer
from datafarm.sim.config import load_rig_config


@pytest.fixture
def channel_name():
    def make(label: str = "arm") -> str:
        return f"test-{label}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture(scope="module")
def safety_args():
    rig = load_rig_config()
    return rig, SafetyLayer(rig=rig).model  # the URDF is parsed once per module


@pytest.fixture
def fake_pair(channel_name, safety_args):
    """Two fake arms at the rest pose; yields them and a factory of connected pairs (closed at teardown)."""
    fakes = {side: FakePiperFirmware(channel_name(side)).start() for side in ("left", "right")}
    pairs = []

    def connect(**overrides) -> PiperPair:
        overrides.setdefault("watchdog", LOADED_FEEDBACK)
        config = PiperPairConfig(left_can=fakes["left"].channel, right_can=fakes["right"].channel,
                                 bustype="virtual", **overrides)
        pair = PiperPair(config, SafetyLayer(config.safety, rig=safety_args[0], model=safety_args[1]))
        pairs.append(pair)
        pair.connect()
        return pair

    yield fakes, connect
    for pair in pairs:
        pair.disconnect()
    for fake in fakes.values():
        fake.stop()
        assert not fake.running  # the 200 Hz thread ended
