"""The author interface every author implements (the built-in one here; LLM roles later).

Contract: `match(request)` says which task the author would build for a plain-words request, or
raises RequestRefused with a message that says what it can build and how to get another author;
`write_package(match, destination)` writes a complete task package folder (task.yaml, scene.yaml,
params.yaml, expert.py, judge.py) for that match. The pipeline cannot tell authors apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from datafarm.errors import Refused


class RequestRefused(Refused, ValueError):
    """The author cannot serve this request."""


@dataclass(frozen=True)
class TaskMatch:
    task: str
    score: float
    reason: str


class Author(ABC):
    """`revises_scenes`: the build may call `write_package` again after setting `scene_feedback` (what
    grounding against the calibration footage found wrong); a deterministic author would only repeat itself."""

    name: str
    revises_scenes: bool = False
    scene_feedback: str = ""

    @abstractmethod
    def match(self, request: str) -> TaskMatch: ...

    @abstractmethod
    def write_package(self, match: TaskMatch, destination: Path) -> Path: ...
