"""Helpers the PiPER tests share (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import time

import numpy as np

from datafarm.piper.driver import PiperPair, WatchdogConfig


# The fake firmwares' 200 Hz threads share this process's GIL with the SDK's readers and the test: on a
# loaded machine their feedback can lag past the real 50 ms. Tests of something else get a wider feedback
# margin (the command deadline stays the real one); tests of the watchdog pass `watchdog` themselves.
LOADED_FEEDBACK = WatchdogConfig(max_feedback_age_s=0.25, min_feedback_hz=40.0)


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
