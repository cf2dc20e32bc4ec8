"""Typed results of the client's calls (dataclasses built from the wire messages)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import numpy as np


class JobState(str, enum.Enum):
    """A training job's state (the wire's JobState without its prefix)."""
    UNSPECIFIED = "unspecified"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: Stopped by a server shutdown or crash; resumes when the server runs again.
    INTERRUPTED = "interrupted"
    #: CancelJob on a running job: it stops when its current step ends.
    CANCELLING = "cancelling"

    @property
    def terminal(self) -> bool:
        """True for the states a job never leaves."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class TlsConfig:
    """TLS for the channel: PEM file paths.

    Attributes:
      ca: certificate authorities to trust; None = the system's roots.
      cert: the client's certificate chain, for a server that asks for one
        (--tls-client-ca); needs ``key``.
      key: the private key of ``cert``.
    """
    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None


@dataclass(frozen=True)
class DatasetInfo:
    """A stored dataset version."""
    dataset_id: str
    name: str
    task: str  # "regression" or "classification"
    num_rows: int
    num_features: int
    num_classes: int
    class_values: Tuple[float, ...]
    version: int
    hash: str
    created_unix_ms: int
    feature_names: Tuple[str, ...]
    target_name: str


@dataclass(frozen=True)
class LossPoint:
    """One point of a job's loss curve: the mean loss after ``step`` steps."""
    step: int
    loss: float


@dataclass(frozen=True)
class Job:
    """A training job as the server reports it (GetJob, ListJobs, CancelJob)."""
    job_id: str
    state: JobState
    dataset_id: str
    dataset_version: int
    method: str
    params: Dict[str, str]
    progress: float
    epoch: int
    step: int
    total_steps: int
    last_loss: float
    snapshot_id: str  # set once SUCCEEDED
    error: str  # set once FAILED
    created_unix_ms: int
    started_unix_ms: int
    finished_unix_ms: int
    model_name: str
    publish: bool
    loss_curve: Tuple[LossPoint, ...]

    @property
    def succeeded(self) -> bool:
        return self.state is JobState.SUCCEEDED


@dataclass(frozen=True)
class JobEvent:
    """One event of WatchJob: ``kind`` is "current", "progress" or "state"."""
    kind: str
    state: JobState
    epoch: int
    step: int
    total_steps: int
    loss: float
    steps_per_second: float
    eta_seconds: float
    unix_ms: int
    error: str
    snapshot_id: str


@dataclass(frozen=True)
class Prediction:
    """Predictive distributions for n rows, as numpy arrays.

    Regression fills ``mean``, ``variance`` (= epistemic + aleatoric),
    ``epistemic_variance`` (variance of the sampled means) and
    ``aleatoric_variance`` (the likelihood's noise), shape (n,), in the
    target's units, and ``quantiles`` (n, Q) for ``quantile_levels``.
    Classification fills ``probabilities`` (n, C; columns in the order of
    ``class_values``), ``predicted_class`` (label values), ``entropy``,
    ``expected_entropy``, ``mutual_information`` (BALD) and
    ``variation_ratio``, shape (n,), in nats. The other task's fields are
    None. ``sample_outputs`` (only with ``per_sample=True``) is (n, S) for
    regression and (n, S, C) for classification.
    """
    snapshot_id: str
    model_name: str
    model_version: int
    num_samples: int
    seed: int
    task: str
    class_values: np.ndarray
    quantile_levels: np.ndarray
    mean: Optional[np.ndarray] = None
    variance: Optional[np.ndarray] = None
    epistemic_variance: Optional[np.ndarray] = None
    aleatoric_variance: Optional[np.ndarray] = None
    quantiles: Optional[np.ndarray] = None
    probabilities: Optional[np.ndarray] = None
    predicted_class: Optional[np.ndarray] = None
    entropy: Optional[np.ndarray] = None
    expected_entropy: Optional[np.ndarray] = None
    mutual_information: Optional[np.ndarray] = None
    variation_ratio: Optional[np.ndarray] = None
    sample_outputs: Optional[np.ndarray] = None

    @property
    def std(self) -> Optional[np.ndarray]:
        """Regression: the predictive standard deviation, sqrt(variance)."""
        return None if self.variance is None else np.sqrt(self.variance)

    def __len__(self) -> int:
        first = self.mean if self.mean is not None else self.probabilities
        return 0 if first is None else int(first.shape[0])


