"""The background family: it changes what is behind the table, and nothing else."""

import dataclasses

import numpy as np
import pytest

from datafarm.farm.episodes import episode_appearance
from datafarm.media import read_video
from datafarm.render import TexturePool, get_renderer, sample_appearance
from datafarm.render.appearance import BACKGROUND_LOOKS, CALIBRATION_BACKGROUND, sample_background
from datafarm.render.views import BACKGROUND, class_maps, load_camera_arrays
from datafarm.task.randomization import RandomizationConfig


def first_seed_with(look: str) -> int:
    return next(seed for seed in range(100) if sample_background(seed).look == look)


def test_background_draws_follow_their_shares_and_change_no_other_draw():
    looks = [sample_background(seed).look for seed in range(600)]
    for look, share in BACKGROUND_LOOKS.items():
        assert abs(looks.count(look) / len(looks) - share) < 0.06
    pool = TexturePool()
    for seed in range(20):
        plain = episode_appearance(seed, pool, RandomizationConfig(background=False))
        varied = episode_appearance(seed, pool, RandomizationConfig())
        assert plain.background == CALIBRATION_BACKGROUND and varied.background == sample_background(seed)
        assert {**plain.to_dict(), "background": None} == {**varied.to_dict(), "background": None}
        assert np.array_equal(plain.texture, varied.texture)
    backdrop = sample_background(first_seed_with("backdrop"))
    assert backdrop.to_dict()["backdrop"]["kind"] in ("noise", "stripes", "checks")
    pattern = backdrop.pattern(64, 48)
    assert pattern.shape == (64 * 48, 3) and pattern.std() > 0.05


def test_the_appearance_family_off_is_one_look_for_every_episode_and_keeps_the_backgrounds():
    pool, fixed = TexturePool(), RandomizationConfig(appearance=False)
    looks = [episode_appearance(seed, pool, fixed, fixed_seed=7) for seed in range(6)]
    assert all({**a.to_dict(), "background": None} == {**looks[0].to_dict(), "background": None} for a in looks)
    assert [a.background for a in looks] == [sample_background(seed) for seed in range(6)]


@pytest.mark.slow
@pytest.mark.parametrize("look", ["relit", "backdrop"])
def test_a_background_look_changes_the_background_pixels_only(sim_episode, references, tmp_path, look):
    appearance = sample_appearance(4, TexturePool())
    changed = dataclasses.replace(appearance, background=sample_background(first_seed_with(look)))
    renderer = get_renderer("composite")
    before = renderer.render(sim_episode, references, appearance, tmp_path / "before")
    after = renderer.render(sim_episode, references, changed, tmp_path / "after")
    for camera in sim_episode.cameras:
        classes = class_maps(sim_episode, load_camera_arrays(sim_episode, camera)["segmentation"])
        a, b = read_video(before[camera]).astype(int), read_video(after[camera]).astype(int)
        t = len(a) // 2
        behind = classes[t] == BACKGROUND
        # away from class edges, where the codec blends neighbours
        inner = ~behind & ~np.roll(behind, 2, 0) & ~np.roll(behind, -2, 0) & ~np.roll(behind, 2, 1) & ~np.roll(behind, -2, 1)
        if behind.mean() > 0.02:
            assert np.abs(a[t][behind] - b[t][behind]).mean() > 8, f"{camera}: the background did not change"
        assert np.abs(a[t][inner] - b[t][inner]).mean() < 2.5, f"{camera}: more than the background changed"
