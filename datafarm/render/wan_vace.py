"""The `wan-vace` renderer: diffusers' WanVACEPipeline (Wan2.1-VACE) re-renders a sim episode as photographic video.

How an episode is rendered:
1. `wan_control.build_conditioning` turns the sim episode into one canvas video: the three views tiled
   (2 columns: head | left wrist / right wrist | empty, each cell e.g. 240 x 320), the control signal
   (sim depth or edges) as the video, a mask (generate everything, or keep the sim's robot pixels), and
   the calibration keyframes tiled the same way as the reference image. The render contract gives the
   prompt, negative prompt, control kind and weight, robot handling, reference frame and seed.
2. `generate` runs the pipeline over overlapping chunks of 4k+1 frames: the prompt is encoded once per
   episode (the text encoder is the costliest part to repeat), and every chunk after the first starts
   with the last `overlap_frames` frames already generated, passed as kept frames (mask 0). The model
   continues the video from them instead of starting afresh, so the seams do not jump; the kept frames
   are not re-generated. Each chunk's noise comes from the episode seed and the chunk's index.
3. The canvas frames are cut back into views, resized to the sim camera sizes and written as mp4s.

Why one canvas per chunk for the three views: the views share one latent video, so the transformer's
self-attention sees all of them at every denoising step and gives the table, the objects, the arms and
the light one appearance in every view, frame by frame. Rendering the views separately would sample an
independent appearance per view (a different cloth or lighting in the wrist views), and chaining them
(head first, then the wrists conditioned on it) triples the number of sequential calls and still only
ties the wrists to the head's first frames. The cost is attention over a larger canvas and one empty
cell (kept black, mask 0), which at 240 x 320 cells is a 480 x 640 canvas, the size Wan2.1 was trained near.

Where the model runs: embedded (the pipeline loaded in this process from a local folder, once per
process and folder) or on a render worker (`datafarm render-worker`, datafarm.render.render_worker) to
which the conditioning is posted and from which the canvas frames come back.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
from PIL import Image

from datafarm.media import VideoWriter
from datafarm.render.appearance import Appearance
from datafarm.render.base import GENERATION_FILE, Renderer, RenderError, check_contract_cameras, check_references
from datafarm.render.contract import RenderContract
from datafarm.render.registry import RendererUnavailable
from datafarm.render.wan_control import (CanvasLayout, Conditioning, build_conditioning, chunk_inputs,
                                         is_frame_count, plan_chunks, resize_frames)
from datafarm.render.wan_models import WeightsMissing, check_weights, load_pipeline
from datafarm.sim.recorder import RecordedEpisode

log = logging.getLogger(__name__)

MAX_SEQUENCE_LENGTH = 512  # Wan2.1's text length


@dataclass(frozen=True)
class GenerationSettings:
    """How the pipeline is run (renderer settings, not part of the contract)."""

    chunk_frames: int = 49
    overlap_frames: int = 9
    steps: int = 20
    guidance_scale: float = 5.0

    def __post_init__(self) -> None:
        if not is_frame_count(self.chunk_frames):
            raise RenderError(f"chunk_frames must have the form 4k+1 (e.g. 33, 49, 81), got {self.chunk_frames}")
        if not 0 < self.overlap_frames < self.chunk_frames - 1:
            raise RenderError(f"overlap_frames must be between 1 and {self.chunk_frames - 2}, "
                              f"got {self.overlap_frames}")
        if not 1 <= self.steps <= 200 or self.guidance_scale < 0:
            raise RenderError(f"steps must be 1..200 and guidance_scale >= 0, got {self.steps}, {self.guidance_scale}")


@dataclass
class GenerationRequest:
    """Everything one episode's generation needs; what the farm posts to a render worker."""

    conditioning: Conditioning
    prompt: str
    negative_prompt: str
    seed: int
    control_weight: float
    settings: GenerationSettings = field(default_factory=GenerationSettings)

    def to_bytes(self) -> bytes:
        meta = {"prompt": self.prompt, "negative_prompt": self.negative_prompt, "seed": self.seed,
                "control_weight": self.control_weight, "settings": asdict(self.settings)}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, control=self.conditioning.control, mask=self.conditioning.mask,
                            reference=self.conditioning.reference, meta=np.array(json.dumps(meta)))
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> GenerationRequest:
        """Parse a posted request; RenderError (a permanent bad input) if it is malformed."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
                meta = json.loads(str(arrays["meta"]))
                conditioning = Conditioning(arrays["control"].astype(np.uint8), arrays["mask"].astype(np.uint8),
                                            arrays["reference"].astype(np.uint8))
            return cls(conditioning, str(meta["prompt"]), str(meta["negative_prompt"]), int(meta["seed"]),
                       float(meta["control_weight"]), GenerationSettings(**meta["settings"]))
        except RenderError:
            raise
        except Exception as error:  # noqa: BLE001 - any parse failure is the sender's malformed input
            raise RenderError(f"malformed render request ({type(error).__name__}: {error}); send one made by "
                              "GenerationRequest.to_bytes of the same datafarm version") from None


def frames_to_bytes(frames: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, frames=frames)
    return buffer.getvalue()


def frames_from_bytes(data: bytes) -> np.ndarray:
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return arrays["frames"]


def generate(pipeline, request: GenerationRequest) -> np.ndarray:
    """Run `pipeline` (a WanVACEPipeline) over the request's chunks -> canvas frames (T, H, W, 3) uint8."""
    import torch

    conditioning, settings = request.conditioning, request.settings
    frames, height, width = conditioning.control.shape[:3]
    guided = settings.guidance_scale > 1.0
    device = pipeline._execution_device
    started = time.perf_counter()
    with torch.no_grad():
        prompt_embeds, negative_embeds = pipeline.encode_prompt(
            request.prompt, request.negative_prompt if guided else None, do_classifier_free_guidance=guided,
            max_sequence_length=MAX_SEQUENCE_LENGTH, device=device)
    reference = Image.fromarray(conditioning.reference)
    generated = np.zeros((frames, height, width, 3), np.uint8)
    chunks = plan_chunks(frames, settings.chunk_frames, settings.overlap_frames)
    for index, chunk in enumerate(chunks):
        control, mask = chunk_inputs(conditioning, generated, chunk)
        output = pipeline(
            video=[Image.fromarray(frame) for frame in control], mask=[Image.fromarray(m) for m in mask],
            reference_images=[reference], conditioning_scale=request.control_weight,
            prompt_embeds=prompt_embeds, negative_prompt_embeds=negative_embeds, height=height, width=width,
            num_frames=chunk.window, num_inference_steps=settings.steps, guidance_scale=settings.guidance_scale,
            generator=torch.Generator("cpu").manual_seed(request.seed + index), output_type="np").frames[0]
        output = np.clip(np.round(np.asarray(output, dtype=np.float32) * 255), 0, 255).astype(np.uint8)
        generated[chunk.start + chunk.keep:chunk.stop] = output[chunk.keep:chunk.stop - chunk.start]
    log.debug("generated %d frames of %d x %d in %d chunks in %.1f s", frames, height, width, len(chunks),
              time.perf_counter() - started)
    return generated


