"""Video files through PyAV: a streaming H.264 writer and a whole-file reader."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np


class VideoWriter:
    """Writes RGB uint8 frames to an H.264 mp4 as they come (constant memory). Use as a context manager."""

    def __init__(self, path: str | Path, fps: int, crf: int = 18):
        self.path = Path(path)
        self.fps = fps
        self.crf = crf
        self._container = None
        self._stream = None
        self.frames = 0

    def __enter__(self) -> VideoWriter:
        self._container = av.open(str(self.path), mode="w")
        return self

    def write(self, rgb: np.ndarray) -> None:
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"{self.path.name}: frames must be (H, W, 3) uint8, got {rgb.shape} {rgb.dtype}")
        if self._stream is None:
            # yuv420p needs even sizes; every camera size we use is even.
            self._stream = self._container.add_stream("libx264", rate=Fraction(self.fps))
            self._stream.width, self._stream.height = rgb.shape[1], rgb.shape[0]
            self._stream.pix_fmt = "yuv420p"
            self._stream.options = {"crf": str(self.crf), "preset": "veryfast"}
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        self._container.mux(self._stream.encode(frame))
        self.frames += 1

    def __exit__(self, *exc) -> None:
        if self._stream is not None:
            self._container.mux(self._stream.encode(None))
        self._container.close()


def write_video(path: str | Path, frames, fps: int) -> Path:
    with VideoWriter(path, fps) as writer:
        for frame in frames:
            writer.write(frame)
    return Path(path)


def read_video(path: str | Path) -> np.ndarray:
    """All frames of a video as (T, H, W, 3) uint8. Raises ValueError naming the file if unreadable."""
    try:
        with av.open(str(path)) as container:
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    except (av.error.FFmpegError, IndexError) as error:
        raise ValueError(f"cannot read video {path}: {error}") from error
    if not frames:
        raise ValueError(f"video {path} has no frames")
    return np.stack(frames)
