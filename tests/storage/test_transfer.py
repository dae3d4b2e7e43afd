"""One file up, below the push: a resumed multipart upload whose file changed after its first parts."""

import hashlib

import pytest
from s3_testkit import TEST_SETTINGS, Interrupt, StopAfter

from datafarm.storage import NoProgress, S3Store, load_storage_settings, parse_s3_uri
from datafarm.storage.transfer import upload_file


def test_a_resumed_upload_of_a_file_changed_since_is_sent_afresh_with_the_new_sha256(s3, bucket, tmp_path):
    """The parts already there still match (the change is further on), but the upload was begun with the old
    SHA-256 in its metadata: the completed object is replaced by a fresh upload carrying the new one."""
    settings = load_storage_settings(TEST_SETTINGS)
    store = S3Store.connect(parse_s3_uri(f"s3://{bucket}/t"), settings)
    path = tmp_path / "payload.bin"
    old = bytes(range(256)) * 160  # 40 KiB: five 8 KiB parts
    path.write_bytes(old)
    with pytest.raises(Interrupt):
        upload_file(store, path, "t/payload.bin", hashlib.sha256(old).hexdigest(), settings, StopAfter(2 * 8192))
    new = old[:3 * 8192] + b"changed" + old[3 * 8192 + 7:]
    path.write_bytes(new)
    result = upload_file(store, path, "t/payload.bin", hashlib.sha256(new).hexdigest(), settings, NoProgress())
    head = s3.head_object(Bucket=bucket, Key="t/payload.bin")
    assert head["Metadata"]["sha256"] == hashlib.sha256(new).hexdigest()
    assert s3.get_object(Bucket=bucket, Key="t/payload.bin")["Body"].read() == new
    # Sent: parts 3-5 of the resumed upload, then the whole file again.
    assert result.parts == 5 and result.parts_reused == 0 and result.bytes_sent == 3 * 8192 + len(new)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_a_resumed_upload_of_the_same_file_sends_only_the_missing_parts(s3, bucket, tmp_path):
    settings = load_storage_settings(TEST_SETTINGS)
    store = S3Store.connect(parse_s3_uri(f"s3://{bucket}/t"), settings)
    path = tmp_path / "payload.bin"
    data = bytes(range(256)) * 150  # 38,400 bytes: four parts of 8 KiB and one of 5,632
    path.write_bytes(data)
    sha256 = hashlib.sha256(data).hexdigest()
    with pytest.raises(Interrupt):
        upload_file(store, path, "t/payload.bin", sha256, settings, StopAfter(2 * 8192))
    result = upload_file(store, path, "t/payload.bin", sha256, settings, NoProgress())
    assert (result.parts, result.parts_reused, result.bytes_sent) == (5, 2, len(data) - 2 * 8192)
    assert s3.get_object(Bucket=bucket, Key="t/payload.bin")["Body"].read() == data
