"""The simulated dual-arm PiPER rig in SAPIEN: scene, control, cameras, IK and recording."""