@dataclass(frozen=True)
class Acquisition:
    """The pool rows an acquisition heuristic chose, best first."""
    indices: np.ndarray  # int64, 0-based pool row indices
    scores: np.ndarray
    pool_rows: int
    seed: int
    snapshot_id: str
    model_name: str
    model_version: int


@dataclass(frozen=True)
class ModelSpec:
    """A network: hidden layer widths and their activations."""
    hidden_sizes: Tuple[int, ...]
    activations: Tuple[str, ...]


@dataclass(frozen=True)
class SnapshotInfo:
    """A stored posterior snapshot."""
    snapshot_id: str
    method: str
    params: Dict[str, str]
    dataset_id: str
    dataset_version: int
    dataset_hash: str
    task: str
    model: ModelSpec
    num_features: int
    num_parameters: int
    posterior_family: str
    steps: int
    epochs: int
    final_loss: float
    train_seconds: float
    seed: int
    created_unix_ms: int
    size_bytes: int
    format_version: int
    library_version: str
    parent_snapshot_id: str
    prior_from_parent: bool
    class_values: Tuple[float, ...]
    job_id: str


@dataclass(frozen=True)
class ExportedSnapshot:
    """What ``Client.export`` sent: the snapshot and, for a model reference,
    the version it resolved to; ``data`` holds the bytes unless they went to
    ``path``."""
    snapshot_id: str
    model_name: str
    model_version: int
    size_bytes: int
    path: Optional[str] = None
    data: Optional[bytes] = None


@dataclass(frozen=True)
class ModelVersion:
    """A snapshot published under a model name."""
    model_name: str
    version: int
    snapshot_id: str
    created_unix_ms: int
    aliases: Tuple[str, ...]


@dataclass(frozen=True)
class ModelInfo:
    """A named model; ``versions`` is empty in ``Client.models()`` listings."""
    name: str
    versions: Tuple[ModelVersion, ...]
    aliases: Dict[str, int]
    num_versions: int
    latest_version: int
    created_unix_ms: int
    updated_unix_ms: int


@dataclass(frozen=True)
class MethodParam:
    name: str
    type: str
    default_value: str
    help: str


@dataclass(frozen=True)
class MethodInfo:
    """A registered inference method and its parameters."""
    name: str
    description: str
    params: Tuple[MethodParam, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Reliability:
    """Calibration of a classifier over equal-width top-class confidence bins.

    Bin b is (lower[b], upper[b]] (confidence 0 joins the first bin);
    ``mean_confidence`` and ``accuracy`` are 0 for an empty bin. ``ece`` is
    sum_b count[b] / n * |accuracy[b] - mean_confidence[b]|.
    """
    ece: float
    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    mean_confidence: np.ndarray
    accuracy: np.ndarray


@dataclass(frozen=True)
class Evaluation:
    """A model's scores on labelled rows (Evaluate; docs/api.md).

    Regression fills ``rmse``, ``log_likelihood`` (the Monte Carlo mixture's
    mean test log-likelihood) and ``nll`` (= -log_likelihood), in the
    target's units. Classification fills ``nll`` (of the MC-averaged
    probabilities), ``accuracy``, ``brier``, ``ece`` and ``reliability``
    (the ECE's bins, for ``bnn_serve.plot.reliability_diagram``), and with
    OOD rows ``auroc_entropy`` and ``auroc_mutual_information``. The other
    task's scores are None.
    """
    snapshot_id: str
    model_name: str
    model_version: int
    num_samples: int
    seed: int
    task: str
    num_rows: int
    rmse: Optional[float] = None
    log_likelihood: Optional[float] = None
    nll: Optional[float] = None
    accuracy: Optional[float] = None
    brier: Optional[float] = None
    ece: Optional[float] = None
    reliability: Optional[Reliability] = None
    auroc_entropy: Optional[float] = None
    auroc_mutual_information: Optional[float] = None
    ood_rows: int = 0
