"""Rendering: simulated episodes -> photographic multi-view video (see Renderer for the contract)."""

from datafarm.render.appearance import Appearance, sample_appearance
from datafarm.render.base import Renderer, RenderError, check_references
from datafarm.render.registry import RENDERERS, RendererUnavailable, get_renderer
from datafarm.render.textures import (PROCEDURAL_KINDS, ROBOMIND_TABLE_BOX, RealTexture, TexturePool,
                                      crop_table_textures, procedural_texture)

__all__ = [
    "Appearance", "sample_appearance", "Renderer", "RenderError", "check_references", "RENDERERS",
    "RendererUnavailable", "get_renderer", "PROCEDURAL_KINDS", "ROBOMIND_TABLE_BOX", "RealTexture", "TexturePool",
    "crop_table_textures", "procedural_texture",
]
