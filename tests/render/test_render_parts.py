"""Fast tests of the render pieces: colour transfer, textures, appearance, registry, reference checks."""

import numpy as np
import pytest

from datafarm.render import (RENDERERS, PROCEDURAL_KINDS, RenderError, RendererUnavailable, TexturePool,
                             check_references, crop_table_textures, get_renderer, procedural_texture,
                             sample_appearance)
from datafarm.render.color import (ColorTransfer, apply_matrix, linear_to_lab, linear_to_srgb, srgb_to_linear)
from datafarm.render.composite import CompositeRenderer, fit_to_view
from datafarm.render.textures import mirror_tile


def test_srgb_round_trip_is_exact_enough():
    values = np.arange(256, dtype=np.uint8).reshape(16, 16)[..., None].repeat(3, axis=2)
    assert np.abs(linear_to_srgb(srgb_to_linear(values)).astype(int) - values).max() <= 1


def test_apply_matrix_matches_matmul():
    rng = np.random.default_rng(0)
    pixels, matrix = rng.random((7, 5, 3), dtype=np.float32), rng.random((3, 3))
    assert np.allclose(apply_matrix(pixels, matrix), pixels @ matrix.T, atol=1e-5)


def test_color_transfer_matches_target_statistics():
    rng = np.random.default_rng(1)
    source = rng.uniform(0.05, 0.4, (5000, 3)).astype(np.float32)
    target = (rng.uniform(0.2, 0.9, (5000, 3)) * [1.0, 0.8, 0.6]).astype(np.float32)
    transfer = ColorTransfer.fit(source, target)
    moved = linear_to_lab(transfer.apply(source))
    wanted = linear_to_lab(target)
    assert np.allclose(moved.mean(axis=0), wanted.mean(axis=0), atol=0.02)
    assert np.allclose(moved.std(axis=0), wanted.std(axis=0), rtol=0.05)
    assert np.allclose(ColorTransfer.identity().apply(source), source, atol=1e-5)
    with pytest.raises(ValueError, match="strength"):
        ColorTransfer.fit(source, target, strength=2.0)


@pytest.mark.parametrize("kind", PROCEDURAL_KINDS)
def test_procedural_textures_tile_and_vary(kind):
    image, params = procedural_texture(kind, np.random.default_rng(3))
    assert image.shape == (128, 128, 3) and image.dtype == np.uint8 and params["kind"] == kind
    assert image.std() > 3  # not a flat colour
    # Periodic: the seam between a tile's last and first column is no stronger than an interior step.
    seam = np.abs(image[:, -1].astype(int) - image[:, 0]).mean()
    interior = np.abs(np.diff(image.astype(int), axis=1)).mean(axis=(0, 2)).max()
    assert seam <= interior + 1


def test_real_crops_are_seamless_and_from_the_table_box():
    frame = np.random.default_rng(0).integers(0, 255, (368, 640, 3), dtype=np.uint8)
    textures = crop_table_textures([frame, frame], per_frame=2)
    assert len(textures) == 4 and all(t.image.shape == (128, 128, 3) for t in textures)
    tile = mirror_tile(frame[:64, :64])
    assert np.array_equal(tile[:, 0], tile[:, -1]) and np.array_equal(tile[0], tile[-1])
    with pytest.raises(ValueError, match="does not fit"):
        crop_table_textures([frame[:100, :100]])


def test_sample_appearance_is_seeded_and_recorded():
    pool = TexturePool(real=crop_table_textures([np.full((368, 640, 3), 128, np.uint8)]))
    first, again, other = sample_appearance(7, pool), sample_appearance(7, pool), sample_appearance(8, pool)
    assert first.to_dict() == again.to_dict() and np.array_equal(first.texture, again.texture)
    assert first.to_dict() != other.to_dict()
    record = first.to_dict()
    assert set(record) == {"seed", "texture", "light", "background"}
    assert np.isclose(np.mean(record["light"]["tint"]), 1.0, atol=1e-3)
    sources = {sample_appearance(seed, pool).texture_source for seed in range(40)}
    assert sources == {"real", "procedural"}
    with pytest.raises(ValueError, match="unknown procedural"):
        TexturePool(procedural=("plaid",))


def test_registry_knows_composite_and_refuses_the_rest_clearly():
    assert set(RENDERERS) == {"composite", "wan-vace"}
    assert isinstance(get_renderer("composite", crf=20), CompositeRenderer)
    with pytest.raises(RendererUnavailable, match="render_model .* or render_worker"):
        get_renderer("wan-vace").backend()  # constructing it does nothing; using it without weights or worker fails
    with pytest.raises(ValueError, match="known renderers: composite, wan-vace"):
        get_renderer("pix2pix")


class _FakeEpisode:
    cameras = ["head", "left_wrist", "right_wrist"]


def test_check_references_names_what_is_missing_or_malformed():
    frame = np.zeros((48, 64, 3), np.uint8)
    check_references(_FakeEpisode(), {c: [frame] for c in _FakeEpisode.cameras})
    with pytest.raises(RenderError, match="right_wrist"):
        check_references(_FakeEpisode(), {"head": [frame], "left_wrist": [frame]})
    with pytest.raises(RenderError, match=r"head\[0\]"):
        check_references(_FakeEpisode(), {c: [frame.astype(float)] for c in _FakeEpisode.cameras})


def test_fit_to_view_crops_to_aspect():
    wide = np.zeros((368, 640, 3), np.uint8)
    wide[:, 300:340] = 255  # a centred stripe stays centred
    fitted = fit_to_view(wide, 320, 240)
    assert fitted.shape == (240, 320, 3)
    assert fitted[:, 160].mean() > 200 and fitted[:, 10].mean() < 10


def test_camera_arrays_read_the_first_frames_alone(tmp_path):
    """`first` inflates only the leading frames of each member, and they equal the full read's."""
    from datafarm.render.views import load_camera_arrays
    from datafarm.sim.recorder import RecordedEpisode, save_npz

    rng = np.random.default_rng(3)
    arrays = {"depth_mm": rng.integers(0, 4000, (9, 6, 8), dtype=np.uint16),
              "segmentation": rng.integers(0, 30, (9, 6, 8), dtype=np.uint16),
              "extrinsics_cv": rng.random((9, 4, 4))}
    (tmp_path / "cameras" / "head").mkdir(parents=True)
    save_npz(tmp_path / "cameras" / "head" / "frames.npz", arrays)
    episode = RecordedEpisode(tmp_path, {"depth_scale": 1000.0, "cameras": {"head": {}}})
    full = load_camera_arrays(episode, "head", depth=True)
    assert np.array_equal(full["depth_m"], arrays["depth_mm"] / np.float32(1000.0))
    for first in (1, 4, 9, 50):
        part = load_camera_arrays(episode, "head", depth=True, first=first)
        assert set(part) == set(full)
        for name, array in part.items():
            assert np.array_equal(array, full[name][:first]), (name, first)
    depth_only = load_camera_arrays(episode, "head", depth=True, segmentation=False, first=2)
    assert set(depth_only) == {"extrinsics_cv", "depth_m"}
