"""A single photo as the calibration: format (c) of `load_calibration`, a one-frame, head-only episode.

`photo_calibration_folder(PHOTO, FOLDER)` checks the photo and writes FOLDER with:

- ``head.png``: the photo, centre-cropped to the rig head camera's aspect and resized to its size
  (the simulated head camera renders at that size; a larger photo would make every render that large);
- ``joints.csv``: ONE row, both arms at the rig's rest pose. A photo carries no joint states: these are
  assumed, not measured, and the provenance says so (the survey then warns, and grounding does not
  gate on the arms);
- ``datafarm_calibration.json``: ``{"source": "photo", "joints": "assumed: ... not measured",
  "cameras_absent": ["left_wrist", "right_wrist"], ...}``.

No wrist views exist. The survey records them as absent (the wrist cameras keep the rig's mounting)
and the renderer takes the head photo's colours as the wrist cameras' real references
(`datafarm.farm.episodes.calibration_references` warns when it does).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from datafarm.calibration.errors import CalibrationError
from datafarm.cameras import CAMERAS
from datafarm.sim.spaces import AXIS_NAMES

log = logging.getLogger(__name__)

PHOTO_FILE = "head.png"
PHOTO_JOINTS = "assumed: the rig's rest pose, not measured (a single photo has no joint states)"
HEAD = "head"
ABSENT_CAMERAS = tuple(camera for camera in CAMERAS if camera != HEAD)
PHOTO_FPS = 30.0  # one frame; the rate only labels it


def minimum_photo_size() -> tuple[int, int]:
    """(width, height): the rig head camera's size. A smaller photo would be upsampled to it."""
    from datafarm.sim.config import load_rig_config

    spec = load_rig_config().cameras[HEAD]
    return int(spec.width), int(spec.height)


def read_photo(path: str | Path) -> np.ndarray:
    """The photo as (H, W, 3) uint8 RGB, or CalibrationError naming what is wrong and the fix."""
    path = Path(path)
    if not path.exists():
        raise CalibrationError(f"photo {path} does not exist; pass the path of a JPEG or PNG photo of the scene "
                               "taken from the head camera's viewpoint")
    if not path.is_file():
        raise CalibrationError(f"photo {path} is not a file; pass one JPEG or PNG image (for a recorded episode "
                               "use --episode instead)")
    try:
        with Image.open(path) as image:
            image.load()
            rgb = np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError) as error:
        raise CalibrationError(f"photo {path} is not a readable image ({type(error).__name__}: {error}); pass a "
                               "JPEG or PNG photo of the scene") from error
    min_width, min_height = minimum_photo_size()
    height, width = rgb.shape[:2]
    if width < min_width or height < min_height:
        raise CalibrationError(f"photo {path} is {width}x{height} pixels; the minimum is {min_width}x{min_height} "
                               "(the head camera's render size): take or export the photo at a higher resolution")
    return rgb


def _fit_to_head(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """Centre-crop to width:height and resize (a centred crop keeps the principal point at the centre)."""
    source_height, source_width = rgb.shape[:2]
    crop_width = min(source_width, round(source_height * width / height))
    crop_height = min(source_height, round(crop_width * height / width))
    x0, y0 = (source_width - crop_width) // 2, (source_height - crop_height) // 2
    crop = Image.fromarray(np.ascontiguousarray(rgb[y0:y0 + crop_height, x0:x0 + crop_width]))
    return np.asarray(crop.resize((width, height), Image.Resampling.LANCZOS))


def rest_state_row() -> list[float]:
    from datafarm.sim.config import load_rig_config

    rig = load_rig_config()
    arm = [*rig.rest_qpos, rig.rest_gripper]
    return [float(v) for v in arm + arm]


def photo_calibration_folder(photo: str | Path, folder: str | Path) -> Path:
    """Check `photo` and write the one-frame calibration folder (module docstring). Returns `folder`."""
    rgb = read_photo(photo)
    folder = Path(folder)
    if folder.exists():
        raise FileExistsError(f"{folder} already exists; remove it or choose another folder")
    width, height = minimum_photo_size()
    head = _fit_to_head(rgb, width, height)
    folder.mkdir(parents=True)
    Image.fromarray(head).save(folder / PHOTO_FILE)
    (folder / "joints.csv").write_text(",".join(AXIS_NAMES) + "\n" + ",".join(f"{v:.6f}" for v in rest_state_row()) + "\n")
    provenance = {"synthetic": False, "source": "photo", "photo": str(Path(photo).resolve()),
                  "photo_size": [int(rgb.shape[1]), int(rgb.shape[0])], "head_size": [width, height],
                  "joints": PHOTO_JOINTS, "cameras_absent": list(ABSENT_CAMERAS),
                  "note": "one photo: head view only; joints assumed at the rig's rest pose; no wrist views"}
    from datafarm.calibration.episode import PROVENANCE_FILE

    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2))
    log.info("photo %s (%dx%d) -> one-frame calibration %s (head %dx%d, joints assumed at rest)", photo,
             rgb.shape[1], rgb.shape[0], folder, width, height)
    return folder


def is_photo_folder(folder: Path) -> bool:
    return (folder / PHOTO_FILE).is_file() and not (folder / "meta" / "info.json").exists()


def read_photo_folder(folder: Path) -> tuple[float, dict[str, np.ndarray], np.ndarray, dict]:
    """(fps, {"head": (1, H, W, 3)}, (1, 14) state, meta) of a folder `photo_calibration_folder` wrote."""
    from datafarm.calibration.joints import read_joint_table

    head = read_photo(folder / PHOTO_FILE)
    joints = folder / "joints.csv"
    if not joints.is_file():
        raise CalibrationError(f"{folder}: joints.csv is missing from the photo calibration; prepare the workspace "
                               "again from the photo (datafarm prepare --image PHOTO ...)")
    state = read_joint_table(joints)
    meta = {"format": "photo", "joints": PHOTO_JOINTS, "cameras_absent": list(ABSENT_CAMERAS)}
    return PHOTO_FPS, {HEAD: head[None]}, state, meta
