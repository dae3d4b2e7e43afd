"""The workspace's appearance reach: how saturated and varied the cloths are, how strong the light's tint."""

import colorsys

import numpy as np
import pytest
from pydantic import ValidationError

from datafarm.farm.episodes import episode_appearance
from datafarm.policy.appearances import tint_ratio
from datafarm.render import TexturePool
from datafarm.render.textures import RealTexture
from datafarm.task.randomization import RandomizationConfig

WIDE = RandomizationConfig(cloth_saturation=(0.3, 0.95), cloth_hue_spread=0.5, light_gains=(0.65, 1.35))


def _saturations(appearance) -> list[float]:
    return [colorsys.rgb_to_hsv(*color)[1] for color in appearance.texture_params["colors"]]


def _hue_gap(appearance) -> float:
    first, second = (colorsys.rgb_to_hsv(*color)[0] for color in appearance.texture_params["colors"])
    return min(abs(first - second), 1 - abs(first - second))


def test_the_default_reach_keeps_cloths_muted_and_lights_near_white():
    looks = [episode_appearance(seed, TexturePool(), RandomizationConfig()) for seed in range(200)]
    assert max(max(_saturations(a)) for a in looks) <= 0.6 + 1e-3
    assert max(_hue_gap(a) for a in looks) <= 0.16 + 1e-3
    assert max(tint_ratio(a.light_tint) for a in looks) <= 1.5 + 1e-3


def test_a_wide_reach_draws_saturated_many_hued_cloths_and_strong_tints_within_its_bounds():
    looks = [episode_appearance(seed, TexturePool(), WIDE) for seed in range(200)]
    saturations = [max(_saturations(a)) for a in looks]
    assert min(saturations) >= 0.3 - 1e-3 and max(saturations) <= 0.95 + 1e-3
    assert np.mean([s > 0.85 for s in saturations]) > 0.1
    assert max(_hue_gap(a) for a in looks) > 0.3
    ratios = [tint_ratio(a.light_tint) for a in looks]
    assert 1.7 < max(ratios) <= 1.35 / 0.65 + 1e-3


def test_the_procedural_share_sets_how_many_cloths_are_procedural():
    crops = tuple(RealTexture(f"crop-{i}", np.full((8, 8, 3), 8 * i, np.uint8)) for i in range(30))
    pool = TexturePool(real=crops)

    def procedural(share):
        config = RandomizationConfig(procedural_cloth_share=share)
        return np.mean([episode_appearance(seed, pool, config).texture_source == "procedural" for seed in range(400)])
    assert procedural(None) < 0.2  # each of 33 entries alike: 3 of 33 procedural
    assert 0.4 < procedural(0.5) < 0.6
    assert procedural(0.0) == 0 and procedural(1.0) == 1


@pytest.mark.parametrize("field, value", [("cloth_saturation", (0.5, 1.2)), ("cloth_saturation", (0.8, 0.3)),
                                          ("light_gains", (0.0, 1.2)), ("light_gains", (1.3, 0.7)),
                                          ("cloth_hue_spread", 0.7), ("procedural_cloth_share", 1.5)])
def test_an_impossible_reach_is_refused_naming_the_setting(field, value):
    with pytest.raises(ValidationError, match=field):
        RandomizationConfig(**{field: value})
