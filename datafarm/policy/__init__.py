"""Policies trained on the farm's deliveries: presets, training with lerobot's own code, inference."""

from datafarm.policy.spec import CAMERA_KEYS, SPEC_FILE, PolicySpec, downscale, load_policy_spec, write_policy_spec

__all__ = ["CAMERA_KEYS", "SPEC_FILE", "PolicySpec", "downscale", "load_policy_spec", "write_policy_spec"]
