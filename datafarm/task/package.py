"""Load a task package from a folder, and keep the expert away from the judge."""

from __future__ import annotations

import importlib.abc
import importlib.util
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from datafarm.errors import BadInput
from datafarm.scene.spec import SceneSpec, load_scene_spec
from datafarm.validation import describe

RecoveryKind = Literal["push", "misgrasp"]  # see datafarm.task.recovery

PACKAGE_FILES = ("task.yaml", "scene.yaml", "params.yaml", "expert.py", "judge.py")


class TaskInfo(BaseModel):
    """task.yaml: what the task is called, the instruction stored in the dataset, and its limits."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    instruction: str
    description: str = ""
    max_seconds: float = Field(30.0, gt=0)
    # Phrases a request may use for this task (the built-in author matches requests against them).
    phrases: list[str] = []
    # The recovery disturbances its expert recovers from (datafarm.task.recovery); none: no recovery episodes.
    recovery: list[RecoveryKind] = []


@dataclass(frozen=True)
class TaskPackage:
    directory: Path
    info: TaskInfo
    scene: SceneSpec
    params: dict[str, Any]
    # A workspace keeps the expert and the judge in folders of their own (the judge hidden).
    expert_file: Path | None = None
    judge_file: Path | None = None

    @property
    def name(self) -> str:
        return self.info.name

    def load_expert(self) -> ModuleType:
        """expert.py as a module with `solve(env, skills, params)`. It cannot import the judge."""
        path = self.expert_file or self.directory / "expert.py"
        with judge_hidden():
            module = _load_module(path, f"datafarm_expert_{self.name}")
        if not callable(getattr(module, "solve", None)):
            raise TypeError(f"{path} must define solve(env, skills, params)")
        return module

    def load_judge(self) -> ModuleType:
        path = self.judge_file or self.directory / "judge.py"
        module = _load_module(path, f"datafarm_judge_{self.name}")
        if not callable(getattr(module, "judge", None)):
            raise TypeError(f"{path} must define judge(trace, params) -> Verdict")
        return module


class TaskFileError(BadInput, ValueError):
    """task.yaml or params.yaml is not what a task package holds; the message names the file and the fix."""


IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLAIN = (str, int, float, bool, type(None))


def _yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise TaskFileError(f"{path}: not valid YAML ({' '.join(str(error).split())}); fix the syntax") from None


def load_task_info(path: Path) -> TaskInfo:
    data = _yaml(path)
    if not isinstance(data, dict):
        raise TaskFileError(f"{path}: must hold a mapping with name and instruction, got {type(data).__name__}")
    try:
        return TaskInfo.model_validate(data)
    except ValidationError as error:
        raise TaskFileError(describe(error, str(path))) from None


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return isinstance(value, PLAIN)


def load_params(path: Path) -> dict[str, Any]:
    """params.yaml: a mapping (possibly empty) of identifier names to plain values (numbers, strings,
    booleans, and lists or mappings of them), which solve() and judge() receive as `params`."""
    data = _yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TaskFileError(f"{path}: must hold a mapping of parameter names to values (e.g. `lift_height: 0.1`), "
                            f"got {type(data).__name__}")
    for key, value in data.items():
        if not isinstance(key, str) or not IDENTIFIER.match(key):
            raise TaskFileError(f"{path}: parameter name {key!r} is not an identifier; use letters, digits and _ "
                                "(e.g. lift_height), as solve() and judge() read params[name]")
        if not _plain(value):
            raise TaskFileError(f"{path}: parameter {key!r} has a {type(value).__name__} value; use numbers, strings, "
                                "booleans, or lists and mappings of them")
    return data


def load_task_package(directory: str | Path, expert_file: Path | None = None,
                      judge_file: Path | None = None) -> TaskPackage:
    """Load the package in `directory`; the expert and judge may live elsewhere (a workspace)."""
    directory = Path(directory)
    elsewhere = {"expert.py": expert_file, "judge.py": judge_file}
    missing = [f for f in PACKAGE_FILES if not elsewhere.get(f) and not (directory / f).exists()]
    if missing:
        raise FileNotFoundError(f"task package {directory} is missing {missing} (a package has {list(PACKAGE_FILES)})")
    info = load_task_info(directory / "task.yaml")
    params = load_params(directory / "params.yaml")
    return TaskPackage(directory, info, load_scene_spec(directory / "scene.yaml"), params, expert_file, judge_file)


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _JudgeBlocker(importlib.abc.MetaPathFinder):
    """Refuses any import that would load a task package's judge."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.rsplit(".", 1)[-1] == "judge" or fullname.startswith("datafarm_judge_"):
            raise ImportError(f"an expert may not import a judge ({fullname}): judges are hidden from their experts")
        return None


@contextmanager
def judge_hidden():
    """While active (loading and running an expert), judge modules cannot be imported or reached."""
    blocker = _JudgeBlocker()
    hidden = {k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith("datafarm_judge_")}
    sys.meta_path.insert(0, blocker)
    try:
        yield
    finally:
        sys.meta_path.remove(blocker)
        sys.modules.update(hidden)
