"""The robot model: the PiPER arm as data, and the URDF our code generates from it."""

from datafarm.robot.config import ArmModel, load_arm_model
from datafarm.robot.urdf import arm_urdf

__all__ = ["ArmModel", "arm_urdf", "load_arm_model"]
