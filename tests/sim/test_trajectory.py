import numpy as np

from datafarm.sim.trajectory import quintic_trajectory


def test_quintic_trajectory_respects_limits_and_ends_at_goal():
    start, goal = np.zeros(3), np.array([1.0, -0.5, 0.2])
    dt, vmax, amax = 1 / 30, 3.0, 5.0
    path = quintic_trajectory(start, goal, dt, vmax, amax)
    np.testing.assert_allclose(path[-1], goal)
    full = np.vstack([start, path])
    velocity = np.diff(full, axis=0) / dt
    assert np.abs(velocity).max() <= vmax + 1e-9
    acceleration = np.diff(velocity, axis=0) / dt
    assert np.abs(acceleration).max() <= amax * 1.1  # sampled at 30 Hz


def test_zero_motion_still_gives_one_waypoint():
    path = quintic_trajectory(np.ones(2), np.ones(2), 0.1, 1.0, 1.0)
    assert path.shape == (1, 2)
