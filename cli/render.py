"""Rendering commands: the GPU render worker."""

from __future__ import annotations

from pathlib import Path

import typer


def render_worker(
    model: Path = typer.Option(..., "--model", help="Local folder with Wan2.1-VACE in diffusers' layout."),
    port: int = typer.Option(8700, "--port", help="TCP port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0 to serve the cluster)."),
    device: str = typer.Option(None, "--device", help="torch device, e.g. cuda:1 (default: cuda if present)."),
    max_request_mb: int = typer.Option(512, "--max-request-mb", help="Largest request accepted."),
) -> None:
    """Serve the wan-vace renderer on one GPU (the model is loaded once; one episode at a time)."""
    from datafarm.render.render_worker import serve

    serve(str(model), host, port, device, max_request_mb)


def register(app: typer.Typer) -> None:
    app.command("render-worker")(render_worker)
