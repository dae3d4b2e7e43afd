"""The farm's phases as plain library functions on a workspace (Prefect wraps them in tasks/ and flows/).

`datafarm.farm.registry` declares the phases; everything that lists them reads it.
"""

from datafarm.farm.registry import FARMED, PHASES, REGISTRY, Phase, get_phase

__all__ = ["FARMED", "PHASES", "REGISTRY", "Phase", "get_phase"]
