"""Renderer backends by name; imported lazily so a CPU install never imports GPU code."""

from __future__ import annotations

from datafarm.errors import Unavailable

import importlib

from datafarm.render.base import Renderer

RENDERERS = {
    "composite": "datafarm.render.composite:CompositeRenderer",
    "wan-vace": "datafarm.render.wan_vace:WanVaceRenderer",
}

# Backends that are registered (so configurations may name them) but not shipped in this library.
_NOT_HERE = {
    "wan-vace": ("the wan-vace renderer needs a GPU render worker: diffusers WanVACEPipeline on a CUDA node, "
                 "served by the GPU render-worker image (docker/). It arrives with the later 'wan-vace render "
                 "worker' issue, which adds datafarm/render/wan_vace.py and its model-weights setup; until then "
                 "use renderer 'composite' (CPU)."),
}


class RendererUnavailable(Unavailable, RuntimeError):
    """The renderer is known but cannot run in this installation."""


def get_renderer(name: str, **options) -> Renderer:
    """A renderer instance by registry name, constructed with `options`."""
    if name not in RENDERERS:
        raise ValueError(f"unknown renderer {name!r}; known renderers: {', '.join(sorted(RENDERERS))}")
    module_name, _, class_name = RENDERERS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        raise RendererUnavailable(_NOT_HERE.get(name, f"renderer {name!r}: module {module_name} is not installed")) \
            from None
    renderer_class = getattr(module, class_name)
    return renderer_class(**options)
