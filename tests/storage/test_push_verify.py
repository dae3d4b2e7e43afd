"""push and the remote verify against a real HTTP S3 endpoint (moto's server on 127.0.0.1)."""

import json

import pytest
from s3_testkit import TEST_SETTINGS, Interrupt, StopAfter

from datafarm.farm.deliver import MANIFEST
from datafarm.storage import load_storage_settings, parse_s3_uri, push, verify_remote

pytestmark = pytest.mark.slow  # the delivery fixture runs lerobot's writer once (about 40 s)


def settings(**changes):
    return load_storage_settings({**TEST_SETTINGS, **changes})


def delivered_files(workspace) -> list[str]:
    return sorted(json.loads(workspace.path(MANIFEST).read_text())["files"]) + [MANIFEST]


def test_push_uploads_every_file_with_its_sha256_and_the_remote_copy_verifies(delivery, bucket, s3):
    location = parse_s3_uri(f"s3://{bucket}/deliveries/apple")
    report = push(delivery, location, settings())
    files = delivered_files(delivery)
    assert sorted(report.uploaded) == files and report.skipped == [] and report.deleted == []
    assert report.bytes_uploaded == report.bytes_total == sum(delivery.path(f).stat().st_size for f in files)
    manifest = json.loads(delivery.path(MANIFEST).read_text())
    for relative, sha256 in manifest["files"].items():
        head = s3.head_object(Bucket=bucket, Key=f"deliveries/apple/{relative}")
        assert head["Metadata"]["sha256"] == sha256
        assert head["ContentLength"] == delivery.path(relative).stat().st_size
    # Files from the threshold up went in parts (a multipart ETag ends in -<parts>), the small ones whole.
    big = "dataset/meta/episodes/chunk-000/file-000.parquet"
    assert delivery.path(big).stat().st_size > 16 * 1024
    assert s3.head_object(Bucket=bucket, Key=f"deliveries/apple/{big}")["ETag"].strip('"').endswith(
        f"-{-(-delivery.path(big).stat().st_size // 8192)}")
    assert "-" not in s3.head_object(Bucket=bucket, Key="deliveries/apple/dataset/meta/info.json")["ETag"]
    checked = verify_remote(location, settings())
    assert checked.ok, checked.problems
    assert checked.checked_files == len(manifest["files"]) and checked.episodes == 1


def test_a_second_push_uploads_nothing(delivery, bucket):
    location = parse_s3_uri(f"s3://{bucket}/d")
    push(delivery, location, settings())
    again = push(delivery, location, settings())
    assert again.uploaded == [] and again.bytes_uploaded == 0
    assert sorted(again.skipped) == delivered_files(delivery)


def test_a_push_repairs_an_object_whose_size_or_sha256_differs(delivery, bucket, s3):
    """A re-upload skips only what matches: an object overwritten (new bytes, no sha256 metadata) goes up again."""
    location = parse_s3_uri(f"s3://{bucket}/d")
    push(delivery, location, settings())
    s3.put_object(Bucket=bucket, Key="d/dataset/meta/info.json", Body=b"{}")
    s3.delete_object(Bucket=bucket, Key="d/episodes/000000/review.json")
    assert not verify_remote(location, settings()).ok
    again = push(delivery, location, settings())
    assert sorted(again.uploaded) == ["dataset/meta/info.json", "episodes/000000/review.json"]
    assert verify_remote(location, settings()).ok


def unfinished_uploads(s3, bucket) -> list[dict]:
    return s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def parts_of(s3, bucket, upload) -> int:
    return len(s3.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]).get("Parts", []))


def test_an_interrupted_multipart_upload_resumes_where_it_stopped(delivery, bucket, s3):
    location = parse_s3_uri(f"s3://{bucket}/d")
    big = "dataset/meta/episodes/chunk-000/file-000.parquet"  # sorted first among the multipart files
    one_at_a_time = settings(workers=1)
    small_first = sum(delivery.path(f).stat().st_size for f in delivered_files(delivery)
                      if f < big and delivery.path(f).stat().st_size < 16 * 1024)
    with pytest.raises(Interrupt):
        push(delivery, location, one_at_a_time, StopAfter(small_first + 3 * 8192))
    [upload] = unfinished_uploads(s3, bucket)
    assert upload["Key"] == f"d/{big}" and parts_of(s3, bucket, upload) == 3
    interrupted = verify_remote(location, one_at_a_time)  # no manifest yet: incomplete, never "verified"
    assert not interrupted.ok and "manifest.json is missing" in interrupted.problems[0]

    resumed = push(delivery, location, one_at_a_time)
    size = delivery.path(big).stat().st_size
    assert resumed.parts_reused == 3 and big in resumed.uploaded
    assert resumed.bytes_uploaded == resumed.bytes_total - 3 * 8192 - sum(
        delivery.path(f).stat().st_size for f in resumed.skipped)
    assert unfinished_uploads(s3, bucket) == []
    assert s3.head_object(Bucket=bucket, Key=f"d/{big}")["ContentLength"] == size
    assert verify_remote(location, one_at_a_time).ok


