"""prepare and survey: bind the calibration episode and the request; read the calibration."""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from datafarm.calibration import load_calibration
from datafarm.farm.settings import FarmSettings, load_settings
from datafarm.sim.config import load_rig_config
from datafarm.workspace import Workspace, WorkspaceError, sha256_file
from datafarm.workspace.workspace import sha256_json

KEYFRAMES = 3


MAX_REQUEST_CHARS = 10_000  # a task request is a few sentences; far more is a wrong file


def check_request(request: str) -> None:
    """A request is plain text of reasonable length; say what is wrong and how to fix it."""
    if not request.strip():
        raise WorkspaceError("the request is empty: write the task in plain words in the --request-file")
    if len(request) > MAX_REQUEST_CHARS:
        raise WorkspaceError(f"the request has {len(request):,} characters (at most {MAX_REQUEST_CHARS:,}): describe "
                             "the task in a few sentences in the --request-file")
    if any(ord(c) < 32 and c not in "\n\r\t" for c in request):
        raise WorkspaceError("the request contains control characters (a binary file?): pass a plain-text "
                             "--request-file")


def prepare(calibration: Path | str, request: str, output: Path, settings: FarmSettings | Mapping[str, Any]) -> Workspace:
    """Validate the inputs, then create the workspace. Nothing is created if an input is bad.

    `calibration` is a local folder or an s3://bucket/prefix URI (downloaded into the local cache first,
    after the other checks; datafarm.storage). The workspace records where it came from.

    `settings` may be given as plain values (e.g. {"target_count": 10, "renderer": "composite"}): a bad
    one is a BadInput naming the setting and the fix; a known renderer that is not installed here is
    Unavailable naming what to install. Both are raised before anything is read or written."""
    from datafarm.render.registry import check_renderer_available

    settings = load_settings(settings, "prepare")
    check_renderer_available(settings.renderer, **settings.renderer_options())
    check_request(request)
    source = str(calibration)
    if source.startswith("s3://"):
        from datafarm.storage import download_calibration

        calibration = download_calibration(source)
    else:
        calibration = Path(calibration)
        source = str(calibration.resolve())
    episode = load_calibration(calibration)  # raises CalibrationError naming the file and the fix
    workspace = Workspace.initialise(output, {"settings": settings.model_dump(mode="json")})
    workspace.write_text("request.txt", request.strip() + "\n")
    workspace.copy_in(calibration, "calibration")
    workspace.meta["calibration"] = {
        "source": source,
        "synthetic": episode.synthetic,
        "frames": int(len(episode.state)),
        "fps": episode.fps,
        "files": {f: sha256_file(workspace.path(f)) for f in workspace.files_under("calibration")},
    }
    workspace.save_meta()
    started = time.time()
    workspace.record_phase("prepare", sha256_json(workspace.meta["calibration"]["files"]),
                           ["request.txt", "calibration"], started)
    return workspace


def prepare_photo(photo: Path | str, request: str, output: Path, settings: FarmSettings | Mapping[str, Any]) -> Workspace:
    """`prepare` from a single photo instead of a calibration episode: the photo becomes a one-frame,
    head-only calibration with the joints assumed at the rig's rest pose (`datafarm.calibration.photo`).
    The photo, the settings and the request are all checked before anything is written."""
    import tempfile

    from datafarm.calibration.photo import photo_calibration_folder, read_photo

    load_settings(settings, "prepare")
    check_request(request)
    read_photo(photo)  # CalibrationError: missing, unreadable, not an image, too small
    with tempfile.TemporaryDirectory(prefix="datafarm-photo-") as scratch:
        folder = photo_calibration_folder(photo, Path(scratch) / "calibration")
        workspace = prepare(folder, request, output, settings)
    workspace.meta["calibration"]["source"] = str(Path(photo).resolve())
    workspace.meta["calibration"]["photo"] = True
    workspace.save_meta()
    return workspace


def settings_of(workspace: Workspace) -> FarmSettings:
    return load_settings(workspace.meta.get("settings"), f"{workspace.path('workspace.json')} settings",
                         {name: "edit it in workspace.json, or prepare a new workspace with `datafarm prepare`"
                          for name in FarmSettings.model_fields})


