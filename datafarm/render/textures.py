"""Tileable tablecloth textures: crops of real table footage, and procedural noise, stripes and checks.

Every texture is a square (N, N, 3) uint8 sRGB image that tiles seamlessly: real crops are mirrored
into a 2 x 2 tile, procedural ones are periodic by construction (integer wave numbers, FFT noise).
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass, field

import numpy as np

PROCEDURAL_KINDS = ("noise", "stripes", "checks")
TEXTURE_SIZE = 128

# The free tabletop in the RoboMIND AgileX third-person clips (640 x 368 frames, x0, y0, x1, y1): right of
# the objects, below the wall, above the front edge; measured on AX-AppleBluePlate and AX-PackBowl.
ROBOMIND_TABLE_BOX = (350, 220, 550, 330)
_CANDIDATES = 12


@dataclass(frozen=True)
class RealTexture:
    """A tileable crop of a real table surface."""

    name: str
    image: np.ndarray = field(repr=False)  # (N, N, 3) uint8


@dataclass(frozen=True)
class TexturePool:
    """The tablecloths an appearance may pick from: real crops, then procedural kinds."""

    real: tuple[RealTexture, ...] = ()
    procedural: tuple[str, ...] = PROCEDURAL_KINDS

    def __post_init__(self) -> None:
        unknown = set(self.procedural) - set(PROCEDURAL_KINDS)
        if unknown:
            raise ValueError(f"unknown procedural texture kinds {sorted(unknown)}; known: {PROCEDURAL_KINDS}")
        if not self.real and not self.procedural:
            raise ValueError("a texture pool needs at least one real crop or procedural kind")

    @property
    def size(self) -> int:
        return len(self.real) + len(self.procedural)


def mirror_tile(patch: np.ndarray) -> np.ndarray:
    """A patch and its mirror images as a 2 x 2 tile, which repeats without seams."""
    top = np.concatenate([patch, patch[:, ::-1]], axis=1)
    return np.ascontiguousarray(np.concatenate([top, top[::-1]], axis=0))


def crop_table_textures(frames: list[np.ndarray], box: tuple[int, int, int, int] = ROBOMIND_TABLE_BOX,
                        per_frame: int = 2, name: str = "robomind", seed: int = 0,
                        size: int = TEXTURE_SIZE) -> tuple[RealTexture, ...]:
    """Square crops of the table inside `box` of each real frame, made tileable (size x size)."""
    rng = np.random.default_rng(seed)
    x0, y0, x1, y1 = box
    half = size // 2
    textures = []
    for index, frame in enumerate(frames):
        height, width = frame.shape[:2]
        if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height) or min(x1 - x0, y1 - y0) < half:
            raise ValueError(f"table box {box} does not fit a {half}px crop in a {width}x{height} frame")
        for crop in range(per_frame):
            # Of a few candidate windows keep the most uniform: bare cloth, not an object or an edge.
            candidates = [(int(rng.integers(x0, x1 - half + 1)), int(rng.integers(y0, y1 - half + 1)))
                          for _ in range(_CANDIDATES)]
            x, y = min(candidates, key=lambda c: float(frame[c[1]:c[1] + half, c[0]:c[0] + half].std()))
            patch = frame[y:y + half, x:x + half]
            textures.append(RealTexture(f"{name}-{index}-{crop}", mirror_tile(patch)))
    return tuple(textures)


CLOTH_SATURATION = (0.05, 0.6)  # HSV saturation of a procedural cloth, drawn once per cloth
CLOTH_HUE_SPREAD = 0.08  # each colour's hue lies within this of the cloth's hue (0.5: any hue)


def random_colors(rng: np.random.Generator, count: int, saturation_range: tuple[float, float] = CLOTH_SATURATION,
                  hue_spread: float = CLOTH_HUE_SPREAD) -> list[tuple[float, float, float]]:
    """`count` cloth colours (sRGB 0..1): one random hue and saturation, each colour's hue within
    `hue_spread` of it, varied lightness."""
    hue = rng.uniform()
    saturation = rng.uniform(*saturation_range)
    colors = []
    for _ in range(count):
        value = rng.uniform(0.3, 0.9)
        shifted = (hue + rng.uniform(-hue_spread, hue_spread)) % 1.0
        colors.append(colorsys.hsv_to_rgb(shifted, saturation, value))
    return colors


def procedural_texture(kind: str, rng: np.random.Generator, size: int = TEXTURE_SIZE,
                       saturation_range: tuple[float, float] = CLOTH_SATURATION,
                       hue_spread: float = CLOTH_HUE_SPREAD) -> tuple[np.ndarray, dict]:
    """A tileable (size, size, 3) uint8 texture of `kind` with random colours (`random_colors`); returns it
    and its parameters."""
    if kind not in PROCEDURAL_KINDS:
        raise ValueError(f"unknown procedural texture {kind!r}; known: {PROCEDURAL_KINDS}")
    first, second = random_colors(rng, 2, saturation_range, hue_spread)
    y, x = np.mgrid[0:size, 0:size] / size
    params: dict = {"kind": kind, "colors": [list(np.round(first, 3)), list(np.round(second, 3))]}
    if kind == "noise":
        cutoff = float(rng.uniform(3, 12))  # cycles per tile
        frequency = np.hypot(*np.meshgrid(np.fft.fftfreq(size) * size, np.fft.fftfreq(size) * size))
        spectrum = np.fft.fft2(rng.standard_normal((size, size))) * np.exp(-(frequency / cutoff) ** 2)
        weight = np.real(np.fft.ifft2(spectrum))
        weight = np.clip(0.5 + 0.5 * weight / (2 * weight.std() + 1e-9), 0, 1)
        params["cutoff_cycles"] = round(cutoff, 2)
    elif kind == "stripes":
        waves = (int(rng.integers(0, 5)), int(rng.integers(2, 9)))
        if rng.uniform() < 0.5:
            waves = waves[::-1]
        phase = np.sin(2 * np.pi * (waves[0] * x + waves[1] * y))
        weight = np.clip(0.5 + phase * float(rng.uniform(0.8, 3.0)), 0, 1)
        params["wave_numbers"] = list(waves)
    else:
        cells = int(rng.choice([2, 4, 8]))
        weight = ((np.floor(x * cells) + np.floor(y * cells)) % 2).astype(float)
        params["cells"] = cells
    grain = rng.standard_normal((size, size)) * 0.03  # a little weave so flat areas are not synthetic-flat
    image = weight[..., None] * np.array(first) + (1 - weight[..., None]) * np.array(second) + grain[..., None]
    return np.clip(image * 255, 0, 255).round().astype(np.uint8), params


# ----- held-out cloths: patterns the training randomization never draws (closed-loop "unseen" appearance) ---
HELD_OUT_KINDS = ("plaid", "dots")


def held_out_texture(kind: str, colors: list[tuple[float, float, float]], size: int = TEXTURE_SIZE) -> np.ndarray:
    """A tileable (size, size, 3) uint8 cloth of a kind `procedural_texture` never makes, in the given sRGB colours.

    plaid: three colours in crossing bands of two widths (a tartan); dots: a grid of round spots of the
    second colour on the first. Deterministic: the held-out set is fixed, not sampled.
    """
    if kind not in HELD_OUT_KINDS:
        raise ValueError(f"unknown held-out texture {kind!r}; known: {HELD_OUT_KINDS}")
    y, x = np.mgrid[0:size, 0:size] / size
    palette = np.asarray(colors, dtype=float)
    if kind == "plaid":
        bands_x = (np.floor(x * 8) % 4 == 0) | (np.floor(x * 16) % 8 == 3)
        bands_y = (np.floor(y * 8) % 4 == 0) | (np.floor(y * 16) % 8 == 3)
        image = np.where(bands_x[..., None] & bands_y[..., None], palette[2],
                         np.where((bands_x | bands_y)[..., None], palette[1], palette[0]))
    else:
        cells = 6
        dx, dy = (x * cells) % 1 - 0.5, (y * cells) % 1 - 0.5
        image = np.where((np.hypot(dx, dy) < 0.3)[..., None], palette[1], palette[0])
    return np.clip(image * 255, 0, 255).round().astype(np.uint8)
