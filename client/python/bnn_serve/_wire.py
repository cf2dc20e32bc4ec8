"""Conversions between Python values and the wire messages, in one place.

Rows travel packed: float64 ``Tensor`` s on ``PredictRequest.features``,
``PoolRows.features`` and ``RowChunk.features/targets``, and predictions come
back packed (``PredictRequest.packed_response`` → ``PredictResponse.packed``).
Only :func:`set_feature_rows`, :func:`row_chunks`/:func:`labelled_chunk` and
:func:`prediction_from_response` below touch row messages.

Also here: the stubs' import, the inputs users pass (numpy arrays, lists, a
pandas DataFrame, a CSV path) turned into float64 matrices, and every
response message turned into the dataclasses of ``bnn_serve.types``.
"""

from __future__ import annotations

import csv
import os
from typing import Any, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from bnn_serve import types

try:
    from bnn_serve._proto import bnn_service_pb2 as pb
    from bnn_serve._proto import bnn_service_pb2_grpc as pb_grpc
except ImportError as _error:  # pragma: no cover - depends on the install
    raise ImportError(
        "bnn_serve's gRPC stubs (bnn_serve._proto) are missing. They are "
        "generated from proto/bnn/v1/bnn_service.proto: build the CMake target "
        "bnn_python_stubs and put BUILD/client/python on PYTHONPATH after "
        "client/python, install the package with `pip install "
        "--no-build-isolation client/python`, or run `python3 "
        "client/python/bnn_serve/_gen.py --out client/python`. "
        f"({_error})") from _error

# The stubs, for the client; this module is their one importer.
__all__ = ["pb", "pb_grpc"]

#: Anything that names a CSV file.
PathLike = Union[str, "os.PathLike[str]"]

_TASKS = {"regression": pb.TASK_REGRESSION, "classification": pb.TASK_CLASSIFICATION}
_TASK_NAMES = {pb.TASK_UNSPECIFIED: "unspecified", pb.TASK_REGRESSION: "regression",
               pb.TASK_CLASSIFICATION: "classification"}
_EVENT_KINDS = {pb.JobEvent.KIND_UNSPECIFIED: "unspecified", pb.JobEvent.KIND_CURRENT: "current",
                pb.JobEvent.KIND_PROGRESS: "progress", pb.JobEvent.KIND_STATE: "state"}


# --- inputs -----------------------------------------------------------------

def is_dataframe(value: Any) -> bool:
    """True for a pandas (or pandas-like) DataFrame; pandas is optional."""
    return hasattr(value, "columns") and hasattr(value, "to_numpy")


def as_matrix(values: Any, field: str = "X") -> np.ndarray:
    """A C-contiguous float64 (n, d) matrix; a 1-D input is one feature per row."""
    if is_dataframe(values):
        values = values.to_numpy(dtype=np.float64)
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.ndim == 1:
        matrix = matrix.reshape(-1, 1)
    if matrix.ndim != 2:
        raise ValueError(f"{field}: expected a (rows, features) array, got shape {matrix.shape}")
    return np.ascontiguousarray(matrix)


def task_enum(task: str) -> int:
    try:
        return _TASKS[task]
    except KeyError:
        raise ValueError(f"task: expected one of {sorted(_TASKS)}, got {task!r}") from None


def _column_index(header: Sequence[str], target: Union[str, int], source: str) -> int:
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        index = int(target)
        if not 0 <= index < len(header):
            raise ValueError(f"target: column {index} is outside the {len(header)} columns of {source}")
        return index
    if target not in header:
        raise ValueError(f"target: {source} has no column {target!r} (its columns: {', '.join(header)})")
    return list(header).index(target)


