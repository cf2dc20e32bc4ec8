#!/usr/bin/env python3
"""A Python Open Inference Protocol client against the real bnn-server.

Generates Python stubs from proto/inference/grpc_predict_v2.proto with
grpc_tools.protoc at test time (as a KServe or Triton user would, with
Debian's python3-grpcio and python3-grpc-tools), starts bnn-server on a free
loopback port, trains and publishes a small model through the bnn_serve
package (client/python, with the stubs the build generated), and then calls
every inference.GRPCInferenceService RPC: ModelInfer with FP64 contents and
with raw FP32 bytes (bit-identical to bnn.v1 Predict with the same seed),
ModelReady, ModelMetadata, and a wrong datatype and an unknown model.

Usage: python_client_test.py REPOSITORY_ROOT BNN_SERVER
(with client/python and the build's stubs on PYTHONPATH)
"""
import pathlib
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np


def generate_stubs(root: pathlib.Path, out: pathlib.Path) -> None:
    """The inference stubs with grpc_tools, as a Python user would make them
    (the proto has no proto3 `optional` field, which Debian's grpc_tools 1.14
    could not compile)."""
    from grpc_tools import protoc  # pylint: disable=import-outside-toplevel
    proto = root / "proto"
    inference = "inference/grpc_predict_v2.proto"
    if protoc.main(["protoc", f"-I{proto}", f"--python_out={out}",
                    f"--grpc_python_out={out}", str(proto / inference)]) != 0:
        raise RuntimeError(f"grpc_tools.protoc failed on {inference}")
    (out / "inference" / "__init__.py").touch()
    sys.path.insert(0, str(out))


def start_server(binary: str, data_dir: str, log):
    process = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir,
         "--metrics-listen", "", "--threads", "1"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = process.stdout.readline()
        if line.startswith("bnn-server listening on "):
            return process, line.split()[-1]
        if not line and process.poll() is not None:
            break
    process.kill()
    raise RuntimeError("bnn-server did not start")


XS = [-2.0 + 0.5 * i for i in range(8)]


def train_and_predict(address: str, name: str) -> list:
    """Publishes a small model `name` and returns the means bnn.v1 Predict
    gives for XS with 16 samples and seed 11."""
    import bnn_serve  # pylint: disable=import-outside-toplevel
    with bnn_serve.Client(address) as client:
        x = np.linspace(-3, 3, 30)
        client.upload(x.reshape(-1, 1), x ** 3, name="cubic")
        client.train("cubic", "slang", hidden=[4], epochs=20, seed=1,
                     model_name=name, publish=True, progress=False,
                     timeout=120)
        prediction = client.predict(name, np.array(XS).reshape(-1, 1),
                                    samples=16, seed=11)
        return [float(v) for v in prediction.mean]


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    binary = sys.argv[2]
    failures = []
    passed = []

    def check(condition: bool, what: str) -> None:
        print(("ok   " if condition else "FAIL ") + what)
        (passed if condition else failures).append(what)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "stubs").mkdir()
        generate_stubs(root, tmp / "stubs")
        import grpc  # pylint: disable=import-outside-toplevel
        from inference import grpc_predict_v2_pb2 as pb  # pylint: disable=import-outside-toplevel
        from inference import grpc_predict_v2_pb2_grpc as pb_grpc  # pylint: disable=import-outside-toplevel

        with open(tmp / "server.log", "w") as log:
            server, address = start_server(binary, str(tmp / "data"), log)
        try:
            means = train_and_predict(address, "cubic")
            channel = grpc.insecure_channel(address)
            stub = pb_grpc.GRPCInferenceServiceStub(channel)

            check(stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live,
                  "ServerLive")
            check(stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready,
                  "ServerReady")
            check(stub.ModelReady(pb.ModelReadyRequest(name="cubic"),
                                  timeout=10).ready, "ModelReady")
            metadata = stub.ServerMetadata(pb.ServerMetadataRequest(),
                                           timeout=10)
            check(metadata.name == "bnn-serve", "ServerMetadata name")
            model = stub.ModelMetadata(
                pb.ModelMetadataRequest(name="cubic", version="1"), timeout=10)
            check(list(model.versions) == ["1"] and
                  model.inputs[0].name == "INPUT" and
                  list(model.inputs[0].shape) == [-1, 1], "ModelMetadata")

            xs = XS
            request = pb.ModelInferRequest(model_name="cubic", id="py")
            tensor = request.inputs.add(name="INPUT", datatype="FP64",
                                        shape=[len(xs), 1])
            tensor.contents.fp64_contents.extend(xs)
            request.parameters["num_samples"].int64_param = 16
            request.parameters["seed"].int64_param = 11
            response = stub.ModelInfer(request, timeout=30)
            outputs = {o.name: list(o.contents.fp64_contents)
                       for o in response.outputs}
            check(response.id == "py" and response.model_version == "1",
                  "ModelInfer id and version")
            check(sorted(outputs) == sorted(["mean", "variance",
                                             "epistemic_variance",
                                             "aleatoric_variance"]),
                  "ModelInfer outputs")

            check([struct.pack("<d", v) for v in outputs["mean"]] ==
                  [struct.pack("<d", v) for v in means],
                  "ModelInfer mean bit-identical to Predict")

            # Raw FP32 bytes in, raw FP64 bytes out, as Triton clients send.
            raw = pb.ModelInferRequest(model_name="cubic")
            raw.inputs.add(name="INPUT", datatype="FP32", shape=[len(xs), 1])
            raw.raw_input_contents.append(struct.pack(f"<{len(xs)}f", *xs))
            raw.outputs.add(name="mean")
            raw.parameters["num_samples"].int64_param = 16
            raw.parameters["seed"].int64_param = 11
            raw_response = stub.ModelInfer(raw, timeout=30)
            raw_means = list(struct.unpack(
                f"<{len(xs)}d", raw_response.raw_output_contents[0]))
            check(raw_means == means, "raw FP32 ModelInfer equals Predict")

            bad = pb.ModelInferRequest(model_name="cubic")
            bad.inputs.add(name="INPUT", datatype="INT32", shape=[1, 1])
            try:
                stub.ModelInfer(bad, timeout=30)
                check(False, "wrong datatype refused")
            except grpc.RpcError as error:
                check(error.code() == grpc.StatusCode.INVALID_ARGUMENT and
                      "datatype 'INT32'" in error.details(),
                      "wrong datatype refused")
            try:
                stub.ModelInfer(pb.ModelInferRequest(model_name="nope"),
                                timeout=30)
                check(False, "unknown model refused")
            except grpc.RpcError as error:
                check(error.code() == grpc.StatusCode.NOT_FOUND,
                      "unknown model refused")
            channel.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
        if failures:
            print((tmp / "server.log").read_text())
    print(f"{len(passed)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
