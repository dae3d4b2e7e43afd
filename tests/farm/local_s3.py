"""An S3 endpoint for the bad-input corpus: moto's HTTP server on 127.0.0.1, started once per process."""

from __future__ import annotations

import logging
import os
from functools import cache

S3_BUCKET = "datafarm-bad-inputs"


@cache
def local_s3() -> dict[str, str]:
    """The environment of a user whose S3 endpoint is moto's HTTP server on 127.0.0.1 (started in this process,
    once, by the first case that needs it) holding the bucket S3_BUCKET, where `half-pushed/` holds what an
    interrupted push leaves: files, no manifest."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()  # a daemon thread: it ends with the process
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "datafarm-test",
           "AWS_SECRET_ACCESS_KEY": "datafarm-test-secret", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_DEFAULT_REGION"])
    client.create_bucket(Bucket=S3_BUCKET)
    client.put_object(Bucket=S3_BUCKET, Key="half-pushed/dataset/meta/info.json", Body=b"{}")
    return env
