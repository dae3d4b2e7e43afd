"""The tools a role session may call, as JSON-schema function tools, scoped to the role.

File tools are confined to the role's folders (roles.Role.reads / writes) under the workspace root:
absolute paths, `..`, and symlinks that lead out are refused. A refused or failing call is returned
to the model as the tool's result ("error: ..."), never raised into the session, so the model can
correct itself. `run_expert` calls back into the caller (who runs the expert, in a sandbox or
in-process) and returns its success statistics, its own errors and the judge's check names only.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datafarm.agent.roles import Role

log = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 2_000_000
MAX_READ_BYTES = 200_000
MAX_WRITE_BYTES = 200_000
MAX_SEEDS = 20

ExpertRunner = Callable[[list[int]], dict[str, Any]]
SubmitCheck = Callable[[str], str | None]  # returns what is still wrong, or None to accept


class ToolRefused(Exception):
    """A tool call the role may not make or that cannot be served; its message goes to the model."""


@dataclass(frozen=True)
class ToolOutcome:
    content: str  # what the model receives as the tool result
    ok: bool = True
    submitted: str | None = None  # the accepted summary, when this was a successful submit
    images: tuple[bytes, ...] = ()  # PNGs the session shows the model after the result (vision models)


SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": {"description": "Read a text file under one of your readable folders.",
                  "parameters": {"type": "object", "properties": {
                      "path": {"type": "string",
                               "description": "relative to the workspace root, e.g. scene/scene.yaml"}},
                      "required": ["path"]}},
    "write_file": {"description": "Create or replace a text file under one of your own folders.",
                   "parameters": {"type": "object", "properties": {
                       "path": {"type": "string", "description": "relative to the workspace root"},
                       "content": {"type": "string", "description": "the whole new file content"}},
                       "required": ["path", "content"]}},
    "list_files": {"description": "List the files under a readable folder (all of them when omitted).",
                   "parameters": {"type": "object", "properties": {
                       "folder": {"type": "string", "description": "e.g. scene; empty for every readable folder"}}}},
    "list_skill_api": {"description": "The skill library and task environment an expert is written against: "
                                      "public methods with signatures and docstrings.",
                       "parameters": {"type": "object", "properties": {}}},
    "run_expert": {"description": "Run your expert/expert.py on seeded, randomized episodes (in a sandbox) and get "
                                  "the success rate and, for failures, your expert's error and traceback and the "
                                  "names of the hidden judge's checks that failed and passed.",
                   "parameters": {"type": "object", "properties": {
                       "seeds": {"type": "array", "items": {"type": "integer", "minimum": 0},
                                 "minItems": 1, "maxItems": MAX_SEEDS}},
                       "required": ["seeds"]}},
    "preview_scene": {"description": "Build scene/scene.yaml in the simulator at its nominal poses and look at it "
                                     "from the three calibrated cameras (head, left_wrist, right_wrist), with the "
                                     "calibration keyframes below for comparison. Returns an image.",
                      "parameters": {"type": "object", "properties": {}}},
    "submit": {"description": "Finish the session. Your files must be complete; checks run and may refuse.",
               "parameters": {"type": "object", "properties": {
                   "summary": {"type": "string", "description": "what you did (first line: the answer asked for)"}},
                   "required": ["summary"]}},
}


def tool_schemas(role: Role) -> list[dict[str, Any]]:
    """OpenAI-style function tools for `role`, in the order of its registry entry."""
    return [{"type": "function", "function": {"name": name, **SCHEMAS[name]}} for name in role.tools]


def skill_api_text() -> str:
    """The public API an expert uses (Skills, the task env and its objects, the skill errors), via inspect."""
    from datafarm import skills
    from datafarm.scene.builder import SceneObject
    from datafarm.task.env import TaskEnv

    parts = [describe_class(skills.Skills, "skills"), describe_class(TaskEnv, "env"),
             describe_class(SceneObject, "env.object(name)")]
    helpers = [f"{name}{inspect.signature(getattr(skills, name))}: {inspect.getdoc(getattr(skills, name)) or ''}"
               for name in ("pose", "top_down")]
    errors = [f"{name}: {inspect.getdoc(getattr(skills, name)) or ''}"
              for name in ("SkillError", "GraspFailed", "GraspSlipped", "Unreachable")]
    parts.append("## from datafarm.skills import ...\n" + "\n".join(f"- {h}" for h in helpers + errors))
    return "\n\n".join(parts)


def judge_api_text() -> str:
    """The public API a judge uses (the trace and the verdict), via inspect."""
    from datafarm.task.trace import Trace
    from datafarm.task.verdict import Verdict

    return "\n\n".join([describe_class(Trace, "trace"), describe_class(Verdict, "Verdict")])


def describe_class(cls: type, label: str) -> str:
    lines = [f"## {label}: {cls.__module__}.{cls.__name__}", inspect.getdoc(cls) or ""]
    for name, member in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(inspect.getattr_static(cls, name), property):
            lines.append(f"- {name} (property): {inspect.getdoc(member) or ''}".rstrip(": "))
        elif callable(member):
            try:
                signature = str(inspect.signature(member)).replace("(self, ", "(").replace("(self)", "()")
            except (TypeError, ValueError):
                signature = "(...)"
            doc = (inspect.getdoc(member) or "").replace("\n", " ")
            lines.append(f"- {name}{signature}" + (f": {doc}" if doc else ""))
    return "\n".join(line for line in lines if line)


class Toolbox:
    """The tools of one role session, bound to a workspace root and the caller's callbacks."""

    def __init__(self, role: Role, root: Path, expert_runner: ExpertRunner | None = None,
                 submit_check: SubmitCheck | None = None):
        self.role = role
        self.root = Path(root).resolve()
        self.expert_runner = expert_runner
        self.submit_check = submit_check
        for folder in role.writes:
            (self.root / folder).mkdir(parents=True, exist_ok=True)

    def schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(self.role)

    def call(self, name: str, arguments: str | dict[str, Any]) -> ToolOutcome:
        """Run one tool call; every failure becomes an "error: ..." result for the model."""
        try:
            if name not in self.role.tools:
                raise ToolRefused(f"{self.role.name} has no tool {name!r}; its tools: {', '.join(self.role.tools)}")
            args = json.loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments)
            if not isinstance(args, dict):
                raise ToolRefused("arguments must be a JSON object")
            return getattr(self, f"_tool_{name}")(**args)
        except json.JSONDecodeError as error:
            return ToolOutcome(f"error: arguments are not valid JSON ({error})", ok=False)
        except TypeError as error:
            return ToolOutcome(f"error: bad arguments for {name}: {error}", ok=False)
        except ToolRefused as error:
            log.info("%s: %s refused: %s", self.role.name, name, error)
            return ToolOutcome(f"error: {error}", ok=False)
        except Exception as error:  # a tool's own failure goes back to the model, not up the stack
            log.warning("%s: tool %s failed: %s", self.role.name, name, error)
            return ToolOutcome(f"error: {name} failed: {type(error).__name__}: {error}", ok=False)

    # ----- path confinement --------------------------------------------------------------------------
    def resolve(self, path: str, write: bool = False) -> Path:
        """The real path of `path` if it lies under a folder the role may read (or write)."""
        allowed = self.role.writes if write else self.role.readable
        verb = "write" if write else "read"
        listing = ", ".join(f + "/" for f in allowed)
        relative = Path(path)
        if not path or relative.is_absolute() or ".." in relative.parts:
            raise ToolRefused(f"{path!r} refused: give a path relative to the workspace root, without '..', "
                              f"under {listing}")
        target = (self.root / relative).resolve()
        for folder in allowed:
            base = (self.root / folder).resolve()
            if target == base or base in target.parents:
                return target
        raise ToolRefused(f"{path!r} refused: {self.role.name} may {verb} only under {listing}")

    # ----- the tools ------------------------------------------------------------------------------
    def _tool_read_file(self, path: str) -> ToolOutcome:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolRefused(f"no file {path!r} (list_files shows what there is)")
        data = target.read_bytes()
        if target.suffix.lower() == ".png" and len(data) <= MAX_IMAGE_BYTES:  # shown to a vision model
            return ToolOutcome(f"{path}: a PNG image of {len(data)} bytes; it follows", images=(data,))
        if len(data) > MAX_READ_BYTES:
            raise ToolRefused(f"{path} is {len(data)} bytes; files over {MAX_READ_BYTES} are not read")
        return ToolOutcome(data.decode("utf-8", errors="replace"))

    def _tool_write_file(self, path: str, content: str) -> ToolOutcome:
        target = self.resolve(path, write=True)
        if len(content.encode()) > MAX_WRITE_BYTES:
            raise ToolRefused(f"content over {MAX_WRITE_BYTES} bytes refused")
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{target.name}.partial")
        staged.write_text(content)
        staged.replace(target)  # atomic: a killed session never leaves half a file
        return ToolOutcome(f"wrote {path} ({len(content.splitlines())} lines)")

    def _tool_preview_scene(self) -> ToolOutcome:
        scene_dir = self.resolve("scene")
        if not (scene_dir / "scene.yaml").is_file():
            raise ToolRefused("write scene/scene.yaml first")
        keyframes = self.root / "keyframes" if "keyframes" in self.role.readable else None
        png, counts = render_scene_preview(scene_dir, keyframes)
        shown = ", ".join(f"{camera}: {n} scene pixels" for camera, n in counts.items())
        return ToolOutcome(f"rendered the scene from head, left_wrist, right_wrist ({shown}); image follows", images=(png,))

    def _tool_list_files(self, folder: str = "") -> ToolOutcome:
        folders = [folder.strip("/")] if folder.strip("/") else list(self.role.readable)
        found = []
        for name in folders:
            base = self.resolve(name)
            if base.is_dir():
                found += [str(p.relative_to(self.root)) for p in sorted(base.rglob("*"))
                          if p.is_file() and not p.name.startswith(".") and "__pycache__" not in p.parts]
        return ToolOutcome("\n".join(found) if found else f"(no files under {', '.join(f + '/' for f in folders)})")

    def _tool_list_skill_api(self) -> ToolOutcome:
        return ToolOutcome(skill_api_text())

    def _tool_run_expert(self, seeds: list[int]) -> ToolOutcome:
        if self.expert_runner is None:
            raise ToolRefused("no expert runner is available in this session")
        if not seeds or len(seeds) > MAX_SEEDS or not all(isinstance(s, int) and s >= 0 for s in seeds):
            raise ToolRefused(f"seeds must be 1 to {MAX_SEEDS} non-negative integers")
        report = self.expert_runner(list(seeds))
        return ToolOutcome(json.dumps(report, indent=1, default=str))

    def _tool_submit(self, summary: str) -> ToolOutcome:
        if not summary.strip():
            raise ToolRefused("submit needs a summary")
        problem = self.submit_check(summary) if self.submit_check else None
        if problem:
            return ToolOutcome(f"error: not accepted yet: {problem}", ok=False)
        return ToolOutcome("accepted", submitted=summary.strip())


