"""S3 tests run against moto's server mode: a real HTTP S3 endpoint on 127.0.0.1, in this process.

Every test gets its own bucket; the environment carries the endpoint and throwaway credentials the
way a user's would (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), with no config file of the machine's
in the way. moto's server allows parts of 1 KiB (S3's minimum is 5 MiB), so the small test delivery
goes up in several parts.
"""

import logging
import os
import shutil
import uuid

import numpy as np
import pytest

# Read by moto when it is imported: multipart parts down to 1 KiB.
os.environ["S3_UPLOAD_PART_MIN_SIZE"] = "1024"

@pytest.fixture(scope="session")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_env(s3_endpoint, monkeypatch, tmp_path):
    """The environment a user configures for an S3-compatible store (and nothing of this machine's)."""
    for name in [n for n in os.environ if n.startswith("AWS_") or n.startswith("DATAFARM_S3_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "datafarm-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "datafarm-test-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("DATAFARM_CACHE", str(tmp_path / "cache"))
    return s3_endpoint


@pytest.fixture
def s3(s3_env):
    """A plain boto3 client on the test endpoint: the test's own view of the store."""
    import boto3

    return boto3.client("s3")


@pytest.fixture
def bucket(s3):
    name = f"datafarm-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def small_delivery(rig, tmp_path_factory):
    """A harvested, verified delivery of one short episode (lerobot's writer, no farming): about 100 KB in
    10 files, the largest about 60 KB."""
    from datafarm.cameras import CAMERAS
    from datafarm.farm.deliver import harvest, verify
    from datafarm.farm.episodes import episode_dir
    from datafarm.media import write_video
    from datafarm.sim.recorder import EpisodeRecorder
    from datafarm.workspace import Workspace

    workspace = Workspace.initialise(tmp_path_factory.mktemp("delivery") / "ws",
                                     {"settings": {"target_count": 1}, "task": "apple_on_scale"})
    workspace.write_text("request.txt", "Put the apple on the scale.")
    workspace.write_json("contract.json", {"instruction": "place the apple on the scale"})
    rig.reset()
    with EpisodeRecorder(rig, workspace.path(episode_dir(0), "sim")) as recorder:
        for _ in range(6):
            recorder.record(rig.rest_state().copy())
    workspace.write_json(f"{episode_dir(0)}/result.json", {"seed": 0, "index": 0})
    render = workspace.path(episode_dir(0), "render")
    render.mkdir(parents=True)
    for camera in CAMERAS:
        write_video(render / f"{camera}.mp4", [np.full((240, 320, 3), 90, np.uint8)] * 6, fps=30)
    workspace.write_json(f"{episode_dir(0)}/review.json", {"index": 0, "seed": 0, "admitted": True, "reasons": []})
    harvest(workspace)
    assert verify(workspace).ok
    return workspace.root


@pytest.fixture
def delivery(small_delivery, tmp_path):
    """A private copy of the delivery (tests may change it)."""
    from datafarm.workspace import Workspace

    copy = tmp_path / "ws"
    shutil.copytree(small_delivery, copy)
    return Workspace.open(copy)
