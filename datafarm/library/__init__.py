"""The built-in reference tasks, each a task package folder here: the paper's five, then seven grasping,
placing and stacking tasks."""

from __future__ import annotations

from pathlib import Path

from datafarm.task.package import TaskPackage, load_task_package

LIBRARY_DIR = Path(__file__).parent

BUILTIN_TASKS: dict[str, str] = {
    "nest_cups": "nest three cups, one inside the next",
    "apple_on_scale": "place an apple on a scale",
    "strike_drum": "strike a drum at least twice",
    "block_in_drawer": "place a block in a drawer and close it",
    "fold_towel": "fold a towel twice",
    "lift_cone": "lift a traffic cone off the table",
    "lift_brick": "lift a heavy brick off the table",
    "lift_teapot": "lift a teapot by its handle",
    "pick_screw": "pick up a screw lying on the table",
    "screw_in_basket": "put a screw into a basket",
    "nut_on_plate": "put a nut on a plate",
    "stack_bowls": "stack a small bowl into a big bowl",
}


def get_task(name: str) -> TaskPackage:
    """The built-in task package `name`; unknown names raise listing the known ones."""
    if name not in BUILTIN_TASKS:
        raise KeyError(f"unknown task {name!r}; built-in tasks: {sorted(BUILTIN_TASKS)}")
    return load_task_package(LIBRARY_DIR / name)


def available_tasks() -> list[str]:
    """Built-in tasks whose package folder exists (every registered one, once the library is complete)."""
    return [name for name in BUILTIN_TASKS if (LIBRARY_DIR / name / "task.yaml").exists()]
