"""wan-vace conditioning without the model: canvas layout, control video, masks, references, chunk plans."""

import json

import numpy as np
import pytest

from datafarm.errors import Unavailable
from datafarm.farm.settings import SettingsError, load_settings
from datafarm.render import RenderError, RendererUnavailable, get_renderer
from datafarm.render.contract import RenderContract
from datafarm.render.registry import UnknownRenderOption, check_renderer_available
from datafarm.render.wan_control import (CanvasLayout, Chunk, Conditioning, build_conditioning, chunk_inputs,
                                         plan_chunks)
from datafarm.render.wan_vace import GenerationRequest, WanVaceRenderer
from wan_synthetic import CAMERAS, HEIGHT, WIDTH, references, robot_box, write_episode

LAYOUT = CanvasLayout(CAMERAS, 16, 32, 2)


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    return write_episode(tmp_path_factory.mktemp("wan") / "episode")


@pytest.mark.parametrize("total, chunk, overlap", [(11, 9, 5), (9, 9, 4), (3, 9, 4), (200, 49, 9), (50, 49, 9)])
def test_chunks_cover_every_frame_in_4k_plus_1_windows_with_the_overlap_kept(total, chunk, overlap):
    chunks = plan_chunks(total, chunk, overlap)
    assert chunks[0].start == 0 and chunks[0].keep == 0 and chunks[-1].stop == total
    for before, after in zip(chunks, chunks[1:]):
        assert after.start == before.stop - overlap and after.keep == overlap
    for c in chunks:
        assert c.window % 4 == 1 and c.stop - c.start <= c.window <= chunk and c.window - (c.stop - c.start) < 4
    assert len(plan_chunks(total, chunk, overlap)) == (1 if total <= chunk else len(chunks))  # deterministic


@pytest.mark.parametrize("chunk, overlap", [(8, 2), (10, 3), (9, 0), (9, 8)])
def test_chunk_plans_refuse_frame_counts_not_4k_plus_1_and_bad_overlaps(chunk, overlap):
    with pytest.raises(RenderError, match="4k\\+1|overlap"):
        plan_chunks(20, chunk, overlap)


def test_canvas_tiles_and_untiles_views_and_refuses_sizes_off_the_16_grid():
    views = {camera: np.full((2, 16, 32, 3), i + 1, np.uint8) for i, camera in enumerate(CAMERAS)}
    canvas = LAYOUT.tile(views)
    assert canvas.shape == (2, 32, 64, 3) and (LAYOUT.height, LAYOUT.width) == (32, 64)
    assert (canvas[:, 16:, 32:] == 0).all()  # the empty fourth cell
    assert all((LAYOUT.untile(canvas)[c] == views[c]).all() for c in CAMERAS)
    masks = LAYOUT.tile({camera: np.full((2, 16, 32), 255, np.uint8) for camera in CAMERAS})
    assert masks.shape == (2, 32, 64) and masks[:, 16:, 32:].max() == 0 and masks[:, :16].min() == 255
    with pytest.raises(RenderError, match="multiples of 16"):
        CanvasLayout(CAMERAS, 20, 32, 2)


def test_conditioning_follows_the_sim_and_the_contract(episode):
    refs = references()
    depth = build_conditioning(episode, refs, RenderContract(), LAYOUT)
    assert depth.control.shape == (11, 32, 64, 3) and depth.mask.shape == (11, 32, 64)
    assert depth.mask[:, :16].min() == 255 and depth.mask[:, 16:, 32:].max() == 0
    head = LAYOUT.untile(depth.control)["head"][0, :, :, 0]  # the sim's 32 x 48 view in a 16 x 32 cell
    assert head[4, 5] > head[7, 30] > head[15, 30] > 0  # the arm nearest, then the near table rows, brighter
    assert head[0, 30] == 0  # no depth (background): black
    edges = build_conditioning(episode, refs, RenderContract(control="edges"), LAYOUT)
    lines = edges.control[:, :16, :32, 0] > 64
    assert 0.05 < lines.mean() < 0.6 and not np.array_equal(edges.control, depth.control)  # lines, not areas
    # robot "keep": the arm's pixels are kept (mask 0) and carry the sim render; "generate" keeps none
    keep = build_conditioning(episode, refs, RenderContract(robot="keep"), LAYOUT)
    kept = keep.mask[:, :16, :32] == 0
    assert kept.any() and kept.mean() < 0.5
    moved = [np.argwhere(kept[t]).mean(axis=0)[1] for t in (0, 10)]
    assert moved[1] > moved[0]  # the kept region follows the arm
    assert np.median(keep.control[:, :16, :32][kept]) < 70  # the sim's dark arm colour (not its depth, bright)
    # the reference: each camera's chosen calibration frame in its own cell
    second = build_conditioning(episode, refs, RenderContract(reference_frame=1), LAYOUT)
    assert not np.array_equal(second.reference, depth.reference)
    assert depth.reference.shape == (32, 64, 3)


