"""Every Client call against the real bnn-server."""

from __future__ import annotations

import io
import os
import threading

import numpy as np
import pytest

import bnn_serve
import bnn_serve.plot
from bnn_serve import _wire
from conftest import TINY_SLANG, ServerProcess, cubic_data, free_port, unique, ADMIN_TOKEN


def test_upload_arrays_get_and_list(client, cubic):
    info, x, _ = cubic
    assert info.dataset_id.startswith("ds-")
    assert (info.task, info.num_rows, info.num_features, info.version) == ("regression", 40, 1, 1)
    assert client.dataset(info.dataset_id) == info
    assert client.dataset(info.name) == info
    assert info.dataset_id in [d.dataset_id for d in client.datasets()]


def test_row_chunks_respect_rows_and_bytes():
    X = np.arange(100.0).reshape(50, 2)
    y = np.arange(50.0)
    chunks = list(_wire.row_chunks(X, y, chunk_rows=7, chunk_bytes=1 << 20))
    assert [c.features.shape[0] for c in chunks] == [7] * 7 + [1]
    assert all(not c.rows and not c.features.f32 and not c.targets.f32 for c in chunks)
    assert list(chunks[1].features.shape) == [7, 2] and list(chunks[1].targets.shape) == [7]
    assert list(chunks[1].features.f64[:2]) == [14.0, 15.0] and chunks[1].targets.f64[0] == 7.0
    # 2 features: 16 + 8 = 24 bytes a row, so 100 bytes hold 4 rows.
    assert {c.features.shape[0] for c in _wire.row_chunks(X, y, 4096, 100)} == {4, 2}


def test_chunked_upload_stores_every_row(server):
    x, y = cubic_data(rows=50, seed=5)
    with bnn_serve.Client(server.address, token=ADMIN_TOKEN, chunk_rows=7) as small_chunks:
        info = small_chunks.upload(x, y, name=unique("chunked"))
    assert info.num_rows == 50


