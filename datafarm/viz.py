"""Pictures for people: contact sheets of camera streams and tiled multi-view previews."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

_LABEL_HEIGHT = 22
_BACKGROUND = (24, 24, 28)
_TEXT = (235, 235, 235)


def _font(size: int = 14):
    return ImageFont.load_default(size=size)


def tile_views(views: list[np.ndarray]) -> np.ndarray:
    """Place frames side by side (resized to the first frame's height)."""
    height = views[0].shape[0]
    resized = []
    for view in views:
        if view.shape[0] != height:
            width = round(view.shape[1] * height / view.shape[0])
            view = np.asarray(Image.fromarray(view).resize((width, height), Image.BILINEAR))
        resized.append(view)
    return np.concatenate(resized, axis=1)


def contact_sheet(streams: dict[str, np.ndarray], times: np.ndarray, columns: int = 6,
                  title: str = "", thumb_height: int = 150) -> Image.Image:
    """A row per stream (camera), `columns` frames sampled evenly in time, labelled with t."""
    names = list(streams)
    count = len(next(iter(streams.values())))
    picks = np.unique(np.linspace(0, count - 1, min(columns, count)).round().astype(int))
    first = streams[names[0]][0]
    thumb_width = round(first.shape[1] * thumb_height / first.shape[0])
    label_width = 110
    width = label_width + len(picks) * (thumb_width + 4)
    height = _LABEL_HEIGHT * 2 + len(names) * (thumb_height + _LABEL_HEIGHT)
    sheet = Image.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    draw.text((8, 4), title, fill=_TEXT, font=_font(16))
    for c, index in enumerate(picks):
        x = label_width + c * (thumb_width + 4)
        draw.text((x + 4, _LABEL_HEIGHT + 2), f"t = {times[index]:.2f} s", fill=_TEXT, font=_font())
    for r, name in enumerate(names):
        y = _LABEL_HEIGHT * 2 + r * (thumb_height + _LABEL_HEIGHT)
        draw.text((8, y + thumb_height // 2 - 7), name, fill=_TEXT, font=_font())
        for c, index in enumerate(picks):
            frame = streams[name][index]
            thumb = Image.fromarray(frame).resize((thumb_width, thumb_height), Image.BILINEAR)
            sheet.paste(thumb, (label_width + c * (thumb_width + 4), y))
    return sheet


def colorize_segmentation(segmentation: np.ndarray) -> np.ndarray:
    """Distinct, stable colours per id (0 stays black)."""
    ids = segmentation.astype(np.uint32)
    rgb = np.stack([(ids * 67) % 255, (ids * 151) % 255, (ids * 211) % 255], axis=-1).astype(np.uint8)
    rgb[ids == 0] = 0
    return rgb
