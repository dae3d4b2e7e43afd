"""The dry run's plot: a few ticks against the fake firmware write a PNG of each axis's policy target vs the
safety layer's command, and not one frame reaches the bus."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from piper_testkit import run

from datafarm.errors import BadInput
from datafarm.piper.command_plot import COMMAND_COLOUR, TARGET_COLOUR, plot_commands

pytestmark = pytest.mark.filterwarnings("ignore:The 'bustype' argument is deprecated:DeprecationWarning")


def _has(image: np.ndarray, colour: tuple[int, int, int]) -> bool:
    return bool(np.all(image == np.array(colour, dtype=np.uint8), axis=-1).any())


def test_a_dry_run_plots_targets_against_commands_and_sends_nothing(fake_pair, tmp_path):
    fakes, connect = fake_pair
    pair = connect(dry_run=True)
    start = pair.observe().position
    target = start.copy()
    target[0] += 0.3  # beyond the per-step change cap: the command ramps while the target jumps
    run(pair, target, 8)
    path = pair.plot_commands(tmp_path / "plots" / "dry-run.png")
    assert sum(sum(fake.received.values()) for fake in fakes.values()) == 0  # counted on the bus: nothing sent
    assert len(pair.targets) == len(pair.commands) == 8
    sent = np.array([c for _, c in pair.commands])
    assert np.all(sent[:, 0] < start[0] + 0.3 - 1e-6) and sent[-1, 0] > sent[0, 0]  # capped, ramping
    image = np.asarray(Image.open(path).convert("RGB"))
    assert image.shape[0] > 500 and image.shape[1] > 500
    assert _has(image, TARGET_COLOUR) and _has(image, COMMAND_COLOUR)


def test_plotting_nothing_is_refused(tmp_path):
    with pytest.raises(BadInput, match="no commands to plot"):
        plot_commands([], [], tmp_path / "x.png")
    with pytest.raises(BadInput, match="not 14-D"):
        plot_commands([], [(0.0, np.zeros(3))], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
