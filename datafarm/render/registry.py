"""Renderer backends by name; imported lazily so a CPU install never imports GPU code."""

from __future__ import annotations

import importlib
import importlib.util
import inspect

from datafarm.errors import BadInput, Unavailable
from datafarm.render.base import Renderer

RENDERERS = {
    "composite": "datafarm.render.composite:CompositeRenderer",
    "wan-vace": "datafarm.render.wan_vace:WanVaceRenderer",
}

# Backends that are registered (so configurations may name them) but not shipped in this library.
_NOT_HERE: dict[str, str] = {}


class RendererUnavailable(Unavailable, RuntimeError):
    """The renderer is known but cannot run in this installation."""


class UnknownRenderer(BadInput, ValueError):
    """No renderer of that name is registered."""


class UnknownRenderOption(BadInput, TypeError):
    """A renderer option the chosen renderer does not take."""


def known_renderer(name: str) -> str:
    """`name` if the registry has it, else UnknownRenderer listing the known ones (a pydantic validator)."""
    if name not in RENDERERS:
        raise UnknownRenderer(f"unknown renderer {name!r}; known renderers: {', '.join(sorted(RENDERERS))}")
    return name


def check_renderer_available(name: str, **options) -> None:
    """Unknown -> UnknownRenderer; known but its module is not installed -> RendererUnavailable naming what
    to install; a backend with a `check_available(**options)` (wan-vace: its weights or worker) is asked too.
    Modules are looked up first without importing (no GPU code on a CPU install)."""
    module_name, _, class_name = RENDERERS[known_renderer(name)].partition(":")
    try:
        found = importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:  # its package is missing
        found = False
    if not found:
        raise RendererUnavailable(_NOT_HERE.get(name, f"renderer {name!r}: module {module_name} is not installed"))
    renderer_class = getattr(importlib.import_module(module_name), class_name)
    accepted = inspect.signature(renderer_class).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise UnknownRenderOption(f"renderer {name!r} has no option(s) {unknown}; its options: "
                                  f"{', '.join(n for n in accepted if n not in ('self', 'args', 'kwargs'))}")
    check = getattr(renderer_class, "check_available", None)
    if check is not None:
        check(**options)


def get_renderer(name: str, **options) -> Renderer:
    """A renderer instance by registry name, constructed with `options`."""
    module_name, _, class_name = RENDERERS[known_renderer(name)].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        raise RendererUnavailable(_NOT_HERE.get(name, f"renderer {name!r}: module {module_name} is not installed")) \
            from None
    renderer_class = getattr(module, class_name)
    return renderer_class(**options)
