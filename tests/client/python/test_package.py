"""The package builds and installs: `pip install client/python` generates the
stubs into the wheel; the generator writes importable stubs."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR


def repository_copy(root):
    """client/python and the proto, laid out as in the repository (so the
    build writes its build/ and egg-info into the copy, not the source)."""
    shutil.copytree(SOURCE_DIR / "client" / "python", root / "client" / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "_proto", "__pycache__"))
    proto = root / "proto" / "bnn" / "v1"
    proto.mkdir(parents=True)
    shutil.copy(SOURCE_DIR / "proto" / "bnn" / "v1" / "bnn_service.proto", proto)
    return root / "client" / "python"


def test_pip_install_builds_the_stubs_into_the_package(tmp_path):
    pytest.importorskip("pip")  # Debian python3-pip, installed by deploy/install-deps.sh
    package = repository_copy(tmp_path / "repo")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                    "--no-deps", "--no-index", "--target", str(target), str(package)],
                   check=True, capture_output=True, timeout=120)
    assert (target / "bnn_serve" / "_proto" / "bnn_service_pb2_grpc.py").is_file()
    probe = ("import bnn_serve, bnn_serve._proto.bnn_service_pb2 as pb; "
             "print(bnn_serve.__file__); print(pb.DESCRIPTOR.services_by_name['BnnService'].name)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True, cwd=tmp_path, env={"PYTHONPATH": str(target)})
    location, service = result.stdout.split()
    assert location.startswith(str(target)) and service == "BnnService"


def test_generator_writes_importable_stubs(tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(SOURCE_DIR / "client/python/bnn_serve/_gen.py"),
                    "--out", str(out)], check=True, capture_output=True, timeout=60)
    generated = sorted(p.name for p in (out / "bnn_serve" / "_proto").iterdir())
    assert generated == ["__init__.py", "bnn_service_pb2.py", "bnn_service_pb2_grpc.py"]
    grpc_module = (out / "bnn_serve" / "_proto" / "bnn_service_pb2_grpc.py").read_text()
    assert "from bnn_serve._proto import bnn_service_pb2" in grpc_module
    failed = subprocess.run([sys.executable, str(SOURCE_DIR / "client/python/bnn_serve/_gen.py"),
                             "--out", str(out), "--proto", str(tmp_path / "missing.proto")],
                            capture_output=True, text=True)
    assert failed.returncode == 1 and "proto file not found" in failed.stderr
