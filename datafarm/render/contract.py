"""The render contract (render_contract.json, written by the scene author's contract phase): what every
renderer of a workspace is told to produce. One contract, two renderers: `composite` checks its cameras and
reference frames against it; `wan-vace` also takes its prompts, control kind and weight, and seed.
Fields added after a workspace was made take their defaults, so older contracts still load."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_NEGATIVE_PROMPT = ("cartoon, illustration, render, CGI, blurry, low quality, distorted robot arms, extra arms, "
                           "extra objects, flicker, text, watermark")


class RenderContract(BaseModel):
    model_config = ConfigDict(extra="ignore")

    renderer: str = "composite"
    cameras: list[str] = Field(default_factory=lambda: ["head", "left_wrist", "right_wrist"])
    fps: int | None = None
    prompts: dict[str, str] = Field(default_factory=dict, description="per camera: what the view shows")
    negative_prompt: str = DEFAULT_NEGATIVE_PROMPT
    control: Literal["depth", "edges"] = Field("depth", description="the sim signal the video model follows")
    control_weight: float = Field(1.0, ge=0.0, le=2.0, description="VACE conditioning scale")
    robot: Literal["generate", "keep"] = Field(
        "generate", description="generate the arms from the control, or keep the sim's arm pixels as they are")
    reference_frame: int = Field(0, ge=0, description="which calibration reference frame of each camera to show")
    seed: int = Field(0, ge=0, description="combined with each episode's seed for the render's noise")
    appearance: list[str] = Field(default_factory=list)

    def canvas_prompt(self) -> str:
        """One prompt for the tiled canvas: the views' prompts in canvas order."""
        if not self.prompts:
            return "Real robot workcell, photographic, consistent lighting."
        return " ".join(f"[{camera}] {self.prompts[camera]}" for camera in self.cameras if camera in self.prompts)

    def episode_seed(self, episode_seed: int) -> int:
        """The noise seed of one episode: fixed by the contract's seed and the episode's own seed."""
        return (self.seed * 1_000_003 + int(episode_seed)) % (2 ** 31)
