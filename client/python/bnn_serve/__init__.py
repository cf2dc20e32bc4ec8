"""bnn_serve: the Python client of bnn-serve.

Upload data, train Bayesian neural nets, and get predictive uncertainty as
numpy arrays::

    import bnn_serve
    with bnn_serve.Client("127.0.0.1:50051") as client:
        data = client.upload(X, y, name="cubic")
        job = client.train(data.dataset_id, "slang", hidden=10, epochs=500, rank=1)
        pred = client.predict(job.snapshot_id, X_test, samples=200, seed=1)
        pred.mean, pred.epistemic_variance, pred.aleatoric_variance

Modules: :mod:`bnn_serve.client` (``Client``), :mod:`bnn_serve.types`
(results), :mod:`bnn_serve.errors` (one exception per gRPC status family),
:mod:`bnn_serve.active_learning` (``ActiveLearningLoop``) and
:mod:`bnn_serve.plot` (PNG figures; needs matplotlib).
"""

import pkgutil

# The generated stubs (bnn_serve._proto) may live in another directory of
# sys.path than these sources: the CMake build writes them to
# BUILD/client/python/bnn_serve/_proto/, and tests put BUILD/client/python
# after client/python on PYTHONPATH. An installed package holds both.
__path__ = pkgutil.extend_path(__path__, __name__)

from bnn_serve.active_learning import ActiveLearningLoop, Round  # noqa: E402
from bnn_serve.client import Client  # noqa: E402
from bnn_serve.errors import (AlreadyExistsError, BnnError, CancelledError,  # noqa: E402
                              DataLossError, DeadlineExceededError,
                              FailedPreconditionError, InternalError,
                              InvalidArgumentError, NotFoundError,
                              PermissionDeniedError, ResourceExhaustedError,
                              UnauthenticatedError, UnavailableError)
from bnn_serve.types import (Acquisition, DatasetInfo, Evaluation,  # noqa: E402
                             ExportedSnapshot, Job, JobEvent, JobState, LossPoint,
                             MethodInfo, MethodParam, ModelInfo, ModelSpec, ModelVersion,
                             Prediction, Reliability, SnapshotInfo, TlsConfig)

__version__ = "0.1.0"

__all__ = [
    "ActiveLearningLoop", "Round", "Client",
    "BnnError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "ResourceExhaustedError", "FailedPreconditionError", "PermissionDeniedError",
    "UnauthenticatedError", "DeadlineExceededError", "UnavailableError",
    "DataLossError", "CancelledError", "InternalError",
    "Acquisition", "DatasetInfo", "Evaluation", "ExportedSnapshot", "Job", "JobEvent", "JobState",
    "LossPoint", "MethodInfo", "MethodParam", "ModelInfo", "ModelSpec", "ModelVersion",
    "Prediction", "Reliability", "SnapshotInfo", "TlsConfig",
]
