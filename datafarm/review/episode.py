"""Automated review of one rendered episode: consistent timing, sound video, robot where the sim put it,
no flicker, and a successful judge verdict. Every check is recorded with its value and limit."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from datafarm.media import probe
from datafarm.render.views import BACKGROUND, TABLE, class_height, class_maps, load_camera_arrays, still_camera_steps
from datafarm.review.generated import colour_drift, edge_agreement, read_seams, seam_jump, static_blocks
from datafarm.review.report import Check, EpisodeReview, ReviewThresholds
from datafarm.review.robot_mask import robot_mask_agreement
from datafarm.review.view_analysis import SimView, ViewMeasures, analyse_view
from datafarm.sim.recorder import RecordedEpisode

log = logging.getLogger(__name__)

MASK_EVAL_FRAMES = 12
MASK_REFERENCE_FRAMES = 10


def review_episode(episode: RecordedEpisode, rendered: dict[str, Path], judge_verdict: dict,
                   thresholds: ReviewThresholds | None = None) -> EpisodeReview:
    """Check the rendered views of `episode` (camera -> mp4) and the judge's verdict; see EpisodeReview."""
    thresholds = thresholds or ReviewThresholds()
    review = EpisodeReview(str(episode.directory), thresholds=thresholds)
    frame_count = int(episode.meta["frames"])
    fps = float(episode.meta["fps"])
    review.checks.append(_timestamps_check(episode, frame_count, fps, thresholds))
    missing = sorted(set(episode.cameras) - set(rendered))
    review.checks.append(Check("views_present", not missing, ", ".join(missing) or "all", "every sim camera",
                               detail=f"no render for {missing}" if missing else ""))
    planes = [(h, c) for h, c in ((class_height(episode, TABLE), TABLE), (class_height(episode, BACKGROUND),
                                                                         BACKGROUND)) if h is not None]
    for camera in episode.cameras:
        if camera in rendered:
            review.checks.extend(_view_checks(episode, camera, Path(rendered[camera]), frame_count, fps, planes,
                                              thresholds))
    review.checks.append(_judge_check(judge_verdict))
    log.debug("review of %s: %s%s", episode.directory, "admitted" if review.admitted else "rejected",
             "" if review.admitted else f" ({'; '.join(review.reasons)})")
    return review


def _timestamps_check(episode: RecordedEpisode, frame_count: int, fps: float, thresholds: ReviewThresholds) -> Check:
    time = np.asarray(episode.data()["time"], dtype=float)
    if len(time) != frame_count:
        return Check("timestamps", False, len(time), frame_count, detail="sim time stamps vs declared frames")
    deviation = float(np.abs(np.diff(time) - 1.0 / fps).max()) if len(time) > 1 else 0.0
    return Check("timestamps", deviation <= thresholds.timestamp_tolerance_s, deviation,
                 thresholds.timestamp_tolerance_s, detail=f"max |dt - 1/{fps:g}| in s")


def _judge_check(verdict: dict) -> Check:
    success = verdict.get("success") if isinstance(verdict, dict) else None
    detail = str(verdict.get("reason", "")) if isinstance(verdict, dict) else f"not a verdict: {verdict!r}"
    if success is None and isinstance(verdict, dict):
        detail = "verdict has no 'success'"
    return Check("judge_verdict", success is True, success, True, detail=detail)


def _view_checks(episode: RecordedEpisode, camera: str, path: Path, frame_count: int, fps: float,
                 planes: list[tuple[float, int]], thresholds: ReviewThresholds) -> list[Check]:
    if not path.exists():
        return [Check("decodes", False, False, True, camera, f"{path} does not exist")]
    arrays = load_camera_arrays(episode, camera)
    spec = episode.meta["cameras"][camera]
    sim = SimView(camera, class_maps(episode, arrays["segmentation"]), arrays["segmentation"],
                  arrays["extrinsics_cv"], np.asarray(spec["intrinsics"], dtype=np.float32), spec["width"],
                  spec["height"])
    measures = analyse_view(path, sim, thresholds)
    if not measures.decoded:
        return [Check("decodes", False, False, True, camera, measures.error)]
    checks = [Check("decodes", True, True, True, camera)]
    try:
        stream_fps = float(probe(path).fps)
    except ValueError as error:
        stream_fps, checks[0] = 0.0, Check("decodes", False, False, True, camera, str(error))
    checks.append(Check("frame_count", measures.frames == frame_count, measures.frames, frame_count, camera))
    checks.append(Check("fps", abs(stream_fps - fps) < 1e-3, stream_fps, fps, camera))
    checks.append(Check("frame_size", measures.size_ok, f"{measures.size[0]}x{measures.size[1]}" if not
                        measures.size_ok else f"{sim.width}x{sim.height}", f"{sim.width}x{sim.height}", camera))
    if not measures.size_ok:
        return checks
    checks.append(Check("black_frames", measures.black_frames <= thresholds.max_bad_frames, measures.black_frames,
                        thresholds.max_bad_frames, camera, f"mean luma < {thresholds.black_level}"))
    checks.append(Check("blank_frames", measures.blank_frames <= thresholds.max_bad_frames, measures.blank_frames,
                        thresholds.max_bad_frames, camera, f"luma std < {thresholds.uniform_level} or not finite"))
    checks.append(Check("frozen_frames", measures.longest_frozen <= thresholds.max_frozen_frames,
                        measures.longest_frozen, thresholds.max_frozen_frames, camera,
                        "longest run of unchanged frames while the sim view changes"))
    checks.append(_flicker_check(measures, camera, thresholds))
    checks.append(_robot_check(episode, sim, measures, planes, min(frame_count, measures.frames), thresholds))
    seams = read_seams(path.parent)
    if seams is not None and measures.blocks is not None:  # a video model made this view
        checks.extend(_generated_checks(sim, measures.blocks, seams, thresholds))
    return checks


