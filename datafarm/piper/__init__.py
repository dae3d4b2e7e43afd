"""The real dual-arm PiPER: the safety layer every command passes, and the driver built on it."""

from datafarm.piper.arm_pair import ArmPair, PairObservation
from datafarm.piper.driver import PiperArm, PiperPair, PiperPairConfig, WatchdogConfig
from datafarm.piper.safety import SafeCommand, SafetyConfig, SafetyLayer

__all__ = ["ArmPair", "PairObservation", "PiperArm", "PiperPair", "PiperPairConfig", "SafeCommand", "SafetyConfig",
           "SafetyLayer", "WatchdogConfig"]
