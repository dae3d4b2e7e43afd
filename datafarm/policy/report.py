"""The evaluation report: success with Wilson 95% intervals per task x appearance x policy, per-trial verdicts,
contact sheets of a success and a failure, and plots (success by appearance; success vs data size).

Reads WS/evals/<policy>/<appearance>/{eval.json, trials/*.json, videos/*.mp4}; writes WS/reports/eval/
(report.md, report.json, PNGs). Plots are drawn with PIL (no plotting library is installed).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from datafarm.cameras import CAMERAS
from datafarm.policy.evaluate import CONTROLS, EVALS
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

REPORT_DIR = "reports/eval"
Z95 = 1.959964


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% by default); (0, 1) with no trials."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Cell:
    task: str
    policy: str
    appearance: str
    trials: int
    successes: int
    rate: float
    low: float
    high: float
    train_episodes: int | None = None  # trained policies: how many episodes they were trained on

    def row(self) -> str:
        return (f"| {self.task} | {self.policy} | {self.appearance} | {self.successes}/{self.trials} | "
                f"{100 * self.rate:.0f}% | [{100 * self.low:.0f}%, {100 * self.high:.0f}%] |")


def load_evaluations(workspace: Workspace) -> list[tuple[dict, list[dict]]]:
    """(eval.json, trial results) of every evaluation in the workspace, in name order."""
    found = []
    for record in sorted(workspace.path(EVALS).glob("*/*/eval.json")):
        trials = [json.loads(p.read_text()) for p in sorted((record.parent / "trials").glob("*.json"))]
        found.append((json.loads(record.read_text()), trials))
    return found


def cells(workspace: Workspace) -> list[Cell]:
    out = []
    for record, trials in load_evaluations(workspace):
        wins = sum(bool(t["success"]) for t in trials)
        low, high = wilson_interval(wins, len(trials))
        out.append(Cell(record.get("task") or "", record["name"], record["appearance"], len(trials), wins,
                        wins / len(trials) if trials else 0.0, low, high,
                        record.get("spec", {}).get("train_episodes")))
    return out


def write_report(workspace: Workspace) -> Path:
    """Write reports/eval/ and return its report.md."""
    folder = workspace.path(REPORT_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    table = cells(workspace)
    evaluations = load_evaluations(workspace)
    lines = ["# Closed-loop evaluation", "",
             "Success per task x policy x appearance with Wilson 95% intervals. Controls: do-nothing (must be ~0%), "
             "blind-replay (one training episode's actions, open-loop: a policy that does not beat it is not using "
             "its cameras), expert (the ceiling).", "",
             "| task | policy | appearance | successes | rate | 95% interval |", "|---|---|---|---|---|---|"]
    lines += [cell.row() for cell in sorted(table, key=lambda c: (c.task, c.policy not in CONTROLS, c.policy,
                                                                   c.appearance))]
    missing = sorted({c for c in CONTROLS} - {cell.policy for cell in table})
    if missing:
        lines += ["", f"Controls not evaluated yet: {', '.join(missing)} (`datafarm eval WS --policy <control>`)."]
    media = []
    for record, trials in evaluations:
        media += _trial_media(workspace, folder, record, trials)
    plots = [p for p in (plot_by_appearance(table, folder / "success_by_appearance.png"),
                         plot_data_size(table, folder / "success_vs_data_size.png")) if p]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    if media:
        lines += ["", "## First trials", ""] + [f"- {m['policy']} / {m['appearance']} seed {m['seed']} "
                                                 f"({'success' if m['success'] else 'failure'}): "
                                                 f"[video]({m['video']}), ![sheet]({m['sheet']})" for m in media]
    lines += ["", "## Per-trial verdicts", ""]
    for record, trials in evaluations:
        lines.append(f"### {record['name']} / {record['appearance']}")
        for trial in trials:
            checks = " ".join(f"{k}={'ok' if v else 'FAIL'}" for k, v in trial["verdict"]["checks"].items())
            lines.append(f"- seed {trial['seed']}: {trial['end']}, {trial['sim_seconds']:.1f} s; {checks or 'no checks'}"
                         + (f"; {trial['error']}" if trial.get("error") else ""))
    report = {"cells": [asdict(c) for c in table], "media": media, "plots": [p.name for p in plots],
              "trials": {f"{r['name']}/{r['appearance']}": [{"seed": t["seed"], "success": t["success"], "end": t["end"],
                                                            "checks": t["verdict"]["checks"]} for t in trials]
                         for r, trials in evaluations}}
    workspace.write_json(f"{REPORT_DIR}/report.json", report)
    return workspace.write_text(f"{REPORT_DIR}/report.md", "\n".join(lines) + "\n")


def _trial_media(workspace: Workspace, folder: Path, record: dict, trials: list[dict]) -> list[dict]:
    """A contact sheet of the first trial with a video that succeeded, and of the first that failed."""
    from datafarm.media import read_video
    from datafarm.viz import contact_sheet

    picked = []
    for wanted in (True, False):
        trial = next((t for t in trials if t.get("video") and bool(t["success"]) == wanted
                      and workspace.path(t["video"]).exists()), None)
        if trial is None:
            continue
        frames = read_video(workspace.path(trial["video"]))
        times = np.arange(len(frames)) / 30.0
        views = " | ".join(record.get("spec", {}).get("cameras", CAMERAS))  # a trial films the policy's views
        sheet = contact_sheet({views: frames}, times, columns=6,
                              title=f"{record['name']} / {record['appearance']} seed {trial['seed']}: {trial['end']}")
        name = f"{record['name']}-{record['appearance']}-{trial['seed']}.png"
        sheet.save(folder / name)
        picked.append({"policy": record["name"], "appearance": record["appearance"], "seed": trial["seed"],
                       "success": wanted, "sheet": name,
                       "video": str(Path("../..") / trial["video"])})
    return picked


# ----- plots (PIL) ---------------------------------------------------------------------------------------
_W, _H, _PAD = 720, 400, 50
_COLOURS = {"original": (70, 130, 200), "unseen": (220, 120, 50)}


def _axes(title: str) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("RGB", (_W, _H), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=14)
    draw.text((_PAD, 10), title, fill="black", font=font)
    draw.line([(_PAD, _PAD), (_PAD, _H - _PAD), (_W - 20, _H - _PAD)], fill="black")
    for tick in (0, 25, 50, 75, 100):
        y = _y(tick / 100)
        draw.line([(_PAD - 4, y), (_PAD, y)], fill="black")
        draw.text((8, y - 7), f"{tick}%", fill="black", font=font)
    return image, draw


def _y(rate: float) -> float:
    return _H - _PAD - rate * (_H - 2 * _PAD)


def plot_by_appearance(table: list[Cell], path: Path) -> Path | None:
    """Grouped bars per policy (one per appearance) with their 95% interval as a whisker."""
    if not table:
        return None
    image, draw = _axes("success by appearance (bars: rate, whiskers: Wilson 95%)")
    policies = sorted({c.policy for c in table})
    slot = (_W - _PAD - 40) / len(policies)
    font = ImageFont.load_default(size=12)
    for i, policy in enumerate(policies):
        x0 = _PAD + 10 + i * slot
        draw.text((x0, _H - _PAD + 8), policy[:18], fill="black", font=font)
        for j, appearance in enumerate(("original", "unseen")):
            cell = next((c for c in table if c.policy == policy and c.appearance == appearance), None)
            if cell is None:
                continue
            left = x0 + j * slot * 0.4
            right = left + slot * 0.35
            draw.rectangle([left, _y(cell.rate), right, _y(0)], fill=_COLOURS[appearance])
            middle = (left + right) / 2
            draw.line([(middle, _y(cell.low)), (middle, _y(cell.high))], fill="black", width=2)
    for j, appearance in enumerate(("original", "unseen")):
        draw.rectangle([_W - 150, 12 + 16 * j, _W - 138, 24 + 16 * j], fill=_COLOURS[appearance])
        draw.text((_W - 132, 10 + 16 * j), appearance, fill="black", font=font)
    image.save(path)
    return path


def plot_data_size(table: list[Cell], path: Path) -> Path | None:
    """Success vs training episodes, one line per appearance, when trained policies differ in data size."""
    trained = [c for c in table if c.train_episodes]
    sizes = sorted({c.train_episodes for c in trained})
    if len(sizes) < 2:
        return None
    image, draw = _axes("success vs training episodes (Wilson 95% whiskers)")
    font = ImageFont.load_default(size=12)

    def x(size: int) -> float:
        return _PAD + 20 + (math.log(size) - math.log(sizes[0])) / (math.log(sizes[-1]) - math.log(sizes[0])) * (_W - _PAD - 80)

    for size in sizes:
        draw.text((x(size) - 8, _H - _PAD + 8), str(size), fill="black", font=font)
    for appearance, colour in _COLOURS.items():
        points = sorted((c.train_episodes, c) for c in trained if c.appearance == appearance)
        for (_, a), (_, b) in zip(points, points[1:]):
            draw.line([(x(a.train_episodes), _y(a.rate)), (x(b.train_episodes), _y(b.rate))], fill=colour, width=2)
        for size, cell in points:
            draw.ellipse([x(size) - 4, _y(cell.rate) - 4, x(size) + 4, _y(cell.rate) + 4], fill=colour)
            draw.line([(x(size), _y(cell.low)), (x(size), _y(cell.high))], fill=colour)
    image.save(path)
    return path
