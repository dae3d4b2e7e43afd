"""The dataset writer: admitted episodes into a LeRobot v3.0 dataset."""

from datafarm.dataset.harvest import (
    FASTEST_SETTINGS,
    HarvestError,
    HarvestItem,
    HarvestReport,
    WriterSettings,
    dataset_features,
    extendable,
    harvest,
)

__all__ = ["FASTEST_SETTINGS", "HarvestError", "HarvestItem", "HarvestReport", "WriterSettings",
           "dataset_features", "extendable", "harvest"]
