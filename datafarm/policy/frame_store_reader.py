"""lerobot's dataset reader with some cameras' frames read from a frame store (imported only by training).

A module of its own because it imports lerobot at the top: loader workers unpickle the reader by
its class, so the class must be importable by name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from lerobot.datasets.dataset_reader import DatasetReader


class FrameStoreReader(DatasetReader):
    """lerobot's reader, with the images of ``frame_store``'s cameras read from memory-mapped arrays."""

    frame_store: dict[str, str]
    frame_transforms: object

    @classmethod
    def wrap(cls, reader: DatasetReader, stores: dict[str, Path]) -> None:
        """Turn lerobot's reader into this class in place (the dataset keeps its one reader)."""
        if type(reader) is not DatasetReader:
            raise TypeError(f"a frame store wraps lerobot's DatasetReader, not {type(reader).__name__}")
        if reader.hf_dataset is None:
            reader.load_and_activate()
        reader.hf_dataset = reader.hf_dataset.remove_columns(list(stores))
        reader.__class__ = cls
        reader.frame_store = {key: str(path) for key, path in stores.items()}
        # lerobot applies its image transforms inside get_item, where these images are no longer present
        reader.frame_transforms, reader._image_transforms = reader._image_transforms, None

    def get_item(self, idx: int) -> dict:
        item = super().get_item(idx)
        row = int(item["index"])
        for key, store in self._frame_arrays().items():
            frame = torch.from_numpy(np.array(store[row], dtype=np.float32) / 255.0)
            item[key] = frame if self.frame_transforms is None else self.frame_transforms(frame)
        return item

    def _frame_arrays(self) -> dict[str, np.ndarray]:
        if getattr(self, "_opened_frames", None) is None:  # opened once per process
            self._opened_frames = {key: np.load(path, mmap_mode="r") for key, path in self.frame_store.items()}
        return self._opened_frames

    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "_opened_frames"}
