"""Fixtures of the bnn_serve tests: the real bnn-server on a free loopback port.

CTest (tests/client/python/CMakeLists.txt) passes the binary as
BNN_SERVER_PATH and puts client/python and BUILD/client/python (the
generated stubs) on PYTHONPATH. One server runs for the whole session, with
a token file holding an admin, a predict and a train token, so that the
authentication errors come from the same server as everything else.
"""

from __future__ import annotations

import hashlib
import os
import select
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np
import pytest

import bnn_serve

SOURCE_DIR = Path(os.environ.get("BNN_SOURCE_DIR", Path(__file__).resolve().parents[3]))
ADMIN_TOKEN = "bnn_pytest-admin-token"
PREDICT_TOKEN = "bnn_pytest-predict-token"
TRAIN_TOKEN = "bnn_pytest-train-token"
#: The session server's --max-predict-samples (the ResourceExhausted test
#: asks for more).
MAX_PREDICT_SAMPLES = 1024
#: SLANG settings of a tiny, fast net (a few hundred steps in well under 1 s).
TINY_SLANG = dict(rank=1, mc_samples=4, batch_size=32, learning_rate=0.1, beta=0.05,
                  noise_precision=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def unique(prefix: str) -> str:
    """A dataset or model name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def write_token_file(path: Path) -> None:
    lines = [f"sha256:{hashlib.sha256(token.encode()).hexdigest()} {scopes} {name}"
             for token, scopes, name in ((ADMIN_TOKEN, "admin", "pytest-admin"),
                                         (PREDICT_TOKEN, "predict", "pytest-predict"),
                                         (TRAIN_TOKEN, "train", "pytest-train"))]
    path.write_text("\n".join(lines) + "\n")


class ServerProcess:
    """bnn-server as a child process; ``address`` once it listens."""

    def __init__(self, binary: str, data_dir: Path, flags: List[str],
                 listen: str = "127.0.0.1:0", startup_timeout: float = 30.0) -> None:
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [binary, "--listen", listen, "--data-dir", str(data_dir), "--metrics-listen", ""]
            + flags, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log)
        self.address = self._wait_for_address(startup_timeout)
        # Drain stdout so the server never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def _wait_for_address(self, timeout: float) -> str:
        prefix = b"bnn-server listening on "
        deadline = time.monotonic() + timeout
        buffer = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.1)
            if ready:
                data = os.read(self.process.stdout.fileno(), 4096)
                if not data:
                    break
                buffer += data
                for line in buffer.split(b"\n")[:-1]:
                    if line.startswith(prefix):
                        return line[len(prefix):].decode().strip()
        self.stop()
        raise RuntimeError(f"bnn-server did not start: {self.log_path.read_text(errors='replace')}")

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


@dataclass
class Server:
    binary: str
    address: str
    process: ServerProcess


@pytest.fixture(scope="session")
def server_binary() -> str:
    binary = os.environ.get("BNN_SERVER_PATH")
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail(f"BNN_SERVER_PATH must name the bnn-server binary (got {binary!r})")
    return binary


@pytest.fixture(scope="session")
def server(server_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Server:
    root = tmp_path_factory.mktemp("server")
    token_file = root / "tokens"
    write_token_file(token_file)
    process = ServerProcess(server_binary, root / "data",
                            ["--token-file", str(token_file), "--max-concurrent-jobs", "2",
                             "--max-predict-samples", str(MAX_PREDICT_SAMPLES),
                             "--threads", "1", "--shutdown-grace", "2"])
    yield Server(server_binary, process.address, process)
    process.stop()


@pytest.fixture(scope="session")
def client(server: Server) -> bnn_serve.Client:
    with bnn_serve.Client(server.address, token=ADMIN_TOKEN) as c:
        yield c


def cubic_data(rows: int = 40, seed: int = 1):
    """SLANG's toy regression: y = x^3 + N(0, 9), x ~ U[-4, 4]."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, rows)
    return x, x ** 3 + rng.normal(0, 3, rows)


def blobs_data(rows: int = 60, seed: int = 2):
    """Two Gaussian blobs in 2-D with labels -1 and +1."""
    rng = np.random.default_rng(seed)
    labels = np.where(np.arange(rows) % 2 == 0, -1.0, 1.0)
    X = rng.normal(0, 0.7, (rows, 2)) + labels[:, None] * 1.5
    return X, labels


@pytest.fixture(scope="session")
def cubic(client: bnn_serve.Client):
    x, y = cubic_data()
    return client.upload(x, y, name=unique("cubic")), x, y


@pytest.fixture(scope="session")
def trained(client: bnn_serve.Client, cubic) -> bnn_serve.Job:
    info, _, _ = cubic
    job = client.train(info.dataset_id, "slang", hidden=8, epochs=150, seed=1,
                       progress=False, timeout=60, **TINY_SLANG)
    assert job.succeeded, job.error
    return job


@pytest.fixture(scope="session")
def classifier(client: bnn_serve.Client):
    X, labels = blobs_data()
    info = client.upload(X, labels, name=unique("blobs"), task="classification")
    job = client.train(info.dataset_id, "slang", hidden=8, epochs=100, seed=3, progress=False,
                       timeout=60, rank=1, mc_samples=4, batch_size=32, learning_rate=0.05,
                       beta=0.05)
    assert job.succeeded, job.error
    return info, job, X, labels
