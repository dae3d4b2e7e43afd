"""The skill library experts are written in."""

from datafarm.skills.errors import GraspFailed, GraspSlipped, SkillError, Unreachable
from datafarm.skills.library import Skills, pose, top_down

__all__ = ["GraspFailed", "GraspSlipped", "SkillError", "Skills", "Unreachable", "pose", "top_down"]
