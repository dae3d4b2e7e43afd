"""How far a farm run is, read from the workspace's own records (so it works for any run on it).

- tried / kept: seeds in rollout/attempts.jsonl; episodes whose simulation is complete on disk
- rendered: kept episodes with every camera's video in episodes/NNNNNN/render/
- reviewed / admitted: episodes/NNNNNN/review.json, and those it admits
- harvested: reports/harvest-progress.json while the dataset is written, manifest.json after

Cheap enough to poll twice a second: a directory listing and one small JSON per episode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from datafarm.farm.episodes import ATTEMPTS, episode_dir, kept_episodes, rendered_videos
from datafarm.farm.prepare import settings_of
from datafarm.workspace import Workspace
from datafarm.workspace.jsonl import read_jsonl

HARVEST_PROGRESS = "reports/harvest-progress.json"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class FarmProgress:
    target: int  # admitted episodes asked for
    tried: int  # seeds simulated
    kept: int  # episodes the hidden judge accepted
    rendered: int
    reviewed: int
    admitted: int
    harvested: int  # episodes written into the dataset


def _read(workspace: Workspace, relative: str) -> dict | None:
    """A small JSON record, or None while it is missing or being replaced."""
    try:
        return json.loads(workspace.path(relative).read_text())
    except (OSError, ValueError):
        return None


def read_progress(workspace: Workspace) -> FarmProgress:
    kept = kept_episodes(workspace)
    rendered = [i for i in kept if all(p.exists() for p in rendered_videos(workspace, i).values())]
    reviews = [_read(workspace, f"{episode_dir(i)}/review.json") for i in kept]
    reviews = [r for r in reviews if r is not None]
    manifest = _read(workspace, MANIFEST)
    if manifest is not None:
        harvested = len(manifest.get("episodes", []))
    else:
        harvested = int((_read(workspace, HARVEST_PROGRESS) or {}).get("done", 0))
    return FarmProgress(target=settings_of(workspace).target_count, tried=len(read_jsonl(workspace.path(ATTEMPTS))),
                        kept=len(kept), rendered=len(rendered), reviewed=len(reviews),
                        admitted=sum(bool(r.get("admitted")) for r in reviews), harvested=harvested)


def record_harvest_progress(workspace: Workspace, done: int, total: int) -> None:
    """What the harvest has written so far (read by `read_progress`; manifest.json supersedes it)."""
    workspace.write_json(HARVEST_PROGRESS, {"done": done, "total": total})
