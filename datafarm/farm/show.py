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


def episode_streams(workspace: Workspace, index: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per camera, the sim's frames and (once rendered) the delivery's; and the frame times."""
    episode = RecordedEpisode.load(workspace.path(episode_dir(index), "sim"))
    streams = {}
    rendered = rendered_videos(workspace, index)
    for camera in CAMERAS:
        streams[f"{camera} sim"] = episode.rgb(camera)
        if rendered[camera].exists():
            streams[f"{camera} render"] = read_video(rendered[camera])
    return streams, episode.data()["time"]


def episode_sheet(workspace: Workspace, index: int, path: Path, streams=None) -> Path:
    """The contact sheet of episode `index` (sim beside rendered, per camera), written to `path`."""
    streams, times = streams or episode_streams(workspace, index)
    result = workspace.read_json(f"{episode_dir(index)}/result.json")
    title = f"episode {index} (seed {result['seed']}): {result['verdict']['reason']}"
    path.parent.mkdir(parents=True, exist_ok=True)
    contact_sheet(streams, times, columns=6, title=title[:140]).save(path)
    return path


def show_episode(workspace: Workspace, index: int | None = None) -> tuple[Path, Path]:
    kept = kept_episodes(workspace)
    if not kept:
        raise WorkspaceError(f"{workspace.root} has no recorded episodes yet: run `datafarm farm {workspace.root}`")
    index = kept[0] if index is None else index
    if index not in kept:
        raise WorkspaceError(f"episode {index} is not in {workspace.root}; it has {kept}")
    streams, times = episode_streams(workspace, index)
    sheet_path = episode_sheet(workspace, index, workspace.path("reports", f"episode_{index:06d}_sheet.png"),
                               (streams, times))
    preview_path = workspace.path("reports", f"episode_{index:06d}_preview.mp4")
    rows = [[n for n in streams if n.endswith("sim")], [n for n in streams if n.endswith("render")]]
    rows = [row for row in rows if row]

    def frames():
        for t in range(len(times)):
            yield np.concatenate([tile_views([streams[n][t] for n in row]) for row in rows], axis=0)

    write_video(preview_path, frames(), fps=workspace.read_json(f"{episode_dir(index)}/sim/episode.json")["fps"])
    return sheet_path, preview_path


def show_survey(workspace: Workspace) -> Path:
    """One picture of what the survey found: the fitted-camera overlay (arm model green, nominal red,
    table tinted, inventory boxed), the table sample, each object's crop and label, and the numbers."""
    from PIL import Image, ImageDraw

    if not workspace.path("survey.json").exists():
        raise WorkspaceError(f"{workspace.root} has no survey yet: run `datafarm farm {workspace.root} --until survey`")
    data = workspace.read_json("survey.json")
    overlay = Image.open(workspace.path(data.get("overlay", "keyframes/survey_overlay.png"))).convert("RGB")
    tiles = [("table", workspace.path(data["table_plane"].get("sample", "keyframes/table_sample.png")))]
    tiles += [(f"{i}: {o['label']} ({o['xy'][0]:+.2f}, {o['xy'][1]:+.2f})", workspace.path(o["crop"]))
              for i, o in enumerate(data.get("objects", [])) if o.get("crop")]
    fit = data["cameras"]["head"].get("fit", {})
    lines = [f"head camera: {data['cameras']['head'].get('source')}; arm alignment "
             f"{fit.get('alignment_px_before')} -> {fit.get('alignment_px_after')} px; "
             f"moved {fit.get('moved_from_nominal_m')} m, turned {fit.get('turned_from_nominal_deg')} deg",
             f"table: height {data['table_plane'].get('height')} m, extent {data['table_plane'].get('extent')}"]
    lines += [f"{name}: table IoU {camera['mount_check']['table_iou']}" for name, camera in data["cameras"].items()
              if "mount_check" in camera]
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    thumb = 96
    width = max(overlay.width, len(tiles) * (thumb + 8) + 8)
    sheet = Image.new("RGB", (width, overlay.height + thumb + 40 + 14 * len(lines)), (24, 24, 28))
    sheet.paste(overlay, (0, 0))
    draw = ImageDraw.Draw(sheet)
    for i, (label, path) in enumerate(tiles):
        image = Image.open(path).convert("RGB")
        image.thumbnail((thumb, thumb))
        x = 8 + i * (thumb + 8)
        sheet.paste(image, (x, overlay.height + 6))
        draw.text((x, overlay.height + thumb + 8), label[:18], fill=(235, 235, 235))
    for row, line in enumerate(lines):
        draw.text((8, overlay.height + thumb + 26 + 14 * row), line[:160], fill=(235, 235, 235))
    path = workspace.path("reports", "survey.png")
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)
    return path
