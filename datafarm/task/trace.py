"""The episode trace: simulator state at every control step, the only thing a judge reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np


@dataclass
class TraceRecorder:
    """Appends one row per control step."""

    time: list[float] = field(default_factory=list)
    qpos: list[np.ndarray] = field(default_factory=list)
    tcp: list[np.ndarray] = field(default_factory=list)
    poses: dict[str, list[np.ndarray]] = field(default_factory=dict)
    fixtures: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)

    def append(self, time: float, qpos: np.ndarray, tcp: np.ndarray, poses: dict[str, np.ndarray],
               fixtures: dict[str, dict[str, float]]) -> None:
        self.time.append(time)
        self.qpos.append(qpos)
        self.tcp.append(tcp)
        for name, pose in poses.items():
            self.poses.setdefault(name, []).append(pose)
        for name, state in fixtures.items():
            columns = self.fixtures.setdefault(name, {})
            for key, value in state.items():
                columns.setdefault(key, []).append(float(value))

    def freeze(self, heights: dict[str, float], info: dict | None = None) -> Trace:
        return Trace(
            time=np.asarray(self.time),
            qpos=np.asarray(self.qpos).reshape(len(self.time), -1),
            tcp=np.asarray(self.tcp).reshape(len(self.time), 2, 3),
            poses={k: np.asarray(v) for k, v in self.poses.items()},
            fixtures={k: {c: np.asarray(v) for c, v in cols.items()} for k, cols in self.fixtures.items()},
            heights=dict(heights),
            events=list(self.events),
            info=dict(info or {}),
        )


@dataclass(frozen=True)
class Trace:
    """Arrays over the episode's T control steps.

    time (T,); qpos (T, 14) rig state; tcp (T, 2, 3) left and right TCP positions; poses[name] (T, 4, 4) world pose of each object's bottom
    centre; fixtures[name][column] (T,); heights[name] object heights (m); events: perturbations
    and skill failures, each {"t": s, "kind": ...}; info: sampled episode values.
    """

    time: np.ndarray
    qpos: np.ndarray
    tcp: np.ndarray
    poses: dict[str, np.ndarray]
    fixtures: dict[str, dict[str, np.ndarray]]
    heights: dict[str, float]
    events: list[dict]
    info: dict

    def __len__(self) -> int:
        return len(self.time)

    def position(self, name: str) -> np.ndarray:
        """(T, 3) bottom-centre positions of an object."""
        if name not in self.poses:
            raise KeyError(f"no object {name!r} in the trace; it has {sorted(self.poses)}")
        return self.poses[name][:, :3, 3]

    def center(self, name: str) -> np.ndarray:
        """(T, 3) geometric centres."""
        poses = self.poses[name]
        return poses[:, :3, 3] + poses[:, :3, 2] * self.heights[name] / 2

    def tilt(self, name: str) -> np.ndarray:
        """(T,) angle (rad) between the object's up axis and the world's."""
        return np.arccos(np.clip(self.poses[name][:, 2, 2], -1.0, 1.0))

    def tcp_distance(self, name: str) -> np.ndarray:
        """(T,) distance from the nearer TCP to an object's centre."""
        return np.linalg.norm(self.tcp - self.center(name)[:, None, :], axis=2).min(axis=1)

    def fixture(self, name: str, column: str) -> np.ndarray:
        if name not in self.fixtures or column not in self.fixtures[name]:
            known = {k: sorted(v) for k, v in self.fixtures.items()}
            raise KeyError(f"no fixture column {name}.{column} in the trace; it has {known}")
        return self.fixtures[name][column]

    def last(self, seconds: float) -> slice:
        """Index range of the final `seconds` of the episode."""
        if len(self.time) == 0:
            return slice(0, 0)
        return slice(int(np.searchsorted(self.time, self.time[-1] - seconds)), len(self.time))

    def save(self, path) -> None:
        """Everything, in one .npz (heights, events and info as a JSON string): Trace.load reads it back."""
        arrays = {"time": self.time, "qpos": self.qpos, "tcp": self.tcp}
        arrays.update({f"pose/{k}": v for k, v in self.poses.items()})
        arrays.update({f"fixture/{k}/{c}": v for k, cols in self.fixtures.items() for c, v in cols.items()})
        meta = {"heights": self.heights, "events": self.events, "info": self.info}
        arrays["meta"] = np.array(json.dumps(meta, default=_jsonable))
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path) -> Trace:
        """A trace written by save (no pickles: a file from a sandbox is data, never code)."""
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"])) if "meta" in data.files else {}
            poses = {k[len("pose/"):]: data[k] for k in data.files if k.startswith("pose/")}
            fixtures: dict[str, dict[str, np.ndarray]] = {}
            for key in data.files:
                if key.startswith("fixture/"):
                    name, column = key[len("fixture/"):].rsplit("/", 1)
                    fixtures.setdefault(name, {})[column] = data[key]
            return cls(time=data["time"], qpos=data["qpos"], tcp=data["tcp"], poses=poses, fixtures=fixtures,
                       heights={k: float(v) for k, v in meta.get("heights", {}).items()},
                       events=list(meta.get("events", [])), info=dict(meta.get("info", {})))


def _jsonable(value):
    """numpy scalars and arrays in events or info, as JSON."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else str(value)
