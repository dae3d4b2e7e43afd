"""Farm commands: prepare, farm, verify, cost, show, match, context, supervise, the calibration helpers.

Errors are not handled here: a library error propagates to `cli.errors.guarded`, which prints it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from datafarm.errors import BadInput, TransientError
from datafarm.farm.registry import FARMED, REGISTRY

console = Console()

PHASE_HELP = ", ".join(FARMED)


def prepare(
    episode: str = typer.Option(None, "--episode", help="Calibration episode: a LeRobot dataset or a folder of 3 mp4s + "
                                "joints.csv, local or at s3://bucket/prefix (downloaded into the cache first)."),
    image: Path = typer.Option(None, "--image", help="Instead of --episode: ONE photo (JPEG/PNG) of the scene from the "
                               "head camera's viewpoint; joints are assumed at the rest pose, no wrist views."),
    request_file: Path = typer.Option(None, "--request-file", help="The task request in plain words ('-' for stdin)."),
    instruction: str = typer.Option(None, "--instruction", help="Instead of --request-file: the request itself."),
    target_count: int = typer.Option(100, "--target-count", help="Admitted episodes to deliver."),
    output: Path = typer.Option(..., "--output", help="New workspace folder."),
    renderer: str = typer.Option("composite", help="composite (CPU) or wan-vace (GPU worker)."),
    render_model: str = typer.Option(None, "--render-model", help="wan-vace in process: local Wan VACE folder."),
    render_worker: str = typer.Option(None, "--render-worker", help="wan-vace on a worker: its URL."),
    render_option: list[str] = typer.Option([], "--render-option", help="NAME=VALUE renderer option, e.g. steps=12."),
    push_to: str = typer.Option(None, "--push-to", help="s3://bucket/prefix: `datafarm farm` pushes the verified "
                                "delivery there (only what is new or changed)."),
    max_usd: float = typer.Option(None, "--max-usd", help="The workspace's whole budget in USD: no work starts "
                                  "once the cost ledger reaches it (none: no budget)."),
    randomization: list[str] = typer.Option([], "--randomization", help="NAME=VALUE randomization setting (datafarm/"
                                            "task/randomization.py), e.g. geometry=false (a family off), "
                                            "recovery_fraction=0.3 (that share of recovery episodes)."),
) -> None:
    """Bind a calibration episode (or a single photo) and a request to a new workspace."""
    from datafarm.farm.prepare import prepare as run_prepare
    from datafarm.farm.prepare import prepare_photo

    if (episode is None) == (image is None):
        raise BadInput("give exactly one of --episode (a recorded calibration episode) and --image (a single photo "
                       f"of the scene); got {'both' if episode is not None else 'neither'}")
    if (request_file is None) == (instruction is None):
        raise BadInput("give exactly one of --request-file (the request in a text file) and --instruction (the "
                       f"request itself); got {'both' if request_file is not None else 'neither'}")
    if instruction is not None:
        request = instruction
    else:
        request = sys.stdin.read() if str(request_file) == "-" else _read(request_file)
    settings = {"target_count": target_count, "renderer": renderer, "render_model": render_model,
                "render_worker": render_worker, "render_options": _options(render_option, "--render-option", "steps=12"),
                "push_to": push_to,
                "max_usd": max_usd}
    if randomization:
        settings["randomization"] = _options(randomization, "--randomization", "recovery_fraction=0.3")
    if image is not None:
        workspace = prepare_photo(image, request, output, settings)
    else:
        workspace = run_prepare(episode, request, output, settings)
    console.print(f"workspace ready: [bold]{workspace.root}[/bold]; next: datafarm farm {workspace.root}")


def _options(pairs: list[str], flag: str, example: str) -> dict[str, object]:
    """NAME=VALUE pairs -> options: numbers as numbers, true/false as booleans, numbers A,B as a list."""
    options: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise BadInput(f"{flag} {pair!r} is not NAME=VALUE; e.g. {flag} {example}")
        parts = [_value(v) for v in value.split(",")]
        numbers = len(parts) > 1 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in parts)
        options[name] = parts if numbers else _value(value)
    return options


def _value(text: str) -> int | float | bool | str:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _read(path: Path) -> str:
    if not path.is_file():
        raise BadInput(f"request file {path} not found: write the task in plain words in a text file and pass its path")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise BadInput(f"request file {path} is not UTF-8 text (a binary file?): write the task in plain words "
                       "in a text file and pass its path") from error


def farm(
    workspace: Path = typer.Argument(..., help="The workspace from `datafarm prepare`."),
    phase: str = typer.Option(None, help=f"Run only this phase ({PHASE_HELP})."),
    until: str = typer.Option(None, help=f"Run the phases up to and including this one ({PHASE_HELP})."),
    target_count: int = typer.Option(None, "--target-count", help="Ask for this many admitted episodes from now on "
                                     "(more than before: the farm tops up)."),
    max_usd: float = typer.Option(None, "--max-usd", help="Set the workspace's whole budget in USD from now on."),
) -> None:
    """Run every phase in order; done phases are skipped, so a rerun resumes where it stopped."""
    from datafarm.farm.registry import selected_phases
    from datafarm.workspace import Workspace

    from datafarm.farm.prepare import check_ready
    from datafarm.workspace.lock import check_unlocked

    selected_phases(phase, until)  # clear errors before Prefect starts
    check_ready(Workspace.open(workspace))
    check_unlocked(workspace)  # another run farming it: refused here; the flow itself holds the lock
    if target_count is not None:
        from datafarm.farm.top_up import set_target_count

        set_target_count(Workspace.open(workspace), target_count)
    if max_usd is not None:
        from datafarm.farm.fleet import set_budget

        set_budget(Workspace.open(workspace), max_usd)
    from cli.progress import farm_progress
    from flows.farm import farm_flow

    with farm_progress(workspace):
        try:
            report = farm_flow(str(workspace), phase=phase, until=until)
        except RuntimeError as error:
            if "ephemeral Prefect API server" not in str(error):
                raise
            raise TransientError("the embedded Prefect server did not start in time (a busy machine): rerun "
                                 f"`datafarm farm {workspace}` (it resumes), or raise "
                                 "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") from error
    if report is not None:
        _print_verify(report)
        if not report.ok:
            raise typer.Exit(1)


def verify(workspace: str = typer.Argument(..., help="The workspace, or a pushed delivery: s3://bucket/prefix.")) -> None:
    """Check the delivery: complete, unmodified (SHA-256 manifest), reviewed episode by episode. For an
    s3:// URI, the remote copy: every file downloaded and hashed."""
    from datafarm.farm.deliver import verify as run_verify
    from datafarm.storage import is_s3_uri
    from datafarm.workspace import Workspace

    if is_s3_uri(workspace):
        from cli.storage import verify_remote

        report = verify_remote(workspace)
    else:
        report = run_verify(Workspace.open(workspace))
    _print_verify(report)
    if not report.ok:
        raise typer.Exit(1)


