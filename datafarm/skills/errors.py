"""Typed skill failures an expert can catch and recover from (retry, re-grasp, pick another arm)."""

from __future__ import annotations


class SkillError(RuntimeError):
    """A skill could not do what it was asked."""


class Unreachable(SkillError):
    """No joint configuration within limits reaches the pose (or the path to it)."""


class GraspFailed(SkillError):
    """The gripper closed on nothing, or on something other than the target."""


class GraspSlipped(SkillError):
    """The object did not come along (it slipped out while moving)."""
