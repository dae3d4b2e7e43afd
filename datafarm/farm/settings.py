"""What a workspace was prepared with (workspace.json "settings")."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from datafarm.task.randomization import RandomizationConfig


class FarmSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target_count: int = Field(gt=0)
    renderer: str = "composite"
    seed_start: int = 0
    expert_trial_seeds: int = Field(10, gt=0)
    expert_min_success: float = Field(0.8, ge=0, le=1)
    max_attempts_factor: float = Field(3.0, ge=1, description="give up after this many x target_count seeds")
    episode_wall_limit: float = 120.0
    randomization: RandomizationConfig = RandomizationConfig()
    repo_id: str = "datafarm/episodes"
