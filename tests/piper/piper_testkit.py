"""Helpers the PiPER tests share (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import time

import numpy as np

from datafarm.piper.driver import PiperPair


def wait_until(condition, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def run(pair: PiperPair, target: np.ndarray, ticks: int) -> None:
    """A control loop at 50 Hz holding one target."""
    for _ in range(ticks):
        pair.act(target)
        time.sleep(1 / 50)


def both_estopped(fakes) -> bool:
    return all(fake.estopped for fake in fakes.values())
