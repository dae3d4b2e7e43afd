"""Colour spaces and Reinhard colour transfer, vectorised for whole canvases.

Images move through the renderer as linear-light float32 RGB in [0, 1]; sRGB uint8 conversions use
lookup tables. Colour transfer follows Reinhard et al. (2001): per-channel mean and standard deviation
are matched in the decorrelated, roughly perceptual l-alpha-beta space (log LMS cone responses). The
whole transfer is folded into one affine map of log-LMS, so applying it costs two 3x3 products, a log
and an exp per pixel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_RGB_TO_LMS = np.array([[0.3811, 0.5783, 0.0402], [0.1967, 0.7244, 0.0782], [0.0241, 0.1288, 0.8444]],
                       dtype=np.float32)
_LMS_TO_RGB = np.linalg.inv(_RGB_TO_LMS).astype(np.float32)
_LOG_LMS_TO_LAB = (np.diag([1 / np.sqrt(3), 1 / np.sqrt(6), 1 / np.sqrt(2)])
                   @ np.array([[1, 1, 1], [1, 1, -2], [1, -1, 0]])).astype(np.float32)
_LAB_TO_LOG_LMS = np.linalg.inv(_LOG_LMS_TO_LAB).astype(np.float32)
_EPSILON = 1e-4  # floor of linear LMS before the log (black stays black, no -inf)
_LUMA = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)  # Rec. 709 luminance of linear RGB

_ENCODE_STEPS = 4096


def _srgb_decode(values: np.ndarray) -> np.ndarray:
    return np.where(values <= 0.04045, values / 12.92, ((values + 0.055) / 1.055) ** 2.4)


def _srgb_encode(values: np.ndarray) -> np.ndarray:
    return np.where(values <= 0.0031308, values * 12.92, 1.055 * np.power(values, 1 / 2.4) - 0.055)


_DECODE_LUT = _srgb_decode(np.arange(256) / 255.0).astype(np.float32)
_ENCODE_LUT = np.round(_srgb_encode(np.linspace(0, 1, _ENCODE_STEPS)) * 255).astype(np.uint8)


def srgb_to_linear(image: np.ndarray) -> np.ndarray:
    """uint8 sRGB -> float32 linear RGB in [0, 1] (table lookup)."""
    if image.dtype != np.uint8:
        raise ValueError(f"srgb_to_linear expects uint8, got {image.dtype}")
    return _DECODE_LUT[image]


def linear_to_srgb(image: np.ndarray) -> np.ndarray:
    """float linear RGB (clipped to [0, 1]) -> uint8 sRGB (table lookup, 4096 steps)."""
    index = np.clip(image, 0.0, 1.0)
    index *= _ENCODE_STEPS - 1
    index += 0.5
    return _ENCODE_LUT[index.astype(np.int32)]


def apply_matrix(pixels: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """(..., 3) float32 pixels times a 3 x 3 matrix (row vectors: matrix @ p), without BLAS.

    Written out per channel on purpose: for (N, 3) arrays a multi-threaded BLAS is slow, and very slow
    on a shared machine; this is a few vectorised multiply-adds.
    """
    out = np.empty(pixels.shape, np.float32)
    red, green, blue = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    for row in range(3):
        channel = out[..., row]
        np.multiply(red, np.float32(matrix[row, 0]), out=channel)
        channel += np.float32(matrix[row, 1]) * green
        channel += np.float32(matrix[row, 2]) * blue
    return out


def luminance(linear: np.ndarray) -> np.ndarray:
    """Relative luminance of linear RGB (..., 3) -> (...)."""
    return _LUMA[0] * linear[..., 0] + _LUMA[1] * linear[..., 1] + _LUMA[2] * linear[..., 2]


def linear_to_lab(linear: np.ndarray) -> np.ndarray:
    """Linear RGB (..., 3) -> Reinhard l-alpha-beta (..., 3)."""
    lms = np.maximum(apply_matrix(linear, _RGB_TO_LMS), _EPSILON)
    return apply_matrix(np.log(lms), _LOG_LMS_TO_LAB)


@dataclass(frozen=True)
class ColorTransfer:
    """An affine map in l-alpha-beta (per-channel scale and offset), fitted once, applied to many frames."""

    scale: np.ndarray  # (3,)
    offset: np.ndarray  # (3,)

    @classmethod
    def identity(cls) -> ColorTransfer:
        return cls(np.ones(3, np.float32), np.zeros(3, np.float32))

    @classmethod
    def fit(cls, source_linear: np.ndarray, target_linear: np.ndarray, strength: float = 1.0,
            max_scale: float = 2.0) -> ColorTransfer:
        """Match the mean and spread of `source` pixels to `target` pixels (both linear RGB, any shape (..., 3)).

        `strength` in [0, 1] blends from the identity to the full transfer; the per-channel scale is
        clipped to [1 / max_scale, max_scale] so a degenerate source (a flat colour) cannot blow up.
        """
        if not 0.0 <= strength <= 1.0:
            raise ValueError(f"strength must be in [0, 1], got {strength}")
        source = linear_to_lab(source_linear.reshape(-1, 3))
        target = linear_to_lab(target_linear.reshape(-1, 3))
        if len(source) == 0 or len(target) == 0:
            raise ValueError("colour transfer needs source and target pixels; one of them is empty")
        source_std = np.maximum(source.std(axis=0), 1e-6)
        scale = np.clip(target.std(axis=0) / source_std, 1 / max_scale, max_scale)
        offset = target.mean(axis=0) - scale * source.mean(axis=0)
        scale = 1.0 + strength * (scale - 1.0)
        offset = strength * offset
        return cls(scale.astype(np.float32), offset.astype(np.float32))

    def apply(self, linear: np.ndarray) -> np.ndarray:
        """Linear RGB (..., 3) float32 -> transferred linear RGB (..., 3), not clipped."""
        # log LMS -> lab -> scale/offset -> log LMS, folded into one affine map of log LMS.
        affine = _LAB_TO_LOG_LMS @ np.diag(self.scale) @ _LOG_LMS_TO_LAB
        shift = _LAB_TO_LOG_LMS @ self.offset
        lms = np.maximum(apply_matrix(linear, _RGB_TO_LMS), _EPSILON)
        log_lms = apply_matrix(np.log(lms, out=lms), affine)
        log_lms += shift.astype(np.float32)
        return apply_matrix(np.exp(log_lms, out=log_lms), _LMS_TO_RGB)

    def to_dict(self) -> dict:
        return {"space": "reinhard-lab", "scale": self.scale.round(4).tolist(), "offset": self.offset.round(4).tolist()}
