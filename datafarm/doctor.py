"""`datafarm doctor`: are the prerequisites here? Each check says how to fix what is missing."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SETUP_HINT = "run `make setup` (as root for system packages)"

# Distribution -> the version prefix the project is verified with (shared/STACK.md).
VERIFIED_PACKAGES = {
    "sapien": "3.0",
    "lerobot": "0.6",
    "torch": "2.11",
    "prefect": "3.9",
    "pydantic": "2.",
    "litellm": "1.",
    "diffusers": "0.42",
    "piper_sdk": "0.6",
    "python-can": "4.",
}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    optional: bool = False  # an optional feature (e.g. pi05): reported, never a failure


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    return Check("python >= 3.12", sys.version_info >= (3, 12), version, "install python3.12, then " + SETUP_HINT)


def check_command(command: str, package: str) -> Check:
    path = shutil.which(command)
    return Check(command, path is not None, path or "not on PATH", f"apt-get install {package}, or {SETUP_HINT}")


def check_vulkan() -> Check:
    """Ask SAPIEN for a render device in a child process (a failing driver can abort the process)."""
    probe = "import sapien; sapien.Scene(); print(sapien.render.get_device_summary().splitlines()[0])"
    fix = "install Mesa >= 25 lavapipe from bookworm-backports: " + SETUP_HINT
    try:
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return Check("vulkan device (SAPIEN)", False, "probe timed out", fix)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return Check("vulkan device (SAPIEN)", False, lines[-1] if lines else f"exit {result.returncode}", fix)
    return Check("vulkan device (SAPIEN)", True, result.stdout.strip() or "ok")


def check_package(distribution: str, prefix: str) -> Check:
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return Check(distribution, False, "not installed", SETUP_HINT)
    ok = version.startswith(prefix)
    return Check(distribution, ok, version, "" if ok else f"verified with {prefix}*: {SETUP_HINT}")


def check_writable(directory: Path) -> Check:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory):
            pass
    except OSError as error:
        return Check(f"writable {directory}", False, str(error), "choose another --workspace or fix permissions")
    return Check(f"writable {directory}", True, str(directory))


def run_checks(workspace: Path | None = None) -> list[Check]:
    checks = [check_python(), check_command("ffmpeg", "ffmpeg"), check_command("bwrap", "bubblewrap"), check_vulkan()]
    checks += [check_package(name, prefix) for name, prefix in VERIFIED_PACKAGES.items()]
    checks.append(check_writable(workspace or Path(os.environ.get("DATAFARM_HOME", Path.cwd()))))
    checks.append(check_pi05())
    checks += [check_robot_plugin(), check_can_interfaces()]
    checks += [check_gpu(), check_render_weights(workspace)]
    return checks


def check_gpu() -> Check:
    """The CUDA GPU the wan-vace renderer would use, and its memory (optional: composite needs none)."""
    import torch

    if not torch.cuda.is_available():
        return Check("GPU (wan-vace)", False, "no CUDA GPU", "render with composite here, or run "
                     "`datafarm render-worker` on a GPU node (docs/rendering.md)", optional=True)
    props = torch.cuda.get_device_properties(0)
    return Check("GPU (wan-vace)", True, f"{torch.cuda.device_count()} x {props.name}, "
                 f"{props.total_memory / 2**30:.0f} GiB", optional=True)


def check_render_weights(workspace: Path | None = None) -> Check:
    """The configured Wan VACE folder ($DATAFARM_RENDER_MODEL, or the workspace's render_model) is complete."""
    import json

    from datafarm.render.wan_models import MODEL_INDEX, missing_parts

    folder = os.environ.get("DATAFARM_RENDER_MODEL")
    settings_file = (workspace or Path.cwd()) / "workspace.json"
    if folder is None and settings_file.is_file():
        folder = json.loads(settings_file.read_text()).get("settings", {}).get("render_model")
    if folder is None:
        return Check("wan-vace weights", False, "none configured", "set DATAFARM_RENDER_MODEL to a local Wan VACE "
                     "folder, or prepare with --render-model (docs/rendering.md)", optional=True)
    missing = missing_parts(Path(folder))
    if not missing:
        kind = json.loads((Path(folder) / MODEL_INDEX).read_text()).get("_class_name")
        missing = [] if kind == "WanVACEPipeline" else [f"a WanVACEPipeline (model_index.json says {kind})"]
    return Check("wan-vace weights", not missing, f"{folder}" + (f" lacks {', '.join(missing)}" if missing else ""),
                 "download the diffusers version of Wan2.1-VACE into that folder (docs/rendering.md)")


def check_pi05() -> Check:
    """pi05 training needs the `pi` extra (transformers < 5.6, a second environment) and the gated tokenizer."""
    from datafarm.policy.presets import pi05_problems

    problems = pi05_problems()
    return Check("pi05 policy (optional)", not problems, "usable" if not problems else "not usable here",
                 "; ".join(problems), optional=True)


PIPER_PLUGIN = "lerobot_robot_datafarm_piper"  # the distribution lerobot's plugin loader finds by its name
PIPER_ROBOT_TYPE = "datafarm_piper"
CAN_ARPHRD = "280"  # /sys/class/net/<if>/type of a CAN interface (ARPHRD_CAN)


def check_robot_plugin(distribution: str = PIPER_PLUGIN, robot_type: str = PIPER_ROBOT_TYPE) -> Check:
    """lerobot's tools find the dual PiPER by name: the plugin distribution is installed and registers the type."""
    name = f"lerobot robot {robot_type!r}"
    fix = f"install the plugin's distribution ({distribution}, plugins/{distribution}): {SETUP_HINT}"
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return Check(name, False, f"{distribution} is not installed", fix)
    try:
        from lerobot.robots.config import RobotConfig
        from lerobot.utils.import_utils import register_third_party_plugins

        register_third_party_plugins()  # what lerobot-record / lerobot-replay do first
        registered = robot_type in RobotConfig.get_known_choices()
    except Exception as error:  # noqa: BLE001  a broken plugin import: report it, the other checks still run
        return Check(name, False, f"registering lerobot's plugins failed: {type(error).__name__}: {error}", fix)
    return Check(name, registered, f"registered by {distribution}" if registered else "not registered", fix)


def can_interfaces(net: Path = Path("/sys/class/net")) -> dict[str, str]:
    """The host's CAN interfaces (socketcan, Linux) -> their operational state ("up", "down", ...)."""
    found = {}
    for interface in sorted(net.glob("*")) if net.is_dir() else []:
        try:
            if (interface / "type").read_text().strip() == CAN_ARPHRD:
                found[interface.name] = (interface / "operstate").read_text().strip() \
                    if (interface / "operstate").is_file() else "unknown"
        except OSError:
            continue
    return found


def check_can_interfaces(net: Path = Path("/sys/class/net")) -> Check:
    """Informational: which CAN interfaces the real PiPER arms could use (never a failure without them)."""
    name = "CAN interfaces (real PiPER arms, optional)"
    if not sys.platform.startswith("linux"):
        return Check(name, False, f"socketcan needs Linux (this is {sys.platform})",
                     "drive the real arms from a Linux host; the simulated pair works anywhere", optional=True)
    found = can_interfaces(net)
    if not found:
        return Check(name, False, "none", "only needed for the real arms: plug in the two USB-CAN adapters and bring "
                     "them up (docs/real-robot.md, Wiring and bring-up)", optional=True)
    down = [interface for interface, state in found.items() if state == "down"]
    detail = ", ".join(f"{interface} ({state})" for interface, state in found.items())
    fix = f"bring up {', '.join(down)}: sudo ip link set IFACE up type can bitrate 1000000" if down else ""
    return Check(name, not down, detail, fix, optional=True)
