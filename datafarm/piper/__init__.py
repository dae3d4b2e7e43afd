"""The real dual-arm PiPER: the safety layer every command passes (the driver builds on it)."""

from datafarm.piper.safety import SafeCommand, SafetyConfig, SafetyLayer

__all__ = ["SafeCommand", "SafetyConfig", "SafetyLayer"]