def test_upload_csv_and_dataframe(client, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,y,b\n1,10,2\n3,30,4\n5,50,6\n")
    info = client.upload(path, target="y", name=unique("csv"))
    assert info.feature_names == ("a", "b") and info.target_name == "y"
    assert info.num_rows == 3 and info.num_features == 2
    by_index = client.upload(str(path), target=1, name=unique("csv-index"))
    assert (by_index.feature_names, by_index.target_name) == (("a", "b"), "y")
    assert by_index.hash == info.hash  # same schema and rows

    class Frame:
        """The DataFrame surface bnn_serve uses (columns, to_numpy, drop, []),
        so the test runs where pandas is not installed."""

        def __init__(self, data):
            self.data = data
            self.columns = list(data)

        def to_numpy(self, dtype=None):
            return np.column_stack([self.data[c] for c in self.columns]).astype(dtype)

        def drop(self, columns):
            return Frame({c: v for c, v in self.data.items() if c not in columns})

        def __getitem__(self, column):
            return self.data[column]

    frame = Frame({"a": [1.0, 3.0, 5.0], "y": [10.0, 30.0, 50.0], "b": [2.0, 4.0, 6.0]})
    from_frame = client.upload(frame, target="y", name=unique("frame"))
    assert from_frame.feature_names == ("a", "b") and from_frame.num_rows == 3

    bad = tmp_path / "bad.csv"
    bad.write_text("a,y\n1,2\n3,x\n")
    with pytest.raises(ValueError, match=r"bad.csv:3: column 'y' is not a number"):
        client.upload(bad, target="y", name=unique("bad"))


def test_upload_classification_keeps_label_values(client, classifier):
    info, _, _, _ = classifier
    assert info.task == "classification"
    assert info.num_classes == 2 and info.class_values == (-1.0, 1.0)


def test_append_creates_versions(client):
    x, y = cubic_data(rows=20, seed=7)
    info = client.upload(x[:10], y[:10], name=unique("append"))
    appended = client.append(info.name, x[10:], y[10:], expected_version=1)
    assert (appended.version, appended.num_rows) == (2, 20)
    assert client.dataset(info.dataset_id, version=1).num_rows == 10
    assert client.dataset(info.dataset_id).num_rows == 20


def test_train_waits_with_plain_progress_lines(client, cubic):
    info, _, _ = cubic
    lines = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stderr", lines)
        job = client.train(info.dataset_id, "slang", hidden=[6], activations="tanh", epochs=60,
                           seed=2, progress="lines", **TINY_SLANG)
    assert job.succeeded and job.snapshot_id.startswith("snap-")
    assert job.params["rank"] == "1" and job.params["epochs"] == "60"
    assert job.loss_curve and job.loss_curve[-1].step == job.total_steps
    text = lines.getvalue()
    assert f"{job.job_id} succeeded step {job.total_steps}/{job.total_steps}" in text
    assert job.snapshot_id in text


def test_train_progress_bar_uses_tqdm(client, cubic):
    pytest.importorskip("tqdm")  # installed by deploy/install-deps.sh
    info, _, _ = cubic
    bar = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stderr", bar)
        job = client.train(info.dataset_id, "slang", hidden=4, epochs=40, seed=3, **TINY_SLANG)
    assert job.succeeded
    assert job.job_id in bar.getvalue() and "step" in bar.getvalue()


def test_train_without_wait_then_watch(client, cubic):
    info, _, _ = cubic
    queued = client.train(info.dataset_id, "slang", hidden=4, epochs=80, seed=4, wait=False,
                          model_name=unique("watched"), publish=True, **TINY_SLANG)
    assert queued.state in (bnn_serve.JobState.QUEUED, bnn_serve.JobState.RUNNING,
                            bnn_serve.JobState.SUCCEEDED)
    events = []
    job = client.wait(queued.job_id, progress=events.append, timeout=60)
    assert job.succeeded and job.publish and job.model_name == queued.model_name
    assert events[0].kind == "current" and events[-1].state is bnn_serve.JobState.SUCCEEDED
    steps = [e.step for e in events if e.kind == "progress"]
    assert steps == sorted(steps)
    assert client.model(queued.model_name).versions[0].snapshot_id == job.snapshot_id


def test_jobs_listing_filters_and_cancel(client, cubic, trained):
    info, _, _ = cubic
    listed = client.jobs(dataset=info.dataset_id, states=["succeeded"])
    assert trained.job_id in [j.job_id for j in listed]
    assert all(j.state is bnn_serve.JobState.SUCCEEDED for j in listed)
    assert len(client.jobs(limit=1)) == 1
    assert client.job(trained.job_id).loss_curve == trained.loss_curve

    long_job = client.train(info.dataset_id, "slang", hidden=32, epochs=100000, wait=False,
                            **TINY_SLANG)
    cancelled = client.cancel(long_job.job_id)
    assert cancelled.state in (bnn_serve.JobState.CANCELLED, bnn_serve.JobState.CANCELLING)
    final = client.wait(long_job.job_id, progress=False, timeout=30)
    assert final.state is bnn_serve.JobState.CANCELLED


def test_methods(client):
    methods = {m.name: m for m in client.methods()}
    assert "slang" in methods
    assert "rank" in {p.name for p in methods["slang"].params}


def test_predict_regression(client, trained):
    grid = np.linspace(-6, 6, 13)
    pred = client.predict(trained.snapshot_id, grid, samples=32, seed=9, quantiles=[0.05, 0.95],
                          per_sample=True)
    assert pred.task == "regression" and len(pred) == 13
    assert pred.snapshot_id == trained.snapshot_id and pred.seed == 9 and pred.num_samples == 32
    for field in (pred.mean, pred.variance, pred.epistemic_variance, pred.aleatoric_variance):
        assert field.shape == (13,) and np.all(np.isfinite(field))
    np.testing.assert_allclose(pred.variance, pred.epistemic_variance + pred.aleatoric_variance,
                               rtol=1e-9)
    assert pred.quantiles.shape == (13, 2) and np.all(pred.quantiles[:, 0] < pred.quantiles[:, 1])
    assert pred.sample_outputs.shape == (13, 32)
    np.testing.assert_allclose(pred.sample_outputs.mean(axis=1), pred.mean, rtol=1e-9, atol=1e-9)
    assert pred.probabilities is None and pred.entropy is None
    again = client.predict(trained.snapshot_id, grid.reshape(-1, 1), samples=32, seed=9)
    np.testing.assert_array_equal(again.mean, pred.mean)
    linear = client.predict(trained.snapshot_id, grid, linearized=True)
    assert np.all(linear.variance > 0)


def test_predict_classification(client, classifier):
    info, job, X, labels = classifier
    pred = client.predict(job.snapshot_id, X, samples=16, seed=1, per_sample=True)
    assert pred.task == "classification" and pred.mean is None
    assert pred.probabilities.shape == (len(X), 2)
    np.testing.assert_allclose(pred.probabilities.sum(axis=1), 1.0, rtol=1e-9)
    np.testing.assert_array_equal(pred.class_values, [-1.0, 1.0])
    assert set(pred.predicted_class) <= {-1.0, 1.0}
    assert np.mean(pred.predicted_class == labels) > 0.9
    assert np.all(pred.entropy >= pred.mutual_information - 1e-12)
    assert np.all(pred.mutual_information >= -1e-12)
    assert pred.sample_outputs.shape == (len(X), 16, 2)
    np.testing.assert_allclose(pred.sample_outputs.mean(axis=1), pred.probabilities, atol=1e-9)


def test_acquire_from_rows_and_from_a_dataset(client, cubic, trained):
    info, x, _ = cubic
    from_rows = client.acquire(trained.snapshot_id, x, k=3, heuristic="max_variance",
                               samples=16, seed=5)
    from_dataset = client.acquire(trained.snapshot_id, info.dataset_id, k=3,
                                  heuristic="max_variance", samples=16, seed=5)
    assert from_rows.pool_rows == 40 and from_rows.indices.shape == (3,)
    np.testing.assert_array_equal(from_rows.indices, from_dataset.indices)
    np.testing.assert_array_equal(from_rows.scores, from_dataset.scores)
    assert list(from_rows.scores) == sorted(from_rows.scores, reverse=True)
    # The rows of largest epistemic variance are the extremes of x.
    assert np.abs(x[from_rows.indices]).min() > np.median(np.abs(x))
    randomly = client.acquire(trained.snapshot_id, x, k=5, heuristic="random", seed=1,
                              diversity_power=0.0)
    assert len(set(randomly.indices.tolist())) == 5


def test_snapshots_export_import(client, cubic, trained, tmp_path):
    info, _, _ = cubic
    assert trained.snapshot_id in [s.snapshot_id for s in client.snapshots(info.dataset_id)]
    snap = client.snapshot(trained.snapshot_id)
    assert snap.method == "slang" and snap.model.hidden_sizes == (8,)
    assert snap.job_id == trained.job_id and snap.posterior_family == "low_rank"

    path = tmp_path / "s.snapshot"
    exported = client.export(trained.snapshot_id, path)
    assert exported.size_bytes == path.stat().st_size == snap.size_bytes
    assert not os.path.exists(str(path) + ".partial")
    in_memory = client.export(trained.snapshot_id)
    assert in_memory.data == path.read_bytes()

    small = bnn_serve.Client(client.address, token=ADMIN_TOKEN, chunk_bytes=100)
    imported = small.import_(path)
    small.close()
    again = client.import_(in_memory.data)
    assert imported.snapshot_id != trained.snapshot_id != again.snapshot_id
    grid = np.linspace(-3, 3, 5)
    original = client.predict(trained.snapshot_id, grid, samples=8, seed=2)
    copy = client.predict(imported.snapshot_id, grid, samples=8, seed=2)
    np.testing.assert_array_equal(original.mean, copy.mean)

    client.delete_snapshot(again.snapshot_id)
    with pytest.raises(bnn_serve.NotFoundError):
        client.snapshot(again.snapshot_id)


def test_named_models_and_references(client, trained):
    name = unique("fit")
    v1 = client.publish(trained.snapshot_id, name, aliases=["stable"])
    assert (v1.model_name, v1.version, v1.aliases) == (name, 1, ("latest", "stable"))
    v2 = client.publish(client.snapshot(trained.snapshot_id), name)
    assert v2.version == 2
    info = client.model(name)
    assert info.aliases == {"latest": 2, "stable": 1} and len(info.versions) == 2
    assert name in [m.name for m in client.models()]

    grid = [[0.0], [1.0]]
    for reference, version in ((name, 2), (f"{name}@stable", 1), (f"{name}:2", 2), (v1, 1)):
        pred = client.predict(reference, grid, samples=4, seed=1)
        assert (pred.model_name, pred.model_version) == (name, version)
        assert pred.snapshot_id == trained.snapshot_id
    acquired = client.acquire(f"{name}@stable", np.zeros((3, 1)), k=1, seed=1)
    assert acquired.model_version == 1
    exported = client.export(f"{name}:1")
    assert (exported.snapshot_id, exported.model_name, exported.model_version) == (
        trained.snapshot_id, name, 1)

    assert client.alias(name, "canary", 2).aliases["canary"] == 2
    assert "canary" not in client.delete_alias(name, "canary").aliases
    client.delete_model(name)
    with pytest.raises(bnn_serve.NotFoundError):
        client.model(name)


def test_delete_dataset(client):
    x, y = cubic_data(rows=10, seed=11)
    info = client.upload(x, y, name=unique("doomed"))
    assert client.delete_dataset(info.name) == info.dataset_id
    with pytest.raises(bnn_serve.NotFoundError):
        client.dataset(info.dataset_id)


def test_targets_resolve_as_the_server_does():
    request = _wire.pb.PredictRequest()
    bnn_serve.Client._set_target(request, "snap-0123456789abcdef")
    assert request.WhichOneof("target") == "snapshot_id"
    for reference in ("m", "m@stable", "m:3", "snap-model"):
        bnn_serve.Client._set_target(request, reference)
        assert request.WhichOneof("target") == "model" and request.model == reference
    assert bnn_serve.Client._snapshot_id("snap-0123456789abcdef", "parent") == "snap-0123456789abcdef"
    with pytest.raises(ValueError, match="parent: expected a snapshot id"):
        bnn_serve.Client._snapshot_id("m@stable", "parent")


def test_wait_reconnects_across_a_server_restart(server_binary, tmp_path):
    """WatchJob ends when the server stops; wait() reconnects with after_step
    and follows the job, resumed from its checkpoint, to its end."""
    port = free_port()
    data = tmp_path / "data"
    flags = ["--shutdown-grace", "2", "--threads", "1"]
    first = ServerProcess(server_binary, data, flags, listen=f"127.0.0.1:{port}")
    processes = [first]
    try:
        c = bnn_serve.Client(first.address)
        x, y = cubic_data(rows=200, seed=3)
        info = c.upload(x, y, name="restart")
        job = c.train(info.dataset_id, "slang", hidden=[48, 48], epochs=200, seed=1,
                      wait=False, **TINY_SLANG)
        events = []
        restarted = threading.Event()

        def on_event(event):
            events.append(event)
            if event.kind == "progress" and event.step > 0 and not restarted.is_set():
                restarted.set()
                # Stop (the job checkpoints and becomes INTERRUPTED) and start
                # again on the same port and data directory.
                threading.Thread(target=lambda: (first.stop(), processes.append(
                    ServerProcess(server_binary, data, flags, listen=f"127.0.0.1:{port}")))).start()

        final = c.wait(job.job_id, progress=on_event, timeout=90, reconnect_delay=0.2)
        assert restarted.is_set() and len(processes) == 2
        assert final.succeeded, final.error
        assert [e.kind for e in events].count("current") >= 2  # one per (re)connection
        progress_steps = [e.step for e in events if e.kind == "progress"]
        assert progress_steps == sorted(progress_steps)
        c.close()
    finally:
        for process in processes:
            process.stop()


# --- packed rows and Evaluate -------------------------------------------------

def _per_row_predict(client, snapshot_id, X, **fields):
    """A raw per-row Predict through the stub (one Features message a row,
    one RowPrediction a row): what the package sent before packed rows."""
    request = _wire.pb.PredictRequest(snapshot_id=snapshot_id, **fields)
    for row in np.asarray(X, dtype=np.float64).reshape(len(X), -1):
        request.rows.add().x.extend(row.tolist())
    return client._unary(client._stub.Predict, request)


def test_packed_requests_and_responses_travel(client, trained, monkeypatch):
    sent = []
    original = client._unary

    def spy(rpc, request, timeout=None):
        response = original(rpc, request, timeout)
        sent.append((request, response))
        return response

    monkeypatch.setattr(client, "_unary", spy)
    client.predict(trained.snapshot_id, np.linspace(-1, 1, 5), samples=4, seed=1)
    request, response = sent[-1]
    assert not request.rows and request.packed_response
    assert list(request.features.shape) == [5, 1] and len(request.features.f64) == 5
    assert not response.predictions and list(response.packed.mean.shape) == [5]


def test_packed_regression_equals_per_row_bit_for_bit(client, trained):
    grid = np.linspace(-5, 5, 17)
    levels = [0.1, 0.5, 0.9]
    packed = client.predict(trained.snapshot_id, grid, samples=24, seed=4, quantiles=levels,
                            per_sample=True)
    raw = _per_row_predict(client, trained.snapshot_id, grid, num_samples=24, seed=4,
                           quantiles=levels, per_sample=True)
    assert len(raw.predictions) == 17
    for name in ("mean", "variance", "epistemic_variance", "aleatoric_variance"):
        np.testing.assert_array_equal(getattr(packed, name),
                                      [getattr(r, name) for r in raw.predictions], err_msg=name)
    np.testing.assert_array_equal(packed.quantiles, [list(r.quantiles) for r in raw.predictions])
    np.testing.assert_array_equal(packed.sample_outputs,
                                  [list(r.sample_outputs) for r in raw.predictions])
    linear = client.predict(trained.snapshot_id, grid, linearized=True)
    raw_linear = _per_row_predict(client, trained.snapshot_id, grid, linearized=True)
    np.testing.assert_array_equal(linear.variance, [r.variance for r in raw_linear.predictions])


def test_packed_classification_equals_per_row_bit_for_bit(client, classifier):
    _, job, X, _ = classifier
    packed = client.predict(job.snapshot_id, X, samples=8, seed=2, per_sample=True)
    raw = _per_row_predict(client, job.snapshot_id, X, num_samples=8, seed=2, per_sample=True)
    for name in ("predicted_class", "entropy", "expected_entropy", "mutual_information",
                 "variation_ratio"):
        np.testing.assert_array_equal(getattr(packed, name),
                                      [getattr(r, name) for r in raw.predictions], err_msg=name)
    np.testing.assert_array_equal(packed.probabilities,
                                  [list(r.probabilities) for r in raw.predictions])
    np.testing.assert_array_equal(packed.sample_outputs.reshape(len(X), -1),
                                  [list(r.sample_outputs) for r in raw.predictions])
    acquired = client.acquire(job.snapshot_id, X, k=4, heuristic="bald", samples=8, seed=2)
    raw_acquire = _wire.pb.AcquireRequest(snapshot_id=job.snapshot_id, k=4, heuristic="bald",
                                          num_samples=8, seed=2)
    for row in X:
        raw_acquire.rows.rows.add().x.extend(row.tolist())
    expected = client._unary(client._stub.Acquire, raw_acquire)
    np.testing.assert_array_equal(acquired.indices, expected.indices)
    np.testing.assert_array_equal(acquired.scores, expected.scores)


def _close(actual, expected):
    assert actual == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_evaluate_regression_matches_predict(client, cubic, trained):
    info, x, y = cubic
    result = client.evaluate(trained.snapshot_id, x, y, samples=32, seed=7)
    assert isinstance(result, bnn_serve.Evaluation)
    assert (result.task, result.num_rows, result.num_samples, result.seed) == (
        "regression", 40, 32, 7)
    assert result.accuracy is None and result.reliability is None and result.ece is None
    pred = client.predict(trained.snapshot_id, x, samples=32, seed=7, per_sample=True)
    _close(result.rmse, float(np.sqrt(np.mean((pred.mean - y) ** 2))))
    # The MC mixture's test log-likelihood with the model's noise variance
    # (the aleatoric variance, the same for every row).
    noise = pred.aleatoric_variance[0]
    np.testing.assert_allclose(pred.aleatoric_variance, noise, rtol=1e-12)
    log_density = (-0.5 * (y[:, None] - pred.sample_outputs) ** 2 / noise
                   - 0.5 * np.log(2 * np.pi * noise))
    peak = log_density.max(axis=1, keepdims=True)
    expected = np.mean(peak[:, 0] + np.log(np.mean(np.exp(log_density - peak), axis=1)))
    _close(result.log_likelihood, expected)
    _close(result.nll, -expected)
    stored = client.evaluate(trained.snapshot_id, dataset=info.name, samples=32, seed=7)
    assert (stored.rmse, stored.log_likelihood) == (result.rmse, result.log_likelihood)
    with pytest.raises(bnn_serve.InvalidArgumentError, match="regression"):
        client.evaluate(trained.snapshot_id, x, y, ood=x[:5])
    with pytest.raises(ValueError, match="dataset"):
        client.evaluate(trained.snapshot_id, x, y, dataset=info.name)


def test_evaluate_classification_matches_predict(client, classifier, tmp_path):
    _, job, X, labels = classifier
    rng = np.random.default_rng(11)
    far = rng.normal(0, 0.5, (20, 2)) + np.array([8.0, -8.0])
    result = client.evaluate(job.snapshot_id, X, labels, ood=far, samples=16, seed=5, bins=10)
    assert (result.task, result.num_rows, result.ood_rows) == ("classification", len(X), 20)
    assert result.rmse is None and result.log_likelihood is None
    pred = client.predict(job.snapshot_id, X, samples=16, seed=5)
    column = np.searchsorted(pred.class_values, labels)
    p_true = pred.probabilities[np.arange(len(X)), column]
    _close(result.nll, float(np.mean(-np.log(np.maximum(p_true, 1e-300)))))
    _close(result.accuracy, float(np.mean(pred.predicted_class == labels)))
    onehot = np.eye(len(pred.class_values))[column]
    _close(result.brier, float(np.mean(np.sum((pred.probabilities - onehot) ** 2, axis=1))))
    local = bnn_serve.plot.reliability(pred.probabilities, labels, pred.class_values, bins=10)
    bins = result.reliability
    np.testing.assert_array_equal(bins.count, local.count)
    np.testing.assert_allclose(bins.lower, local.lower, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(bins.upper, local.upper, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(bins.mean_confidence, local.mean_confidence, rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(bins.accuracy, local.accuracy, rtol=1e-12, atol=1e-12)
    _close(result.ece, local.ece)
    ood = client.predict(job.snapshot_id, far, samples=16, seed=5)
    _, _, auroc_entropy = bnn_serve.plot.roc(pred.entropy, ood.entropy)
    _, _, auroc_mi = bnn_serve.plot.roc(pred.mutual_information, ood.mutual_information)
    _close(result.auroc_entropy, auroc_entropy)
    _close(result.auroc_mutual_information, auroc_mi)
    # The reliability diagram draws the server's bins.
    path = tmp_path / "reliability.png"
    drawn = bnn_serve.plot.reliability_diagram(result, path=path)
    assert drawn is bins and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
