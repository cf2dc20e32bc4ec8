"""Each exception type from a real bad request to the real server."""

from __future__ import annotations

import re

import grpc
import numpy as np
import pytest

import bnn_serve
from conftest import MAX_PREDICT_SAMPLES, PREDICT_TOKEN, cubic_data, free_port, unique


def check(error: bnn_serve.BnnError, cls: type, code: grpc.StatusCode, fragment: str) -> None:
    assert type(error) is cls and isinstance(error, bnn_serve.BnnError)
    assert error.code == code
    assert fragment in error.message, error.message
    assert str(error).startswith(code.name + ": ")


def server_error(error: bnn_serve.BnnError) -> None:
    """The server named the call: x-request-id, 32 hex digits."""
    assert error.request_id is not None and re.fullmatch(r"[0-9a-f]{32}", error.request_id)


def test_invalid_argument_names_the_field(client, trained):
    with pytest.raises(bnn_serve.InvalidArgumentError) as caught:
        client.predict(trained.snapshot_id, [[float("nan")]])
    check(caught.value, bnn_serve.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT,
          "features[0, 0]")
    server_error(caught.value)


def test_not_found(client):
    with pytest.raises(bnn_serve.NotFoundError) as caught:
        client.predict("no-such-model@stable", [[0.0]])
    check(caught.value, bnn_serve.NotFoundError, grpc.StatusCode.NOT_FOUND, "no-such-model")


def test_already_exists(client):
    x, y = cubic_data(rows=5)
    name = unique("taken")
    client.upload(x, y, name=name)
    with pytest.raises(bnn_serve.AlreadyExistsError) as caught:
        client.upload(x, y, name=name)
    check(caught.value, bnn_serve.AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS, name)


def test_resource_exhausted_names_the_flag(client, trained):
    with pytest.raises(bnn_serve.ResourceExhaustedError) as caught:
        client.predict(trained.snapshot_id, [[0.0]], samples=MAX_PREDICT_SAMPLES + 1)
    check(caught.value, bnn_serve.ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED,
          "--max-predict-samples")


def test_failed_precondition(client, trained):
    x, y = cubic_data(rows=6)
    info = client.upload(x[:3], y[:3], name=unique("stale"))
    client.append(info.dataset_id, x[3:5], y[3:5], expected_version=1)
    with pytest.raises(bnn_serve.FailedPreconditionError) as caught:
        client.append(info.dataset_id, x[5:], y[5:], expected_version=1)
    check(caught.value, bnn_serve.FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION,
          "the append expected version 1")
    model = unique("pinned")
    client.publish(trained.snapshot_id, model)
    with pytest.raises(bnn_serve.FailedPreconditionError) as caught:
        client.delete_snapshot(trained.snapshot_id)
    assert model in caught.value.message
    client.delete_model(model)


def test_permission_denied_names_the_scope(server):
    with bnn_serve.Client(server.address, token=PREDICT_TOKEN) as predict_only:
        x, y = cubic_data(rows=3)
        with pytest.raises(bnn_serve.PermissionDeniedError) as caught:
            predict_only.upload(x, y, name=unique("denied"))
        assert predict_only.methods()  # its own scope works
    check(caught.value, bnn_serve.PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED,
          "train")


def test_unauthenticated(server):
    with bnn_serve.Client(server.address) as anonymous:
        with pytest.raises(bnn_serve.UnauthenticatedError) as caught:
            anonymous.methods()
    check(caught.value, bnn_serve.UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED,
          "authorization")
    with bnn_serve.Client(server.address, token="bnn_not-a-token") as stranger:
        with pytest.raises(bnn_serve.UnauthenticatedError):
            stranger.datasets()


def test_deadline_exceeded(client, trained):
    many_rows = np.linspace(-4, 4, 50000)
    with pytest.raises(bnn_serve.DeadlineExceededError) as caught:
        client.predict(trained.snapshot_id, many_rows, samples=MAX_PREDICT_SAMPLES, timeout=0.05)
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_unavailable():
    with bnn_serve.Client(f"127.0.0.1:{free_port()}", timeout=5) as nowhere:
        with pytest.raises(bnn_serve.UnavailableError) as caught:
            nowhere.datasets()
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE


def test_data_loss_for_truncated_snapshot_bytes(client, trained):
    data = client.export(trained.snapshot_id).data
    with pytest.raises(bnn_serve.DataLossError) as caught:
        client.import_(data[: len(data) // 2])
    check(caught.value, bnn_serve.DataLossError, grpc.StatusCode.DATA_LOSS, "truncated")


def test_every_family_has_its_own_type():
    for code in grpc.StatusCode:
        error = bnn_serve.errors.error_for(code, "message")
        assert error.code == code and isinstance(error, bnn_serve.BnnError)
    families = {bnn_serve.errors.error_for(code, "").__class__ for code in grpc.StatusCode}
    assert len(families) == 13  # 12 families + BnnError for the rest (UNKNOWN, ...)


def test_client_side_checks():
    with pytest.raises(ValueError, match="token"):
        bnn_serve.Client("127.0.0.1:1", token="has space")
    with pytest.raises(ValueError, match="cert and key"):
        bnn_serve.Client("127.0.0.1:1", tls=bnn_serve.TlsConfig(cert="c.pem"))
