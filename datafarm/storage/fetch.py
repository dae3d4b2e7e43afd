"""Calibration episodes from S3: `s3://bucket/prefix` mirrored into a local folder, then used as one.

The default folder is in the cache, `$DATAFARM_CACHE/s3/<bucket>/<prefix>/` (DATAFARM_CACHE defaults
to the user's cache folder, `~/.cache/datafarm`). A rerun downloads only objects whose ETag or size changed and removes
files the remote copy no longer has, so the folder is always the remote copy. An object with a
sha256 metadata (as `datafarm push` writes) is checked against the bytes downloaded.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from datafarm.errors import BadInput
from datafarm.storage.location import S3Location, parse_s3_uri
from datafarm.storage.settings import StorageSettings, load_storage_settings
from datafarm.storage.store import S3Store
from datafarm.storage.transfer import SHA256_METADATA, NoProgress, TransferProgress, download_hashing

log = logging.getLogger(__name__)

INDEX = ".datafarm-s3-index.json"  # relative path -> [ETag, size] of what the cache holds


def cache_root() -> Path:
    base = os.environ.get("DATAFARM_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "datafarm"
    return Path(base) / "s3"


def download_calibration(uri: str, target: Path | None = None, settings: StorageSettings | None = None,
                         progress: TransferProgress | None = None) -> Path:
    """The local folder mirroring the calibration episode at `uri` (downloaded or refreshed first), by
    default in the cache: `cache_root()/<bucket>/<prefix>`."""
    location = parse_s3_uri(uri)
    target = target if target is not None else cache_root() / location.bucket / location.prefix
    return mirror(location, target, settings or load_storage_settings(), progress)


def mirror(location: S3Location, target: Path, settings: StorageSettings, progress: TransferProgress | None = None) -> Path:
    """Make `target` hold exactly the objects under `location` (relative paths kept)."""
    progress = progress or NoProgress()
    store = S3Store.connect(location, settings)
    listing = {key: item for key, item in store.listing().items() if not key.endswith("/")}  # "/": folder markers
    remote = {location.relative(key): key for key in listing}
    if not remote:
        raise BadInput(f"nothing at {location}: upload the calibration episode's folder there (e.g. `aws s3 cp "
                       f"--recursive CALIB {location}`), or fix the URI")
    index = _read_index(target)
    fresh: dict[str, list] = {}
    progress.begin(len(remote), sum(item["Size"] for item in listing.values()))
    for relative, key in sorted(remote.items()):
        stamp = [listing[key]["ETag"], listing[key]["Size"]]
        path = target / relative
        if index.get(relative) == stamp and path.is_file() and path.stat().st_size == stamp[1]:
            progress.advance(stamp[1])
            progress.file_done(relative, "skipped")
        else:
            got = download_hashing(store, key, progress, target=path)
            recorded = got.metadata.get(SHA256_METADATA)
            if recorded is not None and recorded != got.sha256:
                path.unlink()
                raise BadInput(f"{location.uri(relative)} does not match the SHA-256 in its metadata (damaged in the "
                               "store): upload it again")
            log.info("fetched %s to %s (%d bytes)", location.uri(relative), path, stamp[1])
            progress.file_done(relative, "downloaded")
        fresh[relative] = stamp
    for stale in sorted(set(_files(target)) - set(fresh)):
        (target / stale).unlink()
        log.info("removed %s from the cache (no longer at %s)", target / stale, location)
    (target / INDEX).write_text(json.dumps(fresh, sort_keys=True))
    return target


def _read_index(target: Path) -> dict:
    try:
        index = json.loads((target / INDEX).read_text())
    except (OSError, ValueError):
        return {}
    return index if isinstance(index, dict) else {}


def _files(target: Path) -> list[str]:
    return [str(p.relative_to(target)) for p in target.rglob("*") if p.is_file() and p.name != INDEX
            and not p.name.startswith(".")] if target.is_dir() else []