def check_ready(workspace: Workspace) -> FarmSettings:
    """What `datafarm farm` checks before any phase runs: valid settings, an installed renderer, the
    calibration copy still in place. Each problem is one BadInput/Unavailable naming the fix."""
    from datafarm.render.registry import check_renderer_available

    settings = settings_of(workspace)
    check_renderer_available(settings.renderer, **settings.renderer_options())
    if not workspace.path("calibration").is_dir():
        raise WorkspaceError(f"{workspace.path('calibration')} is missing: the workspace's copy of the calibration "
                             "episode was deleted; prepare a new workspace from the original episode")
    return settings


def calibrated_rig_config(workspace: Workspace):
    """The rig config with the cameras the survey recorded (size, field of view, pose)."""
    from datafarm.survey.run import rig_with_surveyed_cameras

    return rig_with_surveyed_cameras(load_rig_config(), workspace.read_json("survey.json")["cameras"])


def survey(workspace: Workspace) -> dict:
    """Keyframes and background plates per camera; the head camera fitted to the arms, the wrist cameras
    checked against their mounting, the table plane and the object inventory (datafarm.survey)."""
    from datafarm.survey.run import joints_measured, overlay_image, survey_episode

    episode = load_calibration(workspace.path("calibration"))
    rig = load_rig_config()
    for name in episode.frames:
        for i, frame in enumerate(episode.keyframes(KEYFRAMES)[name]):
            save_png(workspace, f"keyframes/{name}_{i}.png", frame)
        save_png(workspace, f"keyframes/{name}_plate.png", episode.background_plate(name))
    result = survey_episode(episode, rig)
    save_png(workspace, "keyframes/table_sample.png", result.table.sample)
    objects = []
    for index, item in enumerate(result.inventory):
        crop = f"keyframes/objects/{index:02d}.png"
        mask = f"keyframes/objects/{index:02d}_mask.png"
        save_png(workspace, crop, item.crop)
        save_png(workspace, mask, (item.mask * 255).astype(np.uint8))
        objects.append(item.report(crop, mask))
    save_png(workspace, "keyframes/survey_overlay.png", overlay_image(result))
    survey_data = {
        "calibration_frames": int(len(episode.state)),
        "fps": episode.fps,
        "synthetic": episode.synthetic,
        "cameras": result.cameras,
        "table_plane": result.table.report(),
        "objects": objects,
        "inventory": {"method": "offline classical: colour against the table sample, connected blobs on the "
                                "table plane, arms masked by the fitted model", "count": len(objects)},
        "overlay": "keyframes/survey_overlay.png",
        "warnings": result.warnings,
        # a single photo: joints assumed (grounding does not gate on the arms), wrist views absent
        "joints_measured": joints_measured(episode),
        "cameras_absent": list(episode.meta.get("cameras_absent", [])),
        "keyframes": {"indices": episode.keyframe_indices(KEYFRAMES),
                      "states": [episode.state[i].round(5).tolist() for i in episode.keyframe_indices(KEYFRAMES)]},
        "joint_range": {"min": episode.state.min(axis=0).round(4).tolist(), "max": episode.state.max(axis=0).round(4).tolist()},
    }
    _llm_inventory(workspace, survey_data)
    workspace.write_json("survey.json", survey_data)
    return survey_data


def _llm_inventory(workspace: Workspace, survey_data: dict) -> None:
    """With an LLM agent bound, the surveyor role's inventory replaces the offline one (kept beside it)."""
    from datafarm.agent.bindings import load_bindings

    bindings = load_bindings(workspace.root)
    if bindings.agent == "builtin":
        return
    from datafarm.agent.surveyor import survey_with_llm
    from datafarm.costs import CostLedger

    llm = survey_with_llm(bindings, workspace.path(".authoring", "surveyor"), workspace.path("keyframes"),
                          workspace.path("request.txt").read_text(), survey_data, CostLedger(workspace.root))
    survey_data["objects_offline"] = survey_data["objects"]
    survey_data["objects"] = llm.pop("objects")
    survey_data["surveyor"] = llm
    survey_data["inventory"] = {"method": f"surveyor role ({llm['model']}); offline inventory in objects_offline",
                                "count": len(survey_data["objects"])}


def save_png(workspace: Workspace, relative: str, image) -> Path:
    buffer = io.BytesIO()
    (image if isinstance(image, Image.Image) else Image.fromarray(image)).save(buffer, format="PNG")
    return workspace.write_bytes(relative, buffer.getvalue())


def load_png(workspace: Workspace, relative: str) -> np.ndarray:
    return np.asarray(Image.open(workspace.path(relative)).convert("RGB"))
