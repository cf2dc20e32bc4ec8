"""Starts bnn-server on a free loopback port for the Python perf scripts."""
import re
import subprocess
import time


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
