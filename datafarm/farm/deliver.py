"""harvest and verify: the LeRobot dataset out, and the proof that it is complete and unmodified.

manifest.json lists the SHA-256 of every delivered file (the dataset and each admitted episode's
review), the admitted episodes, the target count, the request (the dataset's LeRobot task string) and
the reference task's canonical instruction. verify recomputes all of it.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field

from datafarm.errors import BadInput

from datafarm.farm.episodes import admitted_episodes, episode_dir, rendered_videos
from datafarm.farm.prepare import settings_of
from datafarm.logs import NOTABLE
from datafarm.workspace import Workspace, sha256_file

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
MANIFEST_HASH_KEY = "manifest_sha256"  # in workspace.json


def task_string(workspace: Workspace) -> str:
    """The dataset's LeRobot task string: the request as the user wrote it (its whitespace folded),
    since that is what a language-conditioned policy will be given when deployed."""
    return " ".join(workspace.path("request.txt").read_text().split())


def canonical_instruction(workspace: Workspace) -> str:
    """The instruction the contract states for the task that was built (kept as metadata)."""
    return workspace.read_json("contract.json")["instruction"]


def harvest(workspace: Workspace) -> dict:
    """Write the admitted episodes into workspace/dataset (the request as every frame's task string),
    then manifest.json. A delivery that already holds exactly the admitted episodes, unmodified and written
    with the same settings, is left as it is; a top-up appends to one that holds the first of them;
    otherwise every episode is written afresh."""
    from datafarm.dataset.harvest import HarvestItem, extendable, harvest as write_dataset
    from datafarm.farm.progress import record_harvest_progress

    settings = settings_of(workspace)
    admitted = admitted_episodes(workspace)[: settings.target_count]
    if not admitted:
        raise BadInput(f"no admitted episodes to harvest in {workspace.root}: run rollout, render and review first "
                       f"(`datafarm farm {workspace.root}`)")
    items = [HarvestItem(episode_dir=workspace.path(episode_dir(i), "sim"), videos=rendered_videos(workspace, i), index=i)
             for i in admitted]
    staging = workspace.path(".dataset-staging")
    if staging.exists():
        shutil.rmtree(staging)
    fps = json.loads(workspace.path(episode_dir(admitted[0]), "sim", "episode.json").read_text())["fps"]
    task, instruction = task_string(workspace), canonical_instruction(workspace)
    metadata = {"canonical_instruction": instruction, **randomization_metadata(workspace)}
    final = workspace.path("dataset")
    delivered = extendable(final, settings.repo_id, fps, task, metadata) if _delivery_unmodified(workspace) else []
    if delivered == admitted and workspace.path("reports/harvest.json").exists():
        # A rerun on a complete delivery: writing it again would change its files (and the manifest a
        # trained policy names) for nothing.
        log.info("harvest: up to date, %d episodes delivered", len(admitted), extra=NOTABLE)
        return workspace.read_json("reports/harvest.json")
    kept = len(delivered) if 0 < len(delivered) < len(admitted) and delivered == admitted[:len(delivered)] else 0
    report = write_dataset(items[kept:], staging, settings.repo_id, fps, task,
                           progress=lambda done, total: record_harvest_progress(workspace, done, total),
                           metadata=metadata, extend=final if kept else None)
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    write_manifest(workspace, admitted)
    frames = json.loads((final / "meta" / "info.json").read_text())["total_frames"]
    summary = {"episodes": len(admitted), "frames": frames, "appended_to": kept, "wall_seconds": report.wall_seconds,
               "recorded_seconds_per_wall_second": report.recorded_seconds_per_wall_second}
    workspace.write_json("reports/harvest.json", summary)
    log.info("harvest: %d episodes (%s), %d frames in %s%s", len(admitted), ", ".join(map(str, admitted)), frames,
             final, f" ({report.episodes} appended to the {kept} delivered)" if kept else "", extra=NOTABLE)
    return summary


def _delivery_unmodified(workspace: Workspace) -> bool:
    """Whether the delivery is exactly what was delivered, however many episodes (a top-up may extend it)."""
    report = verify(workspace, require_complete=False)
    return report.ok and report.episodes > 0


def randomization_metadata(workspace: Workspace) -> dict:
    """What the delivery was randomized over, for its users: each family of the simulation, on or off, with
    its ranges; and the renderer's appearance families (drawn per episode: `episodes/*/render/appearance.json`)."""
    settings = settings_of(workspace)
    contract = workspace.read_json("render_contract.json") if workspace.path("render_contract.json").exists() else {}
    return {"randomization": settings.randomization.model_dump(mode="json"),
            "render": {"renderer": settings.renderer, "appearance_families": contract.get("appearance", [])}}


def write_manifest(workspace: Workspace, admitted: list[int]) -> dict:
    files = workspace.files_under("dataset") + [f"{episode_dir(i)}/review.json" for i in admitted]
    manifest = {
        "task": workspace.meta.get("task"),
        "request": task_string(workspace),
        "canonical_instruction": canonical_instruction(workspace),
        "target_count": settings_of(workspace).target_count,
        "episodes": admitted,
        "files": {f: sha256_file(workspace.path(f)) for f in files},
    }
    workspace.write_json(MANIFEST, manifest)
    # No hash inside the manifest covers its own fields (task, request, ...): workspace.json keeps its hash.
    workspace.meta[MANIFEST_HASH_KEY] = sha256_file(workspace.path(MANIFEST))
    workspace.save_meta()
    return manifest


@dataclass
class VerifyReport:
    problems: list[str] = field(default_factory=list)
    checked_files: int = 0
    episodes: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(workspace: Workspace, require_complete: bool = True) -> VerifyReport:
    """Complete (target count admitted, unless not `require_complete`), unmodified (every hash, the manifest's
    own against the harvest record), reviewed (each episode admitted). A damaged file is a problem reported,
    never a crash."""
    report = VerifyReport()
    if not workspace.path(MANIFEST).exists():
        report.problems.append(f"{MANIFEST} is missing: the delivery was never harvested (run `datafarm farm`)")
        return report
    _check_manifest_unmodified(workspace, report)
    manifest = _read_json(workspace, MANIFEST, report)
    if not _manifest_is_well_formed(manifest):
        report.problems.append(f"{MANIFEST} is damaged (not the manifest harvest writes): run `datafarm farm --phase "
                               "harvest` to deliver again")
        return report
    report.episodes = len(manifest["episodes"])
    if require_complete and report.episodes < manifest["target_count"]:
        report.problems.append(f"incomplete: {report.episodes} admitted episodes delivered, {manifest['target_count']} asked")
    for relative, expected in sorted(manifest["files"].items()):
        path = workspace.path(relative)
        report.checked_files += 1
        if not path.is_file():
            report.problems.append(f"missing file: {relative}")
        elif sha256_file(path) != expected:
            report.problems.append(f"modified file: {relative} (SHA-256 differs from the manifest)")
    listed = set(manifest["files"])
    for relative in workspace.files_under("dataset") if workspace.path("dataset").exists() else []:
        if relative not in listed:
            report.problems.append(f"unlisted file in the delivery: {relative}")
    for index in manifest["episodes"]:
        relative = f"{episode_dir(index)}/review.json"
        if not workspace.path(relative).exists():
            report.problems.append(f"episode {index}: review.json is missing")
            continue
        review = _read_json(workspace, relative, report)
        if isinstance(review, dict) and not review.get("admitted"):
            report.problems.append(f"episode {index}: its review did not admit it ({'; '.join(review.get('reasons', []))})")
    info = "dataset/meta/info.json"
    if workspace.path(info).exists():
        data = _read_json(workspace, info, report)
        total = data.get("total_episodes") if isinstance(data, dict) else None
        if data is not None and total != report.episodes:
            report.problems.append(f"the dataset holds {total} episodes, the manifest lists {report.episodes}")
    else:
        report.problems.append("dataset/meta/info.json is missing: not a LeRobot dataset")
    return report


def _check_manifest_unmodified(workspace: Workspace, report: VerifyReport) -> None:
    """The manifest's fields (task, request, ...) are covered by no hash inside it: compare the file with
    the SHA-256 harvest kept in workspace.json when it wrote it (a delivery harvested before that hash was
    kept is checked by the hashes inside its manifest only)."""
    expected = workspace.meta.get(MANIFEST_HASH_KEY)
    if expected is not None and sha256_file(workspace.path(MANIFEST)) != expected:
        report.problems.append(f"modified file: {MANIFEST} (SHA-256 differs from the one harvest kept in workspace.json)")


def _read_json(workspace: Workspace, relative: str, report: VerifyReport):
    try:
        return json.loads(workspace.path(relative).read_text())
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
        report.problems.append(f"damaged file: {relative} is not valid JSON ({error})")
        return None


def _manifest_is_well_formed(manifest) -> bool:
    return (isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)
            and isinstance(manifest.get("target_count"), int)
            and isinstance(manifest.get("episodes"), list) and all(isinstance(i, int) for i in manifest["episodes"]))
