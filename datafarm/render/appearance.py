"""Appearance randomization for rendering: the tablecloth, the light and the background, sampled from a seed.

The background family (switchable: `RandomizationConfig.background`) changes what is behind the table:
half the episodes keep the calibration footage's own background plate; a quarter see it under another
room light (`relit`: a colour, a brightness and a gradient across the view); a quarter see another
backdrop (`backdrop`: a procedural pattern shaded by the plate's own light and dark, so walls and
shelves keep their shape but change their colours).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from datafarm.render.textures import (CLOTH_HUE_SPREAD, CLOTH_SATURATION, PROCEDURAL_KINDS, TexturePool,
                                      procedural_texture)

LIGHT_GAIN_RANGE = (0.8, 1.2)  # per channel, before normalising the gains to mean 1
LIGHT_INTENSITY_RANGE = (0.75, 1.25)
TEXTURE_SCALE_RANGE_M = (0.15, 0.45)  # metres of table one texture tile covers
BACKGROUND_LOOKS = {"calibration": 0.5, "relit": 0.25, "backdrop": 0.25}  # look -> share of the episodes
ROOM_GAIN_RANGE = (0.75, 1.25)  # per channel on the background, before normalising to mean 1
ROOM_INTENSITY_RANGE = (0.6, 1.4)
ROOM_GRADIENT = 0.3  # at most this fraction brighter on one side of the view than in its middle
BACKDROP_TILES = (1.5, 4.0)  # pattern repeats across the view's width


@dataclass(frozen=True)
class Background:
    """What is behind the table: `look` is one of BACKGROUND_LOOKS. Linear RGB `gains` and a brightness
    `gradient` (per view-width and view-height fraction from the middle) light it; a `backdrop` pattern
    (tileable sRGB, `tiles` repeats across a view) replaces its colours."""

    look: str = "calibration"
    gains: tuple[float, float, float] = (1.0, 1.0, 1.0)
    gradient: tuple[float, float] = (0.0, 0.0)
    backdrop_params: dict = field(default_factory=dict)
    tiles: float = 1.0
    backdrop: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {"look": self.look, "gains": list(self.gains), "gradient": list(self.gradient),
                "backdrop": {**self.backdrop_params, "tiles": self.tiles} if self.backdrop is not None else None}

    def light(self, width: int, height: int) -> np.ndarray:
        """(H * W, 3) linear multipliers of one view's background pixels: the room's light over the view."""
        y, x = np.mgrid[0:height, 0:width].astype(np.float32)
        across, down = 2 * x / max(width - 1, 1) - 1, 2 * y / max(height - 1, 1) - 1  # -1..1 from the middle
        ramp = 1 + self.gradient[0] * across + self.gradient[1] * down
        return (ramp.reshape(-1, 1) * np.asarray(self.gains, np.float32)).astype(np.float32)

    def pattern(self, width: int, height: int) -> np.ndarray | None:
        """(H * W, 3) linear backdrop colours of one view, mean luminance 1; None: the plate keeps its colours."""
        if self.backdrop is None:
            return None
        from datafarm.render.color import luminance, srgb_to_linear

        texture = srgb_to_linear(self.backdrop)
        size = texture.shape[0]
        y, x = np.mgrid[0:height, 0:width]
        scale = self.tiles * size / width
        colours = texture[(y * scale).astype(np.int64) % size, (x * scale).astype(np.int64) % size].reshape(-1, 3)
        return (colours / max(float(luminance(colours).mean()), 1e-3)).astype(np.float32)


CALIBRATION_BACKGROUND = Background()


def sample_background(seed: int) -> Background:
    """One episode's background, from its own stream of `seed` (so it changes no other draw)."""
    rng = np.random.default_rng([seed, 0xBAC6])
    look = str(rng.choice(list(BACKGROUND_LOOKS), p=list(BACKGROUND_LOOKS.values())))
    if look == "calibration":
        return CALIBRATION_BACKGROUND
    gains = rng.uniform(*ROOM_GAIN_RANGE, size=3)
    gains = gains / gains.mean() * rng.uniform(*ROOM_INTENSITY_RANGE)
    gradient = rng.uniform(-ROOM_GRADIENT, ROOM_GRADIENT, size=2)
    background = Background(look, tuple(round(float(g), 4) for g in gains), tuple(round(float(g), 4) for g in gradient))
    if look == "backdrop":
        kind = str(rng.choice(PROCEDURAL_KINDS))
        texture, params = procedural_texture(kind, rng)
        background = Background(look, background.gains, background.gradient, params,
                                round(float(rng.uniform(*BACKDROP_TILES)), 3), texture)
    return background


