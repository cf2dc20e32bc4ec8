"""``Client``: every bnn.v1 RPC as a typed Python method.

Model references are taken as the server takes them: a string that is a
snapshot id (``snap-`` and 16 hex digits) names a snapshot, any other string
is a model reference, ``NAME`` (its latest version), ``NAME@ALIAS`` or
``NAME:VERSION`` (docs/api.md, "Model references"). A model whose name looks
like a snapshot id is reached as ``NAME@latest``. ``SnapshotInfo``, ``Job``
(its snapshot) and ``ModelVersion`` objects are accepted too.

Streams are chunked like the C++ client (client/bnn_client.cc): uploads and
appends send RowChunks of at most ``chunk_rows`` rows and about
``chunk_bytes`` bytes, imports SnapshotChunks of ``chunk_bytes`` bytes;
exports are written to ``PATH.partial`` and renamed only once complete.
"""

from __future__ import annotations

import math
import os
import re
import time
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Union

import grpc
import numpy as np

from bnn_serve import _wire
from bnn_serve._wire import pb, pb_grpc
from bnn_serve.errors import BnnError, DeadlineExceededError, from_rpc_error
from bnn_serve.progress import Progress, ProgressOption
from bnn_serve.types import (Acquisition, DatasetInfo, Evaluation, ExportedSnapshot, Job,
                             JobState, MethodInfo, ModelInfo, ModelVersion, Prediction, SnapshotInfo,
                             TlsConfig)

_SNAPSHOT_ID = re.compile(r"snap-[0-9a-f]{16}")
#: What names a snapshot to answer Predict, Acquire and ExportSnapshot.
Target = Union[str, SnapshotInfo, ModelVersion, Job]
# ListJobs and ListModels take at most this many per page.
_MAX_PAGE_SIZE = 1000


def _param_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


