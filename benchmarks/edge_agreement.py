"""The review's edge agreement on farmed episodes: faithful views against the same views broken.

For every view of every episode given (a workspace's `episodes/NNNNNN` folders, with their sim recording
and render), prints the edge agreement (`datafarm.review.generated.edge_agreement`) of the render, of the
sim's own render, of the render time-reversed and of the render shifted 8 px, then the range of each per
head and wrist views: the figures behind `ReviewThresholds.min_edge_agreement`.

    python benchmarks/edge_agreement.py WS/episodes/0000[0-2]?
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from datafarm.media import read_video
from datafarm.render.views import class_maps, load_camera_arrays
from datafarm.review.generated import edge_agreement
from datafarm.review.view_analysis import block_means
from datafarm.sim.recorder import RecordedEpisode

SHIFT_PX = 8


def view_figures(episode: Path, camera: str) -> dict[str, float | None]:
    recorded = RecordedEpisode.load(episode / "sim")
    classes = class_maps(recorded, load_camera_arrays(recorded, camera)["segmentation"])
    frames = read_video(episode / "render" / f"{camera}.mp4")

    def blocks(images) -> np.ndarray:
        return np.stack([block_means(image) for image in images])

    return {"render": edge_agreement(blocks(frames), classes),
            "sim": edge_agreement(blocks(read_video(episode / "sim" / "cameras" / camera / "rgb.mp4")), classes),
            "reversed": edge_agreement(blocks(frames[::-1]), classes),
            f"shifted {SHIFT_PX} px": edge_agreement(blocks(np.roll(frames, (SHIFT_PX, SHIFT_PX), axis=(1, 2))), classes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("episodes", nargs="+", type=Path)
    args = parser.parse_args()
    table: dict[tuple[str, str], list[float]] = {}
    for episode in args.episodes:
        for camera in RecordedEpisode.load(episode / "sim").cameras:
            figures = view_figures(episode, camera)
            print(f"{episode.name} {camera}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items() if v is not None))
            for name, value in figures.items():
                if value is not None:
                    table.setdefault(("head" if camera == "head" else "wrists", name), []).append(value)
    for (views, name), values in sorted(table.items()):
        print(f"{views:6s} {name:14s} {min(values):.2f}-{max(values):.2f} over {len(values)} views")


if __name__ == "__main__":
    main()
