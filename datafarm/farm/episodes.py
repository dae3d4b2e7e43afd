"""rollout, render and review: the per-episode phases.

Layout per kept episode: episodes/NNNNNN/result.json (seed, verdict, sampled values),
episodes/NNNNNN/trace.npz, episodes/NNNNNN/sim/ (the recorder layout), episodes/NNNNNN/render/
(<camera>.mp4 + appearance.json) and episodes/NNNNNN/review.json. A seed simulates into
rollout/staging/<seed>/ and becomes an episode by one rename when committed; every seed committed is
appended to rollout/attempts.jsonl, so a resumed rollout continues after the last seed it tried.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from datafarm.cameras import CAMERAS
from datafarm.farm.prepare import calibrated_rig_config, load_png, settings_of
from datafarm.sim.recorder import RecordedEpisode
from datafarm.task.package import TaskPackage
from datafarm.task.isolation import rollouts_for
from datafarm.workspace import Workspace, WorkspaceError
from datafarm.workspace.jsonl import append_jsonl, read_jsonl

log = logging.getLogger(__name__)

ATTEMPTS = "rollout/attempts.jsonl"
STAGING = "rollout/staging"  # seeds simulated and not yet committed, one folder each
PROCESS_SANDBOX = "rollout-process-"  # .sandbox/ folders of sandboxes kept per process (Dask's workers)


def episode_dir(index: int) -> str:
    return f"episodes/{index:06d}"


@dataclass(frozen=True)
class Attempt:
    seed: int
    accepted: bool
    reason: str
    index: int | None = None  # the episode it became, when accepted


def attempts(workspace: Workspace) -> list[Attempt]:
    return [Attempt(**record) for record in read_jsonl(workspace.path(ATTEMPTS))]


def _log_attempt(workspace: Workspace, attempt: Attempt) -> Attempt:
    append_jsonl(workspace.path(ATTEMPTS), attempt.__dict__)
    return attempt


def kept_episodes(workspace: Workspace) -> list[int]:
    """Indices of episodes whose simulation is complete on disk."""
    root = workspace.path("episodes")
    if not root.exists():
        return []
    return sorted(int(p.name) for p in root.iterdir()
                  if p.name.isdigit() and (p / "result.json").exists() and (p / "sim" / "episode.json").exists())


def next_seed(workspace: Workspace) -> int:
    """The seed after every one tried, including a kept episode's whose attempt line a kill cut off."""
    tried = [a.seed for a in attempts(workspace)]
    tried += [workspace.read_json(f"{episode_dir(i)}/result.json")["seed"] for i in kept_episodes(workspace)]
    return max(tried) + 1 if tried else settings_of(workspace).seed_start


# Recording with cameras costs more than physics alone. While most seeds pass, each seed is recorded in the
# simulation the judge sees (one simulation per admitted episode); when fewer than half of the recent seeds
# pass, a physics-only search comes first so that failing seeds do not pay for the cameras.
RECENT_ATTEMPTS = 10
SEARCH_FIRST_BELOW = 0.5


def search_first(workspace: Workspace) -> bool:
    """Whether the recent acceptance rate is low enough that a physics-only search pays off."""
    recent = attempts(workspace)[-RECENT_ATTEMPTS:]
    return bool(recent) and sum(a.accepted for a in recent) / len(recent) < SEARCH_FIRST_BELOW


@dataclass(frozen=True)
class Staged:
    """A seed simulated into its own staging folder (rollout/staging/<seed>/), not yet an episode: seeds
    simulate side by side, and are made episodes one by one in seed order (:func:`commit_rollout`)."""
    seed: int
    accepted: bool
    reason: str
    cpu_seconds: float = 0.0  # charged to the episode it becomes (or would have become) at the commit
    wall_seconds: float = 0.0
    ended: float = 0.0  # time.time() when the simulation ended
    process: str | None = None  # host:pid of the process that ran it


def staging_dir(workspace: Workspace, seed: int) -> Path:
    return workspace.path(STAGING, str(seed))


def clear_staging(workspace: Workspace) -> None:
    """Forget seeds a killed run simulated and never committed (they were never tried: no attempt line),
    and the scratch folders of earlier runs' per-process sandboxes."""
    shutil.rmtree(workspace.path(STAGING), ignore_errors=True)
    for scratch in workspace.path(".sandbox").glob(f"{PROCESS_SANDBOX}*"):
        shutil.rmtree(scratch, ignore_errors=True)


