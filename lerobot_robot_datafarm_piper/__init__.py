"""The dual AgileX PiPER as a lerobot robot plugin: `lerobot-record --robot.type=datafarm_piper ...`.

lerobot 0.6.1 imports third-party plugins by DISTRIBUTION name (`register_third_party_plugins` imports
every installed distribution whose name starts with ``lerobot_robot_``). This package ships inside the
datafarm distribution; the metadata-only distribution in plugins/lerobot_robot_datafarm_piper (installed
by `make setup`) carries the name lerobot looks for.

Importing this package registers the robot config "datafarm_piper" (config_datafarm_piper.py); lerobot's
``make_robot_from_config`` then finds the robot class :class:`DatafarmPiper` here (the config's class
name without "Config"). See docs/real-robot.md.
"""

from lerobot_robot_datafarm_piper.config_datafarm_piper import DatafarmPiperConfig, PiperSafetySettings
from lerobot_robot_datafarm_piper.datafarm_piper import DatafarmPiper

__all__ = ["DatafarmPiper", "DatafarmPiperConfig", "PiperSafetySettings"]
