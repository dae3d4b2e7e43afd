"""The two appearances a closed-loop evaluation renders in: `original` and `unseen`.

original: the training distribution, drawn exactly as the farm's render phase draws it for an episode
seed (`datafarm.farm.episodes.episode_appearance`: the same tablecloth pool, light, texture placement and
background, under the workspace's randomization settings).

unseen: a fixed, documented held-out set that the training randomization never produces, like the
paper's changed tablecloth and coloured light. Each entry pairs
- a tablecloth of a pattern the training generator has no kind for (plaid, polka dots; training draws
  real table crops, noise, stripes and checks) in saturated colours (HSV saturation >= 0.85; training
  cloths are at most 0.6 by default), with
- a strongly coloured light: linear RGB gains whose largest / smallest ratio is >= 2.2 (training gains
  are drawn per channel in the workspace's `randomization.light_gains`: by default [0.8, 1.2], a ratio of
  at most 1.5). An evaluation refuses the unseen look for a policy whose training light reached it
  (`check_held_out`).
A trial's unseen appearance is the entry `seed % len(UNSEEN_SET)`; scale and rotation are fixed too.
A workspace may widen its cloths' saturation and hues (`randomization.cloth_saturation`, `cloth_hue_spread`);
the unseen set then stays held out by its patterns and its light.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from datafarm.errors import Refused
from datafarm.render.appearance import LIGHT_GAIN_RANGE, Appearance
from datafarm.render.textures import held_out_texture

APPEARANCES = ("original", "unseen")


@dataclass(frozen=True)
class HeldOutLook:
    name: str
    kind: str  # a datafarm.render.textures.HELD_OUT_KINDS pattern
    colors: tuple[tuple[float, float, float], ...]  # sRGB 0..1
    light_tint: tuple[float, float, float]  # linear RGB gains (normalised to mean 1 when used)
    light_intensity: float
    scale_m: float = 0.3
    rotation_deg: float = 20.0


UNSEEN_SET: tuple[HeldOutLook, ...] = (
    HeldOutLook("red-plaid/amber-light", "plaid", ((0.75, 0.05, 0.08), (0.1, 0.1, 0.55), (0.95, 0.85, 0.1)),
                (1.7, 0.9, 0.4), 1.0),
    HeldOutLook("green-dots/blue-light", "dots", ((0.05, 0.55, 0.15), (0.95, 0.9, 0.05)), (0.5, 0.9, 1.6), 0.95),
    HeldOutLook("purple-plaid/green-light", "plaid", ((0.45, 0.05, 0.6), (0.05, 0.6, 0.6), (0.9, 0.4, 0.05)),
                (0.6, 1.6, 0.8), 1.05),
    HeldOutLook("orange-dots/magenta-light", "dots", ((0.9, 0.45, 0.02), (0.05, 0.2, 0.8)), (1.5, 0.5, 1.2), 1.0),
)
TRAINING_MAX_TINT_RATIO = LIGHT_GAIN_RANGE[1] / LIGHT_GAIN_RANGE[0]  # of the default light_gains


def tint_ratio(gains) -> float:
    """Largest over smallest of a light's RGB gains: 1 is white, the further above 1 the stronger the tint."""
    return max(gains) / min(gains)


UNSEEN_MIN_TINT_RATIO = min(tint_ratio(look.light_tint) for look in UNSEEN_SET)


def check_held_out(training_light_gains: tuple[float, float]) -> None:
    """Refuse the unseen look for a policy whose training light gains could draw a tint as strong as it."""
    reach = training_light_gains[1] / training_light_gains[0]
    if reach >= UNSEEN_MIN_TINT_RATIO:
        raise Refused(f"the policy's training light gains {tuple(training_light_gains)} reach a tint ratio of "
                      f"{reach:.2f}, and the unseen set's lights start at {UNSEEN_MIN_TINT_RATIO:.2f}: the unseen "
                      "look is not held out from this policy; evaluate --appearance original, or train on a "
                      f"workspace whose randomization.light_gains spans a ratio below {UNSEEN_MIN_TINT_RATIO:.2f}")


def unseen_appearance(seed: int) -> Appearance:
    look = UNSEEN_SET[seed % len(UNSEEN_SET)]
    tint = np.asarray(look.light_tint, dtype=float)
    tint = tint / tint.mean()
    return Appearance(seed=seed, texture_name=look.name, texture_source="held-out",
                      texture_params={"kind": look.kind, "colors": [list(c) for c in look.colors]},
                      texture_scale_m=look.scale_m, texture_rotation_deg=look.rotation_deg,
                      light_tint=tuple(round(float(g), 4) for g in tint), light_intensity=look.light_intensity,
                      texture=held_out_texture(look.kind, list(look.colors)))


def trial_appearance(kind: str, seed: int, texture_pool, randomization, fixed_seed: int = 0) -> Appearance:
    """The appearance a trial on `seed` is rendered in: `original` as the farm renders its episodes
    (`texture_pool` and the workspace's `randomization`, datafarm.farm.episodes), or the unseen set's."""
    if kind == "original":
        from datafarm.farm.episodes import episode_appearance

        return episode_appearance(seed, texture_pool, randomization, fixed_seed)
    if kind == "unseen":
        return unseen_appearance(seed)
    raise ValueError(f"unknown appearance {kind!r}; choose one of {APPEARANCES}")
