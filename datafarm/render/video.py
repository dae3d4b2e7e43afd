"""Streaming video access for renders and reviews: frame iterators and stream facts, through PyAV."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np


@dataclass(frozen=True)
class VideoInfo:
    frames: int  # as stated by the container (0 when unknown); decode to be sure
    fps: Fraction
    width: int
    height: int


def probe(path: str | Path) -> VideoInfo:
    """Container facts of a video's first video stream. Raises ValueError naming the file if unreadable."""
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            return VideoInfo(stream.frames, Fraction(stream.average_rate or 0), stream.width, stream.height)
    except (av.error.FFmpegError, IndexError) as error:
        raise ValueError(f"cannot read video {path}: {error}") from error


def iter_frames(path: str | Path) -> Iterator[np.ndarray]:
    """Decode a video frame by frame as (H, W, 3) uint8 RGB. Raises ValueError naming the file on errors."""
    try:
        with av.open(str(path)) as container:
            for frame in container.decode(video=0):
                yield frame.to_ndarray(format="rgb24")
    except (av.error.FFmpegError, IndexError) as error:
        raise ValueError(f"cannot decode video {path}: {error}") from error
