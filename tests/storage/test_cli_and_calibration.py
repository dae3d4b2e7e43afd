"""The storage commands as a user runs them, and calibration episodes that come from S3."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from datafarm.errors import BadInput
from datafarm.storage import download_calibration
from datafarm.workspace import sha256_file

pytestmark = pytest.mark.slow  # the delivery fixture; each command is a new process (a few seconds)

ROOT = Path(__file__).resolve().parents[2]


def datafarm(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATAFARM_S3_MULTIPART_THRESHOLD": "16KiB", "DATAFARM_S3_PART_SIZE": "8KiB",
           "COLUMNS": "250"}  # rich wraps long lines at 80 columns when not on a terminal
    return subprocess.run([sys.executable, "-m", "cli.main", *arguments], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_push_then_verify_from_the_command_line_and_the_tampered_copy_fails(delivery, bucket, s3, tmp_path):
    uri = f"s3://{bucket}/deliveries/apple"
    pushed = datafarm("push", str(delivery.root), uri, "--workers", "2", cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    assert "pushed" in pushed.stdout and "11 files uploaded" in pushed.stdout
    log = delivery.path("logs", "datafarm.log").read_text()
    assert "push: dataset/meta/info.json uploaded" in log and "push: manifest.json uploaded" in log
    verified = datafarm("verify", uri, cwd=tmp_path)
    assert verified.returncode == 0 and "verified" in verified.stdout, verified.stdout + verified.stderr

    key = "deliveries/apple/dataset/meta/stats.json"
    original = s3.get_object(Bucket=bucket, Key=key)
    s3.put_object(Bucket=bucket, Key=key, Body=original["Body"].read().replace(b"0", b"1", 1),
                  Metadata=original["Metadata"])
    tampered = datafarm("verify", uri, cwd=tmp_path)
    assert tampered.returncode == 1 and f"modified object: s3://{bucket}/{key}" in tampered.stdout, tampered.stdout


def test_the_commands_name_the_fix_for_a_missing_bucket_and_absent_credentials(delivery, s3_env, tmp_path, monkeypatch):
    missing = datafarm("push", str(delivery.root), "s3://no-such-bucket/x", cwd=tmp_path)
    assert missing.returncode == 2 and "aws s3 mb s3://no-such-bucket" in missing.stderr, missing.stderr
    bad_uri = datafarm("verify", "s3://Bad_Bucket/x", cwd=tmp_path)
    assert bad_uri.returncode == 2 and "s3://BUCKET/PREFIX" in bad_uri.stderr, bad_uri.stderr
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    anonymous = datafarm("verify", "s3://some-bucket/x", cwd=tmp_path)
    assert anonymous.returncode == 5 and "AWS_ACCESS_KEY_ID" in anonymous.stderr, anonymous.stderr
    assert "Traceback" not in missing.stderr + bad_uri.stderr + anonymous.stderr


def upload_folder(s3, bucket: str, folder: Path, prefix: str) -> None:
    """What a user does with `aws s3 cp --recursive` (no sha256 metadata)."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder)}")


def test_prepare_takes_a_calibration_episode_from_s3(small_delivery, bucket, s3, tmp_path):
    from datafarm.farm.prepare import prepare

    calibration = small_delivery / "dataset"  # a one-episode LeRobot dataset with the three cameras
    upload_folder(s3, bucket, calibration, "calibrations/kitchen")
    uri = f"s3://{bucket}/calibrations/kitchen"
    workspace = prepare(uri, "Put the apple on the scale.", tmp_path / "ws", {"target_count": 2})
    assert workspace.meta["calibration"]["source"] == uri
    copied = {f.removeprefix("calibration/"): sha for f, sha in workspace.meta["calibration"]["files"].items()}
    assert copied == {str(p.relative_to(calibration)): sha256_file(p) for p in calibration.rglob("*") if p.is_file()}
    assert workspace.meta["calibration"]["frames"] == 6


def test_the_calibration_cache_downloads_only_what_changed_and_checks_pushed_hashes(small_delivery, bucket, s3, tmp_path):
    from datafarm.storage import NoProgress

    class Outcomes(NoProgress):
        def __init__(self):
            self.seen = {}

        def file_done(self, relative, outcome):
            self.seen[relative] = outcome

    calibration = small_delivery / "dataset"
    upload_folder(s3, bucket, calibration, "calib")
    uri, target = f"s3://{bucket}/calib", tmp_path / "cache"
    first = Outcomes()
    download_calibration(uri, target, progress=first)
    assert set(first.seen.values()) == {"downloaded"}
    s3.put_object(Bucket=bucket, Key="calib/meta/info.json", Body=(calibration / "meta/info.json").read_bytes() + b"\n")
    s3.delete_object(Bucket=bucket, Key="calib/datafarm_harvest.json")
    second = Outcomes()
    download_calibration(uri, target, progress=second)
    assert {f for f, outcome in second.seen.items() if outcome == "downloaded"} == {"meta/info.json"}
    assert not (target / "datafarm_harvest.json").exists()
    assert (target / "meta/info.json").read_bytes().endswith(b"}\n")

    # Negative control: an object whose bytes no longer match the sha256 that push recorded is refused.
    s3.put_object(Bucket=bucket, Key="calib/meta/stats.json", Body=b"{}", Metadata={"sha256": "0" * 64})
    with pytest.raises(BadInput, match="does not match the SHA-256 in its metadata"):
        download_calibration(uri, target)
    with pytest.raises(BadInput, match="nothing at s3://.*/nothing-here.*aws s3 cp --recursive"):
        download_calibration(f"s3://{bucket}/nothing-here", tmp_path / "empty")


def test_prepare_from_the_command_line_with_an_s3_episode(small_delivery, bucket, s3, tmp_path):
    upload_folder(s3, bucket, small_delivery / "dataset", "calib")
    request = tmp_path / "request.txt"
    request.write_text("Put the apple on the scale.")
    result = datafarm("prepare", "--episode", f"s3://{bucket}/calib", "--request-file", str(request),
                      "--target-count", "2", "--output", str(tmp_path / "ws"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "ws" / "workspace.json").read_text())
    assert meta["calibration"]["source"] == f"s3://{bucket}/calib"
