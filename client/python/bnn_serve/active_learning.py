"""``ActiveLearningLoop``: acquire → label → append → train, round after round.

Each round asks the current snapshot which unlabelled pool rows to label
(Acquire, the still-unlabelled rows sent as the pool), gets their labels from
the ``oracle`` callback, appends them to the dataset as its next version
(AppendRows with ``expected_version``, so two loops on one dataset cannot
interleave unnoticed), and trains on that version: warm-started from the
previous snapshot (``warm_start=True``: StartTraining with it as the parent,
``warm_epochs`` epochs) or from scratch. The loop ends after ``rounds``
rounds, when the pool is used up, or when ``stop(history)`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from bnn_serve import _wire
from bnn_serve.client import Client
from bnn_serve.errors import BnnError
from bnn_serve.progress import ProgressOption
from bnn_serve.types import Job

#: oracle(X_batch (k, d), pool_indices (k,)) -> labels (k,).
Oracle = Callable[[np.ndarray, np.ndarray], Any]


@dataclass(frozen=True)
class Round:
    """One round of the loop (round 0 is the initial model)."""
    round: int
    #: Labelled rows of the dataset version trained on.
    labelled: int
    dataset_version: int
    #: The training job (None in round 0 when initial_snapshot was given).
    job: Optional[Job]
    snapshot_id: str
    #: Pool row indices labelled this round, in acquisition order (empty in round 0).
    acquired: np.ndarray
    #: evaluate(client, snapshot_id), when an evaluate callback was given.
    score: Optional[float]


class ActiveLearningLoop:
    """Pool-based active learning against a bnn-server.

    Example::

        loop = ActiveLearningLoop(client, "my-data", pool_X, oracle=label_fn,
                                  heuristic="max_variance", batch_size=2, rounds=10,
                                  hidden=20, epochs=2000, warm_epochs=500,
                                  train_params={"rank": 5}, evaluate=test_rmse)
        for r in loop.run():
            print(r.round, r.labelled, r.score)
    """

    def __init__(self, client: Client, dataset: str, pool: Any, oracle: Oracle, *,
                 heuristic: str = "max_variance", batch_size: int = 1, rounds: int = 10,
                 warm_start: bool = True, method: str = "slang",
                 hidden: Union[int, Sequence[int]] = (), activations: Union[str, Sequence[str]] = (),
                 epochs: Optional[int] = None, warm_epochs: Optional[int] = None,
                 train_params: Optional[Dict[str, Any]] = None, samples: int = 0,
                 seed: Optional[int] = None, diversity_power: float = 0.0,
                 evaluate: Optional[Callable[[Client, str], float]] = None,
                 stop: Optional[Callable[[List[Round]], bool]] = None,
                 initial_snapshot: Optional[str] = None, progress: ProgressOption = False,
                 train_timeout: Optional[float] = None) -> None:
        """
        Args:
          client: the server.
          dataset: the labelled dataset (id or name) that grows by one version a round.
          pool: the unlabelled rows, (N, d) array-like.
          oracle: labels the chosen rows: ``oracle(X_batch, pool_indices)``.
          heuristic: Acquire's heuristic ("max_variance", "entropy", "bald",
            "margin", "random").
          batch_size: rows labelled per round (fewer when the pool runs out).
          rounds: rounds after round 0.
          warm_start: train each round from the previous snapshot (its
            architecture, ``warm_epochs`` epochs); False retrains from scratch
            (``hidden``, ``epochs``).
          method, hidden, activations, epochs, train_params: the training
            (``train_params`` are the method's parameters).
          warm_epochs: epochs of a warm-started round; default ``epochs``.
          samples: posterior samples of each Acquire (0 = the server's default).
          seed: training and acquisition seed (round r uses seed + r); None =
            the server draws them.
          diversity_power: Acquire's stochastic power acquisition (0 = top-k).
          evaluate: ``evaluate(client, snapshot_id) -> float`` after every
            round (e.g. a test RMSE), recorded in ``Round.score``.
          stop: ``stop(history) -> bool`` after every round; True ends the loop
            (e.g. ``lambda h: h[-1].score < 0.2``).
          initial_snapshot: round 0's model; None = train one on the dataset.
          progress: progress display of each training job (see bnn_serve.progress).
          train_timeout: seconds each training job may take (None = no limit).
        """
        if batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
        if rounds < 0:
            raise ValueError(f"rounds: must be >= 0, got {rounds}")
        self.client = client
        self.dataset = dataset
        self.pool = _wire.as_matrix(pool, "pool")
        self.oracle = oracle
        self.heuristic = heuristic
        self.batch_size = batch_size
        self.rounds = rounds
        self.warm_start = warm_start
        self.method = method
        self.hidden = hidden
        self.activations = activations
        self.epochs = epochs
        self.warm_epochs = warm_epochs if warm_epochs is not None else epochs
        self.train_params = dict(train_params or {})
        self.samples = samples
        self.seed = seed
        self.diversity_power = diversity_power
        self.evaluate = evaluate
        self.stop = stop
        self.initial_snapshot = initial_snapshot
        self.progress = progress
        self.train_timeout = train_timeout
        #: Pool indices not labelled yet, in pool order.
        self.remaining = np.arange(self.pool.shape[0], dtype=np.int64)
        #: Every finished round.
        self.history: List[Round] = []

    def _seed(self, round_index: int) -> Optional[int]:
        return None if self.seed is None else self.seed + round_index

    def _train(self, round_index: int, version: int, parent: Optional[str]) -> Job:
        warm = parent is not None
        job = self.client.train(
            self.dataset, self.method, hidden=() if warm else self.hidden,
            activations=() if warm else self.activations,
            epochs=self.warm_epochs if warm else self.epochs, seed=self._seed(round_index),
            dataset_version=version, parent=parent, progress=self.progress,
            timeout=self.train_timeout, **self.train_params)
        if not job.succeeded:
            raise BnnError(f"round {round_index}: training job {job.job_id} ended "
                           f"{job.state.value}: {job.error}")
        return job

    def _finish(self, record: Round) -> bool:
        self.history.append(record)
        return self.stop is not None and bool(self.stop(self.history))

    def run(self) -> List[Round]:
        """Runs round 0 (unless already run) and up to ``rounds`` more; returns the history."""
        if not self.history:
            info = self.client.dataset(self.dataset)
            job = None
            snapshot = self.initial_snapshot
            if snapshot is None:
                job = self._train(0, info.version, None)
                snapshot = job.snapshot_id
            score = self.evaluate(self.client, snapshot) if self.evaluate else None
            if self._finish(Round(0, info.num_rows, info.version, job, snapshot,
                                  np.zeros(0, dtype=np.int64), score)):
                return self.history
        while len(self.history) <= self.rounds and self.remaining.size:
            index = len(self.history)
            previous = self.history[-1]
            k = min(self.batch_size, int(self.remaining.size))
            acquisition = self.client.acquire(
                previous.snapshot_id, self.pool[self.remaining], k=k, heuristic=self.heuristic,
                samples=self.samples, seed=self._seed(index), diversity_power=self.diversity_power)
            chosen = self.remaining[acquisition.indices]
            labels = np.asarray(self.oracle(self.pool[chosen], chosen), dtype=np.float64).reshape(-1)
            if labels.shape[0] != chosen.shape[0]:
                raise ValueError(f"oracle: returned {labels.shape[0]} labels for {chosen.shape[0]} rows")
            info = self.client.append(self.dataset, self.pool[chosen], labels,
                                      expected_version=previous.dataset_version)
            self.remaining = np.setdiff1d(self.remaining, chosen, assume_unique=True)
            job = self._train(index, info.version,
                              previous.snapshot_id if self.warm_start else None)
            score = self.evaluate(self.client, job.snapshot_id) if self.evaluate else None
            if self._finish(Round(index, info.num_rows, info.version, job, job.snapshot_id,
                                  chosen, score)):
                break
        return self.history
