"""The push under Prefect: the workspace's push_to setting, the farm flow pushing after verify, the `push`
flow, and retries of a store that does not answer (moto's HTTP server; the small delivery, no farming)."""

import json
import socket
import time

import pytest

from datafarm.costs import CostLedger
from datafarm.errors import BadInput
from datafarm.farm.runner import phase_inputs_hash
from datafarm.farm.settings import SettingsError, load_settings
from datafarm.storage import BucketMissing, StoreUnreachable, load_storage_settings, parse_s3_uri, push_destination
from datafarm.storage import verify_remote
from datafarm.workspace import Workspace


def test_push_to_is_checked_when_the_settings_load_and_names_the_form():
    assert load_settings({"target_count": 1, "push_to": "s3://my-datasets/apple/"}).push_to == "s3://my-datasets/apple"
    assert load_settings({"target_count": 1}).push_to is None
    for bad in ("s3://My_Bucket/x", "/data/deliveries", "s3://"):
        with pytest.raises(SettingsError, match=r"push_to: .*s3://BUCKET/PREFIX.*--push-to") as caught:
            load_settings({"target_count": 1, "push_to": bad}, "prepare")
        assert caught.value.exit_code == 2


def test_setting_push_to_later_redoes_no_phase(tmp_path):
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1, "push_to": None}})
    workspace.record_phase("prepare", "calibration", [], time.time())
    before = phase_inputs_hash(workspace, "survey")
    workspace.meta["settings"]["push_to"] = "s3://my-datasets/apple"
    assert phase_inputs_hash(workspace, "survey") == before
    workspace.meta["settings"]["expert_trial_seeds"] = 3  # negative control: a setting that matters changes it
    assert phase_inputs_hash(workspace, "survey") != before


def test_without_a_destination_the_push_names_both_ways_to_give_one(tmp_path):
    workspace = Workspace.initialise(tmp_path / "ws", {"settings": {"target_count": 1}})
    with pytest.raises(BadInput, match=r"no destination.*datafarm push .* s3://BUCKET/PREFIX.*--push-to"):
        push_destination(workspace)
    assert push_destination(workspace, "s3://given-bucket/d") == parse_s3_uri("s3://given-bucket/d")
    workspace.meta["settings"]["push_to"] = "s3://set-bucket/d"
    assert push_destination(workspace) == parse_s3_uri("s3://set-bucket/d")


# ----- under Prefect, against the store (the delivery fixture runs lerobot's writer once: slow) ----------------
@pytest.fixture
def small_parts(s3_env, monkeypatch):
    monkeypatch.setenv("DATAFARM_S3_MULTIPART_THRESHOLD", "16KiB")
    monkeypatch.setenv("DATAFARM_S3_PART_SIZE", "8KiB")


@pytest.fixture
def farmed_like(delivery) -> Workspace:
    """The delivery with the judge's verdict a farmed episode records (the farm's run report shows it)."""
    result = delivery.read_json("episodes/000000/result.json")
    verdict = {"success": True, "reason": "on the scale"}
    delivery.write_json("episodes/000000/result.json", {**result, "verdict": verdict})
    return delivery


def set_push_to(workspace: Workspace, uri: str | None) -> None:
    workspace.meta["settings"]["push_to"] = uri
    workspace.save_meta()


MARK = {"datafarm-test": "untouched"}


def mark_every_object(s3, bucket: str) -> list[str]:
    """Tag every object in the bucket (a re-upload replaces the object and loses the tag)."""
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    for key in keys:
        metadata = s3.head_object(Bucket=bucket, Key=key)["Metadata"]
        s3.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key},
                       Metadata={**metadata, **MARK}, MetadataDirective="REPLACE")
    return keys


def replaced(s3, bucket: str, keys: list[str]) -> list[str]:
    return sorted(key for key in keys
                  if s3.head_object(Bucket=bucket, Key=key)["Metadata"].get("datafarm-test") != "untouched")


@pytest.mark.slow
def test_the_farm_flow_pushes_the_verified_delivery_and_a_rerun_uploads_only_what_changed(
        prefect_harness, farmed_like, bucket, s3, small_parts):
    from flows.farm import farm_flow

    delivery = farmed_like

    uri = f"s3://{bucket}/deliveries/apple"
    set_push_to(delivery, uri)
    report = farm_flow(str(delivery.root), phase="verify")
    assert report.ok, report.problems
    remote = verify_remote(parse_s3_uri(uri), load_storage_settings())
    assert remote.ok and remote.episodes == 1, remote.problems
    files = sorted(json.loads(delivery.path("manifest.json").read_text())["files"]) + ["manifest.json"]
    keys = mark_every_object(s3, bucket)
    assert sorted(keys) == [f"deliveries/apple/{f}" for f in files]
    assert any(entry.phase == "push" for entry in CostLedger(delivery.root).entries())

    farm_flow(str(delivery.root), phase="verify")  # nothing new: nothing uploaded
    assert replaced(s3, bucket, keys) == []
    # Negative control: an object changed in the store is the one the next farm run sends again.
    s3.put_object(Bucket=bucket, Key="deliveries/apple/dataset/meta/info.json", Body=b"{}", Metadata=MARK)
    farm_flow(str(delivery.root), phase="verify")
    assert replaced(s3, bucket, keys) == ["deliveries/apple/dataset/meta/info.json"]
    assert verify_remote(parse_s3_uri(uri), load_storage_settings()).ok


@pytest.mark.slow
def test_a_delivery_that_does_not_verify_is_not_pushed_and_none_without_push_to(
        prefect_harness, farmed_like, bucket, s3, small_parts):
    from flows.farm import farm_flow

    delivery = farmed_like

    farm_flow(str(delivery.root), phase="verify")  # no push_to: the farm pushes nowhere
    set_push_to(delivery, f"s3://{bucket}/d")
    info = delivery.path("dataset", "meta", "info.json")
    info.write_text(info.read_text() + " ")
    report = farm_flow(str(delivery.root), phase="verify")
    assert not report.ok
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


@pytest.mark.slow
def test_the_push_flow_takes_the_setting_and_retries_only_a_store_that_does_not_answer(
        prefect_harness, delivery, bucket, s3, small_parts, monkeypatch):
    from flows.farm import push_flow
    from tasks.storage_tasks import push_task

    set_push_to(delivery, f"s3://{bucket}/via-setting")
    pushed = push_flow(str(delivery.root))
    assert pushed["destination"] == f"s3://{bucket}/via-setting" and pushed["skipped"] == []
    given = push_flow(str(delivery.root), f"s3://{bucket}/given")
    assert len(given["uploaded"]) == len(pushed["uploaded"])
    assert push_flow(str(delivery.root))["uploaded"] == []

    def attempts() -> int:  # each try is charged to the ledger, a failed one too
        return sum(entry.phase == "push" for entry in CostLedger(delivery.root).entries())

    quick = push_task.with_options(retry_delay_seconds=0)
    before = attempts()
    with pytest.raises(BucketMissing, match="aws s3 mb s3://no-such-bucket"):  # permanent: one try
        quick(str(delivery.root), "s3://no-such-bucket/d")
    assert attempts() == before + 1
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(StoreUnreachable, match="did not answer"):  # transient: tried 1 + 2 retries
        quick(str(delivery.root), f"s3://{bucket}/d")
    assert attempts() == before + 4
