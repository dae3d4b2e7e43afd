"""The one video module: every mp4 the farm reads or writes goes through these functions (PyAV).

Writing: `VideoWriter` (streaming H.264, constant memory) and `write_video`. Reading: `probe` (stream
facts), `iter_frames` (frame by frame), `iter_timed_frames` (with presentation times), `frames_at`
(seeking), `read_video` (whole file). An unreadable file raises `VideoError` naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from datafarm.errors import BadInput


class VideoError(BadInput, ValueError):
    """A video cannot be read (missing stream, truncated or corrupt file)."""


@dataclass(frozen=True)
class VideoInfo:
    frames: int  # as stated by the container (0 when unknown); decode to be sure
    fps: Fraction  # 0 when the container does not say
    width: int
    height: int
    duration: float  # seconds (0.0 when unknown)


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
            # one thread: the same bytes on any machine, and the caller's thread is charged for all of it
            # (renders and reviews run beside each other, each on a core)
            self._stream.thread_count = 1
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


def probe(path: str | Path) -> VideoInfo:
    """Container facts of a video's first video stream."""
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            duration = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else 0.0
            return VideoInfo(stream.frames, Fraction(stream.average_rate or 0), stream.codec_context.width,
                             stream.codec_context.height, duration)
    except (av.error.FFmpegError, IndexError) as error:
        raise VideoError(f"cannot read video {path}: {error}") from error


def iter_timed_frames(path: str | Path) -> Iterator[tuple[float | None, np.ndarray]]:
    """(presentation time in seconds, (H, W, 3) uint8 RGB) for each frame, decoded one at a time."""
    try:
        with av.open(str(path)) as container:
            container.streams.video[0].thread_count = 1  # in the caller's thread, as the writer
            for frame in container.decode(video=0):
                yield frame.time, frame.to_ndarray(format="rgb24")
    except (av.error.FFmpegError, IndexError) as error:
        raise VideoError(f"cannot decode video {path}: {error}") from error


def iter_frames(path: str | Path) -> Iterator[np.ndarray]:
    """Decode a video frame by frame as (H, W, 3) uint8 RGB (constant memory)."""
    for _, frame in iter_timed_frames(path):
        yield frame


def frames_at(path: str | Path, times: list[float]) -> list[np.ndarray]:
    """The first frame at or after each time (seconds), seeking to the keyframe before it."""
    frames = []
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            for t in times:
                container.seek(int(t / stream.time_base), stream=stream, backward=True)
                for frame in container.decode(stream):
                    if frame.time is None or frame.time >= t:
                        frames.append(frame.to_ndarray(format="rgb24"))
                        break
    except (av.error.FFmpegError, IndexError) as error:
        raise VideoError(f"cannot decode video {path}: {error}") from error
    return frames


def read_video(path: str | Path) -> np.ndarray:
    """All frames of a video as (T, H, W, 3) uint8."""
    frames = list(iter_frames(path))
    if not frames:
        raise VideoError(f"video {path} has no frames")
    return np.stack(frames)
