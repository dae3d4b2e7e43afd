"""The one error type of calibration input."""

from datafarm.errors import BadInput


class CalibrationError(BadInput, ValueError):
    """The calibration input is unusable; the message names the file, what was expected and the fix."""
