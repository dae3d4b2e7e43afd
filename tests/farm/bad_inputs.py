"""A corpus of malformed inputs, built on the fly, and the one way each is judged.

Shared by `tests/farm/test_bad_inputs.py` and `benchmarks/reliability.py`. Every case builds its bad
calibration, request, setting, bindings file or workspace in a folder of its own, runs the real
`datafarm` command line in a subprocess and is judged by `run_case`:

- the exit code is the documented one (datafarm/errors.py: 2 bad input, 1 a check failed, ...);
- no Python traceback is printed, and the output is short (one message, not a wall of text);
- the output names the problem and the fix (a few words of each, case-insensitive);
- nothing already done is lost: the folders the case names are byte-identical afterwards, and a
  refused `prepare` creates no workspace.

Nothing binary is committed: videos, joint tables and workspaces are made here from numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
from local_s3 import S3_BUCKET, local_s3

REPO = Path(__file__).resolve().parents[2]
FRAMES = 12
FPS = 30
SIZE = (48, 64)  # height, width: small, even (H.264)
REQUEST = "Put the apple on the scale."
MAX_OUTPUT_LINES = 15  # "one clear message": a refusal that needs more lines buries its point
TRACEBACK = "Traceback (most recent call last)"
QUIET_ENV = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
             "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "COLUMNS": "400", "NO_COLOR": "1",
             # Prefect's embedded server gets 20 s to start; on a loaded 2-core machine that is too short
             # and `datafarm farm` fails before any phase (see the reliability report).
             "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}

# Exit codes documented in datafarm/errors.py.
BAD_INPUT, CHECK_FAILED, REFUSED, UNAVAILABLE = 2, 1, 3, 5

Words = tuple[str | tuple[str, ...], ...]  # every item must appear; a tuple item: any one of its alternatives


# ----- the command line ------------------------------------------------------------------------------------
@cache
def datafarm_command() -> tuple[str, ...]:
    """The installed `datafarm` script next to this Python; `python -m cli.main` if the install is stale."""
    script = Path(sys.executable).parent / "datafarm"
    if script.exists():
        probe = subprocess.run([str(script), "--help"], capture_output=True, env=command_env(), timeout=120)
        if probe.returncode == 0:
            return (str(script),)
    return (sys.executable, "-m", "cli.main")


def command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a case runs in: ours, without any DATAFARM_* setting leaking in from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATAFARM_")}
    env.update(QUIET_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.update(extra or {})
    return env


def run_datafarm(args: list[str], cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None,
                 timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*datafarm_command(), *args], cwd=cwd, input=stdin, capture_output=True,
                          env=command_env(env), timeout=timeout)


# ----- building valid inputs (each case breaks one thing) ----------------------------------------------------
def moving_block_frames(count: int = FRAMES, size: tuple[int, int] = SIZE) -> np.ndarray:
    """A static background with a bright block sliding across it, like an arm crossing a static view."""
    height, width = size
    frames = np.zeros((count, height, width, 3), np.uint8) + np.array((90, 120, 150), np.uint8)
    for t in range(count):
        x = (4 * t) % (width - 12)
        frames[t, 16:32, x: x + 12] = 250
    return frames


def joint_rows(count: int = FRAMES) -> np.ndarray:
    """(count, 14) joint states near the rest pose: joints in rad, gripper openings in m."""
    from datafarm.sim.spaces import AXIS_NAMES

    t = np.linspace(0, 1, count)[:, None]
    state = 0.2 * np.sin(2 * np.pi * t + np.arange(len(AXIS_NAMES))[None, :])
    grippers = [i for i, name in enumerate(AXIS_NAMES) if name.endswith("gripper")]
    state[:, grippers] = 0.02 + 0.01 * t
    return state


def write_joints(path: Path, state: np.ndarray) -> Path:
    from datafarm.sim.spaces import AXIS_NAMES

    header = ",".join(AXIS_NAMES[: state.shape[1]])
    rows = "\n".join(",".join(repr(float(v)) for v in row) for row in state)
    path.write_text(f"{header}\n{rows}\n")
    return path


def calibration_folder(folder: Path, frames: int = FRAMES) -> Path:
    """A valid calibration folder: head/left_wrist/right_wrist mp4s at 30 fps and joints.csv."""
    from datafarm.media import write_video

    folder.mkdir(parents=True, exist_ok=True)
    for camera in ("head", "left_wrist", "right_wrist"):
        write_video(folder / f"{camera}.mp4", moving_block_frames(frames), fps=FPS)
    write_joints(folder / "joints.csv", joint_rows(frames))
    return folder


# ----- the corpus ----------------------------------------------------------------------------------------------
@dataclass
class Invocation:
    args: list[str]
    cwd: Path
    stdin: bytes = b""
    env: dict[str, str] = field(default_factory=dict)
    unchanged: tuple[Path, ...] = ()  # byte-identical afterwards
    absent: tuple[Path, ...] = ()  # must not exist afterwards


class Ground:
    """The valid inputs the cases start from, built once under `root`: a calibration folder, a request
    file and a prepared workspace (made by the real `datafarm prepare`: the positive control)."""

    def __init__(self, root: Path, workspace_source: Path | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._workspace_source = workspace_source

    @property
    def calibration(self) -> Path:
        folder = self.root / "ground" / "calibration"
        if not (folder / "joints.csv").exists():
            calibration_folder(folder)
        return folder

    @property
    def request(self) -> Path:
        path = self.root / "ground" / "request.txt"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(REQUEST + "\n")
        return path

    def workspace_source(self) -> Path:
        """A workspace to copy: the one given (e.g. a farmed one), else one prepared here."""
        if self._workspace_source is not None:
            return self._workspace_source
        ws = self.root / "ground" / "ws"
        if not (ws / "workspace.json").exists():
            result = run_datafarm(self.prepare_args(output=ws, target_count="2"), cwd=self.root)
            if result.returncode != 0:
                raise RuntimeError(f"the valid inputs were refused (exit {result.returncode}):\n"
                                   f"{result.stdout.decode(errors='replace')}{result.stderr.decode(errors='replace')}")
        return ws

    def workspace(self, folder: Path) -> Path:
        """A private copy of the ground workspace for one case."""
        copy = folder / "ws"
        shutil.copytree(self.workspace_source(), copy, symlinks=True)
        return copy

    def prepare_args(self, episode: Path | None = None, request: Path | str | None = None,
                     output: Path | None = None, target_count: str = "2", extra: tuple[str, ...] = ()) -> list[str]:
        return ["prepare", "--episode", str(episode or self.calibration), "--request-file", str(request or self.request),
                "--target-count", target_count, "--output", str(output), *extra]

    def bad_calibration(self, folder: Path, damage: Callable[[Path], object]) -> Invocation:
        """`prepare` with a copy of the valid calibration after `damage(copy)`; no workspace may appear."""
        calib = folder / "calibration"
        shutil.copytree(self.calibration, calib)
        damage(calib)
        output = folder / "ws"
        return Invocation(self.prepare_args(episode=calib, output=output), folder, absent=(output,))

    def bad_request(self, folder: Path, content: bytes) -> Invocation:
        request = folder / "request.txt"
        request.write_bytes(content)
        output = folder / "ws"
        return Invocation(self.prepare_args(request=request, output=output), folder, absent=(output,))

    def bad_setting(self, folder: Path, target_count: str = "2", extra: tuple[str, ...] = ()) -> Invocation:
        output = folder / "ws"
        return Invocation(self.prepare_args(output=output, target_count=target_count, extra=extra), folder,
                          absent=(output,))

    def bad_bindings(self, folder: Path, bindings: object | bytes, env: dict[str, str] | None = None) -> Invocation:
        """`datafarm match` in a folder whose bindings.json is `bindings` (bytes as they are, else JSON)."""
        data = bindings if isinstance(bindings, bytes) else json.dumps(bindings).encode()
        (folder / "bindings.json").write_bytes(data)
        return Invocation(["match", "--request-file", str(self.request)], folder, env=env or {},
                          unchanged=(folder / "bindings.json",))

    def on_workspace(self, folder: Path, args: Callable[[Path], list[str]],
                     damage: Callable[[Path], object] | None = None) -> Invocation:
        """A command on a private copy of the ground workspace (after `damage`), which must stay as it was."""
        ws = self.workspace(folder)
        if damage is not None:
            damage(ws)
        return Invocation(args(ws), folder, unchanged=(ws,))


@dataclass(frozen=True)
class BadCase:
    name: str
    kind: str  # calibration | request | setting | bindings | workspace
    build: Callable[[Ground, Path], Invocation]
    problem: Words
    fix: Words
    exit_codes: tuple[int, ...] = (BAD_INPUT,)
    slow: bool = False  # starts the farm (Prefect) or the simulator: seconds, not a fraction of one


# ----- damage -------------------------------------------------------------------------------------------------
def _truncate(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _reencode(path: Path, fps: int) -> None:
    from datafarm.media import write_video

    write_video(path, moving_block_frames(), fps=fps)


def _joints(calib: Path, state: np.ndarray) -> None:
    write_joints(calib / "joints.csv", state)


def _with(state: np.ndarray, rows, columns, value) -> np.ndarray:
    state = state.copy()
    state[rows, columns] = value
    return state


def _lerobot_like(calib: Path, info: bytes) -> None:
    """A folder that claims to be a LeRobot dataset (meta/info.json) with the given info file."""
    (calib / "meta").mkdir()
    (calib / "meta" / "info.json").write_bytes(info)


def _json(path: Path, patch: Callable[[dict], object]) -> None:
    data = json.loads(path.read_text())
    patch(data)
    path.write_text(json.dumps(data))


def _text_in_joints(calib: Path) -> None:
    header, first, *rest = (calib / "joints.csv").read_text().splitlines()
    (calib / "joints.csv").write_text("\n".join([header, "abc" + first[first.index(","):], *rest]) + "\n")


def _file(path: Path) -> Path:
    path.write_text("a file, not a folder\n")
    return path


def _binary(size: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


LITELLM = {"agent": "litellm", "model": "openai/farm-model", "api_base": "http://127.0.0.1:9/v1",
           "prices": {"openai/farm-model": {"input_per_token": 1e-7, "output_per_token": 2e-7}}}
UNWRITABLE = Path("/sys/datafarm-unwritable")  # refused even to root (sysfs), unlike a chmod


def _cases() -> list[BadCase]:
    c = BadCase
    return [
        # ----- calibration episodes (`datafarm prepare --episode`) --------------------------------------------
        c("calibration_missing", "calibration",
          lambda g, f: Invocation(g.prepare_args(episode=f / "nowhere", output=f / "ws"), f, absent=(f / "ws",)),
          ("does not exist",), ("LeRobot dataset", "joints.csv")),
        c("calibration_is_a_file", "calibration",
          lambda g, f: Invocation(g.prepare_args(episode=g.calibration / "head.mp4", output=f / "ws"), f,
                                  absent=(f / "ws",)),
          ("is a file",), ("pass the folder",)),
        c("calibration_empty_folder", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: [p.unlink() for p in d.iterdir()]),
          ("missing",), ("head.mp4",)),
        c("missing_camera", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: (d / "right_wrist.mp4").unlink()),
          ("right_wrist", "missing"), ("right_wrist.mp4",)),
        c("truncated_mp4", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _truncate(d / "head.mp4", 0.5)),
          ("head.mp4", ("corrupt", "unreadable")), ("re-export", "libx264")),
        c("empty_mp4", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: (d / "left_wrist.mp4").write_bytes(b"")),
          ("left_wrist.mp4", ("corrupt", "unreadable", "empty")), (("re-export", "re-record"),)),
        c("binary_noise_mp4", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: (d / "head.mp4").write_bytes(_binary(5000))),
          ("head.mp4", ("corrupt", "unreadable")), ("re-export",)),
        c("two_files_for_one_camera", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: shutil.copy(d / "head.mp4", d / "cam_high.mp4")),
          ("cam_high.mp4", "head.mp4"), ("keep one",)),
        c("wrong_fps_one_camera", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _reencode(d / "left_wrist.mp4", 15)),
          ("different frame rates",), ("one rate",)),
        c("unequal_frame_counts", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: write_video_frames(d / "head.mp4", FRAMES - 4)),
          ("unequal frame counts",), ("trim",)),
        c("nan_joints", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _joints(d, _with(joint_rows(), [3, 7], 2, np.nan))),
          ("non-finite", "rows [3, 7]"), (("re-export", "interpolate", "fill"),)),
        c("infinite_joints", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _joints(d, _with(joint_rows(), 5, 0, np.inf))),
          ("non-finite", "rows [5]"), (("re-export", "interpolate", "fill"),)),
        c("joints_in_degrees", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _joints(d, np.rad2deg(joint_rows()) * 10)),
          ("left_joint", ("out of range", "beyond", "degrees")), ("radian",)),
        c("joints_13_columns", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _joints(d, joint_rows()[:, :13])),
          ("13 joint columns", "expected 14"), ("name them",)),
        c("joint_rows_not_frames", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _joints(d, joint_rows(FRAMES - 3))),
          ("9 rows", "12 frames"), ("one joint-state row per video frame",)),
        c("joints_missing", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: (d / "joints.csv").unlink()),
          ("joint states are missing",), ("joints.csv",)),
        c("joints_header_only", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _joints(d, joint_rows(0))),
          ("no rows",), ("one row",)),
        c("joints_text_value", "calibration",
          lambda g, f: g.bad_calibration(f, _text_in_joints),
          ("joints.csv",), (("number", "columns"),)),
        c("joints_binary", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: (d / "joints.csv").write_bytes(_binary(3000, 1))),
          ("joints.csv",), (("header", "number", "columns"),)),
        c("provenance_not_json", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: (d / "datafarm_calibration.json").write_text("{synthetic: yes")),
          ("datafarm_calibration.json", "not valid JSON"), ("fix or delete",)),
        c("lerobot_info_not_json", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _lerobot_like(d, b"\x00\x01 not json")),
          ("info.json", "not valid JSON"), (("re-export", "re-record", "export"),)),
        c("lerobot_v21_dataset", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _lerobot_like(d, json.dumps(
              {"codebase_version": "v2.1", "total_episodes": 1, "fps": 30}).encode())),
          ("v2.1", "expected v3.0"), ("convert",)),
        c("lerobot_two_episodes", "calibration",
          lambda g, f: g.bad_calibration(f, lambda d: _lerobot_like(d, json.dumps(
              {"codebase_version": "v3.0", "total_episodes": 2, "fps": 30}).encode())),
          ("2 episodes", "exactly one episode"), ("export",)),
        # ----- requests (`--request-file`) ---------------------------------------------------------------------
        c("request_empty", "request", lambda g, f: g.bad_request(f, b""), ("request is empty",), ("plain words",)),
        c("request_whitespace", "request", lambda g, f: g.bad_request(f, b" \n\t \n"), ("request is empty",),
          ("plain words",)),
        c("request_binary", "request", lambda g, f: g.bad_request(f, _binary(2000, 2)),
          ("request", ("not text", "binary", "UTF-8")), (("plain words", "text file"),)),
        c("request_50000_characters", "request", lambda g, f: g.bad_request(f, ("put the apple down " * 2632).encode()),
          ("request", ("characters", "too long")), (("shorten", "at most", "a few sentences"),)),
        c("request_file_missing", "request",
          lambda g, f: Invocation(g.prepare_args(request=f / "nowhere.txt", output=f / "ws"), f, absent=(f / "ws",)),
          ("nowhere.txt", ("not found", "does not exist")), (("--request-file", "write", "pass"),)),
        c("request_file_is_a_folder", "request",
          lambda g, f: Invocation(g.prepare_args(request=f, output=f / "ws"), f, absent=(f / "ws",)),
          ("request", ("folder", "directory")), (("--request-file", "file"),)),
        # ----- settings (`prepare` options) --------------------------------------------------------------------
        c("target_count_negative", "setting", lambda g, f: g.bad_setting(f, "-5"),
          ("target", "-5"), (("at least 1", "positive", "greater than 0", ">= 1", "> 0"),)),
        c("target_count_zero", "setting", lambda g, f: g.bad_setting(f, "0"),
          ("target",), (("at least 1", "positive", "greater than 0", ">= 1", "> 0"),)),
        c("target_count_absurd", "setting", lambda g, f: g.bad_setting(f, "1000000000"),
          ("target", "1000000000"), (("at most", "less than", "<=", "smaller"),)),
        c("target_count_not_a_number", "setting", lambda g, f: g.bad_setting(f, "many"),
          ("--target-count",), ("valid integer",)),
        c("unknown_renderer", "setting", lambda g, f: g.bad_setting(f, extra=("--renderer", "nonsense")),
          ("nonsense",), ("composite",)),
        c("unwritable_output", "setting",
          lambda g, f: Invocation(g.prepare_args(output=UNWRITABLE / "ws"), f, absent=(UNWRITABLE,)),
          (str(UNWRITABLE), ("cannot", "not permitted", "unwritable", "permission")), ("--output",)),
        c("output_is_a_file", "setting",
          lambda g, f: Invocation(g.prepare_args(output=_file(f / "ws")), f, unchanged=(f / "ws",)),
          ("ws", "file"), ("--output",)),
        c("output_holds_a_workspace", "setting",
          lambda g, f: (lambda ws: Invocation(g.prepare_args(output=ws), f, unchanged=(ws,)))(g.workspace(f)),
          ("already holds a workspace",), ("new --output",)),
        # ----- bindings (`datafarm match` with bindings.json where it runs) ---------------------------------
        c("bindings_unknown_agent", "bindings", lambda g, f: g.bad_bindings(f, {"agent": "teleoperator"}),
          ("agent", "teleoperator"), ("builtin", "litellm")),
        c("bindings_unknown_provider", "bindings",
          lambda g, f: g.bad_bindings(f, {**LITELLM, "model": "nosuchprovider/farm-model",
                                          "prices": {"nosuchprovider/farm-model": LITELLM["prices"]["openai/farm-model"]}}),
          ("nosuchprovider",), ("provider/model",), slow=True),
        c("bindings_price_missing", "bindings",
          lambda g, f: g.bad_bindings(f, {k: v for k, v in LITELLM.items() if k != "prices"}),
          ("openai/farm-model", "price"), ("prices",), slow=True),
        c("bindings_not_json", "bindings", lambda g, f: g.bad_bindings(f, b'{"agent": "litellm",'),
          ("bindings.json", "not valid JSON"), (("fix", "delete"),)),
        c("bindings_not_an_object", "bindings", lambda g, f: g.bad_bindings(f, [1, 2]),
          ("bindings.json", "JSON object"), ("agent",)),
        c("bindings_unknown_role", "bindings", lambda g, f: g.bad_bindings(f, {**LITELLM, "roles": {"teleoperator": "x/y"}}),
          ("unknown roles", "teleoperator"), ("known roles",)),
        c("bindings_negative_cap", "bindings", lambda g, f: g.bad_bindings(f, {**LITELLM, "caps": {"expert": -1}}),
          ("caps",), (">= 0",)),
        c("bindings_env_names_no_file", "bindings",
          lambda g, f: Invocation(["match", "--request-file", str(g.request)], f,
                                  env={"DATAFARM_BINDINGS": str(f / "nowhere.json")}),
          ("DATAFARM_BINDINGS", "nowhere.json"), (("unset", "path of"),)),
        c("bindings_cap_not_a_number", "bindings",
          lambda g, f: Invocation(["match", "--request-file", str(g.request)], f, env={"DATAFARM_CAP_EXPERT": "lots"}),
          ("DATAFARM_CAP_EXPERT", "lots"), ("number",)),
        # ----- workspaces -----------------------------------------------------------------------------------
        c("farm_on_a_file", "workspace",
          lambda g, f: Invocation(["farm", str(_file(f / "ws.txt"))], f, unchanged=(f / "ws.txt",)),
          ("not a DataFarm workspace",), ("datafarm prepare",)),
        c("verify_on_a_missing_folder", "workspace",
          lambda g, f: Invocation(["verify", str(f / "nowhere")], f, absent=(f / "nowhere",)),
          ("not a DataFarm workspace",), ("datafarm prepare",)),
        c("workspace_json_corrupt", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["cost", str(ws)],
                                      lambda ws: (ws / "workspace.json").write_bytes(b"{\x00 half-written")),
          ("workspace.json",), (("datafarm prepare", "restore", "delete"),)),
        c("farm_unknown_phase", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["farm", str(ws), "--phase", "teleoperate"]),
          ("teleoperate",), ("rollout",)),
        c("context_unknown_role", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["context", str(ws), "--role", "teleoperator"]),
          ("teleoperator",), ("expert_author",)),
        c("show_before_any_episode", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["show", str(ws), "--episode", "99"]),
          (("no recorded episodes", "no episode 99"),), ("datafarm farm",)),
        c("verify_before_harvest", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["verify", str(ws)]),
          ("manifest.json is missing",), ("datafarm farm",), exit_codes=(CHECK_FAILED,)),
        # ----- push / verify s3:// (the storage; datafarm.storage) ---------------------------------------------
        c("push_to_malformed_in_prepare", "setting",
          lambda g, f: g.bad_setting(f, extra=("--push-to", "s3:/my-bucket/x")),
          ("push_to", "not an S3 URI"), ("s3://BUCKET/PREFIX", "--push-to")),
        c("push_without_a_delivery", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["push", str(ws), f"s3://{S3_BUCKET}/apple"]),
          ("no delivery", "manifest.json"), ("datafarm farm",)),
        c("push_to_a_malformed_uri", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["push", str(ws), "s3://Bad_Bucket/apple"]),
          ("Bad_Bucket", "not a valid bucket name"), ("s3://BUCKET/PREFIX",)),
        c("push_to_a_local_folder", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["push", str(ws), str(f / "out")]),
          ("not an S3 URI",), ("s3://BUCKET/PREFIX",)),
        c("push_without_a_destination", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["push", str(ws)]),
          ("no destination",), ("s3://BUCKET/PREFIX", "--push-to")),
        c("verify_s3_prefix_without_manifest", "workspace",
          lambda g, f: Invocation(["verify", f"s3://{S3_BUCKET}/half-pushed"], f, env=local_s3()),
          ("manifest.json is missing",), ("datafarm push",), exit_codes=(CHECK_FAILED,)),
        c("verify_s3_empty_prefix", "workspace",
          lambda g, f: Invocation(["verify", f"s3://{S3_BUCKET}/nothing-here"], f, env=local_s3()),
          ("manifest.json is missing",), ("datafarm push",), exit_codes=(CHECK_FAILED,)),
        c("prepare_renderer_in_workspace_edited", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["farm", str(ws)],
                                      lambda ws: _json(ws / "workspace.json",
                                                       lambda d: d["settings"].update(renderer="nonsense"))),
          ("nonsense",), ("composite",), slow=True),
        c("farm_calibration_deleted", "workspace",
          lambda g, f: g.on_workspace(f, lambda ws: ["farm", str(ws)],
                                      lambda ws: shutil.rmtree(ws / "calibration")),
          ("calibration",), (("datafarm prepare", "restore", "copy"),), slow=True),
    ]


def write_video_frames(path: Path, count: int) -> None:
    from datafarm.media import write_video

    write_video(path, moving_block_frames(count), fps=FPS)


CASES: tuple[BadCase, ...] = tuple(_cases())
# The cases that also run on a finished (farmed) workspace: a bad second command must leave it byte-identical.
ON_FINISHED_WORKSPACE: tuple[str, ...] = ("output_holds_a_workspace", "farm_unknown_phase", "context_unknown_role",
                                          "workspace_json_corrupt")