@dataclass(frozen=True)
class AppearanceRange:
    """How far an episode's tablecloth and light tint reach (the workspace's randomization settings
    `cloth_saturation`, `cloth_hue_spread`, `procedural_cloth_share`, `light_gains`). The defaults draw
    what the farm always drew, so a workspace that sets none of them renders as before."""

    cloth_saturation: tuple[float, float] = CLOTH_SATURATION
    cloth_hue_spread: float = CLOTH_HUE_SPREAD
    procedural_share: float | None = None  # of the cloths drawn procedural; None: each pool entry alike
    light_gains: tuple[float, float] = LIGHT_GAIN_RANGE  # per channel, before normalising to mean 1


@dataclass(frozen=True)
class Appearance:
    """What a render randomizes: tablecloth texture and placement, light colour and intensity.

    `texture` is the tileable sRGB image itself; everything else is plain values, all in `to_dict()`
    (the texture by name, source and parameters, so a render can be explained and repeated).
    """

    seed: int
    texture_name: str
    texture_source: str  # "real" (a crop of real table footage) or "procedural"
    texture_params: dict
    texture_scale_m: float
    texture_rotation_deg: float
    light_tint: tuple[float, float, float]  # linear RGB gains, mean 1
    light_intensity: float
    texture: np.ndarray = field(repr=False, compare=False)  # (N, N, 3) uint8, tileable
    background: Background = CALIBRATION_BACKGROUND

    def __post_init__(self) -> None:
        if self.texture.ndim != 3 or self.texture.shape[2] != 3 or self.texture.dtype != np.uint8:
            raise ValueError(f"texture must be (N, N, 3) uint8, got {self.texture.shape} {self.texture.dtype}")
        if self.texture_scale_m <= 0 or self.light_intensity <= 0 or min(self.light_tint) <= 0:
            raise ValueError("texture scale, light intensity and light gains must be positive")

    @property
    def light_gains(self) -> np.ndarray:
        """Linear RGB multipliers: tint times intensity."""
        return np.asarray(self.light_tint, dtype=np.float32) * np.float32(self.light_intensity)

    def to_dict(self) -> dict:
        return {
            "seed": self.seed,
            "texture": {"name": self.texture_name, "source": self.texture_source, "params": self.texture_params,
                        "size_px": int(self.texture.shape[0]), "scale_m": self.texture_scale_m,
                        "rotation_deg": self.texture_rotation_deg},
            "light": {"tint": list(self.light_tint), "intensity": self.light_intensity},
            "background": self.background.to_dict(),
        }


def sample_appearance(seed: int, texture_pool: TexturePool | None = None,
                      reach: AppearanceRange = AppearanceRange()) -> Appearance:
    """Draw a tablecloth from `texture_pool` (default: procedural only) and a light within `reach`, all from
    `seed`, over the calibration's own background (`sample_background` draws another, from its own stream)."""
    pool = texture_pool or TexturePool()
    rng = np.random.default_rng([seed, 0xA99E])
    if reach.procedural_share is None or not pool.real or not pool.procedural:
        choice = int(rng.integers(pool.size))
    elif rng.uniform() < reach.procedural_share:
        choice = len(pool.real) + int(rng.integers(len(pool.procedural)))
    else:
        choice = int(rng.integers(len(pool.real)))
    if choice < len(pool.real):
        real = pool.real[choice]
        texture, name, source, params = real.image, real.name, "real", {}
    else:
        kind = pool.procedural[choice - len(pool.real)]
        texture, params = procedural_texture(kind, rng, saturation_range=reach.cloth_saturation,
                                             hue_spread=reach.cloth_hue_spread)
        name, source = f"{kind}-{seed}", "procedural"
    gains = rng.uniform(*reach.light_gains, size=3)
    gains /= gains.mean()
    return Appearance(
        seed=seed, texture_name=name, texture_source=source, texture_params=params,
        texture_scale_m=round(float(rng.uniform(*TEXTURE_SCALE_RANGE_M)), 4),
        texture_rotation_deg=round(float(rng.uniform(0, 360)), 2),
        light_tint=tuple(round(float(g), 4) for g in gains),
        light_intensity=round(float(rng.uniform(*LIGHT_INTENSITY_RANGE)), 4),
        texture=texture,
    )
