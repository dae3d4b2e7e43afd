"""Calibration input: the one real (or synthetic) recording a farm is built from.

- `load_calibration`: a LeRobot v3.0 one-episode dataset or a folder of three mp4s + joints table.
- `synth_calibration`: a synthetic one from the simulated rig (labelled synthetic).
- `robomind_calibration_folder`, `appearance_references`: real AgileX footage (RoboMIND clips).
"""

from datafarm.calibration.episode import (
    FOLDER_VIDEO_NAMES,
    PROVENANCE_FILE,
    CalibrationEpisode,
    load_calibration,
)
from datafarm.calibration.errors import CalibrationError
from datafarm.calibration.robomind import appearance_references, robomind_calibration_folder
from datafarm.calibration.synth import synth_calibration

__all__ = ["FOLDER_VIDEO_NAMES", "PROVENANCE_FILE", "CalibrationEpisode", "CalibrationError",
           "appearance_references", "load_calibration", "robomind_calibration_folder", "synth_calibration"]
