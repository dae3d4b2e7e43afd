"""The order of a pipelined round (datafarm.farm.collect): each episode's review runs while the next
episode renders, and the round ends only when every review has finished.

The steps here do what the farm's steps leave on disk (a staged seed, three videos, a review.json), so
the scheduler that reads the workspace's records is the one under test."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from datafarm.cameras import CAMERAS
from datafarm.farm import episodes
from datafarm.farm.collect import EpisodeSteps, Finished, collect_episodes
from datafarm.workspace import Workspace

TARGET = 3


def test_a_review_runs_while_the_next_episode_renders(tmp_path):
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": TARGET}})
    rendering = {index: threading.Event() for index in range(TARGET + 1)}
    saw_next_render: dict[int, bool] = {}
    events: list[str] = []

    def rollout(seed: int, slot: int) -> Finished:
        workspace.write_json(f"{episodes.STAGING}/{seed}/result.json", {"seed": seed})
        workspace.write_json(f"{episodes.STAGING}/{seed}/sim/episode.json", {"fps": 30})
        return Finished(episodes.Staged(seed, True, "judge passed"))

    def render(index: int) -> Finished:
        events.append(f"render {index}")
        rendering[index].set()
        for camera in CAMERAS:
            path = episodes.rendered_videos(workspace, index)[camera]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"video")
        return Finished(None)

    def review(index: int):
        def run() -> dict:
            # the last episode has no next render: it must not wait for one
            saw_next_render[index] = index == TARGET - 1 or rendering[index + 1].wait(timeout=10)
            time.sleep(0.05)
            workspace.write_json(f"{episodes.episode_dir(index)}/review.json", {"admitted": True})
            events.append(f"reviewed {index}")
            return {"admitted": True}
        return pool.submit(run)

    with ThreadPoolExecutor(max_workers=1) as pool:
        report = collect_episodes(workspace, EpisodeSteps(rollout=rollout, render=render, review=review))

    assert saw_next_render == {0: True, 1: True, 2: True}, events
    assert events.index("render 1") < events.index("reviewed 0")
    assert report["rendered"] == TARGET and report["reviewed"] == TARGET  # every review waited for
    assert all(workspace.path(episodes.episode_dir(i), "review.json").exists() for i in range(TARGET))
