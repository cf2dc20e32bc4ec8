"""The plotting program (python3 -m bnn_serve.plot) and ``bnnctl plot``, which
runs it, against the real server: real PNGs, errors, and bnnctl's
instructions when the interpreter cannot import the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bnn_serve import plot
from conftest import ADMIN_TOKEN, PREDICT_TOKEN, blobs_data

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1024


def bnnctl_path() -> str:
    path = os.environ.get("BNNCTL_PATH")
    if not path:
        pytest.skip("BNNCTL_PATH is not set (CTest sets it to the build's bnnctl)")
    return path


def bnnctl(server, *args, env=None, token=ADMIN_TOKEN):
    return subprocess.run([bnnctl_path(), "--server", server.address, "--token", token, *args],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ) if env is None else env)


def test_program_draws_a_loss_curve_and_reports_errors(server, trained, tmp_path, monkeypatch,
                                                       capsys):
    monkeypatch.setenv("BNN_TOKEN", ADMIN_TOKEN)
    out = tmp_path / "loss.png"
    assert plot.main(["--server", server.address, "loss", trained.job_id,
                      "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert_png(out)
    assert plot.main(["--server", server.address, "loss", "job-0000000000000000",
                      "--out", str(out)]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
    monkeypatch.delenv("BNN_TOKEN")
    assert plot.main(["--server", server.address, "loss", trained.job_id]) == 1
    assert "UNAUTHENTICATED" in capsys.readouterr().err


def test_program_bands_need_one_feature(server, trained, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BNN_TOKEN", PREDICT_TOKEN)
    wide = tmp_path / "wide.csv"
    wide.write_text("a,b\n1,2\n3,4\n")
    assert plot.main(["--server", server.address, "bands", trained.snapshot_id,
                      "--csv", str(wide), "--out", str(tmp_path / "b.png")]) == 1
    assert "bands need one feature column, it has 2" in capsys.readouterr().err


def test_bnnctl_plot_draws_loss_bands_and_reliability(server, cubic, trained, classifier,
                                                      tmp_path):
    loss = tmp_path / "loss.png"
    result = bnnctl(server, "plot", "loss", trained.job_id, "--out", str(loss))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(loss)
    assert_png(loss)
    result = bnnctl(server, "--json", "plot", "loss", trained.job_id, "--out", str(loss))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"path": str(loss)}

    _, x, y = cubic
    data = tmp_path / "cubic.csv"
    data.write_text("x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in zip(x, y)))
    bands = tmp_path / "bands.png"
    result = bnnctl(server, "plot", "bands", trained.snapshot_id, "--csv", str(data),
                    "--target", "y", "--samples", "16", "--seed", "1", "--out", str(bands))
    assert result.returncode == 0, result.stderr
    assert_png(bands)

    _, job, X, labels = classifier
    labelled = tmp_path / "blobs.csv"
    labelled.write_text("a,b,label\n" + "".join(
        f"{r[0]!r},{r[1]!r},{l!r}\n" for r, l in zip(X, labels)))
    diagram = tmp_path / "reliability.png"
    result = bnnctl(server, "plot", "reliability", job.snapshot_id, "--csv", str(labelled),
                    "--target", "label", "--bins", "5", "--out", str(diagram))
    assert result.returncode == 0, result.stderr
    assert_png(diagram)

    # A server error comes back through bnnctl's exit status.
    result = bnnctl(server, "plot", "loss", "job-0000000000000000", "--out", str(loss))
    assert result.returncode == 1
    assert "NOT_FOUND" in result.stderr and "exited with status 1" in result.stderr


def test_bnnctl_plot_says_how_to_install_the_package(server, trained, tmp_path):
    # An interpreter that cannot import bnn_serve: a package of that name
    # that fails to import shadows any installed one.
    shadow = tmp_path / "shadow" / "bnn_serve"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = dict(os.environ, PYTHONPATH=str(shadow.parent))
    out = tmp_path / "never.png"
    result = bnnctl(server, "plot", "loss", trained.job_id, "--out", str(out),
                    "--python", sys.executable, env=env)
    assert result.returncode == 1
    assert "FAILED_PRECONDITION" in result.stderr
    assert "cannot import bnn_serve.plot" in result.stderr
    assert "pip install --no-build-isolation client/python" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()

    missing = bnnctl(server, "plot", "loss", trained.job_id, "--python",
                     str(tmp_path / "no-such-python"))
    assert missing.returncode == 1
    assert "cannot run" in missing.stderr and "No such file" in missing.stderr
    assert "pip install" in missing.stderr

    # '-' is refused: the program reads the file itself.
    dash = bnnctl(server, "plot", "bands", trained.snapshot_id, "--csv", "-")
    assert dash.returncode == 2 and "not '-'" in dash.stderr
