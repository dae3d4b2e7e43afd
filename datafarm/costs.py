"""The cost ledger: what each phase and episode spent, in CPU-seconds, GPU-seconds and LLM USD.

Entries are appended to <workspace>/costs.jsonl as they happen (one JSON object a line), so a
killed run keeps what it had spent. Prices come from configs/prices/default.yaml (or DATAFARM_PRICES).
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from datafarm.paths import config_path
from datafarm.workspace.jsonl import append_jsonl, read_jsonl

LEDGER_FILE = "costs.jsonl"


class Prices(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpu_second: float
    gpu_second: float
    llm_models: dict[str, dict[str, float]] = {}


def load_prices() -> Prices:
    path = Path(os.environ.get("DATAFARM_PRICES") or config_path("prices", "default.yaml"))
    return Prices.model_validate(yaml.safe_load(path.read_text()))


@dataclass(frozen=True)
class CostEntry:
    phase: str
    item: str  # "cpu", "gpu" or "llm:<model>"
    quantity: float  # seconds, or tokens for LLM entries
    unit: str
    unit_price: float
    usd: float
    episode: int | None = None
    time: float = 0.0


class CostLedger:
    def __init__(self, workspace_root: Path, prices: Prices | None = None):
        self.path = Path(workspace_root) / LEDGER_FILE
        self.prices = prices or load_prices()

    def add(self, phase: str, item: str, quantity: float, unit: str, unit_price: float,
            episode: int | None = None, usd: float | None = None) -> CostEntry:
        entry = CostEntry(phase, item, quantity, unit, unit_price,
                          quantity * unit_price if usd is None else usd, episode, time.time())
        append_jsonl(self.path, asdict(entry))  # one whole line; a kill's torn line never blocks reading
        return entry

    def add_cpu(self, phase: str, seconds: float, episode: int | None = None) -> CostEntry:
        return self.add(phase, "cpu", seconds, "cpu-s", self.prices.cpu_second, episode)

    def add_gpu(self, phase: str, seconds: float, episode: int | None = None) -> CostEntry:
        return self.add(phase, "gpu", seconds, "gpu-s", self.prices.gpu_second, episode)

    @contextmanager
    def measure_cpu(self, phase: str, episode: int | None = None, thread_only: bool = False):
        """Charge the CPU time spent inside the block: this process's and its finished children's, or with
        `thread_only` this thread's alone (a block that runs beside others in the same process); either way
        with what the sandboxed workers this thread called reported."""
        start = cpu_seconds(thread_only)
        try:
            yield
        finally:
            self.add_cpu(phase, cpu_seconds(thread_only) - start, episode)

    def entries(self) -> list[CostEntry]:
        return [CostEntry(**record) for record in read_jsonl(self.path)]

    def by_phase(self) -> dict[str, dict[str, float]]:
        totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for entry in self.entries():
            totals[entry.phase][entry.item] += entry.usd
            totals[entry.phase]["total"] += entry.usd
        return {phase: dict(items) for phase, items in totals.items()}

    def by_episode(self) -> dict[int, float]:
        totals: dict[int, float] = defaultdict(float)
        for entry in self.entries():
            if entry.episode is not None:
                totals[entry.episode] += entry.usd
        return dict(totals)

    def total(self) -> float:
        return sum(entry.usd for entry in self.entries())


def cpu_seconds(thread_only: bool = False) -> float:
    """CPU seconds so far: this process's and its finished children's, or this thread's alone; either way
    with what the sandboxed workers this thread called reported."""
    worker = getattr(_worker_cpu, "seconds", 0.0)
    if thread_only:
        usage = resource.getrusage(resource.RUSAGE_THREAD)
        return usage.ru_utime + usage.ru_stime + worker
    # process_time has nanosecond resolution; os.times counts 10 ms ticks, too coarse for a short block.
    children = os.times()
    return time.process_time() + children.children_user + children.children_system + worker


# CPU that the sandboxed workers (the expert's, the judge's) reported, request by request. It never
# reaches this process's children times (bubblewrap does not hand its children's usage up; measured in
# tests/task/test_isolation.py), so each request's CPU is counted when its reply comes, in the blocks of the
# thread that made the request (a rollout running beside a render in this process is not charged to both).
_worker_cpu = threading.local()


def charge_worker_cpu(seconds: float) -> None:
    """A sandboxed worker spent `seconds` of CPU on a request this thread made (counted from now on)."""
    _worker_cpu.seconds = getattr(_worker_cpu, "seconds", 0.0) + max(0.0, seconds)
