"""The wan-vace renderer end to end on a tiny randomly initialised Wan VACE pipeline (real diffusers code, real
from_pretrained from a folder), embedded and through a render worker served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from datafarm.errors import is_transient
from datafarm.media import probe, read_video
from datafarm.render.appearance import sample_appearance
from datafarm.render.base import RenderError
from datafarm.render.contract import RenderContract
from datafarm.render.render_worker import (RenderWorkerBusy, RenderWorkerUnreachable, RequestTooLarge, create_app,
                                           post_render)
from datafarm.render.wan_control import plan_chunks
from datafarm.render.wan_models import TINY, build_random_pipeline, load_pipeline
from datafarm.render.wan_vace import WanVaceRenderer, generate
from wan_synthetic import CAMERAS, FPS, HEIGHT, WIDTH, references, write_episode

pytestmark = pytest.mark.slow  # a few seconds each on two busy cores (the tiny VAE dominates)
TINY_SETTINGS = {"cell_height": 16, "cell_width": 32, "columns": 2, "chunk_frames": 9, "overlap_frames": 5,
                 "steps": 2, "guidance_scale": 1.0}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wan-vace-tiny")
    build_random_pipeline(TINY).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    return write_episode(tmp_path_factory.mktemp("wan-episode") / "sim")


@pytest.fixture(scope="module")
def pipeline(model_dir):
    return load_pipeline(model_dir, "cpu")


def test_embedded_render_writes_every_view_at_the_sim_size_and_frame_count(model_dir, episode, tmp_path):
    renderer = WanVaceRenderer(model=model_dir, **TINY_SETTINGS)
    paths = renderer.render(episode, references(), sample_appearance(3), tmp_path / "out", contract=RenderContract())
    assert set(paths) == set(CAMERAS) and not list((tmp_path / "out").glob("*.partial.mp4"))
    for path in paths.values():
        info = probe(path)
        assert (info.width, info.height) == (WIDTH, HEIGHT)
        assert len(read_video(path)) == 11 and round(info.fps) == FPS
    assert renderer.last_timing["frames"] == 11 and renderer.last_timing["seconds_per_frame"] > 0
    chunks = plan_chunks(11, renderer.settings.chunk_frames, renderer.settings.overlap_frames)
    generation = json.loads((tmp_path / "out" / "generation.json").read_text())  # the review's seam check reads it
    assert len(chunks) > 1 and generation == {"renderer": "wan-vace", "seams": [c.start + c.keep for c in chunks[1:]]}
    # negative control: a contract naming a camera the episode lacks is refused, nothing written
    with pytest.raises(RenderError, match="top_camera"):
        renderer.render(episode, references(), sample_appearance(3), tmp_path / "bad",
                        contract=RenderContract(cameras=["head", "top_camera"]))
    assert not (tmp_path / "bad").exists()


def test_seed_and_prompt_of_the_contract_drive_the_output_and_chunks_continue_the_kept_frames(pipeline, episode):
    renderer = WanVaceRenderer(model="unused", **TINY_SETTINGS)
    request, _ = renderer.request(episode, references(), sample_appearance(3), RenderContract(seed=1))
    short = replace(request, conditioning=replace(request.conditioning, control=request.conditioning.control[:9],
                                                  mask=request.conditioning.mask[:9]))
    first = generate(pipeline, short)
    assert first.shape == (9, 32, 64, 3) and first.dtype == np.uint8
    other_seed, _ = renderer.request(episode, references(), sample_appearance(3), RenderContract(seed=2))
    assert other_seed.seed != request.seed
    assert not np.array_equal(generate(pipeline, replace(short, seed=other_seed.seed)), first)
    assert not np.array_equal(generate(pipeline, replace(short, prompt="w5 w6 w7")), first)
    # the whole 11 frames are two chunks ([0, 9) then [4, 11) starting from frames 4-8 kept): the first chunk is
    # the 9-frame video above (same seed, same inputs: the same frames), and the second did not overwrite
    # the frames it was given as kept
    whole = generate(pipeline, request)
    assert whole.shape == (11, 32, 64, 3)
    assert np.array_equal(whole[:9], first)
    assert not np.array_equal(whole[9:], whole[4:6])  # the second chunk made new frames after the kept ones


# ----- the render worker -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


@pytest.fixture(scope="module")
def worker(model_dir):
    import httpx
    import uvicorn

    app = create_app(lambda: load_pipeline(model_dir, "cpu"), max_request_bytes=8 << 20)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/ready").status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    else:
        raise AssertionError("the render worker did not become ready in 60 s")
    yield url, app.state.worker
    server.should_exit = True
    thread.join(10)


def _workspace_with_one_episode(tmp_path: Path, episode, settings: dict):
    from datafarm.farm.episodes import episode_dir
    from datafarm.farm.prepare import save_png
    from datafarm.workspace import Workspace

    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1, **settings}})
    shutil.copytree(episode.directory, workspace.path(episode_dir(0), "sim"))
    workspace.write_json(f"{episode_dir(0)}/result.json", {"seed": 4})
    workspace.path("calibration").mkdir()
    workspace.write_json("render_contract.json", RenderContract(cameras=list(CAMERAS), seed=9).model_dump())
    for camera, frames in references().items():
        save_png(workspace, f"keyframes/{camera}_plate.png", frames[0])
        save_png(workspace, f"keyframes/{camera}_0.png", frames[1])
    return workspace


def test_the_farm_render_step_sends_an_episode_to_the_worker_and_gets_its_videos(worker, episode, tmp_path):
    import httpx

    from datafarm.farm import collect
    from datafarm.farm.prepare import check_ready

    url, state = worker
    assert httpx.get(url + "/health").json()["alive"] is True
    served = state.counts["served"]
    workspace = _workspace_with_one_episode(tmp_path, episode, {"renderer": "wan-vace", "render_worker": url,
                                                                "render_options": TINY_SETTINGS})
    check_ready(workspace)  # what `datafarm farm` checks first: the renderer and its options
    videos = collect.render_one(workspace, 0)
    assert state.counts["served"] == served + 1
    assert all(path.exists() and len(read_video(path)) == 11 for path in videos.values())
    assert json.loads(workspace.path("episodes/000000/render/appearance.json").read_text())["seed"] == 4


def test_the_worker_refuses_a_request_over_its_size_limit_without_retrying(worker, episode):
    url, state = worker
    renderer = WanVaceRenderer(worker=url, **TINY_SETTINGS)
    body = renderer.request(episode, references(), sample_appearance(3), RenderContract())[0].to_bytes()
    before = state.counts["too_large"]
    limit, state.max_request_bytes = state.max_request_bytes, len(body) - 1
    try:
        with pytest.raises(RequestTooLarge, match="--max-request-mb") as caught:
            post_render(url, body, retries=3, retry_delay_s=0.01)
    finally:
        state.max_request_bytes = limit
    assert not is_transient(caught.value) and state.counts["too_large"] == before + 1


def test_a_busy_worker_is_retried_and_a_malformed_request_is_not(worker, episode):
    url, state = worker
    renderer = WanVaceRenderer(worker=url, **TINY_SETTINGS)
    body = renderer.request(episode, references(), sample_appearance(3), RenderContract())[0].to_bytes()
    busy, served = state.counts["busy"], state.counts["served"]
    state.gpu.acquire()  # another episode is on the GPU
    threading.Timer(1.5, state.gpu.release).start()
    frames = post_render(url, body, retries=10, retry_delay_s=0.5)
    assert frames.shape == (11, 32, 64, 3)
    assert state.counts["busy"] >= busy + 1 and state.counts["served"] == served + 1  # refused, retried, served
    # permanent: a malformed request is answered 422 once, however many retries are allowed
    bad = state.counts["bad_request"]
    with pytest.raises(RenderError, match="422.*malformed") as caught:
        post_render(url, b"not a request", retries=3, retry_delay_s=0.01)
    assert not is_transient(caught.value) and state.counts["bad_request"] == bad + 1
    # still busy after the retries: transient, left to the task's retries
    state.gpu.acquire()
    try:
        with pytest.raises(RenderWorkerBusy) as caught:
            post_render(url, body, retries=1, retry_delay_s=0.01)
    finally:
        state.gpu.release()
    assert is_transient(caught.value)


def test_an_unreachable_worker_is_a_transient_failure_naming_the_fix():
    with pytest.raises(RenderWorkerUnreachable, match="datafarm render-worker") as caught:
        post_render(f"http://127.0.0.1:{_free_port()}", b"x", retries=1, retry_delay_s=0.01)
    assert is_transient(caught.value)


def test_the_render_worker_command_serves_the_model_folder(model_dir):
    import subprocess
    import sys

    import httpx

    port = _free_port()
    command = [str(Path(sys.executable).with_name("datafarm")), "render-worker", "--model", str(model_dir),
               "--port", str(port), "--device", "cpu"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline, ready = time.monotonic() + 120, None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/ready")
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        assert ready is not None and ready.status_code == 200, process.stderr.read() if process.poll() else ""
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        assert health["ready"] and not health["busy"] and health["served"] == 0
    finally:
        process.terminate()
        process.wait(20)


@pytest.mark.gpu
def test_real_weights_render_one_episode_at_480p(tmp_path):
    """Needs a CUDA GPU and DATAFARM_RENDER_MODEL pointing at Wan2.1-VACE-1.3B in diffusers' layout."""
    import torch

    folder = os.environ.get("DATAFARM_RENDER_MODEL")
    if not torch.cuda.is_available() or not folder:
        pytest.skip("needs a CUDA GPU and DATAFARM_RENDER_MODEL")
    episode = write_episode(tmp_path / "sim", frames=17)
    renderer = WanVaceRenderer(model=folder, cell_height=240, cell_width=320, chunk_frames=17, overlap_frames=5,
                               steps=10)
    paths = renderer.render(episode, references(), sample_appearance(0), tmp_path / "out", RenderContract())
    assert all(len(read_video(p)) == 17 for p in paths.values())
    frame = read_video(paths["head"])[8]
    assert frame.std() > 5  # not a blank image
    Image.fromarray(frame).save(tmp_path / "head.png")
