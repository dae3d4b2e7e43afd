"""The one error type of calibration input."""


class CalibrationError(ValueError):
    """The calibration input is unusable; the message names the file, what was expected and the fix."""
