"""Speed and memory of the wan-vace generation step (datafarm.render.wan_vace.generate) on one canvas of three views.

    python benchmarks/render_wan_vace.py                        # tiny random model on the CPU (seconds)
    python benchmarks/render_wan_vace.py --size 1.3b            # random weights of Wan2.1-VACE-1.3B's size (GPU)
    python benchmarks/render_wan_vace.py --model DIR            # real weights from a local folder (GPU)
        [--cell 240x320] [--frames 49] [--chunk 49] [--overlap 9] [--steps 20] [--guidance 5.0] [--fps 30]

The conditioning is synthetic (a depth-like gradient with a moving block per view, all generated): the
model's cost does not depend on what the control shows. Prints, after one warm-up chunk:
- seconds per frame of the canvas (all three views at once) and per view-second of video
  (generation seconds / (frames / fps) / views): the figure the issue's goal is stated in
  (at most 2 GPU-seconds per view-second);
- peak GPU memory when on a GPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from datafarm.render.wan_control import CanvasLayout, Conditioning
from datafarm.render.wan_models import TINY, WAN_1_3B, build_random_pipeline, load_pipeline
from datafarm.render.wan_vace import GenerationRequest, GenerationSettings, generate

CAMERAS = ("head", "left_wrist", "right_wrist")


def synthetic_conditioning(layout: CanvasLayout, frames: int) -> Conditioning:
    ramp = np.linspace(40, 230, layout.cell_height, dtype=np.float32)[:, None] * np.ones((1, layout.cell_width))
    views, masks = {}, {}
    for camera in CAMERAS:
        video = np.repeat(ramp[None], frames, axis=0).astype(np.uint8)
        for t in range(frames):
            x0 = (t * 3) % max(layout.cell_width - 20, 1)
            video[t, layout.cell_height // 4:layout.cell_height // 2, x0:x0 + 20] = 250
        views[camera] = np.repeat(video[..., None], 3, axis=-1)
        masks[camera] = np.full((frames, layout.cell_height, layout.cell_width), 255, np.uint8)
    reference = np.random.default_rng(0).integers(0, 255, (layout.height, layout.width, 3), dtype=np.uint8)
    return Conditioning(layout.tile(views), layout.tile(masks), reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="local Wan VACE folder (diffusers layout); default: random weights")
    parser.add_argument("--size", choices=["tiny", "1.3b"], default="tiny")
    parser.add_argument("--cell", default=None, help="HxW of one view, multiples of 16 (tiny: 16x32, else 240x320)")
    parser.add_argument("--frames", type=int, default=None)
    parser.add_argument("--chunk", type=int, default=None)
    parser.add_argument("--overlap", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--guidance", type=float, default=None)
    parser.add_argument("--fps", type=int, default=30)
    args = parser.parse_args()

    import torch

    tiny = args.model is None and args.size == "tiny"
    cell = args.cell or ("16x32" if tiny else "240x320")
    frames = args.frames or (17 if tiny else 49)
    settings = GenerationSettings(chunk_frames=args.chunk or (9 if tiny else 49),
                                  overlap_frames=args.overlap or (5 if tiny else 9),
                                  steps=args.steps or (2 if tiny else 20),
                                  guidance_scale=args.guidance if args.guidance is not None else (1.0 if tiny else 5.0))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.perf_counter()
    if args.model:
        pipeline, source = load_pipeline(args.model, device), args.model
    else:
        size = TINY if tiny else WAN_1_3B
        random_pipeline = build_random_pipeline(size)
        with tempfile.TemporaryDirectory() as folder:  # through the same from_pretrained path as real weights
            random_pipeline.save_pretrained(folder)
            del random_pipeline
            pipeline = load_pipeline(folder, device)
        source = f"random weights ({args.size})"
    load_s = time.perf_counter() - started
    height, width = (int(v) for v in cell.split("x"))
    layout = CanvasLayout(CAMERAS, height, width, 2)
    conditioning = synthetic_conditioning(layout, frames)
    request = GenerationRequest(conditioning, "A real dual-arm robot workcell, photographic.", "blurry, cartoon", 0,
                                1.0, settings)
    warmup = GenerationRequest(Conditioning(conditioning.control[:settings.chunk_frames],
                                            conditioning.mask[:settings.chunk_frames], conditioning.reference),
                               request.prompt, request.negative_prompt, 0, 1.0, settings)
    generate(pipeline, warmup)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    generate(pipeline, request)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    view_seconds = frames / args.fps * len(CAMERAS)
    print(f"model: {source} on {device} (loaded in {load_s:.1f} s)")
    print(f"canvas {layout.height}x{layout.width} ({len(CAMERAS)} views of {cell}), {frames} frames in chunks of "
          f"{settings.chunk_frames} (overlap {settings.overlap_frames}), {settings.steps} steps, "
          f"guidance {settings.guidance_scale}")
    print(f"generation: {seconds:.2f} s = {seconds / frames:.3f} s per canvas frame = "
          f"{seconds / view_seconds:.2f} {'GPU' if device == 'cuda' else 'CPU'}-s per view-second at {args.fps} fps")
    if device == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
