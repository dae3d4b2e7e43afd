"""Joint-state tables of a calibration folder: joints.csv or joints.parquet -> (T, 14) array.

Columns are matched by name when the table has every name of `AXIS_NAMES` (in any order, other
columns ignored); otherwise, after dropping index-like columns (time, timestamp, frame, ...), exactly
14 numeric columns are taken in file order. A parquet file may instead hold one column of 14-lists
(``observation.state`` or ``state``), as LeRobot writes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from datafarm.calibration.errors import CalibrationError
from datafarm.sim.spaces import AXIS_NAMES, DOF

INDEX_COLUMNS = frozenset({"t", "time", "timestamp", "frame", "frame_index", "index", "step"})
VECTOR_COLUMNS = ("observation.state", "state")


def read_joint_table(path: Path) -> np.ndarray:
    """(T, 14) float64 joint states from a csv or parquet table; CalibrationError naming the problem."""
    table = _read_table(path)
    if table.empty:
        raise CalibrationError(f"{path} has no rows; it needs a header and one row of {DOF} joint values per "
                               "video frame")
    for column in VECTOR_COLUMNS:
        if column in table.columns and table[column].map(lambda v: np.ndim(v) == 1).all():
            return _vector_column(path, table[column])
    columns = _state_columns(path, table)
    try:
        return table[columns].apply(pd.to_numeric, errors="raise").to_numpy(dtype=np.float64)
    except (ValueError, TypeError) as error:
        raise CalibrationError(f"{path}: a joint column holds a non-number ({error}); every value must be a "
                               "number (rad for joints, m for the gripper opening)") from error


def _read_table(path: Path) -> pd.DataFrame:
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, skipinitialspace=True)
    except Exception as error:  # pandas raises many types for a broken file
        raise CalibrationError(f"{path} cannot be read as a {path.suffix[1:]} table ({error}); write a header row "
                               f"and {DOF} comma-separated columns named like {list(AXIS_NAMES[:2])}...") from error


def _state_columns(path: Path, table: pd.DataFrame) -> list[str]:
    names = [str(c).strip() for c in table.columns]
    table.columns = names
    if set(AXIS_NAMES) <= set(names):
        return list(AXIS_NAMES)
    candidates = [n for n in names if n.lower() not in INDEX_COLUMNS]
    if len(candidates) != DOF:
        raise CalibrationError(
            f"{path} has {len(candidates)} joint columns {candidates[:20]}, expected {DOF}: name them "
            f"{', '.join(AXIS_NAMES)} or give exactly {DOF} numeric columns (left arm joints 1-6 and gripper, "
            "then the right arm)")
    return candidates


def _vector_column(path: Path, column: pd.Series) -> np.ndarray:
    widths = column.map(len).unique()
    if len(widths) != 1 or widths[0] != DOF:
        raise CalibrationError(f"{path}: column {column.name!r} holds vectors of length {sorted(widths)}, "
                               f"expected {DOF}")
    return np.stack(column.to_numpy()).astype(np.float64)
