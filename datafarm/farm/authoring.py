"""build, contract, review (contract), judge and expert: the author writes the task package.

The package is split across the workspace as DESIGN.md lays it out: scene/ (task.yaml, scene.yaml,
params.yaml), judge/ (judge.py, hidden from the expert's author), expert/ (expert.py + report).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

import numpy as np

from datafarm.author import Author, BuiltinAuthor, RequestRefused
from datafarm.cameras import CAMERAS
from datafarm.farm.prepare import calibrated_rig_config, load_png, save_png, settings_of
from datafarm.render.contract import RenderContract
from datafarm.scene.spec import load_scene_spec, mesh_files
from datafarm.sim.config import load_rig_config
from datafarm.task.package import TaskPackage, load_task_package
from datafarm.task.randomization import RandomizationConfig
from datafarm.task.isolation import IsolatedRollouts, expert_feedback
from datafarm.workspace import Workspace, WorkspaceError

log = logging.getLogger(__name__)

SCENE_FILES = ("task.yaml", "scene.yaml", "params.yaml")  # and the mesh files scene.yaml names


def get_author(workspace: Workspace) -> Author:
    """The author the bindings configure (agent: builtin | litellm); builtin when there are none."""
    from datafarm.agent.bindings import load_bindings

    bindings = load_bindings(workspace.root)
    if bindings.agent == "builtin":
        return BuiltinAuthor()
    from datafarm.agent.expert_runner import sandboxed_expert_runner
    from datafarm.agent.runtime import LLMAuthor
    from datafarm.costs import CostLedger

    workdir = workspace.path(".authoring", "agent")
    return LLMAuthor(bindings, workdir, CostLedger(workspace.root), survey=workspace.read_json("survey.json"),
                     expert_runner=sandboxed_expert_runner(workdir, hidden=[workspace.root]))


def workspace_package(workspace: Workspace) -> TaskPackage:
    """The task package as the workspace holds it (scene/, expert/, judge/)."""
    expert = workspace.path("expert", "expert.py")
    judge = workspace.path("judge", "judge.py")
    return load_task_package(workspace.path("scene"), expert if expert.exists() else None,
                             judge if judge.exists() else None)


GROUNDING_ATTEMPTS = 3  # an author that revises scenes (the LLM one) gets this many tries in all


def build(workspace: Workspace) -> dict:
    """Match the request, write the scene, and ground it against the calibration footage. A scene that
    fails grounding goes back to an author that revises scenes, with the numbers and the overlay; after
    the last attempt (the first, for the deterministic built-in author) GroundingFailed stops the farm."""
    author = get_author(workspace)
    request = workspace.path("request.txt").read_text()
    match = author.match(request)  # RequestRefused says what can be built and how to get more
    attempts = GROUNDING_ATTEMPTS if author.revises_scenes else 1
    for attempt in range(1, attempts + 1):
        _write_package(workspace, author, match)
        grounding = ground_scene(workspace)
        inventory = inventory_check(grounding)
        report = {"task": match.task, "match": match.reason, "author": author.name, "grounding": grounding,
                  "inventory_check": inventory, "attempt": attempt}
        workspace.write_json("scene/grounding.json", report)
        if grounding["passed"]:
            if grounding["unconfirmed"]:
                log.warning("build: %s too small for the head camera to show; placed as the scene says, not "
                            "confirmed by the footage (scene/grounding.png)", ", ".join(grounding["unconfirmed"]))
            return report
        if attempt < attempts:
            author.scene_feedback = (f"Your scene did not match the calibration footage: {'; '.join(grounding['failures'])}. "
                                     f"Scores: {grounding['objects']}, arms {grounding['arms']}. The overlay is "
                                     f"{workspace.path('scene', 'grounding.png')}. The inventory: "
                                     f"{workspace.read_json('survey.json').get('objects', [])}. Revise scene/.")
    raise GroundingFailed(f"the {match.task} scene does not match the calibration footage after {attempts} attempt(s) ("
                          f"{'; '.join(grounding['failures'])}); see {workspace.path('scene', 'grounding.png')} and "
                          f"{workspace.path('scene', 'grounding.json')}: use a calibration recorded in the scene the "
                          "request asks for, or a request for what the footage shows")


def _write_package(workspace: Workspace, author: Author, match) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        package_dir = author.write_package(match, Path(tmp) / "package")
        scene_dir = Path(tmp) / "scene"
        scene_dir.mkdir()
        meshes = mesh_files(load_scene_spec(package_dir / "scene.yaml"))
        for name in [*SCENE_FILES, *meshes]:
            (scene_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(package_dir / name, scene_dir / name)
        workspace.copy_in(scene_dir, "scene")
        # Kept for the judge and expert phases, which each take only their own file.
        workspace.copy_in(package_dir, ".authoring/package")
    workspace.meta["task"] = match.task
    workspace.save_meta()


def inventory_check(grounding: dict) -> dict:
    """Which of the scene's objects the survey's inventory lacks (grounding's matches): they are flagged (the
    contract carries the flags and its reviewer rejects them), never built silently. Objects the head
    camera is too small to show (grounding's "unconfirmed") are listed apart: no footage could flag them."""
    unconfirmed = grounding["unconfirmed"]
    missing = sorted(name for name, match in grounding["matches"].items() if not match["found"] and name not in unconfirmed)
    return {"not_in_inventory": missing, "too_small_to_survey": unconfirmed}


class GroundingFailed(WorkspaceError):
    """The rebuilt scene does not match the calibration footage (datafarm.survey.grounding)."""


def ground_scene(workspace: Workspace) -> dict:
    """Render the scene from the surveyed cameras at the calibration keyframes' joint states and score it
    against the footage per object and for the arms; the overlay goes to scene/grounding.png."""
    from datafarm.survey.grounding import ground_scene_spec

    spec = load_scene_spec(workspace.path("scene", "scene.yaml"))
    survey_data = workspace.read_json("survey.json")
    objects = survey_data.get("objects", [])
    masks = {i: load_png(workspace, o["mask"])[..., 0] > 127 for i, o in enumerate(objects)
             if o.get("mask") and workspace.path(o["mask"]).exists()}
    keyframes = survey_data.get("keyframes") or {"indices": [0], "states": [_rest_state()]}
    images = [load_png(workspace, f"keyframes/head_{i}.png") for i in range(len(keyframes["states"]))]
    brightness = 255 * max(survey_data.get("table_plane", {}).get("colour_rgb", [0.6, 0.6, 0.6]))
    result = ground_scene_spec(calibrated_rig_config(workspace), spec, workspace.path("scene"), objects, masks,
                               images, [np.asarray(s) for s in keyframes["states"]], brightness,
                               gate_arms=survey_data.get("joints_measured", True))
    save_png(workspace, "scene/grounding.png", result.overlay)
    return {**result.report, "overlay": "scene/grounding.png", "failures": result.failures()}


def _rest_state() -> list[float]:
    rig = load_rig_config()
    arm = [*rig.rest_qpos, rig.rest_gripper]
    return arm + arm


def contract(workspace: Workspace) -> dict:
    """State what will be produced; the hidden judge is run once on a do-nothing rollout to name its
    checks and prove it rejects doing nothing."""
    settings = settings_of(workspace)
    package = _authoring_package(workspace)
    # the judge is agent code too: the do-nothing episode and its verdict run in their own sandboxes
    with IsolatedRollouts(package, workspace.path(".sandbox", "contract"), hidden=[workspace.root],
                          do_nothing=True) as rollouts:
        control = rollouts.run(settings.seed_start, RandomizationConfig.none())
    inventory = workspace.read_json("scene/grounding.json").get("inventory_check", {})
    contract_data = {
        "task": package.name,
        "instruction": package.info.instruction,
        "request": workspace.path("request.txt").read_text().strip(),
        "success_criteria": sorted(control.verdict.checks),
        # check names only: the judge's reason text carries its thresholds, and the expert's author reads this file
        "negative_control": {"do_nothing_rejected": not control.success,
                             "failed_checks": sorted(k for k, ok in control.verdict.checks.items() if not ok)},
        "max_seconds": package.info.max_seconds,
        "randomization": settings.randomization.model_dump(mode="json"),
        "not_in_inventory": inventory.get("not_in_inventory", []),
        "too_small_to_survey": inventory.get("too_small_to_survey", []),
    }
    # The defaults of RenderContract (negative prompt, depth control at weight 1, arms generated) complete it.
    render_contract = RenderContract(
        renderer=settings.renderer, cameras=list(CAMERAS), fps=load_rig_config().timing.control_hz,
        prompts={camera: f"{package.info.instruction} Real AgileX dual-arm PiPER rig, {camera} camera view, "
                         "photographic, consistent lighting." for camera in CAMERAS},
        appearance=["tablecloth texture", "light colour and intensity",
                    *(["background plate and room light"] if settings.randomization.background else [])],
        seed=settings.seed_start,
    ).model_dump(mode="json")
    workspace.write_json("contract.json", contract_data)
    workspace.write_json("render_contract.json", render_contract)
    return contract_data


def review_contract(workspace: Workspace) -> dict:
    """An independent reviewer (it sees the request and the contracts only) accepts or rejects."""
    contract_data = workspace.read_json("contract.json")
    render_contract = workspace.read_json("render_contract.json")
    request = workspace.path("request.txt").read_text()
    families = contract_data["randomization"]
    checks = {
        "task_serves_request": _independent_match(request) in (contract_data["task"], None),
        "judge_rejects_doing_nothing": contract_data["negative_control"]["do_nothing_rejected"],
        "success_criteria_named": len(contract_data["success_criteria"]) >= 2,
        # every family as the workspace's settings have it: on, unless the user switched it off (an ablation)
        "randomization_as_set": families == settings_of(workspace).randomization.model_dump(mode="json"),
        "all_cameras_rendered": set(render_contract["cameras"]) == set(CAMERAS),
        # the request's objects must be in the calibration scene (datafarm.survey.inventory)
        "scene_objects_in_inventory": not contract_data.get("not_in_inventory"),
    }
    review = {"accepted": all(checks.values()), "checks": checks, "reviewer": "builtin"}
    llm = _llm_review(workspace, request, contract_data, render_contract)
    if llm is not None:  # the independent model's verdict counts beside the offline checklist
        review["llm"] = llm
        review["reviewer"] = f"builtin + {llm['model']}"
        checks["independent_reviewer_accepts"] = llm["verdict"] == "accept"
        review["accepted"] = all(checks.values())
    workspace.write_json("review/contract.json", review)
    if not review["accepted"]:
        failed = [k for k, ok in checks.items() if not ok]
        raise WorkspaceError(f"the contract was rejected by its reviewer ({', '.join(failed)}); "
                             f"see {workspace.path('review', 'contract.json')}")
    return review


def _llm_review(workspace: Workspace, request: str, contract_data: dict, render_contract: dict) -> dict | None:
    """The contract_reviewer role's verdict when the bindings configure an LLM agent; None offline."""
    from datafarm.agent.bindings import load_bindings

    bindings = load_bindings(workspace.root)
    if bindings.agent == "builtin":
        return None
    from datafarm.agent.contract_review import review_contract_with_llm
    from datafarm.costs import CostLedger

    return review_contract_with_llm(bindings, workspace.path(".authoring", "reviewer"), request, contract_data,
                                    render_contract, workspace.path("scene", "scene.yaml").read_text(),
                                    CostLedger(workspace.root))


def _independent_match(request: str) -> str | None:
    """What the offline matcher makes of the request; None when the request is beyond it (an LLM
    author may build tasks the built-in one cannot, and then this check cannot object)."""
    try:
        return BuiltinAuthor().match(request).task
    except RequestRefused:
        return None


def write_judge(workspace: Workspace) -> dict:
    workspace.copy_in(workspace.path(".authoring", "package", "judge.py"), "judge/judge.py")
    return {"judge": "judge/judge.py"}


def write_expert(workspace: Workspace) -> dict:
    """Write the expert and try it on seeds against the hidden judge; it must pass often enough."""
    settings = settings_of(workspace)
    workspace.copy_in(workspace.path(".authoring", "package", "expert.py"), "expert/expert.py")
    package = workspace_package(workspace)
    with IsolatedRollouts(package, workspace.path(".sandbox", "expert"), hidden=[workspace.root]) as rollouts:
        trials = [rollouts.run(1_000_000 + seed, settings.randomization, wall_limit=settings.episode_wall_limit)
                  for seed in range(settings.expert_trial_seeds)]
    # the expert's author may read this report: check names and its own errors, never judge text
    feedback = expert_feedback(trials, workspace.path("judge", "judge.py"))
    rate = feedback["success_rate"]
    report = {"trial_seeds": feedback["seeds"], "success_rate": rate, "failures": feedback["failures"]}
    workspace.write_json("expert/report.json", report)
    if rate < settings.expert_min_success:
        raise WorkspaceError(f"the expert passed the hidden judge on {rate:.0%} of {len(trials)} trial seeds, below "
                             f"the required {settings.expert_min_success:.0%}; see {workspace.path('expert', 'report.json')}")
    return report


def _authoring_package(workspace: Workspace) -> TaskPackage:
    staged = workspace.path(".authoring", "package")
    if not staged.exists():
        raise WorkspaceError(f"{staged} is missing: rerun the build phase (`datafarm farm {workspace.root} --phase build`)")
    return load_task_package(staged)
