import numpy as np
import pandas as pd
import pytest

from datafarm.calibration import CalibrationError, load_calibration
from datafarm.media import write_video
from datafarm.sim.spaces import AXIS_NAMES

BACKGROUND = (90, 120, 150)
FRAMES = 10


def _moving_block_frames(count=FRAMES, height=48, width=64):
    """A static background with a bright block sliding across it (like an arm crossing a static view)."""
    frames = np.zeros((count, height, width, 3), np.uint8) + np.array(BACKGROUND, np.uint8)
    for t in range(count):
        frames[t, 16:32, 4 * t: 4 * t + 12] = 250
    return frames


def _state(count=FRAMES):
    return np.linspace(0, 1, count)[:, None] + np.arange(14)[None, :] * 0.1


def _folder(tmp_path, names=("head.mp4", "left_wrist.mp4", "right_wrist.mp4"), counts=(FRAMES,) * 3,
            joints="csv", state=None):
    folder = tmp_path / "calib"
    folder.mkdir()
    for name, count in zip(names, counts):
        write_video(folder / name, _moving_block_frames(count), fps=30)
    state = _state() if state is None else state
    if joints == "csv":
        pd.DataFrame(state, columns=list(AXIS_NAMES)[: state.shape[1]]).to_csv(folder / "joints.csv", index=False)
    elif joints == "parquet":
        pd.DataFrame(state, columns=list(AXIS_NAMES)).to_parquet(folder / "joints.parquet")
    return folder


def test_a_folder_of_three_videos_and_joints_loads(tmp_path):
    episode = load_calibration(_folder(tmp_path))
    assert episode.fps == pytest.approx(30) and episode.num_frames == FRAMES and not episode.synthetic
    assert set(episode.frames) == {"head", "left_wrist", "right_wrist"}
    assert episode.frames["head"].shape == (FRAMES, 48, 64, 3) and episode.frames["head"].dtype == np.uint8
    np.testing.assert_allclose(episode.state, _state(), atol=1e-9)
    keyframes = episode.keyframes(3)
    assert episode.keyframe_indices(3) == [0, 4, 9]
    assert [len(v) for v in keyframes.values()] == [3, 3, 3]
    np.testing.assert_array_equal(keyframes["left_wrist"][-1], episode.frames["left_wrist"][-1])


def test_the_background_plate_removes_what_moves(tmp_path):
    episode = load_calibration(_folder(tmp_path))
    plate = episode.background_plate("head")
    assert plate.shape == (48, 64, 3) and plate.dtype == np.uint8
    # every pixel is covered by the block in at most 3 of 10 frames: the median is the background
    assert np.abs(plate.astype(int) - np.array(BACKGROUND)).max() < 12
    assert episode.frames["head"][0].max() > 200  # the block is in the frames themselves
    with pytest.raises(KeyError, match="no camera"):
        episode.background_plate("top")


def test_lerobot_camera_file_names_unnamed_columns_and_parquet_are_accepted(tmp_path):
    names = ("cam_high.mp4", "cam_left_wrist.mp4", "cam_right_wrist.mp4")
    folder = _folder(tmp_path, names=names, joints=None)
    table = pd.DataFrame(_state(), columns=[f"q{i}" for i in range(14)])
    table.insert(0, "timestamp", np.arange(FRAMES) / 30)
    table.to_csv(folder / "joints.csv", index=False)
    np.testing.assert_allclose(load_calibration(folder).state, _state(), atol=1e-9)
    (folder / "joints.csv").unlink()
    pd.DataFrame({"observation.state": list(_state())}).to_parquet(folder / "joints.parquet")
    np.testing.assert_allclose(load_calibration(folder).state, _state(), atol=1e-9)


@pytest.mark.parametrize("case, message", [
    ("missing_camera", r"camera 'right_wrist' is missing; expected right_wrist.mp4 or cam_right_wrist.mp4"),
    ("unequal_frames", r"unequal frame counts \{'head': 10, 'left_wrist': 8, 'right_wrist': 10\}"),
    ("corrupt_video", r"left_wrist.mp4 is unreadable or corrupt"),
    ("wrong_width", r"joints.csv has 13 joint columns .* expected 14"),
    ("rows_not_frames", r"the joint state has 7 rows but the videos have 10 frames"),
    ("no_joints", r"joint states are missing; expected joints.csv"),
    ("not_numbers", r"joints.csv: a joint column holds a non-number"),
    ("two_names", r"both head.mp4 and cam_high.mp4 exist"),
])
def test_bad_folders_are_refused_with_the_file_and_the_fix(tmp_path, case, message):
    if case == "missing_camera":
        folder = _folder(tmp_path, names=("head.mp4", "left_wrist.mp4"))
    elif case == "unequal_frames":
        folder = _folder(tmp_path, counts=(FRAMES, 8, FRAMES))
    elif case == "corrupt_video":
        folder = _folder(tmp_path)
        (folder / "left_wrist.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"not a video" * 50)
    elif case == "wrong_width":
        folder = _folder(tmp_path, state=_state()[:, :13])
    elif case == "rows_not_frames":
        folder = _folder(tmp_path, state=_state(7))
    elif case == "no_joints":
        folder = _folder(tmp_path, joints=None)
    elif case == "not_numbers":
        folder = _folder(tmp_path)
        text = (folder / "joints.csv").read_text().splitlines()
        text[3] = "oops" + text[3][text[3].index(","):]
        (folder / "joints.csv").write_text("\n".join(text))
    else:
        folder = _folder(tmp_path)
        write_video(folder / "cam_high.mp4", _moving_block_frames(), fps=30)
    with pytest.raises(CalibrationError, match=message):
        load_calibration(folder)


def test_a_missing_path_or_a_file_is_refused(tmp_path):
    with pytest.raises(CalibrationError, match="does not exist"):
        load_calibration(tmp_path / "nowhere")
    (tmp_path / "clip.mp4").write_bytes(b"")
    with pytest.raises(CalibrationError, match="is a file; pass the folder"):
        load_calibration(tmp_path / "clip.mp4")
