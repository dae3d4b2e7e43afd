"""Fixtures for the PiPER tests: a fresh virtual CAN channel per test (the SDK keeps one interface per name)."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def channel_name():
    def make(label: str = "arm") -> str:
        return f"test-{label}-{uuid.uuid4().hex[:8]}"

    return make