class GenerationBackend(ABC):
    """Where the pipeline runs: `generate(request)` -> canvas frames (T, H, W, 3) uint8."""

    @abstractmethod
    def generate(self, request: GenerationRequest) -> np.ndarray:
        ...


@functools.cache
def cached_pipeline(folder: str, device: str | None, dtype: str):
    """One pipeline per process, folder and device: the farm renders many episodes, each loads nothing."""
    return load_pipeline(Path(folder), device, dtype)


class EmbeddedBackend(GenerationBackend):
    """The pipeline in this process, loaded from a local diffusers-layout folder on the first generate."""

    def __init__(self, model: str | Path, device: str | None = None, dtype: str = "auto"):
        self.model, self.device, self.dtype = str(model), device, dtype

    def generate(self, request: GenerationRequest) -> np.ndarray:
        return generate(cached_pipeline(self.model, self.device, self.dtype), request)


class WorkerBackend(GenerationBackend):
    """A render worker over HTTP (datafarm.render.render_worker), retrying its transient failures."""

    def __init__(self, url: str, timeout_s: float = 3600.0, retries: int = 3, retry_delay_s: float = 5.0):
        self.url, self.timeout_s, self.retries, self.retry_delay_s = url, timeout_s, retries, retry_delay_s

    def generate(self, request: GenerationRequest) -> np.ndarray:
        from datafarm.render.render_worker import post_render

        return post_render(self.url, request.to_bytes(), self.timeout_s, self.retries, self.retry_delay_s)


