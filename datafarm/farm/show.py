"""`datafarm show`: an episode as a person looks at it, sim beside rendered, per camera."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from datafarm.cameras import CAMERAS
from datafarm.farm.episodes import episode_dir, kept_episodes, rendered_videos
from datafarm.media import read_video, write_video
from datafarm.sim.recorder import RecordedEpisode
from datafarm.viz import contact_sheet, tile_views
from datafarm.workspace import Workspace, WorkspaceError


def show_episode(workspace: Workspace, index: int | None = None) -> tuple[Path, Path]:
    kept = kept_episodes(workspace)
    if not kept:
        raise WorkspaceError(f"{workspace.root} has no recorded episodes yet: run `datafarm farm {workspace.root}`")
    index = kept[0] if index is None else index
    if index not in kept:
        raise WorkspaceError(f"episode {index} is not in {workspace.root}; it has {kept}")
    episode = RecordedEpisode.load(workspace.path(episode_dir(index), "sim"))
    streams = {}
    rendered = rendered_videos(workspace, index)
    for camera in CAMERAS:
        streams[f"{camera} sim"] = episode.rgb(camera)
        if rendered[camera].exists():
            streams[f"{camera} render"] = read_video(rendered[camera])
    times = episode.data()["time"]
    result = workspace.read_json(f"{episode_dir(index)}/result.json")
    title = f"episode {index} (seed {result['seed']}): {result['verdict']['reason']}"
    sheet_path = workspace.path("reports", f"episode_{index:06d}_sheet.png")
    sheet_path.parent.mkdir(parents=True, exist_ok=True)
    contact_sheet(streams, times, columns=6, title=title[:140]).save(sheet_path)
    preview_path = workspace.path("reports", f"episode_{index:06d}_preview.mp4")
    rows = [[n for n in streams if n.endswith("sim")], [n for n in streams if n.endswith("render")]]
    rows = [row for row in rows if row]

    def frames():
        for t in range(len(times)):
            yield np.concatenate([tile_views([streams[n][t] for n in row]) for row in rows], axis=0)

    write_video(preview_path, frames(), fps=episode.meta["fps"])
    return sheet_path, preview_path
