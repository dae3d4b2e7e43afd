"""Smooth joint-space trajectories that respect the arm's velocity and acceleration limits."""

from __future__ import annotations

import numpy as np

# Peak speed and acceleration of the quintic blend s(t) = 10t^3 - 15t^4 + 6t^5 over unit time.
_QUINTIC_PEAK_VELOCITY = 15.0 / 8.0
_QUINTIC_PEAK_ACCELERATION = 10.0 / np.sqrt(3.0)


def quintic_duration(start, goal, max_velocity, max_acceleration) -> float:
    """Shortest duration of a quintic blend from start to goal within the per-axis limits."""
    delta = np.abs(np.asarray(goal, dtype=float) - np.asarray(start, dtype=float))
    max_velocity = np.broadcast_to(max_velocity, delta.shape)
    max_acceleration = np.broadcast_to(max_acceleration, delta.shape)
    t_velocity = np.max(_QUINTIC_PEAK_VELOCITY * delta / max_velocity)
    t_acceleration = np.max(np.sqrt(_QUINTIC_PEAK_ACCELERATION * delta / max_acceleration))
    return float(max(t_velocity, t_acceleration))


def quintic_trajectory(start, goal, dt: float, max_velocity, max_acceleration,
                       min_duration: float = 0.0) -> np.ndarray:
    """Waypoints every `dt` (excluding `start`, ending exactly at `goal`), rest to rest.

    Returns an (N, D) array with N >= 1.
    """
    start = np.asarray(start, dtype=float)
    goal = np.asarray(goal, dtype=float)
    duration = max(quintic_duration(start, goal, max_velocity, max_acceleration), min_duration)
    steps = max(1, int(np.ceil(duration / dt - 1e-9)))
    t = np.arange(1, steps + 1) / steps
    s = 10 * t**3 - 15 * t**4 + 6 * t**5
    return start + s[:, None] * (goal - start)
