"""The agent's roles: who each LLM session is, what it may use and see, and what it is told.

A role's file tools are confined to workspace folders: it reads `reads` + `writes` and writes only
`writes`. That is how information is hidden on purpose: the expert's author cannot read judge/,
the judge's author cannot read expert/, reviewers read only what they review. Everything a role
receives at the start of its session is compiled by `compile_context` into one text whose SHA-256
the caller records (a resumed session checks it is unchanged).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

INSTRUCTIONS_DIR = Path(__file__).parent / "instructions"

FILE_TOOLS = ("read_file", "write_file", "list_files")
ALL_TOOLS = (*FILE_TOOLS, "list_skill_api", "run_expert", "submit")


@dataclass(frozen=True)
class Role:
    name: str
    instruction: str  # file name under datafarm/agent/instructions/
    phase: str  # the farm phase whose USD cap the role's calls count against
    tools: tuple[str, ...]
    reads: tuple[str, ...]  # workspace folders it may read (besides its own)
    writes: tuple[str, ...]  # its own folders: read and write

    @property
    def readable(self) -> tuple[str, ...]:
        return self.writes + tuple(f for f in self.reads if f not in self.writes)

    def instruction_text(self) -> str:
        return (INSTRUCTIONS_DIR / self.instruction).read_text()


# ----- the registry (one screen) -------------------------------------------------------------------
BASIC = (*FILE_TOOLS, "submit")
SCENE = (*FILE_TOOLS, "preview_scene", "submit")
EXPERT = (*FILE_TOOLS, "list_skill_api", "run_expert", "submit")
ROLES: dict[str, Role] = {r.name: r for r in (
    #    name                 instruction             phase              tools   reads                     writes
    Role("surveyor",          "surveyor.md",          "survey",          BASIC,  ("keyframes",),           ("survey",)),
    Role("scene_builder",     "scene_builder.md",     "build",           SCENE,  ("survey", "keyframes"),  ("scene",)),
    Role("contract_author",   "contract_author.md",   "contract",        BASIC,  ("scene",),               ("contract",)),
    Role("contract_reviewer", "contract_reviewer.md", "review_contract", BASIC,  ("contract",),            ("review/contract",)),
    Role("judge_author",      "judge_author.md",      "judge",           BASIC,  ("scene", "contract"),    ("judge",)),
    Role("expert_author",     "expert_author.md",     "expert",          EXPERT, ("scene", "contract"),    ("expert",)),
    Role("episode_reviewer",  "episode_reviewer.md",  "review",          BASIC,  ("episodes",),            ("review/episodes",)),
)}
PHASES: tuple[str, ...] = tuple(dict.fromkeys(r.phase for r in ROLES.values()))


def get_role(name: str) -> Role:
    """The role called `name`; unknown names raise KeyError listing the known ones."""
    try:
        return ROLES[name]
    except KeyError:
        raise KeyError(f"unknown role {name!r}; known roles: {', '.join(ROLES)}") from None


def compile_context(role: Role | str, request: str, survey: dict | None = None, api_docs: str = "") -> tuple[str, str]:
    """Everything `role` is told at the start of its session, as one text, and that text's SHA-256.

    Sections: the role's instruction file, its folders and tools, the task request, the survey (as
    sorted JSON) and the API reference it works against. Deterministic: the same inputs give the same
    text and hash, so the caller can record the hash next to what the role produced.
    """
    role = get_role(role) if isinstance(role, str) else role
    sections = [
        f"# Role: {role.name}\n\n{role.instruction_text().strip()}",
        "# Your workspace\n\n"
        f"You may write only under: {', '.join(f + '/' for f in role.writes)}\n"
        f"You may read under: {', '.join(f + '/' for f in role.readable)}\n"
        "Paths are relative to the workspace root (e.g. "
        f"`{role.writes[0]}/notes.md`); anything else is refused.\n"
        f"Tools: {', '.join(role.tools)}. Finish by calling submit(summary).",
        f"# The task request\n\n{request.strip()}",
    ]
    if survey:
        sections.append(f"# The survey of the calibration recording\n\n```json\n"
                        f"{json.dumps(survey, indent=1, sort_keys=True, default=str)}\n```")
    if api_docs.strip():
        sections.append(f"# API reference\n\n{api_docs.strip()}")
    text = "\n\n".join(sections) + "\n"
    return text, hashlib.sha256(text.encode()).hexdigest()
