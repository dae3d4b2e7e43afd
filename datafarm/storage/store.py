"""One S3 (or S3-compatible) store through boto3, and its failures as the library's errors.

The endpoint and the credentials come from boto3's standard configuration: `AWS_ENDPOINT_URL` (or
`AWS_ENDPOINT_URL_S3`) for an S3-compatible store, `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`,
`AWS_PROFILE` and ~/.aws/config. A custom endpoint is addressed path-style (botocore's default for
one), which MinIO-, moto- and Ceph-style servers accept.

Errors (each names the fix): no credentials -> NoCredentials (exit 5); a missing bucket or a refused
key -> BadInput (exit 2); an unreachable endpoint, time-outs and 5xx answers -> transient (exit 75,
retried by boto3 first).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
from botocore.config import Config
from botocore.exceptions import (BotoCoreError, ClientError, ConnectionError as BotoConnectionError,
                                 NoCredentialsError, PartialCredentialsError)

from datafarm.errors import BadInput, TransientError, Unavailable
from datafarm.storage.location import S3Location
from datafarm.storage.settings import StorageSettings

log = logging.getLogger(__name__)

CREDENTIALS_FIX = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment, and "
                   "AWS_ENDPOINT_URL for an S3-compatible store (docs/deploy.md)")
TRANSIENT_CODES = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "Throttling",
                   "ThrottlingException", "RequestTimeTooSkewed"}
NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound"}
REFUSED_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "403"}


class NoCredentials(Unavailable):
    """boto3 found no credentials anywhere it looks."""


class BucketMissing(BadInput):
    """The bucket of an S3 URI does not exist at the endpoint."""


class AccessRefused(BadInput):
    """The store refused the credentials or the request."""


class StoreUnreachable(TransientError):
    """The endpoint did not answer, or answered with a server error: a retry may succeed."""


class S3Store:
    """A boto3 S3 client for one location. Make one with `S3Store.connect`; the client is thread-safe."""

    def __init__(self, client, location: S3Location):
        self.client = client
        self.location = location

    @classmethod
    def connect(cls, location: S3Location, settings: StorageSettings) -> S3Store:
        """A client from boto3's standard configuration, checked: credentials exist, the bucket is there."""
        session = boto3.session.Session()
        if session.get_credentials() is None:
            raise NoCredentials(f"no S3 credentials found for {location}: {CREDENTIALS_FIX}")
        # Retries: boto3's standard mode (3 attempts with backoff; AWS_MAX_ATTEMPTS sets another count).
        config = Config(retries={"mode": "standard"}, connect_timeout=10, read_timeout=120,
                        max_pool_connections=max(10, 2 * settings.workers),
                        # Only the checksums S3 requires: S3-compatible stores differ in the optional ones,
                        # and every file's SHA-256 (and each part's MD5) is checked end to end anyway.
                        request_checksum_calculation="when_required", response_checksum_validation="when_required")
        client = session.client("s3", region_name=session.region_name or "us-east-1", config=config)
        store = cls(client, location)
        with store.errors(f"reach the bucket of {location}"):
            try:
                client.head_bucket(Bucket=location.bucket)
            except ClientError as error:
                if _code(error) not in NOT_FOUND_CODES:
                    raise
                raise BucketMissing(f"bucket {location.bucket!r} does not exist at {store.endpoint}: create it "
                                    f"(`aws s3 mb s3://{location.bucket}`) or fix the URI {location}") from error
        log.debug("S3 store %s at %s", location.bucket, store.endpoint)
        return store

    @property
    def endpoint(self) -> str:
        return self.client.meta.endpoint_url

    @contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """boto3's failures while doing `action` as our errors, each naming the fix."""
        try:
            yield
        except (NoCredentialsError, PartialCredentialsError) as error:
            raise NoCredentials(f"cannot {action}: {error}; {CREDENTIALS_FIX}") from error
        except BotoConnectionError as error:  # refused, DNS, time-outs, connections closed mid-transfer
            raise StoreUnreachable(f"cannot {action}: the S3 endpoint {self.endpoint} did not answer ({error}); check "
                                   "AWS_ENDPOINT_URL and that the store is running, then rerun") from error
        except ClientError as error:
            raise self._client_error(error, action) from error
        except BotoCoreError as error:
            raise StoreUnreachable(f"cannot {action}: {error}; rerun (transfers resume)") from error

    def _client_error(self, error: ClientError, action: str) -> Exception:
        code = _code(error)
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = error.response.get("Error", {}).get("Message", "") or code
        bucket = self.location.bucket
        if code == "NoSuchBucket":
            return BucketMissing(f"cannot {action}: bucket {bucket!r} does not exist at {self.endpoint}; create it "
                                 f"(`aws s3 mb s3://{bucket}`) or fix the URI")
        if code in REFUSED_CODES or status == 403:
            return AccessRefused(f"cannot {action}: the store refused the request ({code}: {message}); check the "
                                 f"credentials and that they may use bucket {bucket!r} ({CREDENTIALS_FIX})")
        if code == "EntityTooSmall":
            return BadInput(f"cannot {action}: the store refused a part as too small ({message}); set "
                            "DATAFARM_S3_PART_SIZE (or --part-size) to at least 5MiB")
        if code in TRANSIENT_CODES or status >= 500:
            return StoreUnreachable(f"cannot {action}: the store answered {code or status} ({message}); rerun "
                                    "(transfers resume)")
        return BadInput(f"cannot {action}: the store refused the request ({code or status}: {message})")

    def listing(self, under: str = "") -> dict[str, dict]:
        """Every object under this location's prefix (and `under` below it): key -> its listing entry
        (Size, ETag, LastModified)."""
        prefix = self.location.key_prefix + under
        found: dict[str, dict] = {}
        with self.errors(f"list {self.location.uri(under)}"):
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.location.bucket, Prefix=prefix):
                found.update({item["Key"]: item for item in page.get("Contents", [])})
        return found

    def list_sizes(self, under: str = "") -> dict[str, int]:
        return {key: item["Size"] for key, item in self.listing(under).items()}

    def head(self, key: str) -> dict | None:
        """An object's HEAD answer, or None when there is no such object."""
        with self.errors(f"read the metadata of s3://{self.location.bucket}/{key}"):
            try:
                return self.client.head_object(Bucket=self.location.bucket, Key=key)
            except ClientError as error:
                if _code(error) in NOT_FOUND_CODES:
                    return None
                raise

    def delete(self, key: str) -> None:
        with self.errors(f"delete s3://{self.location.bucket}/{key}"):
            self.client.delete_object(Bucket=self.location.bucket, Key=key)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
