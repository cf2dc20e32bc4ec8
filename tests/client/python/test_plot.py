"""bnn_serve.plot: PNGs from real predictions and jobs; the statistics against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from bnn_serve import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1024


def test_predictive_bands(client, cubic, trained, tmp_path):
    _, x, y = cubic
    grid = np.linspace(-8, 8, 81)
    pred = client.predict(trained.snapshot_id, grid, samples=32, seed=1)
    out = tmp_path / "bands.png"
    assert plot.predictive_bands(grid, pred, out, x_train=x, y_train=y) == str(out)
    assert_png(out)
    with pytest.raises(ValueError, match="81 predicted rows"):
        plot.predictive_bands(grid[:5], pred, out)


def test_loss_curve(client, trained, tmp_path):
    out = tmp_path / "loss.png"
    plot.loss_curve(client.job(trained.job_id), out)
    assert_png(out)
    listed = next(j for j in client.jobs() if j.job_id == trained.job_id)
    with pytest.raises(ValueError, match="no loss curve"):
        plot.loss_curve(listed, out)


def brute_force_reliability(probabilities, labels, values, bins):
    ece, counts = 0.0, []
    for b in range(bins):
        lower, upper = b / bins, (b + 1) / bins
        members = [i for i, p in enumerate(probabilities)
                   if (lower < p.max() <= upper) or (b == 0 and p.max() == 0)]
        counts.append(len(members))
        if members:
            confidence = np.mean([probabilities[i].max() for i in members])
            accuracy = np.mean([values[np.argmax(probabilities[i])] == labels[i] for i in members])
            ece += len(members) / len(labels) * abs(accuracy - confidence)
    return ece, counts


def test_reliability_diagram_from_a_real_classifier(client, classifier, tmp_path):
    _, job, X, labels = classifier
    pred = client.predict(job.snapshot_id, X, samples=16, seed=1)
    out = tmp_path / "reliability.png"
    stats = plot.reliability_diagram(pred.probabilities, labels, out,
                                     class_values=pred.class_values, bins=10)
    assert_png(out)
    ece, counts = brute_force_reliability(pred.probabilities, labels, pred.class_values, 10)
    assert stats.ece == pytest.approx(ece, abs=1e-12)
    assert stats.count.tolist() == counts and stats.count.sum() == len(X)


def test_reliability_matches_brute_force_on_random_inputs():
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(300, 3)) * 2
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    probabilities[0] = [1.0, 0.0, 0.0]  # a bin edge
    labels = rng.integers(0, 3, 300).astype(float)
    stats = plot.reliability(probabilities, labels, bins=7)
    ece, counts = brute_force_reliability(probabilities, labels, np.arange(3.0), 7)
    assert stats.ece == pytest.approx(ece, abs=1e-12) and stats.count.tolist() == counts


def test_roc_auroc_equals_mann_whitney_with_ties():
    rng = np.random.default_rng(5)
    scores_in = rng.integers(0, 5, 40).astype(float)
    scores_out = rng.integers(2, 8, 30).astype(float)
    pairs = [(o > i) + 0.5 * (o == i) for o in scores_out for i in scores_in]
    fpr, tpr, auroc = plot.roc(scores_in, scores_out)
    assert auroc == pytest.approx(np.mean(pairs), abs=1e-12)
    assert fpr[0] == tpr[0] == 0 and fpr[-1] == tpr[-1] == 1
    assert plot.roc([0.0], [1.0])[2] == 1.0 and plot.roc([1.0], [0.0])[2] == 0.0


def test_ood_roc_from_real_entropies(client, classifier, tmp_path):
    _, job, X, _ = classifier
    ood = np.random.default_rng(6).uniform(-0.5, 0.5, (40, 2))  # between the blobs
    inside = client.predict(job.snapshot_id, X, samples=16, seed=1)
    outside = client.predict(job.snapshot_id, ood, samples=16, seed=1)
    out = tmp_path / "roc.png"
    auroc = plot.ood_roc(inside.entropy, outside.entropy, out)
    assert auroc == pytest.approx(plot.roc(inside.entropy, outside.entropy)[2])
    assert auroc > 0.7  # the boundary between the blobs is where the classifier is unsure
    assert_png(out)