def _generated_checks(sim: SimView, blocks: np.ndarray, seams: list[int], thresholds: ReviewThresholds) -> list[Check]:
    jump = seam_jump(blocks, seams)
    checks = [Check("seam_jump", jump is None or jump <= thresholds.max_seam_jump, jump, thresholds.max_seam_jump,
                    sim.camera, f"{len(seams)} seams; change into a chunk over the change around it"
                    if jump is not None else "not applicable: one chunk")]
    still = bool(still_camera_steps(sim.extrinsics).all())
    drift = colour_drift(blocks, static_blocks(sim.classes[:len(blocks)])) if still else None
    checks.append(Check("colour_drift", drift is None or drift <= thresholds.max_colour_drift, drift,
                        thresholds.max_colour_drift, sim.camera, "static background, first frames against the last"
                        if drift is not None else "not applicable: a moving camera or no static background"))
    edges = edge_agreement(blocks, sim.classes)
    checks.append(Check("edge_agreement", edges is None or edges >= thresholds.min_edge_agreement, edges,
                        thresholds.min_edge_agreement, sim.camera, "video gradients on the sim's robot and object "
                        "outlines against their interiors (AUC)" if edges is not None else
                        "not applicable: too little robot or object outline in view"))
    return checks


def _flicker_check(measures: ViewMeasures, camera: str, thresholds: ReviewThresholds) -> Check:
    if measures.flicker is None:
        return Check("static_flicker", True, None, thresholds.max_flicker, camera,
                     "not applicable: no static background seen by a still camera")
    return Check("static_flicker", measures.flicker <= thresholds.max_flicker, measures.flicker,
                 thresholds.max_flicker, camera, "mean |luma change| in static background")


def _robot_check(episode: RecordedEpisode, sim: SimView, measures: ViewMeasures, planes: list[tuple[float, int]],
                 frames: int, thresholds: ReviewThresholds) -> Check:
    name, limit = "robot_mask_iou", thresholds.min_robot_iou
    if measures.blocks is None or frames < 2 or not planes:
        return Check(name, False, None, limit, sim.camera, "nothing to compare: no frames or no table/floor plane")
    eval_frames = np.unique(np.linspace(0, frames - 1, MASK_EVAL_FRAMES).round().astype(int)).tolist()
    offset = 0.5 * (frames - 1) / MASK_REFERENCE_FRAMES
    ref_frames = np.unique(np.linspace(offset, frames - 1 - offset, MASK_REFERENCE_FRAMES).round().astype(int)).tolist()
    depth = load_camera_arrays(episode, sim.camera, depth=True, segmentation=False,
                               first=ref_frames[-1] + 1)["depth_m"][ref_frames]
    agreement = robot_mask_agreement(sim, measures.blocks, dict(zip(ref_frames, depth)), planes, eval_frames,
                                     ref_frames, thresholds.robot_difference_level, thresholds.robot_difference_min_level,
                                     thresholds.robot_noise_factor)
    calibration = (f"robot level {agreement.level:.1f}" if agreement.background_error is None else
                   f"robot level {agreement.level:.1f} from background error {agreement.background_error:.1f}")
    if agreement.iou is None:
        return Check(name, True, None, limit, sim.camera,
                     f"not applicable: only {agreement.union_blocks} robot blocks against estimable background")
    return Check(name, agreement.iou >= limit, round(agreement.iou, 4), limit, sim.camera,
                 f"{agreement.union_blocks} blocks over {agreement.frames} frames; {calibration}")
