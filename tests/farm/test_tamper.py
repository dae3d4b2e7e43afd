"""verify finds every single-byte change of a delivery: in the dataset's files, the reviews and the
manifest itself (`benchmarks/reliability.py` runs 200 positions; this is the lean version)."""

import json
import shutil

import pytest
from bad_inputs import TRACEBACK, run_datafarm
from campaign import delivery_files, tamper_campaign, tamper_positions

pytestmark = pytest.mark.slow  # needs the farmed workspace


@pytest.fixture
def delivery(farmed_workspace, tmp_path):
    copy = tmp_path / "ws"
    shutil.copytree(farmed_workspace, copy)
    return copy


def test_every_changed_byte_is_found_and_restoring_it_verifies_again(delivery):
    result = tamper_campaign(delivery, count=20, seed=9)
    assert result.verified_before and result.verified_after
    assert result.positions == 20 and result.missed == [] and result.detected == 20


def test_the_positions_reach_every_file_of_the_delivery(delivery):
    files = delivery_files(delivery)
    assert "manifest.json" in files and any(f.endswith(".mp4") for f in files) and any("review.json" in f for f in files)
    assert {f for f, _ in tamper_positions(delivery, len(files))} == set(files)


def test_a_changed_request_in_the_manifest_is_found(delivery):
    """The manifest's own fields are covered by no hash inside it: the hash harvest keeps in workspace.json does."""
    manifest = delivery / "manifest.json"
    data = json.loads(manifest.read_text())
    data["request"] = data["request"].replace("apple", "apples")
    manifest.write_text(json.dumps(data, indent=2, sort_keys=True))
    result = run_datafarm(["verify", str(delivery)], cwd=delivery.parent)
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 1 and "manifest.json" in output and TRACEBACK not in output, output


def test_a_half_written_manifest_is_a_problem_reported_not_a_crash(delivery):
    manifest = delivery / "manifest.json"
    manifest.write_bytes(manifest.read_bytes()[:40])
    result = run_datafarm(["verify", str(delivery)], cwd=delivery.parent)
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 1 and "manifest.json" in output and TRACEBACK not in output, output
