"""Run lerobot's own training script in this process and record its metrics as JSON lines.

Usage (what `datafarm.policy.train` starts as a child process):
``python -m datafarm.policy.lerobot_run METRICS.jsonl -- <lerobot-train arguments>``.

lerobot logs its `MetricsTracker` every ``log_freq`` steps, but formats the step as "1K", so the
loss curve is taken from the tracker object itself: a filter on the root logger (lerobot replaces
the root logger's handlers, not its filters) appends ``tracker.to_dict()`` to METRICS.jsonl.
When the dataset has a frame store (a derived dataset, :mod:`datafarm.policy.frame_store`), the
datasets lerobot makes read their images from it. A fresh ACT starts its ResNet from the state dict named
by ``DATAFARM_BACKBONE_INIT`` when set (a pose-pretrained backbone). An ACT whose ResNet is not ImageNet's
trains it with BatchNorm (`with_trainable_backbone_norm`); everything else is lerobot's own training.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path


BACKBONE_INIT_ENV = "DATAFARM_BACKBONE_INIT"  # a ResNet state dict a fresh ACT's backbone starts from


class MetricsRecorder(logging.Filter):
    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def filter(self, record: logging.LogRecord) -> bool:
        from lerobot.utils.logging_utils import MetricsTracker

        if isinstance(record.msg, MetricsTracker):
            values = {key: float(value) for key, value in record.msg.to_dict().items()}
            with open(self.path, "a") as f:
                f.write(json.dumps(values) + "\n")
        return True


def _with_frame_store(make_datasets):
    """Wrap lerobot's dataset factory: datasets whose root has a frame store read their images from it."""
    from datafarm.policy.frame_store import has_frame_store, use_frame_store

    def make(cfg, *args, **kwargs):
        made = make_datasets(cfg, *args, **kwargs)
        for dataset in made:
            if dataset is not None and dataset.meta.camera_keys and \
                    has_frame_store(dataset.root, dataset.meta.camera_keys):
                use_frame_store(dataset, dataset.meta.camera_keys)
                logging.info("reading %s's frames from its frame store", dataset.root)
        return made

    return make


def with_trainable_backbone_norm(policy):
    """ACT builds its ResNet with FrozenBatchNorm2d, made for ImageNet weights and their statistics. From
    random weights (``pretrained_backbone_weights`` null: all we have offline) a frozen norm is the
    identity, so the backbone would train with no normalisation at all, and slowly. Swap each one for a
    BatchNorm2d holding the same four tensors (on resume, the trained ones) and no batch counter (its
    momentum does not use one), so the checkpoint has the keys lerobot's own ACT has. In eval mode
    BatchNorm2d computes what FrozenBatchNorm2d computes from them: the checkpoint loads and acts
    unchanged. Returns how many norms were swapped."""
    import torch
    from torchvision.ops.misc import FrozenBatchNorm2d

    backbone = getattr(getattr(policy, "model", None), "backbone", None)
    if backbone is None or getattr(policy.config, "pretrained_backbone_weights", "") is not None:
        return 0
    frozen = [(name, module) for name, module in backbone.named_modules() if isinstance(module, FrozenBatchNorm2d)]
    for name, module in frozen:
        norm = torch.nn.BatchNorm2d(module.weight.numel(), eps=module.eps).to(module.weight.device)
        with torch.no_grad():
            for tensor in ("weight", "bias", "running_mean", "running_var"):
                getattr(norm, tensor).copy_(getattr(module, tensor))
        norm.register_buffer("num_batches_tracked", None)
        parent, _, attribute = name.rpartition(".")
        setattr(backbone.get_submodule(parent), attribute, norm)
    return len(frozen)


def load_backbone_init(policy, path: Path) -> None:
    """Start ACT's backbone from a ResNet state dict (:mod:`datafarm.policy.pose_pretraining`'s); every key must fit."""
    import torch

    backbone = getattr(getattr(policy, "model", None), "backbone", None)
    if backbone is None:
        raise ValueError(f"{type(policy).__name__} has no ResNet backbone to start from {path}")
    backbone.load_state_dict(torch.load(path, map_location="cpu", weights_only=True), strict=True)


def _with_backbone_setup(make_policy):
    def make(*args, **kwargs):
        policy = make_policy(*args, **kwargs)
        if init := os.environ.get(BACKBONE_INIT_ENV):
            load_backbone_init(policy, Path(init))
            logging.info("the backbone starts from %s", init)
        if swapped := with_trainable_backbone_norm(policy):
            logging.info("the backbone is not ImageNet's: its %d frozen norms train as BatchNorm", swapped)
        return policy

    return make


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] != "--":
        raise SystemExit("usage: python -m datafarm.policy.lerobot_run METRICS.jsonl -- <lerobot-train arguments>")
    from lerobot.scripts import lerobot_train

    logging.getLogger().addFilter(MetricsRecorder(Path(argv[0])))
    lerobot_train.make_train_eval_datasets = _with_frame_store(lerobot_train.make_train_eval_datasets)
    lerobot_train.make_policy = _with_backbone_setup(lerobot_train.make_policy)
    sys.argv = ["lerobot-train", *argv[2:]]
    lerobot_train.main()


if __name__ == "__main__":
    main(sys.argv[1:])
