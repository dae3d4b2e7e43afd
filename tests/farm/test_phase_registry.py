"""The phase registry is the one list of phases: every entry is real, documented, and used."""

import re
from pathlib import Path

import pytest

from datafarm.agent.roles import ROLES, get_role
from datafarm.errors import BadInput
from datafarm.farm.registry import FARMED, FLOWS, PHASES, REGISTRY, get_phase, selected_phases

README = Path(__file__).resolve().parents[2] / "README.md"


def _workspace_table() -> list[tuple[str, set[str]]]:
    """(row text, the phases in its 'written by' column) for README's workspace table."""
    section = README.read_text().split("### The workspace", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| `")]
    return [("|".join(cells), {p.strip() for p in cells[1].split(",")}) for cells in rows]


def _documented(output: str, rows: list[str]) -> bool:
    head, _, tail = output.rpartition("/")
    return any(f"`{output}" in row or (head and f"`{head}/`" in row and f"`{tail}" in row) for row in rows)


@pytest.mark.parametrize("phase", REGISTRY, ids=lambda p: p.name)
def test_each_phase_is_real_documented_and_wired(phase):
    assert callable(phase.work_function()), phase.work
    rows = [row for row, writers in _workspace_table() if phase.name in writers]
    for output in phase.writes:
        assert _documented(output, rows), f"{output} ({phase.name}) is not in README's workspace table"
    assert all(PHASES.index(upstream) < PHASES.index(phase.name) for upstream in phase.reads)
    if phase.role is not None:
        assert get_role(phase.role).phase == phase.name  # its LLM calls count against this phase's cap
    if phase.flow is not None:
        from flows.farm import FLOW_OF

        assert FLOW_OF[phase.flow].name == phase.flow


def test_every_role_is_used_by_a_phase_and_every_flow_exists():
    from flows.farm import FLOW_OF

    assert {p.role for p in REGISTRY if p.role} == set(ROLES)
    assert set(FLOW_OF) == set(FLOWS)


def test_every_role_is_run_by_the_code():
    """A role declared but never run is a defect: each one's session is opened somewhere (its name the first
    argument of open_session, or of the LLM author's _run)."""
    import datafarm

    code = "".join(p.read_text() for p in Path(datafarm.__file__).parent.rglob("*.py"))
    opened = set(re.findall(r'(?:open_session|self\._run)\(\s*"(\w+)"', code))
    assert set(ROLES) <= opened, sorted(set(ROLES) - opened)


def test_the_documentation_check_can_fail():
    rows = [row for row, writers in _workspace_table() if "render" in writers]
    assert _documented("episodes/NNNNNN/render", rows)
    assert not _documented("episodes/NNNNNN/colour.json", rows) and not _documented("renders", rows)


def test_unknown_phases_are_refused_with_the_known_names():
    with pytest.raises(BadInput, match=re.escape(", ".join(PHASES))):
        get_phase("rendr")
    with pytest.raises(BadInput, match="harvest"):
        selected_phases(until="prepare")  # not farmed: its own command
    assert selected_phases(until="expert") == FARMED[: FARMED.index("expert") + 1]
    assert selected_phases(phase="render") == ("render",)
    assert selected_phases() == FARMED