def _print_verify(report) -> None:
    if report.ok:
        console.print(f"[green]verified[/green]: {report.episodes} episodes, {report.checked_files} files unmodified, all reviewed")
    else:
        console.print(f"[red]verify found {len(report.problems)} problem(s):[/red]")
        for problem in report.problems:
            console.print(f"  - {problem}")


def cost(workspace: Path = typer.Argument(..., help="The workspace.")) -> None:
    """What the run cost, per phase and per episode."""
    from datafarm.costs import CostLedger
    from datafarm.farm.episodes import admitted_episodes
    from datafarm.farm.summary import phase_costs
    from datafarm.workspace import Workspace

    ws = Workspace.open(workspace)
    ledger = CostLedger(ws.root)
    table = Table(title=f"cost of {ws.root.name}")
    for column in ("phase", "cpu USD", "gpu USD", "llm USD", "total USD"):
        table.add_column(column, justify="right" if column != "phase" else "left")
    for phase, items in phase_costs(ws):
        llm = sum(v for k, v in items.items() if k.startswith("llm"))
        table.add_row(phase, f"{items.get('cpu', 0):.5f}", f"{items.get('gpu', 0):.5f}", f"{llm:.5f}", f"{items['total']:.5f}")
    console.print(table)
    admitted = admitted_episodes(ws)
    per_episode = ledger.by_episode()
    console.print(f"total ${ledger.total():.4f}; {len(admitted)} admitted episodes; "
                  f"${ledger.total() / max(1, len(admitted)):.4f} per admitted episode")
    if per_episode:
        shown = ", ".join(f"{k}: ${v:.4f}" for k, v in sorted(per_episode.items())[:10])
        console.print(f"per episode (rollout + render + review): {shown}{' ...' if len(per_episode) > 10 else ''}")


def show(
    workspace: Path = typer.Argument(..., help="The workspace."),
    episode: int = typer.Option(None, "--episode", help="Episode index (default: the first)."),
    survey: bool = typer.Option(False, "--survey", help="Instead: an image of what the survey found (camera "
                                "overlay, table, labelled inventory) at reports/survey.png."),
) -> None:
    """Contact sheet PNG and preview mp4 of an episode, sim beside rendered (or, with --survey, the survey)."""
    from datafarm.farm.show import show_episode, show_survey
    from datafarm.workspace import Workspace

    if survey:
        console.print(f"survey: [bold]{show_survey(Workspace.open(workspace))}[/bold]")
        return
    sheet, preview = show_episode(Workspace.open(workspace), episode)
    console.print(f"contact sheet: [bold]{sheet}[/bold]\npreview: [bold]{preview}[/bold]")