class Client:
    """A connection to one bnn-server.

    Every call raises a :class:`bnn_serve.BnnError` subclass on failure and
    has a deadline (``timeout`` seconds, or the call's own ``timeout=``),
    which covers the whole stream of the streaming calls. Use it as a
    context manager, or call :meth:`close`.
    """

    def __init__(self, address: str, token: Optional[str] = None,
                 tls: Optional[TlsConfig] = None, *, timeout: float = 30.0,
                 chunk_rows: int = 4096, chunk_bytes: int = 1 << 20,
                 max_receive_bytes: int = 256 << 20) -> None:
        """
        Args:
          address: ``HOST:PORT`` of the server.
          token: a bearer token for a server with --token-file, sent as
            ``authorization: Bearer TOKEN`` on every call.
          tls: TLS files; None = plaintext (as bnn-server without --tls-cert).
          timeout: seconds each call may take (default 30, as bnnctl's).
          chunk_rows: most rows per RowChunk of an upload or append.
          chunk_bytes: about this many bytes per RowChunk, and exactly this
            many per SnapshotChunk of an import (the last is shorter).
          max_receive_bytes: largest response message accepted (a Predict of
            many rows with per-sample outputs is large).
        """
        if not address:
            raise ValueError("address: must be HOST:PORT, got ''")
        if not timeout > 0:
            raise ValueError(f"timeout: must be > 0, got {timeout}")
        if chunk_rows < 1 or chunk_bytes < 1 or max_receive_bytes < 1:
            raise ValueError("chunk_rows, chunk_bytes, max_receive_bytes: must be >= 1")
        if token is not None and not re.fullmatch(r"[\x21-\x7e]+", token):
            raise ValueError("token: must be printable ASCII without spaces")
        self.address = address
        self._timeout = float(timeout)
        self._chunk_rows = chunk_rows
        self._chunk_bytes = chunk_bytes
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        options = [("grpc.max_receive_message_length", max_receive_bytes)]
        if tls is None:
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            if (tls.cert is None) != (tls.key is None):
                raise ValueError("tls: give both cert and key (the client's certificate chain "
                                 "and its private key) or neither")

            def read(path: Optional[str]) -> Optional[bytes]:
                if path is None:
                    return None
                with open(path, "rb") as handle:
                    return handle.read()

            credentials = grpc.ssl_channel_credentials(
                root_certificates=read(tls.ca), private_key=read(tls.key),
                certificate_chain=read(tls.cert))
            self._channel = grpc.secure_channel(address, credentials, options=options)
        self._stub = pb_grpc.BnnServiceStub(self._channel)

    # --- plumbing ---------------------------------------------------------

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _deadline(self, timeout: Optional[float]) -> float:
        return self._timeout if timeout is None else float(timeout)

    def _unary(self, rpc: Any, request: Any, timeout: Optional[float] = None) -> Any:
        try:
            return rpc(request, timeout=self._deadline(timeout), metadata=self._metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    @staticmethod
    def _snapshot_id(value: Target, field: str) -> str:
        """The snapshot a value names, for fields that take only a snapshot."""
        if isinstance(value, (SnapshotInfo, Job, ModelVersion)):
            return value.snapshot_id
        if isinstance(value, str) and _SNAPSHOT_ID.fullmatch(value):
            return value
        raise ValueError(f"{field}: expected a snapshot id, SnapshotInfo, Job or ModelVersion, "
                         f"got {value!r}")

    @staticmethod
    def _set_target(request: Any, target: Target) -> None:
        if isinstance(target, SnapshotInfo):
            request.snapshot_id = target.snapshot_id
        elif isinstance(target, Job):
            request.snapshot_id = target.snapshot_id
        elif isinstance(target, ModelVersion):
            request.model = f"{target.model_name}:{target.version}"
        elif isinstance(target, str) and _SNAPSHOT_ID.fullmatch(target):
            request.snapshot_id = target
        elif isinstance(target, str):
            request.model = target
        else:
            raise TypeError(f"target: expected a snapshot id or model reference, got {target!r}")

    # --- datasets ---------------------------------------------------------

    def upload(self, X: Any, y: Any = None, *, name: str, task: str = "regression",
               target: Union[str, int, None] = None,
               feature_names: Optional[Sequence[str]] = None,
               target_name: Optional[str] = None, timeout: Optional[float] = None) -> DatasetInfo:
        """Uploads a labelled dataset (UploadDataset, chunked) and returns it.

        Args:
          X: features, (n, d) or (n,) array-like; or a pandas DataFrame
            (``target`` names its target column, or pass ``y``); or the path
            of a CSV file with a header line (``target`` names or indexes
            its target column; every other column is a feature).
          y: targets (n,): regression values or class labels (any numbers).
          name: the dataset's name, unique on the server.
          task: "regression" or "classification".
          feature_names, target_name: stored names; by default the
            DataFrame's or CSV's column names.
        """
        features, targets, names, tname = _wire.labelled_rows(X, y, target)
        header = pb.DatasetHeader(name=name, task=_wire.task_enum(task),
                                  num_features=features.shape[1],
                                  feature_names=list(feature_names or names),
                                  target_name=target_name if target_name is not None else tname)
        requests = self._row_stream(pb.UploadDatasetRequest(header=header), pb.UploadDatasetRequest,
                                    features, targets)
        response = self._client_stream(self._stub.UploadDataset, requests, timeout)
        return _wire.dataset_info(response.dataset)

    def append(self, dataset: str, X: Any, y: Any = None, *,
               target: Union[str, int, None] = None, expected_version: Optional[int] = None,
               timeout: Optional[float] = None) -> DatasetInfo:
        """Appends labelled rows (AppendRows, chunked), creating the next version.

        ``X``/``y``/``target`` as in :meth:`upload`. With ``expected_version``
        the append fails (FailedPreconditionError) unless that version is
        still the latest.
        """
        features, targets, _, _ = _wire.labelled_rows(X, y, target)
        header = pb.AppendHeader(dataset_id=dataset)
        if expected_version is not None:
            header.expected_version = expected_version
        requests = self._row_stream(pb.AppendRowsRequest(header=header), pb.AppendRowsRequest,
                                    features, targets)
        return _wire.dataset_info(self._client_stream(self._stub.AppendRows, requests, timeout))

    def _row_stream(self, first: Any, request_type: Any, features: np.ndarray,
                    targets: np.ndarray) -> Iterator[Any]:
        yield first
        for chunk in _wire.row_chunks(features, targets, self._chunk_rows, self._chunk_bytes):
            yield request_type(chunk=chunk)

    def _client_stream(self, rpc: Any, requests: Iterator[Any], timeout: Optional[float]) -> Any:
        try:
            return rpc(requests, timeout=self._deadline(timeout), metadata=self._metadata)
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    def dataset(self, dataset: str, version: Optional[int] = None) -> DatasetInfo:
        """A dataset (by id or name), its latest version unless ``version``."""
        request = pb.GetDatasetRequest(dataset_id=dataset)
        if version is not None:
            request.version = version
        return _wire.dataset_info(self._unary(self._stub.GetDataset, request))

    def datasets(self) -> List[DatasetInfo]:
        """Every stored dataset (latest versions)."""
        response = self._unary(self._stub.ListDatasets, pb.ListDatasetsRequest())
        return [_wire.dataset_info(d) for d in response.datasets]

    def delete_dataset(self, dataset: str, force: bool = False) -> str:
        """Deletes every version of a dataset; returns its id. Refused while
        snapshots or queued/running jobs use it, unless ``force``."""
        response = self._unary(self._stub.DeleteDataset,
                               pb.DeleteDatasetRequest(dataset_id=dataset, force=force))
        return response.dataset_id

    # --- training ---------------------------------------------------------

    def train(self, dataset: str, method: str = "slang", *,
              hidden: Union[int, Sequence[int]] = (), activations: Union[str, Sequence[str]] = (),
              epochs: Optional[int] = None, seed: Optional[int] = None,
              dataset_version: Optional[int] = None, parent: Optional[Target] = None,
              prior_from_parent: bool = False, model_name: Optional[str] = None,
              publish: bool = False, wait: bool = True, progress: ProgressOption = True,
              timeout: Optional[float] = None, **params: Any) -> Job:
        """Starts a training job (StartTraining) and, with ``wait``, follows it to its end.

        Args:
          dataset: dataset id or name.
          method: a registered method (see :meth:`methods`).
          hidden: hidden layer widths (an int for one layer); empty = linear
            or logistic regression. With ``parent``, leave it empty.
          activations: one for all layers or one per layer ("relu", "tanh",
            "leaky_tanh", "identity"); empty = relu.
          epochs, seed, dataset_version: as StartTrainingRequest's.
          parent: a snapshot (or Job, or SnapshotInfo) to warm-start from.
          prior_from_parent: use the parent's posterior as the prior.
          model_name, publish: file the job under a model name and, with
            ``publish``, publish its snapshot there when it succeeds.
          wait: follow the job with WatchJob until it ends (reconnecting with
            ``after_step`` if the server restarts) and return it then; else
            return it as queued.
          progress: see :mod:`bnn_serve.progress`.
          timeout: with ``wait``, seconds to wait for the job (None = no limit).
          **params: method parameters by name (``rank=1, learning_rate=0.1``),
            sent as strings; unknown names are rejected by the server.

        Returns the job; with ``wait`` it is in a final state (check
        ``job.succeeded``: a failed job is returned, not raised).
        """
        request = pb.StartTrainingRequest(dataset_id=dataset, method=method,
                                          prior_from_parent=prior_from_parent,
                                          model_name=model_name or "", publish=publish)
        request.model.hidden_sizes.extend([hidden] if isinstance(hidden, int) else list(hidden))
        request.model.activations.extend(
            [activations] if isinstance(activations, str) else list(activations))
        for key, value in params.items():
            request.params[key] = _param_value(value)
        if epochs is not None:
            request.epochs = epochs
        if seed is not None:
            request.seed = seed
        if dataset_version is not None:
            request.dataset_version = dataset_version
        if parent is not None:
            request.parent_snapshot_id = self._snapshot_id(parent, "parent")
        job_id = self._unary(self._stub.StartTraining, request).job_id
        if not wait:
            return self.job(job_id)
        return self.wait(job_id, progress=progress, timeout=timeout)

    def wait(self, job_id: str, *, progress: ProgressOption = True,
             timeout: Optional[float] = None, reconnect_delay: float = 0.5) -> Job:
        """Follows a job with WatchJob until it is SUCCEEDED, FAILED or CANCELLED.

        While the server is unavailable (restarting) it reconnects every
        ``reconnect_delay`` seconds, asking only for steps after the last one
        it saw. Returns the job (GetJob) once it ended; raises
        DeadlineExceededError if it has not within ``timeout`` seconds.
        """
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        last_step: Optional[int] = None
        with Progress(job_id, progress) as display:
            while True:
                request = pb.WatchJobRequest(job_id=job_id)
                if last_step is not None:
                    request.after_step = last_step
                remaining = deadline - time.monotonic()
                done = False
                try:
                    for message in self._stub.WatchJob(
                            request, timeout=None if math.isinf(remaining) else max(remaining, 0.001),
                            metadata=self._metadata):
                        event = _wire.job_event(message)
                        if event.kind == "progress":
                            last_step = event.step
                        elif event.state.terminal:
                            done = True
                        display.update(event)
                except grpc.RpcError as error:
                    code = error.code()
                    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                        raise DeadlineExceededError(
                            f"job {job_id} did not finish within {timeout} s") from None
                    if code != grpc.StatusCode.UNAVAILABLE:
                        raise from_rpc_error(error) from None
                if done:
                    return self.job(job_id)
                if time.monotonic() + reconnect_delay >= deadline:
                    raise DeadlineExceededError(f"job {job_id} did not finish within {timeout} s "
                                                "(the server was unavailable)")
                time.sleep(reconnect_delay)

    def job(self, job_id: str) -> Job:
        """A job, with its loss curve."""
        return _wire.job(self._unary(self._stub.GetJob, pb.GetJobRequest(job_id=job_id)))

    def cancel(self, job_id: str) -> Job:
        """Cancels a job: a queued one at once, a running one after its current step."""
        return _wire.job(self._unary(self._stub.CancelJob, pb.CancelJobRequest(job_id=job_id)))

    def jobs(self, *, states: Iterable[Union[str, JobState]] = (), dataset: str = "",
             method: str = "", model: str = "", limit: int = 100) -> List[Job]:
        """Jobs, newest first, at most ``limit`` (paging through ListJobs).

        ``states`` ("queued", "running", ...), ``dataset``, ``method`` and
        ``model`` filter; empty = any. Listed jobs carry no loss curve.
        """
        request = pb.ListJobsRequest(states=[_wire.job_state_enum(s) for s in states],
                                     dataset_id=dataset, method=method, model_name=model)
        jobs: List[Job] = []
        while len(jobs) < limit:
            request.page_size = min(_MAX_PAGE_SIZE, limit - len(jobs))
            page = self._unary(self._stub.ListJobs, request)
            jobs.extend(_wire.job(j) for j in page.jobs)
            if not page.next_page_token:
                break
            request.page_token = page.next_page_token
        return jobs

    def methods(self) -> List[MethodInfo]:
        """The registered inference methods and their parameters."""
        response = self._unary(self._stub.ListMethods, pb.ListMethodsRequest())
        return [_wire.method_info(m) for m in response.methods]

    # --- inference ----------------------------------------------------------

    def predict(self, target: Target, X: Any, *, samples: int = 0, seed: Optional[int] = None,
                quantiles: Sequence[float] = (), linearized: bool = False,
                per_sample: bool = False, timeout: Optional[float] = None) -> Prediction:
        """Predictive distributions for the rows of ``X`` (Predict).

        Args:
          target: a snapshot id or model reference (module docstring).
          X: (n, d) or (n,) array-like, or a DataFrame of feature columns.
          samples: posterior samples S (0 = the server's default, 64).
          seed: the same seed, S and rows give bitwise-identical outputs.
          quantiles: regression: predictive quantile levels in (0, 1).
          linearized: regression: the linearised (GLM) predictive.
          per_sample: also return every sample's output.
        """
        request = pb.PredictRequest(num_samples=samples, linearized=linearized,
                                    quantiles=list(quantiles), per_sample=per_sample)
        self._set_target(request, target)
        if seed is not None:
            request.seed = seed
        _wire.set_feature_rows(request, _wire.as_matrix(X))
        request.packed_response = True
        response = self._unary(self._stub.Predict, request, timeout)
        return _wire.prediction_from_response(response, list(quantiles), per_sample)

    def acquire(self, target: Target, pool: Any, *, k: int = 1,
                heuristic: str = "max_variance", samples: int = 0, seed: Optional[int] = None,
                diversity_power: float = 0.0, dataset_version: Optional[int] = None,
                timeout: Optional[float] = None) -> Acquisition:
        """The ``k`` pool rows ``heuristic`` scores highest (Acquire), best first.

        Args:
          pool: feature rows (array-like or DataFrame), or a dataset id or
            name (its targets are ignored; ``dataset_version`` picks a version).
          heuristic: "max_variance" (regression), "entropy", "bald", "margin"
            (classification) or "random".
          diversity_power: > 0 draws the batch with probability proportional
            to score**power instead of the top k.
        """
        request = pb.AcquireRequest(k=k, heuristic=heuristic, num_samples=samples,
                                    diversity_power=diversity_power)
        self._set_target(request, target)
        if seed is not None:
            request.seed = seed
        if isinstance(pool, str):
            request.dataset_id = pool
            if dataset_version is not None:
                request.dataset_version = dataset_version
        else:
            _wire.set_feature_rows(request.rows, _wire.as_matrix(pool, "pool"))
        response = self._unary(self._stub.Acquire, request, timeout)
        return Acquisition(indices=np.asarray(response.indices, dtype=np.int64),
                           scores=np.asarray(response.scores, dtype=np.float64),
                           pool_rows=response.pool_rows, seed=response.seed,
                           snapshot_id=response.snapshot_id, model_name=response.model_name,
                           model_version=response.model_version)

    def evaluate(self, target: Target, X: Any = None, y: Any = None, *,
                 dataset: Optional[str] = None, dataset_version: Optional[int] = None,
                 label: Union[str, int, None] = None, ood: Any = None,
                 ood_version: Optional[int] = None, samples: int = 0,
                 seed: Optional[int] = None, bins: int = 0,
                 timeout: Optional[float] = None) -> Evaluation:
        """The model's scores on labelled rows (Evaluate): RMSE and test
        log-likelihood (regression); NLL, accuracy, Brier, ECE and its
        reliability bins (classification).

        Args:
          target: a snapshot id or model reference (module docstring).
          X, y: the labelled rows, as in :meth:`upload` (``label`` names the
            target column of a DataFrame or CSV file); or instead
          dataset: a stored dataset's id or name (``dataset_version`` picks
            a version).
          ood: classifiers: out-of-distribution rows (array-like or
            DataFrame of features) or a stored dataset's id or name (its
            targets are ignored; ``ood_version`` picks a version); adds the
            AUROC of entropy and of mutual information.
          samples: posterior samples S (0 = 64); seed: the same seed gives
            the same scores (and the same draw as :meth:`predict`).
          bins: confidence bins of the ECE (0 = 15).
        """
        request = pb.EvaluateRequest(num_samples=samples, ece_bins=bins)
        self._set_target(request, target)
        if seed is not None:
            request.seed = seed
        if dataset is not None:
            if X is not None or y is not None:
                raise ValueError("dataset: give either a stored dataset or rows X (and y), not both")
            request.dataset_id = dataset
            if dataset_version is not None:
                request.dataset_version = dataset_version
        elif X is None:
            raise ValueError("X: the labelled rows (X and y) or dataset= are required")
        else:
            features, targets, _, _ = _wire.labelled_rows(X, y, label)
            request.rows.CopyFrom(_wire.labelled_chunk(features, targets))
        if isinstance(ood, str):
            request.ood_dataset_id = ood
            if ood_version is not None:
                request.ood_dataset_version = ood_version
        elif ood is not None:
            _wire.set_feature_rows(request.ood_rows, _wire.as_matrix(ood, "ood"))
        return _wire.evaluation(self._unary(self._stub.Evaluate, request, timeout))

    # --- snapshots ------------------------------------------------------------

    def snapshots(self, dataset: str = "") -> List[SnapshotInfo]:
        """Every snapshot, oldest first; only those trained on ``dataset`` if given."""
        response = self._unary(self._stub.ListSnapshots, pb.ListSnapshotsRequest(dataset_id=dataset))
        return [_wire.snapshot_info(s) for s in response.snapshots]

    def snapshot(self, snapshot_id: str) -> SnapshotInfo:
        return _wire.snapshot_info(
            self._unary(self._stub.GetSnapshot, pb.GetSnapshotRequest(snapshot_id=snapshot_id)))

    def delete_snapshot(self, snapshot_id: str, force: bool = False) -> None:
        """Deletes a snapshot; refused while model versions point at it unless
        ``force`` (which removes those versions)."""
        self._unary(self._stub.DeleteSnapshot,
                    pb.DeleteSnapshotRequest(snapshot_id=snapshot_id, force=force))

    def export(self, target: Target, path: Union[str, "os.PathLike[str]", None] = None, *,
               timeout: Optional[float] = None) -> ExportedSnapshot:
        """Downloads a snapshot file (ExportSnapshot, streamed in chunks).

        With ``path`` the bytes go to ``PATH.partial``, renamed to ``path``
        once complete (removed on failure); without it they are returned in
        ``ExportedSnapshot.data``.
        """
        request = pb.ExportSnapshotRequest()
        self._set_target(request, target)
        first: Optional[Any] = None
        size = 0
        partial = None if path is None else os.fspath(path) + ".partial"
        parts: List[bytes] = []
        handle = None if partial is None else open(partial, "wb")
        try:
            for chunk in self._stub.ExportSnapshot(request, timeout=self._deadline(timeout),
                                                   metadata=self._metadata):
                if first is None:
                    first = chunk
                size += len(chunk.data)
                if handle is not None:
                    handle.write(chunk.data)
                else:
                    parts.append(chunk.data)
            if handle is not None:
                handle.close()
                os.replace(partial, os.fspath(path))
        except BaseException as error:
            if handle is not None:
                handle.close()
                os.remove(partial)
            if isinstance(error, grpc.RpcError):
                raise from_rpc_error(error) from None
            raise
        if first is None:
            raise BnnError("ExportSnapshot sent no chunk", grpc.StatusCode.DATA_LOSS)
        return ExportedSnapshot(snapshot_id=first.snapshot_id, model_name=first.model_name,
                                model_version=first.model_version, size_bytes=size,
                                path=None if path is None else os.fspath(path),
                                data=None if path is not None else b"".join(parts))

    def import_(self, source: Union[bytes, str, "os.PathLike[str]"], *,
                timeout: Optional[float] = None) -> SnapshotInfo:
        """Uploads a snapshot file (ImportSnapshot, in ``chunk_bytes`` chunks)
        from bytes or a path, stored under a new id; returns it."""

        def chunks() -> Iterator[Any]:
            if isinstance(source, (bytes, bytearray, memoryview)):
                data = bytes(source)
                for begin in range(0, len(data), self._chunk_bytes):
                    yield pb.SnapshotChunk(data=data[begin:begin + self._chunk_bytes])
                return
            with open(source, "rb") as handle:
                while True:
                    data = handle.read(self._chunk_bytes)
                    if not data:
                        return
                    yield pb.SnapshotChunk(data=data)

        return _wire.snapshot_info(self._client_stream(self._stub.ImportSnapshot, chunks(), timeout))

    # --- named models -------------------------------------------------------

    def publish(self, snapshot: Target, model: str, aliases: Sequence[str] = ()) -> ModelVersion:
        """Publishes a snapshot as the next version of ``model`` and points
        ``aliases`` (and ``latest``) at it."""
        request = pb.PublishModelRequest(name=model,
                                         snapshot_id=self._snapshot_id(snapshot, "snapshot"),
                                         aliases=list(aliases))
        return _wire.model_version(self._unary(self._stub.PublishModel, request))

    def models(self) -> List[ModelInfo]:
        """Every model by name (without versions; see :meth:`model`)."""
        request = pb.ListModelsRequest(page_size=_MAX_PAGE_SIZE)
        models: List[ModelInfo] = []
        while True:
            page = self._unary(self._stub.ListModels, request)
            models.extend(_wire.model_info(m) for m in page.models)
            if not page.next_page_token:
                return models
            request.page_token = page.next_page_token

    def model(self, name: str) -> ModelInfo:
        """A model with every version and alias."""
        return _wire.model_info(self._unary(self._stub.GetModel, pb.GetModelRequest(name=name)))

    def alias(self, name: str, alias: str, version: int) -> ModelInfo:
        """Points ``alias`` at ``version`` (creating or moving it atomically)."""
        request = pb.SetAliasRequest(name=name, alias=alias, version=version)
        return _wire.model_info(self._unary(self._stub.SetAlias, request))

    def delete_alias(self, name: str, alias: str) -> ModelInfo:
        request = pb.DeleteAliasRequest(name=name, alias=alias)
        return _wire.model_info(self._unary(self._stub.DeleteAlias, request))

    def delete_model(self, name: str) -> None:
        """Forgets a model, its versions and aliases; its snapshots stay."""
        self._unary(self._stub.DeleteModel, pb.DeleteModelRequest(name=name))
