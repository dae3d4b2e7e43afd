"""What a workspace was prepared with (workspace.json "settings"): the one settings model of the farm.

Choices are checked when the settings load: the renderer against the renderer registry (an unknown
name lists the known ones), the counts against their ranges. `load_settings` turns pydantic's
ValidationError into a one-line BadInput naming the setting and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from datafarm.errors import BadInput
from datafarm.render.registry import known_renderer
from datafarm.task.randomization import RandomizationConfig
from datafarm.validation import describe

MAX_TARGET_COUNT = 100_000  # beyond this a count is a typo (about $80,000 of episodes), not a request


def _review_thresholds(values: dict[str, int | float]) -> dict[str, int | float]:
    """Overrides of the review's limits, by the names of datafarm.review.report.ReviewThresholds."""
    from dataclasses import fields

    from datafarm.review.report import ReviewThresholds

    known = [f.name for f in fields(ReviewThresholds)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"unknown review thresholds {unknown}; the known ones are {known}")
    return values


def _s3_destination(uri: str | None) -> str | None:
    """An s3://bucket/prefix, checked when the settings load (a bad one names the form to use)."""
    if uri is not None:
        from datafarm.storage.location import parse_s3_uri  # lazily: datafarm.storage imports the farm

        return parse_s3_uri(uri).uri()
    return uri


# Settings no whole-workspace phase reads: how many episodes (the episode loop reads them from the
# workspace each time), how many seeds simulate at once, and where a delivery goes. They are outside the
# phases' input hashes, so raising the target re-authors nothing.
NOT_HASHED = frozenset({"target_count", "max_attempts_factor", "max_usd", "review", "push_to", "rollout_workers",
                        "rollout_runner", "cluster_address"})


class FarmSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target_count: int = Field(gt=0, le=MAX_TARGET_COUNT)
    renderer: Annotated[str, AfterValidator(known_renderer)] = "composite"
    render_model: str | None = Field(None, description="wan-vace: local folder of the pipeline (embedded mode)")
    render_worker: str | None = Field(None, description="wan-vace: URL of a `datafarm render-worker`")
    render_options: dict[str, int | float | str] = Field(
        default_factory=dict, description="the renderer's own options, e.g. wan-vace's cell_height, steps")
    seed_start: int = Field(0, ge=0)
    expert_trial_seeds: int = Field(10, gt=0)
    expert_min_success: float = Field(0.8, ge=0, le=1)
    max_attempts_factor: float = Field(3.0, ge=1, description="give up after this many x target_count seeds")
    max_usd: float | None = Field(None, gt=0, description="the workspace's whole budget: no work starts past it")
    episode_wall_limit: float = Field(120.0, gt=0)
    # 1: on 2 cores one rollout already keeps both busy beside the render (its camera renders on lavapipe's
    # threads); two at once measured 116 admitted episodes per hour against 121 (benchmarks/farm_throughput.py)
    rollout_workers: int = Field(1, ge=1, le=64, description=(
        "seeds simulated at once, each in its own sandboxed worker; for machines with more cores, or a cluster "
        "(where renders and reviews also run this many at once). The episodes are the same for any number"))
    rollout_runner: Literal["threads", "dask", "ray"] = Field("threads", description=(
        "where episodes are made: rollouts in threads of the farm's process, each waiting on its sandbox, while "
        "the farm's thread renders and reviews; or rollouts, renders and reviews in the processes of a Dask "
        "cluster (prefect-dask: pip install 'datafarm[dask]') or a Ray cluster (pip install 'datafarm[ray]')"))
    cluster_address: str | None = Field(None, description=(
        "rollout_runner dask or ray: an existing cluster that sees the workspace's path (Dask's scheduler "
        "tcp://host:8786, Ray's ray://host:10001); unset: a local cluster of rollout_workers processes"))
    randomization: RandomizationConfig = RandomizationConfig()
    review: Annotated[dict[str, int | float], AfterValidator(_review_thresholds)] = Field(
        default_factory=dict, description="review limits to change, e.g. {\"min_robot_iou\": 0.5}")
    repo_id: str = Field("datafarm/episodes", pattern=r"^[\w.-]+/[\w.-]+$")
    push_to: Annotated[str | None, AfterValidator(_s3_destination)] = Field(
        None, description="s3://bucket/prefix the farm pushes the verified delivery to (datafarm.storage)")

    @model_validator(mode="after")
    def _cluster_address_needs_a_cluster(self) -> FarmSettings:
        if self.cluster_address and self.rollout_runner == "threads":
            raise ValueError("cluster_address is a setting of rollout_runner dask or ray, not threads")
        return self

    @model_validator(mode="after")
    def _render_options_fit_the_renderer(self) -> FarmSettings:
        if self.renderer != "wan-vace" and (self.render_model or self.render_worker):
            raise ValueError(f"render_model / render_worker are wan-vace settings; renderer {self.renderer!r} "
                             "takes neither")
        return self

    def renderer_options(self) -> dict[str, str]:
        """The renderer's constructor options from these settings (only those set)."""
        options = {"model": self.render_model, "worker": self.render_worker}
        return {**self.render_options, **{name: value for name, value in options.items() if value is not None}}


# How to fix each setting, from the command line (`prepare`) or in workspace.json.
FIXES = {
    "target_count": f"pass --target-count with a whole number from 1 to {MAX_TARGET_COUNT}",
    "renderer": "pass --renderer with one of them (composite runs on the CPU)",
    "render_model": "pass --render-model with a local Wan VACE folder, and only with --renderer wan-vace",
    "render_worker": "pass --render-worker with the worker's URL, and only with --renderer wan-vace",
    "render_options": "pass --render-option NAME=VALUE with an option of the chosen renderer",
    "push_to": "correct --push-to (or push_to in workspace.json)",
    "max_usd": "pass --max-usd with a positive number of USD (or leave it out: no budget)",
    "randomization": "correct the randomization settings (datafarm/task/randomization.py's RandomizationConfig), "
                     "with --randomization NAME=VALUE, e.g. --randomization recovery_fraction=0.3",
    "rollout_runner": "use threads, dask (with prefect-dask installed) or ray (with prefect-ray)",
    "review": "name review limits as datafarm/review/report.py's ReviewThresholds does, with numbers",
}


class SettingsError(BadInput, ValueError):
    """A farm setting is missing, of the wrong type, out of range, or an unknown choice."""


def load_settings(values: Mapping[str, Any] | FarmSettings, source: str = "farm settings",
                  fixes: Mapping[str, str] = FIXES) -> FarmSettings:
    """FarmSettings from `values`, or SettingsError: '<source>: <setting>: <problem> (got ...); <fix>'."""
    if isinstance(values, FarmSettings):
        return values
    if not isinstance(values, Mapping):
        raise SettingsError(f"{source}: the settings must be a mapping of names to values, got "
                            f"{type(values).__name__}; restore them (e.g. from `datafarm prepare`)")
    try:
        return FarmSettings.model_validate(dict(values))
    except ValidationError as error:
        raise SettingsError(describe(error, source, fixes)) from None