def rollout_sandbox(workspace: Workspace, slot: int | None) -> Path:
    """The scratch folder of slot `slot`'s sandboxes; with None, this process's own (a runner whose workers
    are processes running one rollout at a time, e.g. Dask's: one sandbox pair per process, whatever seeds
    it is given). Seeds simulating at the same time in one process use different slots."""
    if slot is None:
        return workspace.path(".sandbox", f"{PROCESS_SANDBOX}{socket.gethostname()}-{os.getpid()}")
    return workspace.path(".sandbox", f"rollout-{slot}" if slot else "rollout")


def rollout_seed(workspace: Workspace, package: TaskPackage, seed: int, slot: int | None = 0) -> Staged:
    """Simulate `seed` with cameras into its staging folder, kept there if the hidden judge accepts it;
    in the sandboxes of `slot` (:func:`rollout_sandbox`)."""
    settings = settings_of(workspace)
    rig_config = calibrated_rig_config(workspace)
    # the expert and the judge are agent code: each runs in its own sandbox (workers kept across seeds)
    rollouts = rollouts_for(package, rollout_sandbox(workspace, slot), hidden=[workspace.root])
    if search_first(workspace):
        search = rollouts.run(seed, settings.randomization, rig_config=rig_config,
                              wall_limit=settings.episode_wall_limit)
        if not search.success:
            return Staged(seed, False, search.error or search.verdict.reason)
    folder = staging_dir(workspace, seed)
    shutil.rmtree(folder, ignore_errors=True)
    recorded = rollouts.run(seed, settings.randomization, rig_config=rig_config, record_dir=folder / "sim",
                            wall_limit=settings.episode_wall_limit * 4)
    if not recorded.success:
        shutil.rmtree(folder, ignore_errors=True)
        return Staged(seed, False, recorded.error or recorded.verdict.reason)
    recorded.trace.save(folder / "trace.npz")
    workspace.write_json(f"{STAGING}/{seed}/result.json", recorded.to_dict())
    return Staged(seed, True, recorded.verdict.reason)


def commit_rollout(workspace: Workspace, staged: Staged, index: int) -> Attempt:
    """Make an accepted staged seed episode `index` (one rename), log the attempt and charge its cost to
    `index`. Only the farm's own thread commits, in seed order, so the episodes and the attempt log are the
    same however many seeds simulated at once."""
    from datafarm.costs import CostLedger

    CostLedger(workspace.root).add_cpu("rollout", staged.cpu_seconds, index)
    workspace.log_timing("rollout", staged.wall_seconds, index, end=staged.ended, process=staged.process)
    if not staged.accepted:
        return _log_attempt(workspace, Attempt(staged.seed, False, staged.reason))
    folder = staging_dir(workspace, staged.seed)
    result = f"{STAGING}/{staged.seed}/result.json"
    workspace.write_json(result, {**workspace.read_json(result), "index": index})
    final = workspace.path(episode_dir(index))
    shutil.rmtree(final, ignore_errors=True)  # a leftover folder that never became an episode
    final.parent.mkdir(parents=True, exist_ok=True)
    folder.rename(final)
    return _log_attempt(workspace, Attempt(staged.seed, True, staged.reason, index))


def next_index(workspace: Workspace) -> int:
    kept = kept_episodes(workspace)
    return max(kept) + 1 if kept else 0


def calibration_references(workspace: Workspace) -> dict[str, list]:
    """Real reference frames per camera from the survey (for the head camera, its plate first)."""
    references = {}
    for camera in CAMERAS:
        if not workspace.path(f"keyframes/{camera}_plate.png").exists():
            continue
        frames = [load_png(workspace, f"keyframes/{camera}_plate.png")]
        index = 0
        while workspace.path(f"keyframes/{camera}_{index}.png").exists():
            frames.append(load_png(workspace, f"keyframes/{camera}_{index}.png"))
            index += 1
        references[camera] = frames
    absent = [camera for camera in CAMERAS if camera not in references]
    if absent and "head" in references:  # a single-photo calibration has no wrist views
        log.warning("the calibration has no %s views (a single photo?): the renders take the head photo's "
                    "colours as their real references", absent)
        references.update({camera: references["head"] for camera in absent})
    elif absent:
        raise WorkspaceError(f"{workspace.path('keyframes')} has no frames of {absent}: run the survey phase again "
                             f"(datafarm farm {workspace.root} --phase survey)")
    return references


