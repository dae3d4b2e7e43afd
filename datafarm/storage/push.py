"""push: a workspace's delivery (manifest.json and every file it lists) to `s3://bucket/prefix`.

The remote copy mirrors the workspace's layout: `<prefix>/manifest.json`, `<prefix>/dataset/...`,
`<prefix>/episodes/NNNNNN/review.json`. Only a delivery that verifies locally is pushed. A file whose
object is already there with the same size and SHA-256 is skipped, so a rerun sends only what is
missing or changed; a multipart upload cut short resumes (datafarm.storage.transfer). The manifest
goes last, and a remote manifest of another delivery is deleted first: a push cut short leaves a
copy without a manifest, which `datafarm verify s3://...` reports as incomplete, never as complete.
Objects under `<prefix>/dataset/` that the manifest no longer lists (an older harvest) are deleted.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from datafarm.errors import BadInput
from datafarm.farm.deliver import MANIFEST, verify
from datafarm.storage.location import S3Location, parse_s3_uri
from datafarm.storage.settings import StorageSettings
from datafarm.storage.store import S3Store
from datafarm.storage.transfer import SHA256_METADATA, NoProgress, TransferProgress, UploadResult, upload_file
from datafarm.workspace import Workspace, sha256_file

log = logging.getLogger(__name__)


@dataclass
class PushReport:
    destination: str
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    bytes_uploaded: int = 0
    bytes_total: int = 0
    parts_reused: int = 0
    seconds: float = 0.0


def push(workspace: Workspace, location: S3Location, settings: StorageSettings,
         progress: TransferProgress | None = None) -> PushReport:
    """Upload the delivery of `workspace` to `location`; see the module's docstring."""
    progress = progress or NoProgress()
    started = time.monotonic()
    files = _delivery_files(workspace)
    sizes = {relative: workspace.path(relative).stat().st_size for relative in files}
    store = S3Store.connect(location, settings)
    report = PushReport(str(location), bytes_total=sum(sizes.values()))
    remote = store.list_sizes()
    manifest_key = location.key(MANIFEST)
    if manifest_key in remote and _remote_sha256(store, manifest_key) != files[MANIFEST]:
        store.delete(manifest_key)  # another delivery's manifest must not vouch for a half-replaced copy
        del remote[manifest_key]
        log.info("push: %s held another delivery's manifest: deleted it until this push completes", location)
    progress.begin(len(files), report.bytes_total)

    def send(relative: str) -> UploadResult | None:
        """Upload one file unless its object is there already (then None)."""
        key = location.key(relative)
        if remote.get(key) == sizes[relative] and _remote_sha256(store, key) == files[relative]:
            progress.advance(sizes[relative])
            log.info("push: %s skipped (at %s already, size and SHA-256 match)", relative, location.uri(relative))
            progress.file_done(relative, "skipped")
            return None
        result = upload_file(store, workspace.path(relative), key, files[relative], settings, progress)
        parts = f", {result.parts} parts, {result.parts_reused} of them resumed" if result.parts else ""
        log.info("push: %s %s (%d bytes%s) to %s", relative, result.outcome, result.size, parts, location.uri(relative))
        progress.file_done(relative, result.outcome)
        return result

    with ThreadPoolExecutor(settings.workers, thread_name_prefix="push") as pool:
        futures = {relative: pool.submit(send, relative) for relative in files if relative != MANIFEST}
        try:
            outcomes = {relative: future.result() for relative, future in futures.items()}
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    outcomes[MANIFEST] = send(MANIFEST)  # last: the copy is complete once its manifest is there
    for relative, result in outcomes.items():
        if result is None:
            report.skipped.append(relative)
            continue
        report.uploaded.append(relative)
        report.bytes_uploaded += result.bytes_sent
        report.parts_reused += result.parts_reused
    report.deleted = _delete_unlisted(store, location, files)
    report.seconds = time.monotonic() - started
    log.info("push: %s: %d files uploaded (%d bytes), %d already there, %d deleted, in %.1f s", location,
             len(report.uploaded), report.bytes_uploaded, len(report.skipped), len(report.deleted), report.seconds)
    return report


def push_destination(workspace: Workspace, given: str | None = None) -> S3Location:
    """Where the delivery of `workspace` goes: `given`, else its `push_to` setting (`prepare --push-to`)."""
    if given:
        return parse_s3_uri(given)
    from datafarm.farm.prepare import settings_of  # lazily: the farm's settings import the renderers

    configured = settings_of(workspace).push_to
    if configured is None:
        raise BadInput(f"no destination for the delivery of {workspace.root}: pass one (`datafarm push "
                       f"{workspace.root} s3://BUCKET/PREFIX`), or set push_to in the settings of its "
                       "workspace.json (`datafarm prepare --push-to s3://BUCKET/PREFIX` for a new workspace)")
    return parse_s3_uri(configured)


def _delivery_files(workspace: Workspace) -> dict[str, str]:
    """relative path -> SHA-256 of every file to push (the manifest last), after a local verify."""
    if not workspace.path(MANIFEST).is_file():
        raise BadInput(f"{workspace.root} has no delivery to push yet (no {MANIFEST}: the farm has not harvested "
                       f"it): run `datafarm farm {workspace.root}` until `datafarm verify {workspace.root}` passes, "
                       "then push")
    checked = verify(workspace)
    if not checked.ok:
        shown = "; ".join(checked.problems[:3]) + (f"; and {len(checked.problems) - 3} more" if len(checked.problems) > 3 else "")
        raise BadInput(f"the delivery in {workspace.root} does not verify ({shown}): fix it first (`datafarm verify "
                       f"{workspace.root}`, then `datafarm farm {workspace.root}`), then push again")
    manifest = workspace.read_json(MANIFEST)
    # verify() just recomputed every listed file's SHA-256 and found the manifest's.
    return {**dict(sorted(manifest["files"].items())), MANIFEST: sha256_file(workspace.path(MANIFEST))}


def _remote_sha256(store: S3Store, key: str) -> str | None:
    head = store.head(key)
    return None if head is None else head.get("Metadata", {}).get(SHA256_METADATA)


def _delete_unlisted(store: S3Store, location: S3Location, files: dict[str, str]) -> list[str]:
    """Objects under <prefix>/dataset/ that this delivery does not list (left by an older harvest)."""
    listed = {location.key(relative) for relative in files}
    deleted = []
    for key in sorted(store.list_sizes("dataset/")):
        if key not in listed:
            store.delete(key)
            deleted.append(location.relative(key))
            log.info("push: deleted %s (not in this delivery's manifest)", location.uri(location.relative(key)))
    return deleted
