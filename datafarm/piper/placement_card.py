"""Placement cards: where the operator puts each object for one evaluation trial, drawn on the head camera's view.

The positions are the eval seed's own draw: the task's scene sampling (``sample_episode``, the function
``episode_world`` calls), so a real trial on seed S starts from the scene the simulated trial on S would
build. Each object's (x, y) on the table top is projected through the calibrated head camera (the
survey's pose and field of view, ``calibrated_rig_config``) onto the calibration keyframe
(``keyframes/head_plate.png``: the table as the head camera saw it, ``calibration_references``' first
head frame), and marked with a ring, a heading tick (its yaw) and its name.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from datafarm.errors import BadInput
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

HEAD_KEYFRAME = "keyframes/head_plate.png"
CARD_MIN_WIDTH = 640
RING_RADIUS_M = 0.04  # drawn ring: about an apple's footprint on the table
COLOURS = ((255, 64, 64), (64, 160, 255), (80, 220, 80), (255, 200, 40), (220, 80, 255))


def project_to_head(points_world: np.ndarray, camera, image_size: tuple[int, int]) -> np.ndarray:
    """(N, 3) world points -> (N, 2) pixels (u right, v down) on an image of `image_size` (width, height)."""
    pose = camera.local_pose()  # camera -> world; x forward, y left, z up
    homogeneous = np.c_[points_world, np.ones(len(points_world))] @ np.linalg.inv(pose).T
    forward, left, up = homogeneous[:, 0], homogeneous[:, 1], homogeneous[:, 2]
    if np.any(forward <= 0):
        raise BadInput("an object of the placement card lies behind the head camera: the survey's head camera "
                       "pose (survey.json) does not look at the table; re-run `datafarm prepare`")
    intrinsics = camera.intrinsics()
    u = intrinsics[0, 2] - intrinsics[0, 0] * left / forward
    v = intrinsics[1, 2] - intrinsics[1, 1] * up / forward
    scale = np.array([image_size[0] / camera.width, image_size[1] / camera.height])
    return np.c_[u, v] * scale


def draw_placement_card(workspace: Workspace, seed: int, path: Path, title: str = "") -> Path:
    """Draw the card of `seed` (the task's placements for that seed) as a PNG at `path`; returns `path`."""
    from PIL import Image, ImageDraw

    from datafarm.farm.authoring import workspace_package
    from datafarm.farm.prepare import calibrated_rig_config, settings_of
    from datafarm.task.randomization import sample_episode

    package = workspace_package(workspace)
    rig_config = calibrated_rig_config(workspace)
    sample = sample_episode(package.scene, seed, settings_of(workspace).randomization, package.info.max_seconds,
                            rig_config.timing.control_hz)
    keyframe = workspace.path(HEAD_KEYFRAME)
    if not keyframe.exists():
        raise BadInput(f"{keyframe} is missing: the placement card is drawn on the head camera's calibration "
                       f"keyframe; run `datafarm prepare` on the workspace first")
    image = Image.open(keyframe).convert("RGB")
    if image.width < CARD_MIN_WIDTH:  # small survey frames: enlarge so the labels stay readable
        factor = -(-CARD_MIN_WIDTH // image.width)
        image = image.resize((image.width * factor, image.height * factor), Image.BICUBIC)
    camera = rig_config.cameras["head"]
    table = rig_config.table.height
    draw = ImageDraw.Draw(image)
    legend = []
    for number, (name, placement) in enumerate(sorted(sample.placements.items())):
        colour = COLOURS[number % len(COLOURS)]
        centre = np.array([placement.x, placement.y, table])
        heading = centre + RING_RADIUS_M * 1.8 * np.array([np.cos(placement.yaw), np.sin(placement.yaw), 0.0])
        ring = [centre + RING_RADIUS_M * placement.scale * np.array([np.cos(a), np.sin(a), 0.0])
                for a in np.linspace(0, 2 * np.pi, 25)]
        pixels = project_to_head(np.array([centre, heading, *ring]), camera, image.size)
        draw.line([tuple(p) for p in pixels[2:]], fill=colour, width=3)
        draw.line([tuple(pixels[0]), tuple(pixels[1])], fill=colour, width=3)
        u, v = pixels[0]
        draw.line([(u - 4, v), (u + 4, v)], fill=colour, width=2)
        draw.line([(u, v - 4), (u, v + 4)], fill=colour, width=2)
        draw.text((u + 8, v - 14), f"{number + 1} {name}", fill=colour)
        legend.append(f"{number + 1} {name}: x {placement.x:+.3f} y {placement.y:+.3f} m, yaw "
                      f"{np.rad2deg(placement.yaw):+.0f} deg")
    banner = Image.new("RGB", (image.width, 14 * (len(legend) + 1) + 6), (0, 0, 0))
    text = ImageDraw.Draw(banner)
    text.text((4, 2), title or f"seed {seed}: put each object on its ring, facing its tick", fill=(255, 255, 255))
    for row, line in enumerate(legend, start=1):
        text.text((4, 2 + 14 * row), line, fill=COLOURS[(row - 1) % len(COLOURS)])
    card = Image.new("RGB", (image.width, image.height + banner.height))
    card.paste(image, (0, 0))
    card.paste(banner, (0, image.height))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    card.save(path)
    log.info("placement card for seed %d: %s (%s)", seed, path, "; ".join(legend))
    return path


__all__ = ["draw_placement_card", "project_to_head"]