@functools.cache
def texture_pool():
    """Tablecloths: real table-surface crops from the RoboMIND AgileX footage, plus procedural ones."""
    from datafarm.calibration import appearance_references
    from datafarm.render import TexturePool, crop_table_textures

    try:
        real = crop_table_textures(appearance_references(8))
    except FileNotFoundError:  # the footage lives in shared/; without it, procedural cloths only
        real = ()
    return TexturePool(real=tuple(real))


def episode_appearance(seed: int, texture_pool, randomization, fixed_seed: int = 0):
    """How the render shows episode `seed`: its own draw of tablecloth and light, or with the appearance
    family off one fixed look (`fixed_seed`'s) for every episode; its background when that family is on."""
    import dataclasses

    from datafarm.render.appearance import (CALIBRATION_BACKGROUND, AppearanceRange, sample_appearance,
                                            sample_background)

    reach = AppearanceRange(tuple(randomization.cloth_saturation), randomization.cloth_hue_spread,
                            randomization.procedural_cloth_share, tuple(randomization.light_gains))
    appearance = sample_appearance(seed if randomization.appearance else fixed_seed, texture_pool, reach)
    return dataclasses.replace(appearance, background=sample_background(seed) if randomization.background
                               else CALIBRATION_BACKGROUND)


def render_episode(workspace: Workspace, index: int, renderer, references: dict[str, list],
                   texture_pool) -> dict[str, Path]:
    from datafarm.render.contract import RenderContract

    contract = RenderContract.model_validate(workspace.read_json("render_contract.json")) \
        if workspace.path("render_contract.json").exists() else RenderContract()
    result = workspace.read_json(f"{episode_dir(index)}/result.json")
    settings = settings_of(workspace)
    appearance = episode_appearance(result["seed"], texture_pool, settings.randomization, settings.seed_start)
    staging = workspace.path(episode_dir(index), ".render-staging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    episode = RecordedEpisode.load(workspace.path(episode_dir(index), "sim"))
    renderer.render(episode, references, appearance, staging, contract=contract)
    (staging / "appearance.json").write_text(json.dumps(appearance.to_dict(), indent=2, default=str))
    final = workspace.path(episode_dir(index), "render")
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    return {camera: final / f"{camera}.mp4" for camera in CAMERAS}


def rendered_videos(workspace: Workspace, index: int) -> dict[str, Path]:
    folder = workspace.path(episode_dir(index), "render")
    return {camera: folder / f"{camera}.mp4" for camera in CAMERAS}


def review_episode(workspace: Workspace, index: int) -> dict:
    from datafarm.review import review_episode as review
    from datafarm.review.report import ReviewThresholds

    result = workspace.read_json(f"{episode_dir(index)}/result.json")
    episode = RecordedEpisode.load(workspace.path(episode_dir(index), "sim"))
    thresholds = ReviewThresholds(**settings_of(workspace).review)  # the workspace's own limits, if it set any
    verdict = review(episode, rendered_videos(workspace, index), result["verdict"], thresholds)
    data = {"index": index, "seed": result["seed"], "reviewer": "builtin", **verdict.to_dict()}
    if data["admitted"]:
        _llm_episode_review(workspace, index, data)
    workspace.write_json(f"{episode_dir(index)}/review.json", data)
    return data


def _llm_episode_review(workspace: Workspace, index: int, data: dict) -> None:
    """With an LLM agent bound, the episode_reviewer role's decision counts beside the classical checks."""
    from datafarm.agent.bindings import load_bindings

    bindings = load_bindings(workspace.root)
    if bindings.agent == "builtin":
        return
    from datafarm.agent.episode_reviewer import review_episode_with_llm
    from datafarm.costs import CostLedger
    from datafarm.farm.show import episode_sheet

    workdir = workspace.path(".authoring", "episode_reviewer", f"{index:06d}")
    sheet = episode_sheet(workspace, index, workdir / "sheet.png")
    llm = review_episode_with_llm(bindings, workdir, workspace.path("request.txt").read_text(), sheet, data,
                                  CostLedger(workspace.root))
    data["llm"] = llm
    data["reviewer"] = f"builtin + {llm['model']}"
    if llm["decision"] == "reject":
        data["admitted"] = False
        data["reasons"] = [*data["reasons"], f"episode reviewer: {llm['reason']}"]


def admitted_episodes(workspace: Workspace) -> list[int]:
    admitted = []
    for index in kept_episodes(workspace):
        path = workspace.path(episode_dir(index), "review.json")
        if path.exists() and json.loads(path.read_text()).get("admitted"):
            admitted.append(index)
    return admitted
