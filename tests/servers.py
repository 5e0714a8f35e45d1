"""Real servers on loopback for the integration tests: an S3 API (moto's server mode) and `mlflow server`.

Both bind to 127.0.0.1 on a free port; nothing here reaches beyond this machine.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

LOOPBACK = "127.0.0.1"
# moto accepts any key until auth is switched on (S3Server.require_auth); the region must be set for pyarrow.
TEST_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


@dataclass
class S3Server:
    """A moto S3 server: `endpoint` is its http URL; the helpers sign with `key`/`secret` (any key is accepted
    until `require_auth`, which makes them the only one)."""

    endpoint: str
    key: str = "testing"
    secret: str = "testing"

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.key, aws_secret_access_key=self.secret)

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def read(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def require_auth(self) -> tuple[str, str]:
        """Create an IAM user allowed everything and switch signature checking on: from then on only its
        key (returned as id, secret) is accepted, and a wrong secret is refused with 403."""
        import boto3

        iam = boto3.client("iam", endpoint_url=self.endpoint, region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        user = f"platform-{uuid.uuid4().hex[:8]}"  # moto's IAM state outlives a server within one process
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        self.key, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        self._checked_requests_after(0)
        return self.key, self.secret

    def allow_all(self) -> None:
        """Switch signature checking off again (moto's setting is global to the process)."""
        self._checked_requests_after(float("inf"))

    def _checked_requests_after(self, count: float) -> None:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset-auth", data=str(count).encode(),
                                         method="POST", headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(request, timeout=10).close()


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """moto's S3 API in a thread of this process, on a free loopback port."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(f"http://{host}:{port}")
    finally:
        server.stop()


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"server not ready after {timeout} s:\n{log.read_text()[-3000:]}")


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a server started with start_new_session=True and every process it forked."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


@dataclass
class MlflowServer:
    """`mlflow server` on a fixed loopback port (one worker, no job runner), which a test can stop (as a crash
    would) and start again on the same port and store."""

    backend_store_uri: str
    log: Path
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> str:
        self.port = self.port or free_port()
        mlflow_cli = Path(sys.executable).with_name("mlflow")
        server_env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **(self.env or {})}
        with open(self.log, "a") as log_file:
            self.proc = subprocess.Popen(
                [str(mlflow_cli) if mlflow_cli.exists() else "mlflow", "server", "--backend-store-uri",
                 self.backend_store_uri, "--host", LOOPBACK, "--port", str(self.port), "--workers", "1",
                 *self.extra_args],
                stdout=log_file, stderr=subprocess.STDOUT, env=server_env, start_new_session=True)
        wait_healthy(self.url, self.proc, self.log)
        return self.url

    def kill(self) -> None:
        """Every process of the server at once, as a crash or an OOM kill would."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc)


@contextlib.contextmanager
def mlflow_server(backend_store_uri: str, log: Path, *extra_args: str, env: dict[str, str] | None = None
                  ) -> Iterator[str]:
    """`mlflow server` on a free loopback port (one worker, no job runner); yields its base URL."""
    server = MlflowServer(backend_store_uri, log, extra_args, env)
    try:
        yield server.start()
    finally:
        server.stop()


def printed_url(log: Path, proc: subprocess.Popen, timeout: float = 120) -> str:
    """The base URL of the `serving ... on http://HOST:PORT/invocations` line `experiments.serve` prints."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r" on (http://127\.0\.0\.1:[1-9][0-9]*)/invocations", log.read_text())
        if found:
            return found.group(1)
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"serve printed no URL in {timeout} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def served_model(model_uri: str, tracking_uri: str, log: Path, cwd: Path) -> Iterator[str]:
    """`python -m experiments.serve MODEL --port 0` started from a plain environment (no venv on PATH), as a user
    starts it: it picks a free loopback port and prints the URL it serves on; yields that URL once it answers
    /health. The server's process group is always stopped."""
    env = {"HOME": os.environ.get("HOME", "/tmp"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd),
           "MLFLOW_TRACKING_URI": tracking_uri}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "experiments.serve", model_uri, "--port", "0"], cwd=cwd,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = printed_url(log, proc)
        wait_healthy(url, proc, log)
        yield url
    finally:
        stop_group(proc)


@contextlib.contextmanager
def joining(address: str) -> Iterator[list[str]]:
    """The arguments that make a run in this process join the Ray at `address` (`--address ADDRESS`) instead of
    starting its own; the driver is disconnected afterwards (a run never disconnects from a cluster it joined)."""
    import ray

    ray.shutdown()  # a test before may have left its driver connected
    try:
        yield ["--address", address]
    finally:
        ray.shutdown()