# ----- checks a submit must pass, and the in-process expert runner ---------------------------------------
def check_defines(path: Path, function: str) -> str | None:
    """What is wrong with a Python file that must define `function` (parsed, never executed here)."""
    import ast

    if not path.is_file():
        return f"{path.parent.name}/{path.name} has not been written"
    try:
        tree = ast.parse(path.read_text(), filename=path.name)
    except SyntaxError as error:
        return f"{path.name} does not parse: line {error.lineno}: {error.msg}"
    if not any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body):
        return f"{path.name} must define a top-level function {function}()"
    return None


def check_scene_files(scene_dir: Path) -> str | None:
    """What is wrong with scene/ (task.yaml, scene.yaml, params.yaml), validated by their schemas."""
    from datafarm.scene.spec import load_scene_spec
    from datafarm.task.package import load_params, load_task_info

    missing = [n for n in ("task.yaml", "scene.yaml", "params.yaml") if not (scene_dir / n).is_file()]
    if missing:
        return f"scene/ is missing {missing}"
    try:
        load_task_info(scene_dir / "task.yaml")
        load_scene_spec(scene_dir / "scene.yaml")
        load_params(scene_dir / "params.yaml")
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def in_process_expert_runner(root: Path, wall_limit: float = 120.0) -> ExpertRunner:
    """Run root/expert/expert.py, judged by root/judge/judge.py, on root/scene/, in THIS process.

    For tests and trusted models only: agent-written code belongs in the sandboxes
    (datafarm.agent.expert_runner.sandboxed_expert_runner). What it returns is what the sandboxed
    runner returns (datafarm.task.isolation.expert_feedback): no verdict reason, no judge text.
    """

    def run(seeds: list[int]) -> dict[str, Any]:
        from datafarm.task.isolation import expert_feedback
        from datafarm.task.package import load_task_package
        from datafarm.task.rollout import run_episode

        judge_file = root / "judge" / "judge.py"
        package = load_task_package(root / "scene", root / "expert" / "expert.py", judge_file)
        results = [run_episode(package, seed, wall_limit=wall_limit) for seed in seeds]
        return expert_feedback(results, judge_file)

    return run


