"""Scenes of task packages: the declarative spec, its SAPIEN builder, and fixtures."""
