"""A derived dataset's frames decoded once into a tensor store, so a training step decodes no image.

lerobot reads an ACT sample's 50-step action chunk with ``hf_dataset[rows]``, and its dataset transform
decodes every column of those rows, the PNG images included: 51 image decodes for the one image the
sample uses (about 90% of a CPU step's data time, measured by ``benchmarks/train_step.py``). The store
is one ``(frames, 3, h, w)`` uint8 array per camera, ``frames/<camera key>.npy`` inside the derived
dataset, indexed by lerobot's absolute frame index and memory-mapped by every loader worker.
:func:`use_frame_store` makes a lerobot dataset read its images from it: the image columns leave the
parquet view, and each sample takes its frame from the store (as lerobot's own float CHW in [0, 1]).
The store is written by the derived-dataset build, before its stamp, so it is rebuilt with it.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

STORE_DIR = "frames"


def store_path(dataset_root: Path, camera_key: str) -> Path:
    return Path(dataset_root) / STORE_DIR / f"{camera_key}.npy"


def has_frame_store(dataset_root: Path, camera_keys: list[str]) -> bool:
    return all(store_path(dataset_root, key).is_file() for key in camera_keys)


def build_frame_store(dataset_root: Path, camera_keys: list[str]) -> None:
    """Decode every image of a LeRobot image dataset (PNG in parquet) into ``frames/<key>.npy``."""
    import pyarrow.parquet as pq
    from PIL import Image

    files = sorted((Path(dataset_root) / "data").glob("chunk-*/file-*.parquet"))
    tables = [pq.read_table(f, columns=["index", *camera_keys]) for f in files]
    total = sum(t.num_rows for t in tables)
    (Path(dataset_root) / STORE_DIR).mkdir(exist_ok=True)
    for key in camera_keys:
        store = None
        for table in tables:
            indices = table.column("index").to_numpy()
            for index, cell in zip(indices, table.column(key).to_pylist()):
                frame = np.asarray(Image.open(io.BytesIO(cell["bytes"])).convert("RGB")).transpose(2, 0, 1)
                if store is None:
                    store = np.empty((total, *frame.shape), dtype=np.uint8)
                store[int(index)] = frame
        partial = store_path(dataset_root, key).with_suffix(".partial.npy")
        np.save(partial, store)
        partial.rename(store_path(dataset_root, key))
        log.info("frame store %s: %d frames of %s", store_path(dataset_root, key), total, key)


def use_frame_store(dataset, camera_keys: list[str]) -> None:
    """Make a lerobot ``LeRobotDataset`` take these cameras' frames from its root's store, not its parquet."""
    from datafarm.policy.frame_store_reader import FrameStoreReader

    FrameStoreReader.wrap(dataset._ensure_reader(), {key: store_path(dataset.root, key) for key in camera_keys})
