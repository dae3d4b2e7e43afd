"""Appearance randomization for rendering: the tablecloth and the light, sampled from a seed."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from datafarm.render.textures import TexturePool, procedural_texture

LIGHT_GAIN_RANGE = (0.8, 1.2)  # per channel, before normalising the gains to mean 1
LIGHT_INTENSITY_RANGE = (0.75, 1.25)
TEXTURE_SCALE_RANGE_M = (0.15, 0.45)  # metres of table one texture tile covers


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
        }


def sample_appearance(seed: int, texture_pool: TexturePool | None = None) -> Appearance:
    """Draw a tablecloth from `texture_pool` (default: procedural only) and a light, all from `seed`."""
    pool = texture_pool or TexturePool()
    rng = np.random.default_rng([seed, 0xA99E])
    choice = int(rng.integers(pool.size))
    if choice < len(pool.real):
        real = pool.real[choice]
        texture, name, source, params = real.image, real.name, "real", {}
    else:
        kind = pool.procedural[choice - len(pool.real)]
        texture, params = procedural_texture(kind, rng)
        name, source = f"{kind}-{seed}", "procedural"
    gains = rng.uniform(*LIGHT_GAIN_RANGE, size=3)
    gains /= gains.mean()
    return Appearance(
        seed=seed, texture_name=name, texture_source=source, texture_params=params,
        texture_scale_m=round(float(rng.uniform(*TEXTURE_SCALE_RANGE_M)), 4),
        texture_rotation_deg=round(float(rng.uniform(0, 360)), 2),
        light_tint=tuple(round(float(g), 4) for g in gains),
        light_intensity=round(float(rng.uniform(*LIGHT_INTENSITY_RANGE)), 4),
        texture=texture,
    )
