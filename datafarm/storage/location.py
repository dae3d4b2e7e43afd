"""Where a delivery lives in S3: `s3://bucket/prefix`, parsed and checked before any request is sent."""

from __future__ import annotations

import re
from dataclasses import dataclass

from datafarm.errors import BadInput

SCHEME = "s3://"
# S3's bucket naming rules (3-63 characters; lowercase letters, digits, dots and hyphens; starts and
# ends with a letter or digit); S3-compatible stores accept the same set.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_FIX = "write it as s3://BUCKET/PREFIX (e.g. s3://my-datasets/deliveries/apple-on-scale)"


class StorageURIError(BadInput, ValueError):
    """A location that is not a usable S3 URI."""


def is_s3_uri(text: object) -> bool:
    return isinstance(text, str) and text.startswith(SCHEME)


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix ("" for the bucket's root; no leading or trailing slash)."""

    bucket: str
    prefix: str = ""

    def key(self, relative: str) -> str:
        """The object key of a file at `relative` (a workspace-relative path, '/'-separated)."""
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def relative(self, key: str) -> str:
        """Inverse of `key` for keys under this prefix."""
        return key[len(self.prefix) + 1:] if self.prefix else key

    @property
    def key_prefix(self) -> str:
        """What every key under this location starts with (for listing)."""
        return f"{self.prefix}/" if self.prefix else ""

    def uri(self, relative: str = "") -> str:
        key = self.key(relative) if relative else self.prefix
        return f"{SCHEME}{self.bucket}/{key}" if key else f"{SCHEME}{self.bucket}"

    def __str__(self) -> str:
        return self.uri()


def parse_s3_uri(text: str) -> S3Location:
    """`s3://bucket[/prefix]` as an S3Location, or StorageURIError naming what is wrong and the fix."""
    if not is_s3_uri(text):
        raise StorageURIError(f"{text!r} is not an S3 URI: {_FIX}")
    bucket, _, prefix = text[len(SCHEME):].partition("/")
    if not bucket:
        raise StorageURIError(f"{text!r} names no bucket: {_FIX}")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise StorageURIError(f"{text!r}: {bucket!r} is not a valid bucket name (3-63 lowercase letters, digits, dots "
                              f"or hyphens): {_FIX}")
    prefix = prefix.strip("/")
    parts = prefix.split("/") if prefix else []
    if any(part in ("", ".", "..") for part in parts):
        raise StorageURIError(f"{text!r}: the prefix has an empty, '.' or '..' part: {_FIX}")
    if any(ord(c) < 32 for c in prefix):
        raise StorageURIError(f"{text!r}: the prefix contains control characters: {_FIX}")
    return S3Location(bucket, prefix)
