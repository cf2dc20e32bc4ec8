"""Generates the package's gRPC stubs from ``proto/bnn/v1/bnn_service.proto``.

The stubs are not committed: they are generated from the wire contract with
the system ``protoc`` (3.21, which knows proto3 ``optional``) and
``grpc_python_plugin`` (Debian ``protobuf-compiler-grpc``). Debian's
``python3-grpc-tools`` bundles protoc 3.5.1, which is too old for the proto.

Three callers, one implementation:

* the CMake build (``client/python/CMakeLists.txt``) writes them into
  ``BUILD/client/python/bnn_serve/_proto/`` (run as a script, so the package
  itself is not imported before its stubs exist);
* ``pip install client/python`` (``setup.py``'s build step) writes them into
  the wheel;
* by hand: ``python3 client/python/bnn_serve/_gen.py --out DIR`` writes
  ``DIR/bnn_serve/_proto/``.

The proto is compiled under the virtual path ``bnn_serve/_proto/``, so the
generated gRPC module imports its messages as ``bnn_serve._proto.…`` and no
top-level ``bnn`` package is created.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

#: Where the stubs live inside the package.
PROTO_PACKAGE = "bnn_serve/_proto"
#: The proto file, relative to the repository's ``proto/bnn/v1``.
PROTO_FILE = "bnn_service.proto"
#: The generated modules.
GENERATED = ("bnn_service_pb2.py", "bnn_service_pb2_grpc.py")


def default_proto() -> Path:
    """The proto of the repository this file is in (client/python/bnn_serve/)."""
    return Path(__file__).resolve().parents[3] / "proto" / "bnn" / "v1" / PROTO_FILE


def _find_tool(explicit: Optional[str], env: str, name: str) -> str:
    candidate = explicit or os.environ.get(env) or shutil.which(name)
    if not candidate and Path("/usr/bin", name).exists():
        candidate = str(Path("/usr/bin", name))
    if not candidate:
        raise FileNotFoundError(
            f"{name} not found (set {env} or put it on PATH; Debian: apt-get "
            f"install protobuf-compiler protobuf-compiler-grpc)")
    return candidate


def generate(out_dir: os.PathLike | str, proto: Optional[os.PathLike | str] = None,
             protoc: Optional[str] = None, grpc_plugin: Optional[str] = None) -> list[Path]:
    """Writes the stubs into ``out_dir/bnn_serve/_proto/`` and returns their paths.

    Args:
      out_dir: the directory that holds (or will hold) the ``bnn_serve`` package.
      proto: the ``bnn_service.proto`` to compile; default: the repository's.
      protoc: the protoc binary; default ``$PROTOC``, then ``protoc`` on PATH.
      grpc_plugin: the gRPC Python plugin; default ``$GRPC_PYTHON_PLUGIN``,
        then ``grpc_python_plugin`` on PATH or in /usr/bin.

    Raises:
      FileNotFoundError: the proto or a tool is missing.
      subprocess.CalledProcessError: protoc failed (its stderr is passed on).
    """
    proto_path = Path(proto) if proto else default_proto()
    if not proto_path.is_file():
        raise FileNotFoundError(f"proto file not found: {proto_path}")
    protoc_bin = _find_tool(protoc, "PROTOC", "protoc")
    plugin_bin = _find_tool(grpc_plugin, "GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    out = Path(out_dir)
    package = out / PROTO_PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [protoc_bin,
         f"--proto_path={PROTO_PACKAGE}={proto_path.resolve().parent}",
         f"--python_out={out}", f"--grpc_python_out={out}",
         f"--plugin=protoc-gen-grpc_python={plugin_bin}",
         f"{PROTO_PACKAGE}/{proto_path.name}"],
        check=True)
    init = package / "__init__.py"
    init.write_text('"""Generated from proto/bnn/v1/bnn_service.proto by '
                    'bnn_serve/_gen.py; do not edit."""\n')
    return [init] + [package / name for name in GENERATED]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True,
                        help="directory holding the bnn_serve package; the "
                             "stubs go to OUT/bnn_serve/_proto/")
    parser.add_argument("--proto", help="bnn_service.proto (default: the repository's)")
    parser.add_argument("--protoc", help="protoc binary")
    parser.add_argument("--grpc-plugin", help="grpc_python_plugin binary")
    args = parser.parse_args(argv)
    try:
        generate(args.out, args.proto, args.protoc, args.grpc_plugin)
    except (FileNotFoundError, subprocess.CalledProcessError) as error:
        print(f"bnn_serve._gen: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
