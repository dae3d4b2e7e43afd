"""Progress bars per phase while the farm runs, read from the workspace (datafarm.farm.progress).

    with farm_progress(workspace_path):
        farm_flow(str(workspace_path))

A background thread polls the workspace every `interval` seconds and moves the bars; log lines
(one per notable event, see datafarm.logs) print above them because both use the same console. On a
terminal the bars are live; piped to a file they print once, at the end.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from datafarm.errors import DataFarmError
from datafarm.farm.progress import FarmProgress, read_progress
from datafarm.logs import console
from datafarm.workspace import Workspace

log = logging.getLogger(__name__)

# bar -> (what it counts, what its total is, the note beside it)
BARS = {
    "rollout": (lambda p: p.kept, lambda p: max(p.target, p.kept), lambda p: f"kept, {p.tried} seeds tried"),
    "render": (lambda p: p.rendered, lambda p: max(p.target, p.kept), lambda p: "rendered"),
    "review": (lambda p: p.admitted, lambda p: p.target, lambda p: f"admitted, {p.reviewed} reviewed"),
    "harvest": (lambda p: p.harvested, lambda p: p.target, lambda p: "in the dataset"),
}


def _update(progress: Progress, bars: dict[str, TaskID], state: FarmProgress) -> None:
    for name, (done, total, note) in BARS.items():
        progress.update(bars[name], completed=done(state), total=total(state), note=note(state))


@contextmanager
def farm_progress(workspace_path: str | Path, interval: float = 0.5) -> Iterator[Progress]:
    """Show a bar per episode phase (rollout, render, review, harvest) while the block runs."""
    workspace = Workspace.open(workspace_path)
    progress = Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console())
    bars = {name: progress.add_task(name, total=None, note="") for name in BARS}
    stop = threading.Event()

    def poll() -> None:
        while True:
            try:
                _update(progress, bars, read_progress(workspace))
            except (OSError, DataFarmError) as error:  # a record being replaced; the run reports real errors
                log.debug("progress not read this time: %s", error)
            if stop.wait(interval):
                return

    thread = threading.Thread(target=poll, name="farm-progress", daemon=True)
    with progress:
        thread.start()
        try:
            yield progress
        finally:
            stop.set()
            thread.join()
            try:
                _update(progress, bars, read_progress(workspace))
            except (OSError, DataFarmError):
                pass
