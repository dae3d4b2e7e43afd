"""Cost of one training step with lerobot's own training, and how much of it is loading data.

    python benchmarks/train_step.py WS [--policy act] [--preset cpu] [--steps 12] [--samples 20]

Prints:
- the derived dataset's build time (the one pass that decodes the delivery's videos), or "reused";
- per-sample load time through lerobot's LeRobotDataset, each sample with the preset's action chunk
  (what a training step asks for): the delivered video dataset (three cameras decoded from mp4 per
  sample), the derived image dataset read by lerobot alone (its transform decodes the PNG of every
  row of the chunk), and the same through the frame store the training reads;
- s/step and the loading share (lerobot's ``data_s / (data_s + updt_s)``, first window skipped) of a short
  training run of the preset, in a scratch folder (the workspace's policies/ is not touched; the run's
  cost is charged to the workspace's ledger like any training).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from datafarm.policy.derived import delivered_data
from datafarm.policy.frame_store import use_frame_store
from datafarm.policy.presets import load_preset
from datafarm.policy.train import train_policy, training_data


def per_sample_seconds(repo_id: str, root: Path, samples: int, chunk: int, fps: int, store: bool = False) -> float:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset(repo_id, root=root, delta_timestamps={"action": [i / fps for i in range(chunk)]})
    if store:
        use_frame_store(dataset, dataset.meta.camera_keys)
    indices = random.Random(0).sample(range(len(dataset)), min(samples, len(dataset)))
    dataset[indices[0]]  # open files, warm caches
    started = time.perf_counter()
    for index in indices:
        dataset[index]
    return (time.perf_counter() - started) / len(indices)


def sizes_label(sizes: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{camera} {h}x{w}" for camera, (h, w) in sizes.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--policy", default="act")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--steps", type=int, default=12, help="training steps to time (one log window a step)")
    parser.add_argument("--samples", type=int, default=20, help="dataset samples to time per dataset")
    args = parser.parse_args()

    preset = load_preset(args.policy, args.preset)
    started = time.perf_counter()
    data = training_data(args.workspace, preset)
    built = time.perf_counter() - started
    print(f"training data: {data.root} ({'derived' if data.derived else 'delivered'}, "
          f"{sizes_label(data.image_sizes)}): "
          + (f"built in {data.built_seconds:.1f} s" if data.built_seconds else f"reused ({built:.1f} s to check)"))

    chunk = int(preset.policy_options.get("chunk_size", 1))
    delivered = delivered_data(args.workspace)
    video = per_sample_seconds(delivered.repo_id, delivered.root, args.samples, chunk, delivered.fps)
    print(f"per sample with a {chunk}-step action chunk, delivered video dataset (3 cameras, "
          f"{sizes_label(delivered.image_sizes)}): {video * 1000:.1f} ms")
    if data.derived:
        for label, store in (("lerobot's parquet images", False), ("frame store", True)):
            image = per_sample_seconds(data.repo_id, data.root, args.samples, chunk, data.fps, store)
            print(f"per sample, derived dataset ({'+'.join(data.cameras)}), {label}: {image * 1000:.1f} ms "
                  f"(x{preset.batch_size} per batch: {image * preset.batch_size:.3f} s)")

    timed = preset.model_copy(update={"steps": args.steps, "log_freq": 1, "save_freq": args.steps})
    with tempfile.TemporaryDirectory(prefix="train-step-") as scratch:
        result = train_policy(args.workspace, args.policy, args.preset, preset=timed, folder=Path(scratch) / "policy")
    timing = result.timing
    print(f"{preset.folder_name}: batch {preset.batch_size}, {args.steps} steps in {result.wall_seconds:.1f} s wall "
          f"({result.cpu_seconds:.1f} CPU-s, including start-up)")
    if timing:
        print(f"s/step {timing.seconds_per_step:.3f}  loading share {timing.loading_share:.1%}  "
              f"(over {timing.windows} steps after the first)")


if __name__ == "__main__":
    main()
