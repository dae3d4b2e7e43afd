"""Each way a store can be wrong is one clear error naming the fix, before anything is transferred."""

import socket

import pytest

from datafarm.errors import BadInput, TransientError, Unavailable
from datafarm.storage import (BucketMissing, NoCredentials, S3Store, StorageSettingsError, StorageURIError,
                              StoreUnreachable, load_storage_settings, parse_s3_uri)


@pytest.mark.parametrize("text, says", [
    ("/data/ws", "is not an S3 URI"),
    ("http://bucket/prefix", "is not an S3 URI"),
    ("s3://", "names no bucket"),
    ("s3:///prefix", "names no bucket"),
    ("s3://My_Bucket/x", "not a valid bucket name"),
    ("s3://ab/x", "not a valid bucket name"),
    ("s3://bucket/a//b", "empty, '.' or '..' part"),
    ("s3://bucket/a/../b", "empty, '.' or '..' part"),
])
def test_a_bad_uri_is_refused_with_the_form_to_use(text, says):
    with pytest.raises(StorageURIError, match=says) as caught:
        parse_s3_uri(text)
    assert "s3://BUCKET/PREFIX" in str(caught.value) and caught.value.exit_code == 2


def test_a_good_uri_maps_workspace_paths_to_keys():
    location = parse_s3_uri("s3://my-datasets/deliveries/apple/")
    assert (location.bucket, location.prefix) == ("my-datasets", "deliveries/apple")
    assert location.key("dataset/meta/info.json") == "deliveries/apple/dataset/meta/info.json"
    assert location.relative("deliveries/apple/manifest.json") == "manifest.json"
    assert parse_s3_uri("s3://my-datasets").key("manifest.json") == "manifest.json"
    assert str(location) == "s3://my-datasets/deliveries/apple"


def test_settings_take_sizes_with_units_from_the_environment_and_the_command_line():
    settings = load_storage_settings({"part_size": "8MiB", "workers": None},
                                     environ={"DATAFARM_S3_MULTIPART_THRESHOLD": "100MB", "DATAFARM_S3_WORKERS": "2"})
    assert (settings.multipart_threshold, settings.part_size, settings.workers) == (100_000_000, 8 << 20, 2)
    assert settings.part_size_for(200 << 30) > settings.part_size  # 10,000 parts at most
    with pytest.raises(StorageSettingsError, match="part_size: .*not a size.*DATAFARM_S3_PART_SIZE"):
        load_storage_settings({"part_size": "eight megs"}, environ={})
    with pytest.raises(StorageSettingsError, match="workers.*DATAFARM_S3_WORKERS"):
        load_storage_settings(environ={"DATAFARM_S3_WORKERS": "0"})


def test_a_missing_bucket_names_the_bucket_and_how_to_create_it(s3_env):
    with pytest.raises(BucketMissing, match=r"bucket 'no-such-bucket' does not exist at http://127\.0\.0\.1:\d+: "
                                            r"create it \(`aws s3 mb s3://no-such-bucket`\)"):
        S3Store.connect(parse_s3_uri("s3://no-such-bucket/x"), load_storage_settings())


def test_no_credentials_is_unavailable_and_names_the_variables(s3_env, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(NoCredentials, match="no S3 credentials.*AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") as caught:
        S3Store.connect(parse_s3_uri("s3://some-bucket/x"), load_storage_settings())
    assert isinstance(caught.value, Unavailable) and caught.value.exit_code == 5


def test_an_unreachable_endpoint_is_transient_and_names_the_endpoint(s3_env, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(StoreUnreachable, match=f"endpoint http://127.0.0.1:{port} did not answer.*AWS_ENDPOINT_URL") as caught:
        S3Store.connect(parse_s3_uri("s3://some-bucket/x"), load_storage_settings())
    assert isinstance(caught.value, TransientError) and not isinstance(caught.value, BadInput)
