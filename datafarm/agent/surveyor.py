"""The surveyor role: a (vision-language) model looks at the calibration keyframes and writes the object
inventory, when the bindings configure an LLM agent. The offline classical inventory
(datafarm.survey.inventory) is in its context as a starting point, and is what the farm uses without a key.

The session runs in its own folder holding copies of the keyframes (read_file shows a PNG to the
model); it must write ``survey/inventory.json``: a JSON list of objects, each with ``label``, ``xy``
(world metres on the table, as in the survey), ``size_m`` {width, height} and ``colour``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from datafarm.agent.bindings import Bindings
from datafarm.agent.runtime import open_session, require_submitted
from datafarm.costs import CostLedger

DOCS = ("keyframes/ holds the head camera's keyframes (head_0.png ...) and background plate (head_plate.png); "
        "read_file on a .png shows it to you. The survey above has the fitted camera, the table plane and an offline "
        "inventory (`objects`, positions in world metres: x to the robot's right, y away from it). Write "
        "survey/inventory.json: a JSON list with one entry per object on the table, each "
        '{"label": "red apple", "xy": [x, y], "size_m": {"width": w, "height": h}, "colour": "red"}; keep an '
        "offline item's xy when it is the same object. Then call submit with a two-line summary.")


def inventory_problem(path: Path) -> str | None:
    """Why `path` is not a usable inventory, or None."""
    if not path.is_file():
        return "write survey/inventory.json first"
    try:
        items = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        return f"survey/inventory.json is not valid JSON ({error})"
    if not isinstance(items, list):
        return "survey/inventory.json must be a JSON list of objects"
    for i, item in enumerate(items):
        xy = item.get("xy") if isinstance(item, dict) else None
        if not (isinstance(item, dict) and isinstance(item.get("label"), str) and isinstance(xy, list) and len(xy) == 2
                and all(isinstance(v, (int, float)) for v in xy)):
            return f"item {i} needs a string label and xy [x, y] in metres"
    return None


def survey_with_llm(bindings: Bindings, workdir: Path, keyframes: Path, request: str, survey: dict,
                    ledger: CostLedger | None = None) -> dict:
    """Run the surveyor session; its inventory (labelled by model), notes, cost and transcript."""
    workdir = Path(workdir)
    copy = workdir / "keyframes"
    copy.mkdir(parents=True, exist_ok=True)
    for image in sorted(Path(keyframes).glob("head_*.png")):
        shutil.copy(image, copy / image.name)
    target = workdir / "survey" / "inventory.json"
    session = open_session("surveyor", bindings, workdir, request, survey, DOCS, ledger,
                           submit_check=lambda _: inventory_problem(target))
    result = require_submitted("surveyor", session.run())
    objects = [{**item, "source": f"surveyor ({result.model})"} for item in json.loads(target.read_text())]
    return {"objects": objects, "summary": result.summary, "model": result.model, "usd": round(result.usd, 6),
            "transcript": result.transcript}
