"""verify of a pushed delivery, from the remote copy itself: every file the manifest lists is there
and its bytes, downloaded and hashed, have the manifest's SHA-256.

What is checked (each finding is a problem in the report, like the local verify's):
- the manifest is there, reads as a manifest, and its bytes have the SHA-256 its metadata records
  (no hash inside a manifest covers its own fields);
- the delivery is complete (the target count of episodes), every listed file is present with the
  listed SHA-256 (computed from the downloaded bytes), and each object's metadata agrees;
- no object under `<prefix>/dataset/` is left unlisted; each episode's review admitted it; the
  dataset's info.json counts the manifest's episodes.
A missing bucket, absent credentials or an unreachable store are errors (datafarm.storage.store).
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor

from datafarm.farm.deliver import MANIFEST, VerifyReport
from datafarm.farm.episodes import episode_dir
from datafarm.storage.location import S3Location
from datafarm.storage.settings import StorageSettings
from datafarm.storage.store import S3Store
from datafarm.storage.transfer import SHA256_METADATA, NoProgress, TransferProgress, download_hashing

log = logging.getLogger(__name__)

INFO = "dataset/meta/info.json"


def verify_remote(location: S3Location, settings: StorageSettings, progress: TransferProgress | None = None) -> VerifyReport:
    progress = progress or NoProgress()
    report = VerifyReport()
    store = S3Store.connect(location, settings)
    remote = store.list_sizes()
    manifest_key = location.key(MANIFEST)
    if manifest_key not in remote:
        report.problems.append(f"{location.uri(MANIFEST)} is missing: nothing was pushed there, or a push did not finish "
                               f"(rerun `datafarm push WS {location}`)")
        return report
    manifest = _read_manifest(store, location, report)
    if manifest is None:
        return report
    files: dict[str, str] = manifest["files"]
    report.episodes = len(manifest["episodes"])
    if report.episodes < manifest["target_count"]:
        report.problems.append(f"incomplete: {report.episodes} admitted episodes delivered, {manifest['target_count']} asked")
    present = [relative for relative in sorted(files) if location.key(relative) in remote]
    for relative in sorted(set(files) - set(present)):
        report.problems.append(f"missing object: {location.uri(relative)}")
    report.checked_files = len(files)
    wanted_json = {INFO} | {f"{episode_dir(i)}/review.json" for i in manifest["episodes"]}
    progress.begin(len(present), sum(remote[location.key(relative)] for relative in present))

    def check(relative: str) -> tuple[list[str], bytes | None]:
        problems = []
        got = download_hashing(store, location.key(relative), progress, keep=relative in wanted_json)
        if got.sha256 != files[relative]:
            problems.append(f"modified object: {location.uri(relative)} (the SHA-256 of its bytes differs from the manifest)")
        elif got.metadata.get(SHA256_METADATA) != files[relative]:
            problems.append(f"{location.uri(relative)}: its sha256 metadata ({got.metadata.get(SHA256_METADATA)}) is not "
                            "the manifest's (push again to rewrite it)")
        progress.file_done(relative, "verified" if not problems else "differs")
        log.info("verify: %s %s", location.uri(relative), "ok" if not problems else problems[0])
        return problems, got.data if not problems else None

    with ThreadPoolExecutor(settings.workers, thread_name_prefix="verify") as pool:
        results = dict(zip(present, pool.map(check, present)))
    bodies = {}
    for relative, (problems, body) in results.items():
        report.problems += problems
        if body is not None:
            bodies[relative] = body
    listed = {location.key(relative) for relative in files}
    for key in sorted(k for k in remote if k.startswith(location.key("dataset/")) and k not in listed):
        report.problems.append(f"unlisted object in the delivery: s3://{location.bucket}/{key}")
    _check_reviews_and_count(location, manifest["episodes"], bodies, report)
    return report


def _read_manifest(store: S3Store, location: S3Location, report: VerifyReport) -> dict | None:
    """The remote manifest when its bytes match its metadata's SHA-256 and it is well formed, else None
    (with the problem in the report)."""
    got = download_hashing(store, location.key(MANIFEST), NoProgress(), keep=True)
    recorded = got.metadata.get(SHA256_METADATA)
    if recorded != got.sha256:
        report.problems.append(f"modified object: {location.uri(MANIFEST)} (the SHA-256 of its bytes is not the one "
                               f"push recorded in its metadata: {recorded}); push the delivery again")
        return None
    try:
        manifest = json.loads(got.data)
    except (ValueError, UnicodeDecodeError) as error:
        report.problems.append(f"damaged object: {location.uri(MANIFEST)} is not valid JSON ({error}); push again")
        return None
    if not _well_formed(manifest):
        report.problems.append(f"{location.uri(MANIFEST)} is not a delivery manifest (no files, episodes or target "
                               "count); push a delivery made by `datafarm farm`")
        return None
    return manifest


def _well_formed(manifest: object) -> bool:
    return (isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in manifest["files"].items())
            and isinstance(manifest.get("target_count"), int)
            and isinstance(manifest.get("episodes"), list) and all(isinstance(i, int) for i in manifest["episodes"]))


def _check_reviews_and_count(location: S3Location, episodes: list[int], bodies: dict[str, bytes],
                             report: VerifyReport) -> None:
    """Each episode's review admitted it; info.json counts the manifest's episodes (files that failed
    their hash check are reported already and not read)."""
    for index in episodes:
        review = _json(bodies.get(f"{episode_dir(index)}/review.json"))
        if isinstance(review, dict) and not review.get("admitted"):
            report.problems.append(f"episode {index}: its review did not admit it ({'; '.join(review.get('reasons', []))})")
    if INFO not in bodies and not any(INFO in problem for problem in report.problems):
        report.problems.append(f"{INFO} is not in the delivery: not a LeRobot dataset")
    info = _json(bodies.get(INFO))
    if isinstance(info, dict) and info.get("total_episodes") != report.episodes:
        report.problems.append(f"the dataset holds {info.get('total_episodes')} episodes, the manifest lists {report.episodes}")


def _json(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
