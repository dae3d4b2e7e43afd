"""harvest and verify: the LeRobot dataset out, and the proof that it is complete and unmodified.

manifest.json lists the SHA-256 of every delivered file (the dataset and each admitted episode's
review), the admitted episodes and the target count. verify recomputes all of it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field

from datafarm.farm.episodes import admitted_episodes, episode_dir, rendered_videos
from datafarm.farm.prepare import settings_of
from datafarm.workspace import Workspace, sha256_file

MANIFEST = "manifest.json"


def harvest(workspace: Workspace, instruction: str, progress=None) -> dict:
    from datafarm.dataset.harvest import HarvestItem, harvest as write_dataset

    settings = settings_of(workspace)
    admitted = admitted_episodes(workspace)[: settings.target_count]
    if not admitted:
        raise RuntimeError(f"no admitted episodes to harvest in {workspace.root}: run rollout, render and review first")
    items = [HarvestItem(episode_dir=workspace.path(episode_dir(i), "sim"), videos=rendered_videos(workspace, i), index=i)
             for i in admitted]
    staging = workspace.path(".dataset-staging")
    if staging.exists():
        shutil.rmtree(staging)
    fps = json.loads(workspace.path(episode_dir(admitted[0]), "sim", "episode.json").read_text())["fps"]
    report = write_dataset(items, staging, settings.repo_id, fps, instruction, progress=progress)
    final = workspace.path("dataset")
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    write_manifest(workspace, admitted)
    summary = {"episodes": len(admitted), "frames": report.frames, "wall_seconds": report.wall_seconds,
               "recorded_seconds_per_wall_second": report.recorded_seconds_per_wall_second}
    workspace.write_json("reports/harvest.json", summary)
    return summary


def write_manifest(workspace: Workspace, admitted: list[int]) -> dict:
    files = workspace.files_under("dataset") + [f"{episode_dir(i)}/review.json" for i in admitted]
    manifest = {
        "task": workspace.meta.get("task"),
        "target_count": settings_of(workspace).target_count,
        "episodes": admitted,
        "files": {f: sha256_file(workspace.path(f)) for f in files},
    }
    workspace.write_json(MANIFEST, manifest)
    return manifest


@dataclass
class VerifyReport:
    problems: list[str] = field(default_factory=list)
    checked_files: int = 0
    episodes: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(workspace: Workspace) -> VerifyReport:
    """Complete (target count admitted), unmodified (every hash), reviewed (each episode admitted)."""
    report = VerifyReport()
    if not workspace.path(MANIFEST).exists():
        report.problems.append(f"{MANIFEST} is missing: the delivery was never harvested (run `datafarm farm`)")
        return report
    manifest = json.loads(workspace.path(MANIFEST).read_text())
    report.episodes = len(manifest["episodes"])
    if report.episodes < manifest["target_count"]:
        report.problems.append(f"incomplete: {report.episodes} admitted episodes delivered, {manifest['target_count']} asked")
    for relative, expected in sorted(manifest["files"].items()):
        path = workspace.path(relative)
        report.checked_files += 1
        if not path.exists():
            report.problems.append(f"missing file: {relative}")
        elif sha256_file(path) != expected:
            report.problems.append(f"modified file: {relative} (SHA-256 differs from the manifest)")
    listed = set(manifest["files"])
    for relative in workspace.files_under("dataset") if workspace.path("dataset").exists() else []:
        if relative not in listed:
            report.problems.append(f"unlisted file in the delivery: {relative}")
    for index in manifest["episodes"]:
        review_path = workspace.path(episode_dir(index), "review.json")
        if not review_path.exists():
            report.problems.append(f"episode {index}: review.json is missing")
            continue
        review = json.loads(review_path.read_text())
        if not review.get("admitted"):
            report.problems.append(f"episode {index}: its review did not admit it ({'; '.join(review.get('reasons', []))})")
    info = workspace.path("dataset", "meta", "info.json")
    if info.exists():
        total = json.loads(info.read_text()).get("total_episodes")
        if total != report.episodes:
            report.problems.append(f"the dataset holds {total} episodes, the manifest lists {report.episodes}")
    else:
        report.problems.append("dataset/meta/info.json is missing: not a LeRobot dataset")
    return report
