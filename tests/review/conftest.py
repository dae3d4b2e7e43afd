"""Review tests reuse the render fixtures: the shortened sim episode and the RoboMIND references."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("render_fixtures", Path(__file__).parents[1] / "render" / "conftest.py")
_render_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_render_fixtures)

sim_episode = _render_fixtures.sim_episode
references = _render_fixtures.references
sim_episode_dir = _render_fixtures.sim_episode_dir
