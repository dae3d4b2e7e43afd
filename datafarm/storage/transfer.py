"""One file up or down, checked end to end.

Upload: a file below the multipart threshold is one PUT; a larger one goes up in parts. Every object
carries its file's SHA-256 in its metadata (`x-amz-meta-sha256`) and every request its body's MD5
(`Content-MD5`), which the store checks. A multipart upload is resumable: an unfinished upload of the
same key whose parts all match the local file (size and MD5, part by part) is continued, only its
missing parts are sent; one that does not match (another part size, a changed file) is aborted and
the file starts over. Nothing is aborted on an interruption: the next push resumes it.

Download: the bytes are hashed as they arrive; the SHA-256 is of what was read, never the metadata's.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from datafarm.storage.settings import StorageSettings
from datafarm.storage.store import S3Store

log = logging.getLogger(__name__)

SHA256_METADATA = "sha256"  # boto3 sends it as the x-amz-meta-sha256 header
READ_CHUNK = 1 << 20


class TransferProgress(ABC):
    """What a push, a remote verify or a fetch reports while it runs. Called from worker threads: an
    implementation must be thread-safe. An exception raised here stops the transfer where it is (the
    store keeps an unfinished multipart upload for the next run to resume)."""

    @abstractmethod
    def begin(self, files: int, total_bytes: int) -> None:
        """Called once, before any byte moves."""

    @abstractmethod
    def advance(self, nbytes: int) -> None:
        """`nbytes` more were sent, read, or found already in place."""

    @abstractmethod
    def file_done(self, relative: str, outcome: str) -> None:
        """A file is finished: 'uploaded', 'resumed', 'skipped', 'verified', 'downloaded', or a problem."""


class NoProgress(TransferProgress):
    def begin(self, files: int, total_bytes: int) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        pass

    def file_done(self, relative: str, outcome: str) -> None:
        pass


@dataclass(frozen=True)
class UploadResult:
    key: str
    size: int
    parts: int  # 0 for a single PUT
    parts_reused: int  # parts an earlier, interrupted upload had already sent
    bytes_sent: int

    @property
    def outcome(self) -> str:
        return "resumed" if self.parts_reused else "uploaded"


def md5_base64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def upload_file(store: S3Store, path: Path, key: str, sha256: str, settings: StorageSettings,
                progress: TransferProgress) -> UploadResult:
    """Upload `path` to `key` with its SHA-256 in the metadata; multipart (resumable) from the threshold."""
    size = path.stat().st_size
    if size < settings.multipart_threshold:
        data = path.read_bytes()
        with store.errors(f"upload {path.name} to s3://{store.location.bucket}/{key}"):
            store.client.put_object(Bucket=store.location.bucket, Key=key, Body=data, ContentMD5=md5_base64(data),
                                    Metadata={SHA256_METADATA: sha256})
        progress.advance(size)
        return UploadResult(key, size, 0, 0, size)
    result = _multipart(store, path, key, sha256, settings.part_size_for(size), progress)
    head = store.head(key)
    if head is None or head["ContentLength"] != size or head.get("Metadata", {}).get(SHA256_METADATA) != sha256:
        # The resumed upload was begun for an earlier version of this file (its metadata is the old SHA-256,
        # set when it began; the store gives no way to read it back before completion): send it afresh.
        log.info("upload of %s resumed an upload begun for other content: uploading it afresh", key)
        store.delete(key)
        fresh = _multipart(store, path, key, sha256, settings.part_size_for(size), progress, resume=False)
        result = replace(fresh, bytes_sent=result.bytes_sent + fresh.bytes_sent)
    return result


def _multipart(store: S3Store, path: Path, key: str, sha256: str, part_size: int, progress: TransferProgress,
               resume: bool = True) -> UploadResult:
    bucket, size = store.location.bucket, path.stat().st_size
    count = -(-size // part_size)
    where = f"s3://{bucket}/{key}"
    with open(path, "rb") as source:
        def chunk(number: int) -> bytes:
            source.seek((number - 1) * part_size)
            return source.read(part_size)

        upload_id, done = _resumable_upload(store, key, count, part_size, size, chunk) if resume else (None, {})
        if upload_id is None:
            with store.errors(f"begin the multipart upload of {where}"):
                upload_id = store.client.create_multipart_upload(Bucket=bucket, Key=key,
                                                                 Metadata={SHA256_METADATA: sha256})["UploadId"]
        reused, sent = len(done), 0
        progress.advance(sum(min(part_size, size - (n - 1) * part_size) for n in done))
        for number in range(1, count + 1):
            if number in done:
                continue
            data = chunk(number)
            with store.errors(f"upload part {number}/{count} of {where}"):
                answer = store.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                                  Body=data, ContentMD5=md5_base64(data))
            done[number] = answer["ETag"]
            sent += len(data)
            progress.advance(len(data))
    with store.errors(f"complete the multipart upload of {where}"):
        store.client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": done[n]} for n in sorted(done)]})
    if reused:
        log.info("%s: resumed an interrupted upload (%d of %d parts were there)", key, reused, count)
    return UploadResult(key, size, count, reused, sent)


def _resumable_upload(store: S3Store, key: str, count: int, part_size: int, size: int,
                      chunk: Callable[[int], bytes]) -> tuple[str | None, dict[int, str]]:
    """An unfinished upload of `key` whose parts all match the local file -> (its id, {part: ETag});
    every other unfinished upload of `key` is aborted. (None, {}) when there is none to continue."""
    bucket = store.location.bucket
    chosen: tuple[str | None, dict[int, str]] = (None, {})
    with store.errors(f"list the unfinished uploads of s3://{bucket}/{key}"):
        uploads = [u for page in store.client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=key)
                   for u in page.get("Uploads", []) if u["Key"] == key]
        for upload in sorted(uploads, key=lambda u: u["Initiated"], reverse=True):
            if chosen[0] is None:
                parts = [p for page in store.client.get_paginator("list_parts").paginate(
                    Bucket=bucket, Key=key, UploadId=upload["UploadId"]) for p in page.get("Parts", [])]
                matching = _matching_parts(parts, count, part_size, size, chunk)
                if matching is not None:
                    chosen = (upload["UploadId"], matching)
                    continue
            log.info("%s: aborting an unfinished upload that does not match the file", key)
            store.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"])
    return chosen


def _matching_parts(parts: list[dict], count: int, part_size: int, size: int,
                    chunk: Callable[[int], bytes]) -> dict[int, str] | None:
    """{part: ETag} when every part already sent is the local file's part (size and MD5), else None."""
    matching = {}
    for part in parts:
        number = part["PartNumber"]
        expected_size = min(part_size, size - (number - 1) * part_size)
        if not 1 <= number <= count or part["Size"] != expected_size:
            return None
        if part["ETag"].strip('"') != hashlib.md5(chunk(number)).hexdigest():
            return None
        matching[number] = part["ETag"]
    return matching


@dataclass(frozen=True)
class Downloaded:
    sha256: str  # of the bytes read
    metadata: dict[str, str]
    data: bytes | None  # the bytes, when asked to keep them


def download_hashing(store: S3Store, key: str, progress: TransferProgress, target: Path | None = None,
                     keep: bool = False) -> Downloaded:
    """Stream an object, hashing what arrives; written to `target` (atomically) when given, kept in
    memory when `keep` (small files only)."""
    digest, kept = hashlib.sha256(), bytearray()
    where = f"s3://{store.location.bucket}/{key}"
    sink = temporary = None
    with store.errors(f"download {where}"):
        answer = store.client.get_object(Bucket=store.location.bucket, Key=key)
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            sink = os.fdopen(fd, "wb")
        try:
            for block in answer["Body"].iter_chunks(READ_CHUNK):
                digest.update(block)
                if sink is not None:
                    sink.write(block)
                if keep:
                    kept += block
                progress.advance(len(block))
        except BaseException:
            if sink is not None:
                sink.close()
                os.unlink(temporary)
            raise
    if sink is not None:
        sink.close()
        os.replace(temporary, target)
    return Downloaded(digest.hexdigest(), answer.get("Metadata", {}), bytes(kept) if keep else None)
