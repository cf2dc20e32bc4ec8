"""Starts bnn-server on a free loopback port for the Python perf scripts."""
import hashlib
import re
import subprocess
import time


def provenance(server):
    """The server binary's --version line (its build commit, "-dirty" when
    its tree had uncommitted changes) and SHA-256, for result JSONs."""
    version = subprocess.run([server, "--version"], capture_output=True,
                             text=True, check=True).stdout.strip()
    with open(server, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return {"server_binary": server, "server_version": version,
            "server_sha256": sha}


def start(server, data_dir, log_path, extra, threads=2):
    """Starts `server` on 127.0.0.1:0; returns (process, address)."""
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [server, "--listen", "127.0.0.1:0", "--data-dir", data_dir,
         "--metrics-listen", "", "--threads", str(threads)] + extra,
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        with open(log_path) as f:
            m = re.findall(r"listening on (\S+)", f.read())
        if m:
            return proc, m[-1]
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start within 60 s")


def timed(fn):
    """Milliseconds `fn()` took."""
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000.0
