"""Upload and verify throughput of `datafarm push` / `datafarm verify s3://...` against a local S3 store.

    python benchmarks/s3_throughput.py [--size-mb 128] [--files 4] [--workers 4] [--part-size 8MiB]

Starts moto's S3 server (a real HTTP endpoint) as its own process on 127.0.0.1, builds a synthetic
delivery (a workspace with a manifest, reviews and `--files` random payload files under dataset/, so
the bytes do not compress), then prints MB/s for: the first push (multipart above the threshold), a
second push (everything skipped: HEAD requests only), and the remote verify (every byte downloaded and
hashed). Both ends share this machine's cores, so the figures are a floor for a real store.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_moto(port: int) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("moto's server did not start within 60 s")


def synthetic_delivery(root: Path, size_mb: int, files: int):
    """A workspace that verifies: random payload files in dataset/, one admitted review, the manifest."""
    import json

    from datafarm.farm.deliver import write_manifest
    from datafarm.farm.episodes import episode_dir
    from datafarm.workspace import Workspace

    workspace = Workspace.initialise(root, {"settings": {"target_count": 1}, "task": "benchmark"})
    workspace.write_text("request.txt", "Benchmark the storage.")
    workspace.write_json("contract.json", {"instruction": "benchmark the storage"})
    workspace.write_text("dataset/meta/info.json", json.dumps({"total_episodes": 1}))
    each = size_mb * 1_000_000 // files
    for index in range(files):
        workspace.write_bytes(f"dataset/videos/payload-{index:03d}.bin", os.urandom(each))
    workspace.write_json(f"{episode_dir(0)}/review.json", {"index": 0, "admitted": True, "reasons": []})
    write_manifest(workspace, [0])
    return workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=128, help="payload in MB (1 MB = 10^6 bytes)")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--part-size", default="8MiB")
    parser.add_argument("--multipart-threshold", default="16MiB")
    args = parser.parse_args()

    import boto3

    from datafarm.storage import load_storage_settings, parse_s3_uri, push, verify_remote

    port = free_port()
    server = start_moto(port)
    os.environ.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="benchmark",
                      AWS_SECRET_ACCESS_KEY="benchmark", AWS_DEFAULT_REGION="us-east-1")
    try:
        with tempfile.TemporaryDirectory(prefix="datafarm-s3-bench-") as scratch:
            workspace = synthetic_delivery(Path(scratch) / "ws", args.size_mb, args.files)
            boto3.client("s3").create_bucket(Bucket="datafarm-bench")
            location = parse_s3_uri("s3://datafarm-bench/delivery")
            settings = load_storage_settings({"part_size": args.part_size, "workers": args.workers,
                                              "multipart_threshold": args.multipart_threshold})
            first = push(workspace, location, settings)
            second = push(workspace, location, settings)
            started = time.monotonic()
            report = verify_remote(location, settings)
            verify_seconds = time.monotonic() - started
            assert report.ok, report.problems
    finally:
        server.terminate()
        server.wait(timeout=30)
    megabytes = first.bytes_total / 1e6
    print(f"local S3 (moto server on 127.0.0.1), {megabytes:.0f} MB in {args.files} payload files + "
          f"{len(first.uploaded) - args.files} small; part size {args.part_size}, {args.workers} workers; "
          f"{os.cpu_count()} cores shared by client and server")
    print(f"push (first):   {first.seconds:6.2f} s  {megabytes / first.seconds:7.1f} MB/s  "
          f"({len(first.uploaded)} files uploaded; the time includes the local verify that push runs first)")
    print(f"push (again):   {second.seconds:6.2f} s  {len(second.uploaded)} files uploaded, {len(second.skipped)} skipped")
    print(f"verify (s3://): {verify_seconds:6.2f} s  {megabytes / verify_seconds:7.1f} MB/s  "
          f"({report.checked_files} files downloaded and hashed)")


if __name__ == "__main__":
    main()
