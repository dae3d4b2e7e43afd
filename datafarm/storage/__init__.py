"""Deliveries in S3 (or any S3-compatible store) through boto3, and calibration episodes from it.

    push(workspace, parse_s3_uri("s3://bucket/prefix"), load_storage_settings())   # `datafarm push`
    verify_remote(parse_s3_uri("s3://bucket/prefix"), load_storage_settings())      # `datafarm verify s3://...`
    download_calibration("s3://bucket/calib")  # a local folder; `datafarm prepare --episode s3://...`

Endpoint and credentials come from boto3's standard configuration (never from the repository).
"""

from datafarm.storage.fetch import cache_root, download_calibration
from datafarm.storage.location import S3Location, StorageURIError, is_s3_uri, parse_s3_uri
from datafarm.storage.push import PushReport, push, push_destination
from datafarm.storage.remote_verify import verify_remote
from datafarm.storage.settings import StorageSettings, StorageSettingsError, load_storage_settings
from datafarm.storage.store import AccessRefused, BucketMissing, NoCredentials, S3Store, StoreUnreachable
from datafarm.storage.transfer import NoProgress, TransferProgress

__all__ = ["AccessRefused", "BucketMissing", "NoCredentials", "NoProgress", "PushReport", "S3Location", "S3Store",
           "StorageSettings", "StorageSettingsError", "StorageURIError", "StoreUnreachable", "TransferProgress",
           "cache_root", "download_calibration", "is_s3_uri", "load_storage_settings", "parse_s3_uri", "push",
           "push_destination", "verify_remote"]