def test_an_unfinished_upload_that_does_not_match_is_aborted_and_the_file_sent_afresh(delivery, bucket, s3):
    """Parts of another size (the part size changed between runs) cannot be continued: the upload restarts."""
    location = parse_s3_uri(f"s3://{bucket}/d")
    with pytest.raises(Interrupt):
        push(delivery, location, settings(workers=1, part_size="4KiB"), StopAfter(40 * 1024))
    assert len(unfinished_uploads(s3, bucket)) == 1
    restarted = push(delivery, location, settings(workers=1))
    assert restarted.parts_reused == 0
    assert unfinished_uploads(s3, bucket) == []
    assert verify_remote(location, settings()).ok


def test_verify_reads_the_bytes_and_catches_a_tampered_object(delivery, bucket, s3):
    """Negative control: one byte changed in the store, its sha256 metadata left as push wrote it."""
    location = parse_s3_uri(f"s3://{bucket}/d")
    push(delivery, location, settings())
    assert verify_remote(location, settings()).ok
    key = "d/dataset/videos/observation.images.cam_high/chunk-000/file-000.mp4"
    original = s3.get_object(Bucket=bucket, Key=key)
    data = bytearray(original["Body"].read())
    data[len(data) // 2] ^= 0x01
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(data), Metadata=original["Metadata"])
    report = verify_remote(location, settings())
    assert not report.ok
    assert report.problems == [f"modified object: s3://{bucket}/{key} (the SHA-256 of its bytes differs from the manifest)"]


def test_verify_reports_missing_unlisted_and_a_changed_manifest(delivery, bucket, s3):
    location = parse_s3_uri(f"s3://{bucket}/d")
    push(delivery, location, settings())
    s3.delete_object(Bucket=bucket, Key="d/dataset/meta/stats.json")
    s3.put_object(Bucket=bucket, Key="d/dataset/extra.bin", Body=b"not in the manifest")
    problems = verify_remote(location, settings()).problems
    assert f"missing object: s3://{bucket}/d/dataset/meta/stats.json" in problems
    assert f"unlisted object in the delivery: s3://{bucket}/d/dataset/extra.bin" in problems
    manifest = s3.get_object(Bucket=bucket, Key="d/manifest.json")
    changed = manifest["Body"].read().replace(b"apple", b"pear")
    s3.put_object(Bucket=bucket, Key="d/manifest.json", Body=changed, Metadata=manifest["Metadata"])
    [problem] = verify_remote(location, settings()).problems
    assert problem.startswith(f"modified object: s3://{bucket}/d/manifest.json")


def test_push_refuses_a_delivery_that_does_not_verify_locally(delivery, bucket, s3):
    from datafarm.errors import BadInput

    path = delivery.path("dataset/meta/stats.json")
    path.write_bytes(path.read_bytes() + b" ")
    with pytest.raises(BadInput, match="does not verify .*modified file: dataset/meta/stats.json.*datafarm verify"):
        push(delivery, parse_s3_uri(f"s3://{bucket}/d"), settings())
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_push_over_another_delivery_replaces_it_and_deletes_its_stale_files(delivery, bucket, s3):
    location = parse_s3_uri(f"s3://{bucket}/d")
    s3.put_object(Bucket=bucket, Key="d/manifest.json", Body=b"{}", Metadata={"sha256": "0" * 64})
    s3.put_object(Bucket=bucket, Key="d/dataset/data/chunk-009/file-000.parquet", Body=b"old harvest")
    report = push(delivery, location, settings())
    assert report.deleted == ["dataset/data/chunk-009/file-000.parquet"]
    assert verify_remote(location, settings()).ok
