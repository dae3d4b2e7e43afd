"""Storage commands: `datafarm push WS s3://bucket/prefix`, and the remote side of `datafarm verify`.

Endpoint and credentials: boto3's standard configuration (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY or AWS_PROFILE); see docs/deploy.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                           TransferSpeedColumn)

from datafarm.logs import console as log_console
from datafarm.storage import TransferProgress

console = Console()


class BarProgress(TransferProgress):
    """One rich bar over all the bytes of a transfer, with the count of files done beside it."""

    def __init__(self, progress: Progress, description: str):
        self.progress = progress
        self.description = description
        self.bar = None
        self.files = 0
        self.done = 0
        self.lock = threading.Lock()

    def begin(self, files: int, total_bytes: int) -> None:
        self.files = files
        self.bar = self.progress.add_task(self.description, total=total_bytes, files=f"0/{files} files")

    def advance(self, nbytes: int) -> None:
        self.progress.advance(self.bar, nbytes)

    def file_done(self, relative: str, outcome: str) -> None:
        with self.lock:
            self.done += 1
            self.progress.update(self.bar, files=f"{self.done}/{self.files} files")


@contextmanager
def transfer_bar(description: str) -> Iterator[BarProgress]:
    progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                        TextColumn("{task.fields[files]}"), TimeRemainingColumn(), console=log_console())
    with progress:
        yield BarProgress(progress, description)


def push(
    workspace: Path = typer.Argument(..., help="The workspace whose delivery to upload (dataset/ + manifest.json)."),
    destination: str = typer.Argument(None, help="Where: s3://bucket/prefix (default: the workspace's push_to "
                                      "setting, from `datafarm prepare --push-to`)."),
    multipart_threshold: str | None = typer.Option(None, help="Files this large go up in parts (e.g. 64MiB; default: "
                                            "DATAFARM_S3_MULTIPART_THRESHOLD or 64MiB)."),
    part_size: str | None = typer.Option(None, help="Part size (e.g. 16MiB; S3 needs at least 5MiB; default: "
                                  "DATAFARM_S3_PART_SIZE or 16MiB)."),
    workers: int | None = typer.Option(None, help="Files uploaded at the same time (default: DATAFARM_S3_WORKERS or 4)."),
) -> None:
    """Upload the delivery to S3: SHA-256 of each file in its metadata; a rerun sends only what is missing."""
    from datafarm.storage import load_storage_settings, parse_s3_uri, push as run_push, push_destination
    from datafarm.workspace import Workspace

    if destination is not None:
        parse_s3_uri(destination)  # a bad URI is refused before the workspace is read
    settings = load_storage_settings({"multipart_threshold": multipart_threshold, "part_size": part_size,
                                      "workers": workers})
    ws = Workspace.open(workspace)
    location = push_destination(ws, destination)
    with transfer_bar("push") as bar:
        report = run_push(ws, location, settings, bar)
    console.print(f"[green]pushed[/green] to {report.destination}: {len(report.uploaded)} files uploaded "
                  f"({report.bytes_uploaded / 1e6:.1f} MB"
                  f"{f', {report.parts_reused} parts resumed' if report.parts_reused else ''}), "
                  f"{len(report.skipped)} already there"
                  f"{f', {len(report.deleted)} stale objects deleted' if report.deleted else ''}; "
                  f"check it with `datafarm verify {report.destination}`")


def verify_remote(uri: str):
    """The report of `datafarm verify s3://...` (printed by the caller, like the local one)."""
    from datafarm.storage import load_storage_settings, parse_s3_uri, verify_remote as run_verify

    location = parse_s3_uri(uri)
    settings = load_storage_settings()
    with transfer_bar("verify") as bar:
        return run_verify(location, settings, bar)


def register(app: typer.Typer) -> None:
    app.command()(push)
