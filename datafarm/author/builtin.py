"""The built-in author: matches a request to a reference task by meaning, offline and deterministic.

Each task is a few concepts (an object and what to do with it), each a set of words and phrases
that mean it. A request matches a task when it names every concept; words are compared after light
stemming, so "cups", "Cup" and "cup's" agree. Anything else is refused with the list of tasks.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from datafarm.author.base import Author, RequestRefused, TaskMatch
from datafarm.library import BUILTIN_TASKS, LIBRARY_DIR

# task -> concepts; each concept: words or phrases any one of which names it.
CONCEPTS: dict[str, list[set[str]]] = {
    "nest_cups": [
        {"cup", "mug", "beaker", "tumbler"},
        {"nest", "stack", "inside", "into each other", "into one another", "one in another", "within",
         "one into the next", "in the next", "into the next", "in each other"},
    ],
    "apple_on_scale": [
        {"apple", "fruit"},
        {"scale", "weigh", "weighing", "balance"},
    ],
    "strike_drum": [
        {"drum", "snare", "tom", "bongo"},
        {"strike", "hit", "beat", "bang", "tap", "play", "drum on", "knock", "whack", "pound"},
    ],
    "block_in_drawer": [
        {"block", "cube", "brick"},
        {"drawer"},
        {"close", "shut", "push in", "slide in"},
    ],
    "fold_towel": [
        {"towel", "cloth", "napkin", "rag", "dishcloth", "tea towel"},
        {"fold", "double over", "crease"},
    ],
    "lift_cone": [
        {"cone", "traffic cone", "pylon"},
        {"lift", "pick up", "pick", "raise", "grasp", "grab", "hoist", "hold up", "take"},
    ],
    "lift_brick": [  # block_in_drawer's "brick" needs its drawer and closing words besides
        {"brick"},
        {"lift", "pick up", "pick", "raise", "grasp", "grab", "hoist", "hold up", "take"},
    ],
    "lift_teapot": [
        {"teapot", "tea pot", "kettle"},
        {"lift", "pick up", "pick", "raise", "grasp", "grab", "hoist", "hold up", "take", "handle"},
    ],
    "pick_screw": [  # "sort the screws" stays refused: sorting is no picking word
        {"screw", "bolt"},
        {"pick up", "pick", "lift", "raise", "grab", "grasp", "take", "hold up"},
    ],
    "screw_in_basket": [
        {"screw", "bolt"},
        {"basket", "tray", "bin"},
    ],
    "nut_on_plate": [
        {"nut", "hex nut"},
        {"plate", "dish", "saucer"},
    ],
    "stack_bowls": [  # nest_cups' stacking words apply to cups, these to bowls
        {"bowl", "basin"},
        {"stack", "nest", "inside", "into the other", "in the other", "into another", "in another", "into the big",
         "in the big", "into each other", "in each other", "within", "on top of each other"},
    ],
}

HOW_TO_GET_AN_LLM_AUTHOR = (
    "To build other tasks, configure an LLM author: set `agent: litellm` and a model in bindings.json "
    "(or DATAFARM_BINDINGS / DATAFARM_AGENT=litellm) with the provider's API key in the environment."
)


def _stem(word: str) -> str:
    """Crude, but the same on both sides: "closed", "closes", "close" all become "clos"."""
    for suffix in ("'s", "ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def normalise(text: str) -> str:
    words = re.findall(r"[a-z]+(?:'s)?", text.lower())
    return " " + " ".join(_stem(w) for w in words) + " "


def _names(concept: set[str], text: str) -> bool:
    return any(f" {normalise(phrase).strip()} " in text for phrase in concept)


class BuiltinAuthor(Author):
    name = "builtin"

    def match(self, request: str) -> TaskMatch:
        text = normalise(request)
        if not text.strip():
            raise RequestRefused("the request is empty: describe the task in plain words, e.g. "
                                 f"{BUILTIN_TASKS['apple_on_scale']!r}")
        matches = []
        for task, concepts in CONCEPTS.items():
            named = [c for c in concepts if _names(c, text)]
            if len(named) == len(concepts):
                matches.append(task)
        if len(matches) == 1:
            task = matches[0]
            return TaskMatch(task, 1.0, f"the request names every concept of {task}: {BUILTIN_TASKS[task]}")
        known = "; ".join(f"{name} ({description})" for name, description in BUILTIN_TASKS.items())
        if matches:
            raise RequestRefused(f"the request fits several built-in tasks ({', '.join(matches)}); ask for one. "
                                 f"Built-in tasks: {known}.")
        raise RequestRefused(f"the built-in author cannot build this request: {request.strip()!r}. "
                             f"It builds: {known}. {HOW_TO_GET_AN_LLM_AUTHOR}")

    def write_package(self, match: TaskMatch, destination: Path) -> Path:
        source = LIBRARY_DIR / match.task
        if destination.exists():
            shutil.rmtree(destination)
        shutil.copytree(source, destination, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return destination
