"""Writes cone.obj, the traffic cone of lift_cone: a square base plate under a hollow-free conical
body (a frustum with a small flat top), in metres, the bottom centre at the origin, z up.

    python datafarm/library/lift_cone/make_cone.py

The mesh is two closed convex pieces, so the builder's convex decomposition (coacd) keeps them exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

BASE_HALF = 0.04  # m: the base plate is 8 cm square ...
BASE_THICKNESS = 0.008  # m: ... and 8 mm thick
BOTTOM_RADIUS = 0.032  # m: the body's radius where it meets the plate
TOP_RADIUS = 0.009  # m: its flat top
HEIGHT = 0.14  # m: total height, plate included
SEGMENTS = 32  # facets around the body


def plate() -> tuple[np.ndarray, list[tuple[int, ...]]]:
    h, t = BASE_HALF, BASE_THICKNESS
    vertices = np.array([[x, y, z] for z in (0.0, t) for x, y in ((-h, -h), (h, -h), (h, h), (-h, h))])
    faces = [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)]
    return vertices, faces


def frustum() -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The body, from just inside the plate (so the pieces overlap, one rigid part) to the top."""
    angles = 2 * np.pi * np.arange(SEGMENTS) / SEGMENTS
    ring = np.column_stack([np.cos(angles), np.sin(angles)])
    bottom = np.column_stack([BOTTOM_RADIUS * ring, np.full(SEGMENTS, BASE_THICKNESS / 2)])
    top = np.column_stack([TOP_RADIUS * ring, np.full(SEGMENTS, HEIGHT)])
    vertices = np.vstack([bottom, top])
    n = SEGMENTS
    faces = [tuple(reversed(range(n))), tuple(range(n, 2 * n))]
    faces += [(i, (i + 1) % n, n + (i + 1) % n, n + i) for i in range(n)]
    return vertices, faces


def write_obj(path: Path) -> None:
    lines = ["# traffic cone for lift_cone, written by make_cone.py"]
    offset = 0
    for name, (vertices, faces) in (("plate", plate()), ("body", frustum())):
        lines.append(f"o {name}")
        lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in vertices]
        lines += ["f " + " ".join(str(offset + i + 1) for i in face) for face in faces]
        offset += len(vertices)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    write_obj(Path(__file__).with_name("cone.obj"))