def match(request_file: Path = typer.Option(..., "--request-file", help="The request ('-' for stdin).")) -> None:
    """Print the task the configured author would build for a request, or the refusal."""
    import tempfile

    from datafarm.agent.bindings import load_bindings
    from datafarm.author import BuiltinAuthor

    request = sys.stdin.read() if str(request_file) == "-" else _read(request_file)
    bindings = load_bindings()  # bindings.json here, DATAFARM_BINDINGS or DATAFARM_* variables
    if bindings.agent == "builtin":
        found = BuiltinAuthor().match(request)  # RequestRefused says what it can build instead
    else:
        from datafarm.agent.runtime import LLMAuthor

        found = LLMAuthor(bindings, Path(tempfile.mkdtemp(prefix="datafarm-match-"))).match(request)
    console.print(f"{found.task} ({bindings.agent} author): {found.reason}")


def synth_calibration(
    output: Path = typer.Option(..., "--output", help="Folder for the LeRobot calibration dataset."),
    task: str = typer.Option(None, "--task", help="Built-in task whose scene to record (default: the bare rig)."),
) -> None:
    """Record a synthetic calibration episode from the simulated rig (says so in its metadata)."""
    from datafarm.calibration import synth_calibration as run_synth

    path = run_synth(output, task)
    console.print(f"synthetic calibration episode: [bold]{path}[/bold]")


def context(
    workspace: Path = typer.Argument(..., help="The workspace."),
    role: str = typer.Option(..., "--role", help=f"The role: {', '.join(p.role for p in REGISTRY if p.role)}."),
) -> None:
    """Compile what a role receives into one file, and record its SHA-256 in the workspace."""
    from datafarm.agent.roles import compile_context, get_role
    from datafarm.agent.tools import judge_api_text, skill_api_text
    from datafarm.workspace import Workspace

    ws = Workspace.open(workspace)
    try:
        spec = get_role(role)
    except KeyError as error:
        raise BadInput(str(error).strip('"')) from None
    survey = ws.read_json("survey.json") if ws.path("survey.json").exists() else None
    api = judge_api_text() if role == "judge_author" else skill_api_text()
    text, digest = compile_context(spec, ws.path("request.txt").read_text(), survey, api)
    path = ws.write_text(f"contexts/{role}.md", text)
    ws.meta.setdefault("contexts", {})[role] = digest
    ws.save_meta()
    console.print(f"{path} (sha256 {digest})")


def supervise(
    workspace: Path = typer.Argument(..., help="The workspace."),
    max_runs: int = typer.Option(5, help="Give up after this many runs."),
    backoff: float = typer.Option(5.0, help="Seconds before the first restart (doubling)."),
) -> None:
    """Run the farm until the task is delivered, restarting after crashes, kills and provider errors."""
    from datafarm.farm.deliver import verify as run_verify
    from datafarm.farm.supervise import NotDelivered, supervise as run_supervise
    from datafarm.workspace import Workspace

    ws = Workspace.open(workspace)
    result = run_supervise([sys.executable, "-m", "cli.main", "farm", str(workspace)],
                           delivered=lambda: run_verify(ws).ok, max_runs=max_runs, backoff_seconds=backoff)
    if not result.delivered:
        raise NotDelivered(result, ws.path("logs", "datafarm.log"))
    console.print(f"[green]delivered[/green] after {result.runs} run(s)")


def robomind_calibration(
    output: Path = typer.Option(..., "--output", help="Folder to write (three mp4s + joints.csv + README.txt)."),
    clip: str = typer.Option("AX-PackPlate.mp4", help="Which real RoboMIND AgileX clip (shared/data/agilex_robomind/videos)."),
) -> None:
    """A calibration folder from real AgileX footage (head view real; wrists are crops; joints at rest)."""
    from datafarm.calibration import load_calibration, robomind_calibration_folder

    folder = robomind_calibration_folder(output, clip=clip)
    episode = load_calibration(folder)
    console.print(f"real-footage calibration folder: [bold]{folder}[/bold] ({episode.num_frames} frames; "
                  f"see its README.txt for what is real)")


def register(app: typer.Typer) -> None:
    for command in (prepare, farm, verify, cost, show, match, context, supervise):
        app.command()(command)
    app.command(name="synth-calibration")(synth_calibration)
    app.command(name="robomind-calibration")(robomind_calibration)