def test_a_chunk_after_the_first_starts_from_the_frames_already_generated(episode):
    conditioning = build_conditioning(episode, references(), RenderContract(), LAYOUT)
    generated = np.random.default_rng(0).integers(0, 255, conditioning.control.shape, dtype=np.uint8)
    first, second = plan_chunks(11, 9, 5)
    control, mask = chunk_inputs(conditioning, generated, second)
    assert control.shape == (9, 32, 64, 3) and mask.shape == (9, 32, 64)  # 7 frames padded to 9
    assert np.array_equal(control[:5], generated[4:9]) and mask[:5].max() == 0
    assert np.array_equal(control[5:7], conditioning.control[9:11]) and np.array_equal(control[8], control[6])
    control, mask = chunk_inputs(conditioning, generated, first)
    assert np.array_equal(control, conditioning.control[:9]) and np.array_equal(mask, conditioning.mask[:9])


def test_requests_round_trip_and_malformed_ones_are_a_render_error(episode):
    conditioning = build_conditioning(episode, references(), RenderContract(), LAYOUT)
    request = GenerationRequest(conditioning, "a robot", "blurry", 5, 0.7)
    back = GenerationRequest.from_bytes(request.to_bytes())
    assert np.array_equal(back.conditioning.control, conditioning.control) and back.seed == 5
    assert (back.prompt, back.negative_prompt, back.control_weight) == ("a robot", "blurry", 0.7)
    with pytest.raises(RenderError, match="malformed render request"):
        GenerationRequest.from_bytes(b"not an npz")
    with pytest.raises(RenderError, match="shapes disagree"):
        Conditioning(conditioning.control, conditioning.mask[:, :16], conditioning.reference)


def test_the_contract_drives_seed_and_prompt_and_older_contracts_load():
    old = RenderContract.model_validate({"renderer": "composite", "cameras": list(CAMERAS), "fps": 30,
                                         "prompts": {"head": "a table"}, "appearance": []})
    assert old.control == "depth" and old.canvas_prompt() == "[head] a table"
    assert old.episode_seed(3) != old.episode_seed(4) != RenderContract(seed=1).episode_seed(3)


def test_wan_vace_is_refused_at_prepare_without_weights_or_a_worker(tmp_path):
    with pytest.raises(RendererUnavailable, match="render_model .* or render_worker"):
        check_renderer_available("wan-vace")
    (tmp_path / "empty").mkdir()
    with pytest.raises(Unavailable, match="missing: model_index.json, transformer"):
        check_renderer_available("wan-vace", model=str(tmp_path / "empty"))
    with pytest.raises(Unavailable, match="http"):
        check_renderer_available("wan-vace", worker="gpu-node:8700")
    check_renderer_available("wan-vace", worker="http://gpu-node:8700")  # control: a URL is enough to prepare
    check_renderer_available("composite")
    assert isinstance(get_renderer("wan-vace", worker="http://gpu-node:8700"), WanVaceRenderer)
    with pytest.raises(SettingsError, match="render_model / render_worker are wan-vace settings"):
        load_settings({"target_count": 1, "renderer": "composite", "render_model": str(tmp_path)})
    settings = load_settings({"target_count": 1, "renderer": "wan-vace", "render_worker": "http://x:1",
                              "render_options": {"steps": 8}})
    assert settings.renderer_options() == {"worker": "http://x:1", "steps": 8}
    # renderer options: checked against the chosen renderer's own, and their values against their ranges
    with pytest.raises(UnknownRenderOption, match=r"no option\(s\) \['colour'\].*cell_height"):
        check_renderer_available("wan-vace", worker="http://x:1", colour=2)
    with pytest.raises(UnknownRenderOption, match="steps"):
        check_renderer_available("composite", steps=2)
    with pytest.raises(RenderError, match="4k\\+1"):
        check_renderer_available("wan-vace", worker="http://x:1", chunk_frames=32)
    with pytest.raises(RenderError, match="multiples of 16"):
        check_renderer_available("wan-vace", worker="http://x:1", cell_height=100)
    check_renderer_available("composite", crf=20)


def test_sizes_of_the_synthetic_episode_are_what_the_tests_assume(episode):
    assert episode.meta["cameras"]["head"]["width"] == WIDTH and episode.meta["cameras"]["head"]["height"] == HEIGHT
    assert robot_box(0) != robot_box(5) and Chunk(0, 9, 0, 9).window == 9


def test_doctor_reports_the_configured_wan_vace_folder(tmp_path, monkeypatch):
    from datafarm.doctor import check_gpu, check_render_weights

    monkeypatch.delenv("DATAFARM_RENDER_MODEL", raising=False)
    unset = check_render_weights(tmp_path)
    assert not unset.ok and unset.optional and "DATAFARM_RENDER_MODEL" in unset.fix
    folder = tmp_path / "wan"
    monkeypatch.setenv("DATAFARM_RENDER_MODEL", str(folder))
    missing = check_render_weights(tmp_path)
    assert not missing.ok and not missing.optional  # configured but absent: a failure, not an option
    for part in ("transformer", "vae", "text_encoder", "tokenizer", "scheduler"):
        (folder / part).mkdir(parents=True)
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline"}))
    assert "WanVACEPipeline" in check_render_weights(tmp_path).detail  # the wrong pipeline
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "WanVACEPipeline"}))
    assert check_render_weights(tmp_path).ok
    gpu = check_gpu()
    assert gpu.optional and (gpu.ok or "no CUDA GPU" in gpu.detail)
