"""Real footage of an AgileX dual-arm rig (RoboMIND clips, Apache-2.0) as calibration material.

The clips (``AX-*.mp4``, 640x368, 24 fps) are third-person recordings of real tasks. They carry no
wrist streams and no joint data, so `robomind_calibration_folder` builds a format-(b) folder that is
honest about it: ``head.mp4`` is real footage; the wrist videos are crops of the same real frames; the
joint states are the simulated rig's rest pose repeated. A README.txt and ``datafarm_calibration.json``
in the folder say exactly this. `appearance_references` samples real frames for the renderer.

The clips are looked up in ``$DATAFARM_ROBOMIND_DIR``, then ``shared/data/agilex_robomind`` in the
checkout, then next to it (``../shared/...``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from datafarm.calibration.episode import PROVENANCE_FILE
from datafarm.media import frames_at, iter_timed_frames, probe, write_video
from datafarm.paths import REPO_ROOT
from datafarm.sim.spaces import AXIS_NAMES

log = logging.getLogger(__name__)

CALIBRATION_FPS = 30
CALIBRATION_SIZE = (320, 240)  # width, height of every stream in the folder
# Wrist stand-ins: (left, top, right, bottom) as fractions of the real frame, before resizing to 4:3.
WRIST_CROPS = {"left_wrist": (0.0, 0.35, 0.5, 1.0), "right_wrist": (0.5, 0.35, 1.0, 1.0)}

README_TEXT = """\
DataFarm calibration folder built from REAL footage, with two stand-ins. Read before use.

head.mp4
    REAL: the first {seconds:g} s of {clip} (RoboMIND, an AgileX Cobot Magic dual-arm rig, Apache-2.0,
    from {source}). It is a third-person view of the real rig, not the rig's own head camera.
    Resampled from {src_fps:g} fps to {fps} fps (nearest frame), centre-cropped from {src_w}x{src_h} to 4:3
    and resized to {width}x{height}.
left_wrist.mp4, right_wrist.mp4
    NOT wrist cameras: crops of the same real frames (lower-left and lower-right regions), resized
    to {width}x{height}. The clips have no wrist streams.
joints.csv
    NOT measured: the simulated rig's rest pose (configs/rig/dual_piper.yaml) repeated for every
    frame. The clips carry no joint data.

The footage is real; the wrist views and the joint states are not. Use it to exercise ingest,
survey and appearance code on real pixels, not to calibrate cameras or kinematics.
"""


def robomind_dir() -> Path:
    """The folder holding the RoboMIND clips; FileNotFoundError saying where it was looked for."""
    candidates = [Path(p) for p in [os.environ.get("DATAFARM_ROBOMIND_DIR")] if p]
    candidates += [REPO_ROOT / "shared" / "data" / "agilex_robomind",
                   REPO_ROOT.parent / "shared" / "data" / "agilex_robomind"]
    for candidate in candidates:
        if (candidate / "videos").is_dir():
            return candidate
    raise FileNotFoundError(f"RoboMIND clips not found; looked in {[str(c) for c in candidates]}; set "
                            "DATAFARM_ROBOMIND_DIR to the folder holding videos/AX-*.mp4")


def robomind_clips() -> list[Path]:
    clips = sorted((robomind_dir() / "videos").glob("AX-*.mp4"))
    if not clips:
        raise FileNotFoundError(f"no AX-*.mp4 clips in {robomind_dir() / 'videos'}")
    return clips


def _decode_first_seconds(path: Path, seconds: float) -> tuple[list[np.ndarray], float]:
    """Frames with timestamps below `seconds`, and the clip's frame rate."""
    frames = []
    rate = float(probe(path).fps or 24)
    for time, frame in iter_timed_frames(path):
        if time is not None and time >= seconds:
            break
        frames.append(frame)
    if not frames:
        raise ValueError(f"{path} has no video frames")
    return frames, rate


