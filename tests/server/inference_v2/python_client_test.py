#!/usr/bin/env python3
"""A Python Open Inference Protocol client against the real bnn-server.

Generates Python stubs from proto/inference/grpc_predict_v2.proto (and
proto/bnn/v1 for training) with grpc_tools.protoc at test time (Debian's
python3-grpcio and python3-grpc-tools), starts bnn-server on a free loopback
port, trains and publishes a small model through bnn.v1, and then calls
every inference.GRPCInferenceService RPC as a KServe or Triton client would:
ModelInfer with FP64 contents and with raw FP32 bytes (bit-identical to
bnn.v1 Predict with the same seed), ModelReady, ModelMetadata, and a wrong
datatype and an unknown model.

Usage: python_client_test.py REPOSITORY_ROOT BNN_SERVER
"""
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def generate_stubs(root: pathlib.Path, out: pathlib.Path) -> None:
    """The inference stubs with grpc_tools (as a Python user would make
    them); bnn.v1's, needed only to train the model, with the system protoc
    and its gRPC plugin, as Debian's grpc_tools (1.14) predates proto3
    `optional` fields."""
    from grpc_tools import protoc  # pylint: disable=import-outside-toplevel
    proto = root / "proto"
    inference = "inference/grpc_predict_v2.proto"
    if protoc.main(["protoc", f"-I{proto}", f"--python_out={out}",
                    f"--grpc_python_out={out}", str(proto / inference)]) != 0:
        raise RuntimeError(f"grpc_tools.protoc failed on {inference}")
    plugin = shutil.which("grpc_python_plugin")
    subprocess.run(["protoc", f"-I{proto}", f"--python_out={out}",
                    f"--plugin=protoc-gen-grpc_python={plugin}",
                    f"--grpc_python_out={out}",
                    str(proto / "bnn/v1/bnn_service.proto")], check=True)
    for package in ("inference", "bnn", "bnn/v1"):
        (out / package / "__init__.py").touch()
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


def train_model(v1, v1_grpc, channel, name: str) -> None:
    stub = v1_grpc.BnnServiceStub(channel)

    def messages():
        yield v1.UploadDatasetRequest(header=v1.DatasetHeader(
            name="cubic", task=v1.TASK_REGRESSION, num_features=1))
        chunk = v1.RowChunk()
        for i in range(30):
            x = -3 + 6 * i / 29
            chunk.rows.add(x=[x], y=x ** 3)
        yield v1.UploadDatasetRequest(chunk=chunk)

    dataset = stub.UploadDataset(messages(), timeout=30).dataset.dataset_id
    request = v1.StartTrainingRequest(dataset_id=dataset, method="slang",
                                      epochs=20, seed=1, model_name=name,
                                      publish=True)
    request.model.hidden_sizes.append(4)
    job_id = stub.StartTraining(request, timeout=30).job_id
    deadline = time.time() + 120
    while time.time() < deadline:
        job = stub.GetJob(v1.GetJobRequest(job_id=job_id), timeout=30)
        if job.state == v1.JOB_STATE_SUCCEEDED:
            return
        if job.state in (v1.JOB_STATE_FAILED, v1.JOB_STATE_CANCELLED):
            raise RuntimeError(f"training failed: {job.error}")
        time.sleep(0.05)
    raise RuntimeError("training did not finish")


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
        from bnn.v1 import bnn_service_pb2 as v1  # pylint: disable=import-outside-toplevel
        from bnn.v1 import bnn_service_pb2_grpc as v1_grpc  # pylint: disable=import-outside-toplevel

        with open(tmp / "server.log", "w") as log:
            server, address = start_server(binary, str(tmp / "data"), log)
        try:
            channel = grpc.insecure_channel(address)
            train_model(v1, v1_grpc, channel, "cubic")
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

            xs = [-2.0 + 0.5 * i for i in range(8)]
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

            predict = v1.PredictRequest(model="cubic", num_samples=16, seed=11)
            for x in xs:
                predict.rows.add(x=[x])
            predicted = v1_grpc.BnnServiceStub(channel).Predict(predict,
                                                                timeout=30)
            means = [row.mean for row in predicted.predictions]
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
