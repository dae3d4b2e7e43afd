"""The loss curve: lerobot's logged metrics read back, summarised, and drawn as a PNG (PIL, no plotting library)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont


@dataclass(frozen=True)
class StepTiming:
    seconds_per_step: float  # mean of lerobot's per-window (data loading + update) time
    loading_share: float  # data loading / (loading + update): what decoding and batching cost
    windows: int


def read_metrics(path: Path) -> list[dict[str, float]]:
    """lerobot's metrics, one dict per log window (see lerobot_run), in step order (resumed runs appended)."""
    if not Path(path).is_file():
        return []
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    by_step = {int(row["steps"]): row for row in rows}  # a resumed run may log a step again: keep the latest
    return [by_step[step] for step in sorted(by_step)]


def step_timing(metrics: list[dict[str, float]], skip_first: bool = True) -> StepTiming | None:
    """Mean s/step and the loading share; the first window (model build, caches warming) is skipped if others exist."""
    rows = metrics[1:] if skip_first and len(metrics) > 1 else metrics
    if not rows:
        return None
    loading = sum(row["dataloading_s"] for row in rows) / len(rows)
    update = sum(row["update_s"] for row in rows) / len(rows)
    total = loading + update
    return StepTiming(total, loading / total if total > 0 else 0.0, len(rows))


def slowed_down(metrics: list[dict[str, float]], factor: float = 3.0, history: int = 4) -> tuple[float, float] | None:
    """(usual, latest) s/step when the latest window took at least `factor` x the median of the windows
    before it (at least `history` of them, the first skipped), else None. On a CPU, a step slows like this
    when other work shares the cores: torch's threads keep waiting on each other."""
    times = [row["update_s"] + row["dataloading_s"] for row in metrics[1:]]
    if len(times) <= history:
        return None
    usual, latest = statistics.median(times[:-1]), times[-1]
    return (usual, latest) if latest >= factor * usual else None


def draw_loss_curve(metrics: list[dict[str, float]], path: Path, title: str,
                    size: tuple[int, int] = (640, 400)) -> Path:
    """Training loss against step (log scale when the loss spans more than a decade)."""
    width, height = size
    left, right, top, bottom = 70, 20, 40, 50
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=13)
    draw.text((left, 10), title, fill="black", font=font)
    points = [(row["steps"], row["loss"]) for row in metrics if row.get("loss", 0) > 0 and math.isfinite(row["loss"])]
    draw.rectangle([left, top, width - right, height - bottom], outline="black")
    if points:
        steps, losses = zip(*points)
        log_scale = max(losses) / min(losses) > 10
        scale = (lambda v: math.log10(v)) if log_scale else (lambda v: v)
        low, high = scale(min(losses)), scale(max(losses))
        high = high if high > low else low + 1.0
        first, last = min(steps), max(steps)
        span = last - first if last > first else 1.0

        def xy(step: float, loss: float) -> tuple[float, float]:
            x = left + (step - first) / span * (width - left - right)
            y = height - bottom - (scale(loss) - low) / (high - low) * (height - top - bottom)
            return x, y

        line = [xy(s, v) for s, v in points]
        if len(line) > 1:
            draw.line(line, fill=(31, 119, 180), width=2)
        for x, y in line[-1:] if len(line) > 1 else line:
            draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill=(31, 119, 180))
        for value, label_y in ((max(losses), top), (min(losses), height - bottom - 12)):
            draw.text((4, label_y), f"{value:.3g}", fill="black", font=font)
        draw.text((left, height - bottom + 6), f"{first:.0f}", fill="black", font=font)
        draw.text((width - right - 60, height - bottom + 6), f"{last:.0f}", fill="black", font=font)
        draw.text((width // 2 - 30, height - 22), "step", fill="black", font=font)
        draw.text((4, height // 2), "loss (log)" if log_scale else "loss", fill="black", font=font)
    else:
        draw.text((left + 10, height // 2), "no loss logged yet", fill="black", font=font)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path
