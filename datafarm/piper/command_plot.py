"""The dry run's plot: each axis's policy target against the safety layer's command, over time (a PNG).

Drawn with PIL, as the project's other plots (datafarm.policy.curve): one panel per axis (left arm in the
left column, right arm in the right; six joints in rad, then the gripper opening in m), the policy's target
in blue, the command the safety layer let through (what a live run sends) in red. Where they part, the
safety layer clipped or capped the policy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from datafarm.errors import BadInput
from datafarm.sim.spaces import AXIS_NAMES, DOF, JOINTS_PER_ARM

log = logging.getLogger(__name__)

TARGET_COLOUR, COMMAND_COLOUR = (40, 90, 220), (220, 40, 40)
PANEL_W, PANEL_H, MARGIN = 420, 130, 46


def plot_commands(targets: Sequence[tuple[float, np.ndarray]], commands: Sequence[tuple[float, np.ndarray]],
                  path: Path | str, title: str = "dry run: policy target (blue) vs safety command (red)") -> Path:
    """Write the PNG of (time, 14-D) `targets` and `commands` to `path`; returns it."""
    if not commands:
        raise BadInput("there are no commands to plot: run the control loop (act) at least once before plotting")
    t_cmd, cmd = _series(commands, "commands")
    t_tgt, tgt = _series(targets, "targets") if targets else (t_cmd, cmd)
    start = min(t_cmd[0], t_tgt[0])
    t_cmd, t_tgt = t_cmd - start, t_tgt - start
    span = max(float(max(t_cmd[-1], t_tgt[-1])), 1e-6)
    rows = JOINTS_PER_ARM + 1
    image = Image.new("RGB", (2 * PANEL_W, rows * PANEL_H + 30), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=12)
    draw.text((8, 8), f"{title}; {len(cmd)} commands over {span:.2f} s", fill="black", font=font)
    for axis in range(DOF):
        column, row = divmod(axis, rows)
        box = (column * PANEL_W + MARGIN, 30 + row * PANEL_H + 16, (column + 1) * PANEL_W - 10, 30 + (row + 1) * PANEL_H - 18)
        values = np.concatenate([tgt[:, axis], cmd[:, axis]])
        low, high = float(np.nanmin(values)), float(np.nanmax(values))
        if high - low < 1e-6:
            low, high = low - 0.01, high + 0.01
        draw.rectangle(box, outline=(180, 180, 180))
        unit = "m" if axis % rows == JOINTS_PER_ARM else "rad"
        draw.text((box[0], box[1] - 15), f"{AXIS_NAMES[axis]} ({unit})", fill="black", font=font)
        draw.text((box[0] - MARGIN + 2, box[1]), f"{high:.3f}", fill="gray", font=font)
        draw.text((box[0] - MARGIN + 2, box[3] - 12), f"{low:.3f}", fill="gray", font=font)
        for times, series, colour in ((t_tgt, tgt[:, axis], TARGET_COLOUR), (t_cmd, cmd[:, axis], COMMAND_COLOUR)):
            points = [(box[0] + (box[2] - box[0]) * float(t) / span,
                       box[3] - (box[3] - box[1]) * (float(v) - low) / (high - low))
                      for t, v in zip(times, series) if np.isfinite(v)]
            if len(points) == 1:
                points.append((points[0][0] + 1, points[0][1]))
            if points:
                draw.line(points, fill=colour, width=2)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    log.info("plotted %d commands (%d targets) to %s", len(cmd), len(tgt), path)
    return path


def _series(samples: Sequence[tuple[float, np.ndarray]], what: str) -> tuple[np.ndarray, np.ndarray]:
    times = np.array([t for t, _ in samples], dtype=float)
    values = np.array([np.asarray(v, dtype=float).reshape(-1) for _, v in samples])
    if values.ndim != 2 or values.shape[1] != DOF:
        raise BadInput(f"the {what} to plot are not {DOF}-D (shape {values.shape}): pass the pair's 14-D history")
    return times, values


__all__ = ["plot_commands"]