def render_scene_preview(scene_dir: Path, keyframes: Path | None = None) -> tuple[bytes, dict[str, int]]:
    """One PNG: the scene rendered from the rig's cameras (top row) and the calibration keyframes (bottom
    row, when given); and per camera how many pixels show scene objects (0: the camera misses them)."""
    import io

    import numpy as np
    from PIL import Image

    from datafarm.scene.builder import build_scene
    from datafarm.scene.spec import load_scene_spec
    from datafarm.sim.rig import DualArmRig
    from datafarm.task.randomization import RandomizationConfig, sample_episode
    from datafarm.viz import tile_views

    spec = load_scene_spec(scene_dir / "scene.yaml")  # validated data, not code: safe to build here
    rig = DualArmRig.create()
    sample = sample_episode(spec, 0, RandomizationConfig.none(), 60.0, rig.config.timing.control_hz)
    built = build_scene(rig, spec, sample.placements, scene_dir)
    frames = rig.capture()
    names = {*built.objects, *(n for f in built.fixtures.values() for n in f.entity_names())}
    ids = [i for i, name in rig.segmentation_legend().items() if name in names]
    counts = {camera: int(np.isin(frame.segmentation, ids).sum()) for camera, frame in frames.items()}
    rows = [tile_views([frame.rgb for frame in frames.values()])]
    if keyframes is not None and all((keyframes / f"{c}_0.png").exists() for c in frames):
        rows.append(tile_views([np.asarray(Image.open(keyframes / f"{c}_0.png").convert("RGB")) for c in frames]))
        if rows[1].shape[1] != rows[0].shape[1]:
            rows[1] = np.asarray(Image.fromarray(rows[1]).resize((rows[0].shape[1], rows[0].shape[0])))
    buffer = io.BytesIO()
    Image.fromarray(np.concatenate(rows, axis=0)).save(buffer, format="PNG")
    return buffer.getvalue(), counts
