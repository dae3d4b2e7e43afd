"""The render worker: an HTTP service holding one Wan VACE pipeline on one GPU, and the farm's client for it.

Service (`create_app`, started by `datafarm render-worker --model PATH --port N`):
- the pipeline is loaded once, in a background thread at start-up: `GET /health` answers at once (the
  process is alive), `GET /ready` answers 200 once the model is loaded (503 before, 500 if loading failed);
- `POST /render` takes a `GenerationRequest` (datafarm.render.wan_vace, an npz body) and answers the canvas
  frames (an npz). One request at a time per worker (one GPU): a second one gets 503 "busy" with
  Retry-After instead of queueing on the GPU; a body over the size limit gets 413; a malformed one 422.

Client (`post_render`): 503, 502, 504, connection failures and time-outs are transient (RenderWorkerUnreachable /
RenderWorkerBusy, TransientError): retried here a few times, then left to the task's own retries;
413 and 4xx are permanent (RenderError, never retried); a 500 is the model failing on this input: permanent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from datafarm.errors import TransientError
from datafarm.render.base import RenderError

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_MB = 512
BODY_TYPE = "application/octet-stream"


class RenderWorkerBusy(TransientError):
    """The worker is rendering another episode, or still loading its model."""


class RenderWorkerUnreachable(TransientError):
    """The worker did not answer (connection refused, time-out, gateway error)."""


class RequestTooLarge(RenderError):
    """The request is over the worker's size limit."""


@dataclass
class WorkerState:
    """What the service knows: its model (once loaded), its one GPU slot, and counters for /health."""

    load: Callable[[], object]
    max_request_bytes: int
    pipeline: object | None = None
    load_error: str | None = None
    gpu: threading.Lock = field(default_factory=threading.Lock)
    counts: dict[str, int] = field(default_factory=lambda: {"served": 0, "busy": 0, "too_large": 0,
                                                             "bad_request": 0, "failed": 0})

    def load_now(self) -> None:
        try:
            self.pipeline = self.load()
        except Exception as error:  # noqa: BLE001 - reported by /ready, and in the log
            self.load_error = f"{type(error).__name__}: {error}"
            log.exception("the render worker could not load its model")


def create_app(load: Callable[[], object], max_request_bytes: int = DEFAULT_MAX_REQUEST_MB << 20):
    """The FastAPI app; `load()` returns the pipeline (called once, in a thread, when the app starts).

    (FastAPI reads the endpoints' annotations, so its names are imported at module level.)"""
    from datafarm.render.wan_vace import GenerationRequest, frames_to_bytes, generate

    state = WorkerState(load, max_request_bytes)

    @asynccontextmanager
    async def lifespan(app):
        threading.Thread(target=state.load_now, name="load-model", daemon=True).start()
        yield

    app = FastAPI(title="datafarm render worker", lifespan=lifespan)
    app.state.worker = state

    def refuse(status: int, count: str, message: str, **headers) -> JSONResponse:
        state.counts[count] += 1
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    @app.get("/health")
    def health() -> dict:
        return {"alive": True, "ready": state.pipeline is not None, "busy": state.gpu.locked(), **state.counts}

    @app.get("/ready")
    def ready() -> JSONResponse:
        if state.load_error:
            return JSONResponse({"ready": False, "error": state.load_error}, status_code=500)
        return JSONResponse({"ready": state.pipeline is not None}, status_code=200 if state.pipeline else 503)

    @app.post("/render")
    async def render(request: Request) -> Response:
        declared = int(request.headers.get("content-length") or 0)
        if declared > state.max_request_bytes:
            return refuse(413, "too_large", f"request of {declared} bytes is over this worker's limit of "
                                            f"{state.max_request_bytes} bytes")
        body = bytearray()
        async for part in request.stream():
            body += part
            if len(body) > state.max_request_bytes:
                return refuse(413, "too_large",
                              f"request is over this worker's limit of {state.max_request_bytes} bytes")
        if state.pipeline is None:
            return refuse(503, "busy", "the model is still loading" if not state.load_error else state.load_error,
                          **{"Retry-After": "10"})
        if not state.gpu.acquire(blocking=False):
            return refuse(503, "busy", "rendering another episode", **{"Retry-After": "5"})
        try:
            try:
                parsed = GenerationRequest.from_bytes(bytes(body))
            except RenderError as error:
                return refuse(422, "bad_request", str(error))
            try:
                frames = await run_in_threadpool(generate, state.pipeline, parsed)
            except Exception as error:  # noqa: BLE001 - the client gets the reason; the log the traceback
                log.exception("render failed")
                return refuse(500, "failed", f"the model failed on this request: {type(error).__name__}: {error}")
            state.counts["served"] += 1
            return Response(frames_to_bytes(frames), media_type=BODY_TYPE)
        finally:
            state.gpu.release()

    return app


def serve(model: str, host: str = "127.0.0.1", port: int = 8700, device: str | None = None,
          max_request_mb: int = DEFAULT_MAX_REQUEST_MB) -> None:
    """Run the worker until interrupted (uvicorn, one process: one GPU)."""
    import uvicorn

    from datafarm.render.wan_models import check_weights, load_pipeline

    check_weights(model)  # refuse at once, before the server starts, if the folder is not a pipeline
    app = create_app(lambda: load_pipeline(model, device), max_request_mb << 20)
    uvicorn.run(app, host=host, port=port, log_level="info")


def _error_text(response) -> str:
    try:
        return str(response.json().get("error", response.text))
    except ValueError:
        return response.text[:300]


def post_render(url: str, body: bytes, timeout_s: float = 3600.0, retries: int = 3,
                retry_delay_s: float = 5.0) -> np.ndarray:
    """POST a request to a worker -> the canvas frames; retries transient failures `retries` times."""
    import httpx

    from datafarm.render.wan_vace import frames_from_bytes

    endpoint = url.rstrip("/") + "/render"
    for attempt in range(retries + 1):
        try:
            response = httpx.post(endpoint, content=body, headers={"content-type": BODY_TYPE}, timeout=timeout_s)
        except (httpx.TransportError, OSError) as error:  # refused, reset, timed out
            failure: TransientError = RenderWorkerUnreachable(
                f"render worker {url} did not answer ({type(error).__name__}: {error}); start it with "
                "`datafarm render-worker --model PATH --port N`, or check the render_worker URL")
        else:
            if response.status_code == 200:
                return frames_from_bytes(response.content)
            reason = _error_text(response)
            if response.status_code == 413:
                raise RequestTooLarge(f"render worker {url} refused the request: {reason}; start the worker with a "
                                      "larger --max-request-mb, or render smaller cells")
            if response.status_code == 503:
                failure = RenderWorkerBusy(f"render worker {url} is busy: {reason}; retry later or add workers")
            elif response.status_code in (502, 504):
                failure = RenderWorkerUnreachable(f"render worker {url}: gateway error {response.status_code}")
            else:
                raise RenderError(f"render worker {url} refused the request ({response.status_code}): {reason}")
        if attempt < retries:
            log.info("render worker: %s; retrying in %.1f s", failure, retry_delay_s)
            time.sleep(retry_delay_s)
    raise failure