def _crop_resize(frame: np.ndarray, box: tuple[float, float, float, float], size: tuple[int, int]) -> np.ndarray:
    """Crop the fractional `box`, then the largest centred region of the target aspect, then resize."""
    height, width = frame.shape[:2]
    left, top, right, bottom = (round(box[0] * width), round(box[1] * height),
                                round(box[2] * width), round(box[3] * height))
    region = frame[top:bottom, left:right]
    aspect = size[0] / size[1]
    h, w = region.shape[:2]
    if w / h > aspect:
        cut = w - round(h * aspect)
        region = region[:, cut // 2: w - (cut - cut // 2)]
    else:
        cut = h - round(w / aspect)
        region = region[cut // 2: h - (cut - cut // 2)]
    return np.asarray(Image.fromarray(region).resize(size, Image.Resampling.BILINEAR))


def _rest_pose() -> np.ndarray:
    from datafarm.sim.config import load_rig_config

    config = load_rig_config()
    arm = [*config.rest_qpos, config.rest_gripper]
    return np.array(arm + arm, dtype=np.float64)


def robomind_calibration_folder(output: str | Path, clip: str = "AX-PackPlate.mp4", seconds: float = 3.0) -> Path:
    """Build a format-(b) calibration folder at `output` from the first `seconds` of a real clip.

    All three streams are 320x240 at 30 fps (see README_TEXT for exactly what is real). Returns `output`."""
    output = Path(output)
    if output.exists():
        raise FileExistsError(f"{output} already exists; remove it or choose another output folder")
    source = robomind_dir() / "videos" / clip
    if not source.is_file():
        raise FileNotFoundError(f"no clip {clip!r} in {source.parent}; available: {[c.name for c in robomind_clips()]}")
    real, src_fps = _decode_first_seconds(source, seconds)
    count = max(2, int(round(len(real) / src_fps * CALIBRATION_FPS)))
    picks = [min(len(real) - 1, int(i * src_fps / CALIBRATION_FPS)) for i in range(count)]
    staging = output.with_name(output.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    boxes = {"head": (0.0, 0.0, 1.0, 1.0), **WRIST_CROPS}
    for camera, box in boxes.items():
        write_video(staging / f"{camera}.mp4", (_crop_resize(real[i], box, CALIBRATION_SIZE) for i in picks),
                    fps=CALIBRATION_FPS)
    rest = _rest_pose()
    rows = "\n".join(",".join(f"{v:.6f}" for v in rest) for _ in range(count))
    (staging / "joints.csv").write_text(",".join(AXIS_NAMES) + "\n" + rows + "\n")
    src_h, src_w = real[0].shape[:2]
    (staging / "README.txt").write_text(README_TEXT.format(
        seconds=seconds, clip=clip, source="github.com/x-humanoid-robomind/x-humanoid-robomind.github.io", src_fps=src_fps, fps=CALIBRATION_FPS,
        src_w=src_w, src_h=src_h, width=CALIBRATION_SIZE[0], height=CALIBRATION_SIZE[1]))
    provenance = {"synthetic": False, "source": f"RoboMIND {clip} (Apache-2.0)", "real_streams": ["head"],
                  "wrist_streams": "crops of the real head-clip frames, not wrist cameras",
                  "joints": "simulated rig rest pose repeated, not measured",
                  "frames": count, "fps": CALIBRATION_FPS, "resolution": list(CALIBRATION_SIZE)}
    (staging / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2))
    staging.rename(output)
    log.info("real-footage calibration folder %s from %s: %d frames", output, clip, count)
    return output


def appearance_references(count: int = 8) -> list[np.ndarray]:
    """`count` real RGB frames (H, W, 3) uint8 at the clips' 640x368, spread over every clip and its length."""
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    clips = robomind_clips()
    per_clip = [count // len(clips) + (1 if i < count % len(clips) else 0) for i in range(len(clips))]
    references = []
    for clip, n in zip(clips, per_clip):
        if n == 0:
            continue
        duration = probe(clip).duration or 10.0
        references.extend(frames_at(clip, [duration * (k + 0.5) / n for k in range(n)]))
    return references[:count]
