"""Progress display of a training job, fed by WatchJob events.

``progress=True`` shows a tqdm bar when tqdm is installed and plain lines on
stderr otherwise; ``"tqdm"`` and ``"lines"`` pick one; ``False`` shows
nothing; a callable receives every :class:`bnn_serve.types.JobEvent`.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Callable, Optional, TextIO, Union

from bnn_serve.types import JobEvent

#: What ``Client.train`` and ``Client.wait`` accept as ``progress``.
ProgressOption = Union[bool, str, Callable[[JobEvent], None], None]


class Progress:
    """Shows a job's events; use as a context manager (``close`` ends the bar)."""

    def __init__(self, job_id: str, option: ProgressOption = True,
                 stream: Optional[TextIO] = None, line_interval: float = 1.0) -> None:
        """
        Args:
          job_id: the job, named on every line.
          option: see the module docstring.
          stream: where bars and lines go; default sys.stderr (as it is now).
          line_interval: plain lines: at most one progress line per this many
            seconds (state changes are always printed).
        """
        self._job_id = job_id
        self._stream = stream if stream is not None else sys.stderr
        self._line_interval = line_interval
        self._last_line = 0.0
        self._bar = None
        self._callback = option if callable(option) else None
        mode = "none"
        if option is True or option == "tqdm":
            mode = "tqdm"
            if importlib.util.find_spec("tqdm") is None:  # an optional dependency
                if option == "tqdm":
                    raise ImportError("progress='tqdm' needs tqdm (Debian: python3-tqdm)")
                mode = "lines"
        elif option == "lines":
            mode = "lines"
        elif option not in (False, None) and self._callback is None:
            raise ValueError(f"progress: expected a bool, 'tqdm', 'lines' or a callable, got {option!r}")
        self.mode = "callback" if self._callback else mode

    def update(self, event: JobEvent) -> None:
        """Shows one event."""
        if self._callback is not None:
            self._callback(event)
        elif self.mode == "tqdm":
            self._update_bar(event)
        elif self.mode == "lines":
            self._print_line(event)

    def _update_bar(self, event: JobEvent) -> None:
        if self._bar is None:
            from tqdm import tqdm
            self._bar = tqdm(total=max(event.total_steps, 1), desc=self._job_id, unit="step",
                             file=self._stream, leave=True)
        if event.total_steps and self._bar.total != event.total_steps:
            self._bar.total = event.total_steps
        self._bar.n = event.step
        self._bar.set_postfix(loss=f"{event.loss:.6g}", state=event.state.value, refresh=False)
        self._bar.refresh()

    def _print_line(self, event: JobEvent) -> None:
        now = time.monotonic()
        if event.kind == "progress" and now - self._last_line < self._line_interval:
            return
        self._last_line = now
        percent = 100.0 * event.step / event.total_steps if event.total_steps else 0.0
        line = (f"{self._job_id} {event.state.value} step {event.step}/{event.total_steps} "
                f"({percent:.1f}%) epoch {event.epoch} loss {event.loss:.6g}")
        if event.steps_per_second > 0:
            line += f" {event.steps_per_second:.1f} steps/s"
        if event.error:
            line += f" error: {event.error}"
        if event.snapshot_id:
            line += f" snapshot {event.snapshot_id}"
        print(line, file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