class WanVaceRenderer(Renderer):
    """Video-diffusion backend; see the module docstring for the method and Renderer for the contract.

    Exactly one of `model` (a local folder in diffusers' layout: embedded mode) and `worker` (a render
    worker's URL) is given. Cells are cell_height x cell_width (multiples of 16), `columns` cells wide.
    """

    name: ClassVar[str] = "wan-vace"

    def __init__(self, model: str | Path | None = None, worker: str | None = None, cell_height: int = 240,
                 cell_width: int = 320, columns: int = 2, chunk_frames: int = 49, overlap_frames: int = 9,
                 steps: int = 20, guidance_scale: float = 5.0, device: str | None = None, crf: int = 18):
        self.model, self.worker = model, worker
        self.cell_height, self.cell_width, self.columns = cell_height, cell_width, columns
        self.settings = GenerationSettings(chunk_frames, overlap_frames, steps, guidance_scale)
        self.device, self.crf = device, crf
        self.last_timing: dict[str, float] = {}

    @classmethod
    def check_available(cls, model: str | Path | None = None, worker: str | None = None, **settings) -> None:
        """RendererUnavailable unless exactly one of model / worker is set and the model folder is complete;
        RenderError if a generation setting is out of range (checked by constructing the renderer)."""
        renderer = cls(model, worker, **settings)
        CanvasLayout(("view",), renderer.cell_height, renderer.cell_width, renderer.columns)
        if (model is None) == (worker is None):
            raise RendererUnavailable(
                "renderer wan-vace needs either render_model (a local folder with Wan2.1-VACE in diffusers' "
                "layout: the pipeline runs in this process) or render_worker (the URL of a running "
                "`datafarm render-worker`), not both and not neither; see docs/rendering.md")
        if model is not None:
            try:
                check_weights(Path(model))
            except WeightsMissing as error:
                raise RendererUnavailable(str(error)) from None
        if worker is not None and not str(worker).startswith(("http://", "https://")):
            raise RendererUnavailable(f"render_worker must be an http(s) URL such as http://gpu-node:8700, "
                                      f"got {worker!r}")

    def backend(self) -> GenerationBackend:
        self.check_available(self.model, self.worker)
        if self.worker is not None:
            return WorkerBackend(self.worker)
        return EmbeddedBackend(self.model, self.device)

    def request(self, episode: RecordedEpisode, references: dict[str, list[np.ndarray]], appearance: Appearance,
                contract: RenderContract) -> tuple[GenerationRequest, CanvasLayout]:
        """The generation request of one episode (the conditioning canvas, the contract's prompt and seed)."""
        check_contract_cameras(episode, contract)
        layout = CanvasLayout(tuple(episode.cameras), self.cell_height, self.cell_width, self.columns)
        conditioning = build_conditioning(episode, references, contract, layout)
        return GenerationRequest(conditioning, contract.canvas_prompt(), contract.negative_prompt,
                                 contract.episode_seed(appearance.seed), contract.control_weight,
                                 self.settings), layout

    def render(self, episode: RecordedEpisode, references: dict[str, list[np.ndarray]], appearance: Appearance,
               output_dir: Path, contract: RenderContract | None = None) -> dict[str, Path]:
        check_references(episode, references)
        started = time.perf_counter()
        backend = self.backend()
        request, layout = self.request(episode, references, appearance, contract or RenderContract())
        prepared = time.perf_counter()
        canvas = backend.generate(request)
        if canvas.shape != request.conditioning.control.shape:
            raise RenderError(f"the video model returned frames of shape {canvas.shape}, expected "
                              f"{request.conditioning.control.shape}")
        generated = time.perf_counter()
        output_dir = Path(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        partial = {camera: output_dir / f"{camera}.partial.mp4" for camera in layout.cameras}
        try:
            for camera, frames in layout.untile(canvas).items():
                spec = episode.meta["cameras"][camera]
                with VideoWriter(partial[camera], int(episode.meta["fps"]), self.crf) as writer:
                    for frame in resize_frames(frames, spec["width"], spec["height"]):
                        writer.write(frame)
        except BaseException:
            for path in partial.values():
                path.unlink(missing_ok=True)
            raise
        paths = {camera: path.replace(output_dir / f"{camera}.mp4") for camera, path in partial.items()}
        frames = len(canvas)
        # the review's seam and drift checks (datafarm.review.generated) read where each later chunk begins
        chunks = plan_chunks(frames, self.settings.chunk_frames, self.settings.overlap_frames)
        (output_dir / GENERATION_FILE).write_text(json.dumps(
            {"renderer": self.name, "seams": [chunk.start + chunk.keep for chunk in chunks[1:]]}))
        self.last_timing = {"prepare_s": prepared - started, "generate_s": generated - prepared, "frames": frames,
                            "seconds_per_frame": (generated - prepared) / max(frames, 1),
                            "total_s": time.perf_counter() - started}
        log.info("wan-vace render of %s: %d frames, canvas %d x %d, %.2f s per frame", episode.directory.name,
                 frames, layout.height, layout.width, self.last_timing["seconds_per_frame"])
        return paths