def read_csv(path: PathLike, target: Union[str, int, None]) -> Tuple[np.ndarray, Optional[np.ndarray], list, str]:
    """A CSV file with a header line: (features, targets, feature names, target name).

    ``target`` names the target column or gives its 0-based index; every
    other column is a feature. Without a target, every column is a feature
    and the targets are None. A field that is not a number fails naming its
    line and column.
    """
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration:
            raise ValueError(f"{path}: empty file (expected a header line)") from None
        column = None if target is None else _column_index(header, target, str(path))
        rows = []
        for line_number, record in enumerate(reader, start=2):
            if not record:
                continue
            if len(record) != len(header):
                raise ValueError(f"{path}:{line_number}: {len(record)} fields, the header has {len(header)}")
            try:
                rows.append([float(value) for value in record])
            except ValueError:
                bad = next(i for i, value in enumerate(record) if not _is_float(value))
                raise ValueError(f"{path}:{line_number}: column {header[bad]!r} is not a number: "
                                 f"{record[bad]!r}") from None
    data = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(header))
    if column is None:
        return data, None, header, ""
    features = np.delete(data, column, axis=1)
    names = [name for i, name in enumerate(header) if i != column]
    return np.ascontiguousarray(features), data[:, column].copy(), names, header[column]


def _is_float(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        return False


def labelled_rows(X: Any, y: Any, target: Union[str, int, None]
                  ) -> Tuple[np.ndarray, np.ndarray, list, str]:
    """(features, targets, feature names, target name) from the three input forms.

    * ``X`` an array (n, d) or (n,), ``y`` an array (n,);
    * ``X`` a DataFrame and ``target`` one of its columns (or ``y`` given);
    * ``X`` a CSV path and ``target`` its target column.
    """
    if isinstance(X, (str, os.PathLike)):
        if y is not None:
            raise ValueError("y: a CSV file holds its targets; name the column with target=")
        if target is None:
            raise ValueError(f"target: name the target column of {X} (or give its 0-based index)")
        features, targets, names, target_name = read_csv(X, target)
        return features, targets, names, target_name
    if is_dataframe(X):
        columns = [str(c) for c in X.columns]
        if y is None:
            if target is None:
                raise ValueError("target: name the DataFrame's target column, or pass y")
            name = columns[_column_index(columns, target, "the DataFrame")]
            targets = np.asarray(X[X.columns[columns.index(name)]], dtype=np.float64)
            features = X.drop(columns=[X.columns[columns.index(name)]])
            return (as_matrix(features), targets,
                    [c for c in columns if c != name], name)
        return as_matrix(X), np.asarray(y, dtype=np.float64).reshape(-1), columns, ""
    if y is None:
        raise ValueError("y: the targets are required with an array X")
    features = as_matrix(X)
    targets = np.asarray(y, dtype=np.float64).reshape(-1)
    if targets.shape[0] != features.shape[0]:
        raise ValueError(f"y: {targets.shape[0]} targets for {features.shape[0]} rows of X")
    return features, targets, [], ""


# --- rows on the wire (packed Tensors, docs/api.md "Packed rows") -------------

def tensor(values: np.ndarray) -> "pb.Tensor":
    """A float64 Tensor of ``values``' shape, row-major."""
    array = np.ascontiguousarray(values, dtype=np.float64)
    return pb.Tensor(shape=list(array.shape), f64=array.reshape(-1))


def set_feature_rows(container: Any, X: np.ndarray) -> None:
    """Puts the rows of ``X`` into ``container``, a PredictRequest or PoolRows,
    packed in its ``features`` Tensor ([rows, num_features], float64)."""
    container.features.CopyFrom(tensor(X))


def labelled_chunk(X: np.ndarray, y: np.ndarray) -> "pb.RowChunk":
    """Labelled rows as one packed RowChunk (``features`` and ``targets``)."""
    return pb.RowChunk(features=tensor(X), targets=tensor(np.asarray(y).reshape(-1)))


def row_chunks(X: np.ndarray, y: np.ndarray, chunk_rows: int, chunk_bytes: int
               ) -> Iterator["pb.RowChunk"]:
    """Labelled rows as packed RowChunks of at most ``chunk_rows`` rows and
    about ``chunk_bytes`` bytes (the C++ client's limits)."""
    row_bytes = 8 * X.shape[1] + 8
    per_chunk = max(1, min(chunk_rows, chunk_bytes // row_bytes))
    for begin in range(0, X.shape[0], per_chunk):
        yield labelled_chunk(X[begin:begin + per_chunk], y[begin:begin + per_chunk])


def _tensor_array(t: "pb.Tensor", field: str) -> np.ndarray:
    """A response Tensor (always f64) as a numpy array of its shape."""
    values = np.asarray(t.f64, dtype=np.float64)
    shape = tuple(t.shape)
    if int(np.prod(shape, dtype=np.int64)) != values.size:
        raise ValueError(f"packed.{field}: {values.size} values for shape {list(shape)}")
    return values.reshape(shape)


def prediction_from_response(response: "pb.PredictResponse", quantile_levels: Sequence[float],
                             per_sample: bool) -> types.Prediction:
    """The packed predictions (the request set packed_response) as numpy arrays."""
    packed = response.packed
    class_values = np.asarray(response.class_values, dtype=np.float64)
    common = dict(snapshot_id=response.snapshot_id, model_name=response.model_name,
                  model_version=response.model_version, num_samples=response.num_samples,
                  seed=response.seed, class_values=class_values,
                  quantile_levels=np.asarray(quantile_levels, dtype=np.float64))

    def array(name: str) -> np.ndarray:
        return _tensor_array(getattr(packed, name), name)

    def samples() -> Optional[np.ndarray]:
        # Packed sample-major ([S, n] or [S, n, C]); Prediction is row-major.
        if not per_sample:
            return None
        return np.ascontiguousarray(np.swapaxes(array("sample_outputs"), 0, 1))

    if class_values.size:
        return types.Prediction(
            task="classification", **common,
            probabilities=array("probabilities"), predicted_class=array("predicted_class"),
            entropy=array("entropy"), expected_entropy=array("expected_entropy"),
            mutual_information=array("mutual_information"),
            variation_ratio=array("variation_ratio"), sample_outputs=samples())
    rows = array("mean").shape[0]
    return types.Prediction(
        task="regression", **common,
        mean=array("mean"), variance=array("variance"),
        epistemic_variance=array("epistemic_variance"),
        aleatoric_variance=array("aleatoric_variance"),
        quantiles=(array("quantiles") if quantile_levels
                   else np.empty((rows, 0), dtype=np.float64)),
        sample_outputs=samples())


def evaluation(m: "pb.EvaluateResponse") -> types.Evaluation:
    """An EvaluateResponse; the scores its task lacks are None."""
    def optional(name: str) -> Optional[float]:
        return getattr(m, name) if m.HasField(name) else None

    bins = m.reliability
    return types.Evaluation(
        snapshot_id=m.snapshot_id, model_name=m.model_name, model_version=m.model_version,
        num_samples=m.num_samples, seed=m.seed, task=_TASK_NAMES.get(m.task, str(m.task)),
        num_rows=m.num_rows, rmse=optional("rmse"), log_likelihood=optional("log_likelihood"),
        nll=optional("nll"), accuracy=optional("accuracy"), brier=optional("brier"),
        ece=optional("ece"),
        reliability=types.Reliability(
            ece=m.ece if m.HasField("ece") else float("nan"),
            lower=np.asarray([b.lower for b in bins], dtype=np.float64),
            upper=np.asarray([b.upper for b in bins], dtype=np.float64),
            count=np.asarray([b.count for b in bins], dtype=np.int64),
            mean_confidence=np.asarray([b.mean_confidence for b in bins], dtype=np.float64),
            accuracy=np.asarray([b.accuracy for b in bins], dtype=np.float64)) if bins else None,
        auroc_entropy=optional("auroc_entropy"),
        auroc_mutual_information=optional("auroc_mutual_information"), ood_rows=m.ood_rows)


# --- responses as dataclasses --------------------------------------------------

def dataset_info(m: "pb.DatasetInfo") -> types.DatasetInfo:
    return types.DatasetInfo(
        dataset_id=m.dataset_id, name=m.name, task=_TASK_NAMES.get(m.task, str(m.task)),
        num_rows=m.num_rows, num_features=m.num_features, num_classes=m.num_classes,
        class_values=tuple(m.class_values), version=m.version, hash=m.hash,
        created_unix_ms=m.created_unix_ms, feature_names=tuple(m.feature_names),
        target_name=m.target_name)


def job_state(value: int) -> types.JobState:
    name = pb.JobState.Name(value)[len("JOB_STATE_"):].lower()
    return types.JobState(name)


def job_state_enum(state: Union[str, types.JobState]) -> int:
    name = types.JobState(state).value.upper()
    return pb.JobState.Value("JOB_STATE_" + name)


def job(m: "pb.Job") -> types.Job:
    return types.Job(
        job_id=m.job_id, state=job_state(m.state), dataset_id=m.dataset_id,
        dataset_version=m.dataset_version, method=m.method, params=dict(m.params),
        progress=m.progress, epoch=m.epoch, step=m.step, total_steps=m.total_steps,
        last_loss=m.last_loss, snapshot_id=m.snapshot_id, error=m.error,
        created_unix_ms=m.created_unix_ms, started_unix_ms=m.started_unix_ms,
        finished_unix_ms=m.finished_unix_ms, model_name=m.model_name, publish=m.publish,
        loss_curve=tuple(types.LossPoint(p.step, p.loss) for p in m.loss_curve))


def job_event(m: "pb.JobEvent") -> types.JobEvent:
    return types.JobEvent(
        kind=_EVENT_KINDS.get(m.kind, str(m.kind)), state=job_state(m.state), epoch=m.epoch,
        step=m.step, total_steps=m.total_steps, loss=m.loss,
        steps_per_second=m.steps_per_second, eta_seconds=m.eta_seconds, unix_ms=m.unix_ms,
        error=m.error, snapshot_id=m.snapshot_id)


def snapshot_info(m: "pb.SnapshotInfo") -> types.SnapshotInfo:
    return types.SnapshotInfo(
        snapshot_id=m.snapshot_id, method=m.method, params=dict(m.params),
        dataset_id=m.dataset_id, dataset_version=m.dataset_version,
        dataset_hash=m.dataset_hash, task=_TASK_NAMES.get(m.task, str(m.task)),
        model=types.ModelSpec(tuple(m.model.hidden_sizes), tuple(m.model.activations)),
        num_features=m.num_features, num_parameters=m.num_parameters,
        posterior_family=m.posterior_family, steps=m.steps, epochs=m.epochs,
        final_loss=m.final_loss, train_seconds=m.train_seconds, seed=m.seed,
        created_unix_ms=m.created_unix_ms, size_bytes=m.size_bytes,
        format_version=m.format_version, library_version=m.library_version,
        parent_snapshot_id=m.parent_snapshot_id, prior_from_parent=m.prior_from_parent,
        class_values=tuple(m.class_values), job_id=m.job_id)


def model_version(m: "pb.ModelVersion") -> types.ModelVersion:
    return types.ModelVersion(model_name=m.model_name, version=m.version,
                              snapshot_id=m.snapshot_id, created_unix_ms=m.created_unix_ms,
                              aliases=tuple(m.aliases))


def model_info(m: "pb.ModelInfo") -> types.ModelInfo:
    return types.ModelInfo(
        name=m.name, versions=tuple(model_version(v) for v in m.versions),
        aliases=dict(m.aliases), num_versions=m.num_versions,
        latest_version=m.latest_version, created_unix_ms=m.created_unix_ms,
        updated_unix_ms=m.updated_unix_ms)


def method_info(m: "pb.MethodInfo") -> types.MethodInfo:
    return types.MethodInfo(
        name=m.name, description=m.description,
        params=tuple(types.MethodParam(p.name, p.type, p.default_value, p.help)
                     for p in m.params))

