"""The farm's three cameras, named once: the rig config's camera names and the delivered dataset's keys.

Every list of cameras (calibration input, rollouts, renders, reviews, the dataset, policies) is this one.
"""

from __future__ import annotations

# Camera name -> LeRobot observation key (the delivered dataset's layout, AgileX/ALOHA naming).
CAMERA_KEYS: dict[str, str] = {"head": "observation.images.cam_high",
                               "left_wrist": "observation.images.cam_left_wrist",
                               "right_wrist": "observation.images.cam_right_wrist"}
CAMERAS: tuple[str, ...] = tuple(CAMERA_KEYS)
