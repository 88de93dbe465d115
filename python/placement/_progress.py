"""progress= of device_put / RemoteArray.to_numpy: a callable told
(bytes done, bytes in all) as a transfer moves, or True for a tqdm bar
(when tqdm is installed; otherwise a one-line bar on stderr, drawn only when
stderr is a terminal). Reports come from the calling thread, after each
chunk of a stream (a same-host region transfer may report only its end),
with `done` never decreasing and reaching `total` exactly once.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterator, Optional, Tuple, Union

ProgressFn = Callable[[int, int], None]
Progress = Union[None, bool, ProgressFn]


class _StderrBar:
    """The fallback for progress=True without tqdm."""

    def __init__(self, description: str) -> None:
        self._description = description
        self._start = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        rate = done / max(now - self._start, 1e-3)
        line = (f"{self._description}  {done / 2**20:.1f} / {total / 2**20:.1f} MiB  "
                f"{rate / 1e6:.1f} MB/s")
        sys.stderr.write("\r" + line + "\x1b[K")
        self._drawn = True
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


class _Tqdm:
    def __init__(self, tqdm: Any, description: str) -> None:
        self._tqdm = tqdm
        self._description = description
        self._bar: Any = None
        self._done = 0

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                                   desc=self._description, leave=False)
        self._bar.update(done - self._done)
        self._done = done
        if done >= total:
            self._bar.close()


def reporter(progress: Progress, description: str) -> Optional[ProgressFn]:
    """The callable for a transfer's progress= (None: none)."""
    if progress is None or progress is False:
        return None
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return _StderrBar(description) if sys.stderr.isatty() else None
        return _Tqdm(tqdm, description)
    if not callable(progress):
        from placement import errors
        raise errors.InvalidArgumentError(
            f"progress must be a callable(done, total), True or None, got {progress!r}")
    return progress


class Tracker:
    """Turns the messages of a stream into progress reports."""

    def __init__(self, report: Optional[ProgressFn], total: int) -> None:
        self._report = report
        self.total = total
        self.done = 0

    @property
    def listening(self) -> bool:
        """Whether anyone is told (a copy need not be cut into pieces
        otherwise: cutting a warm 256 MiB copy in four took 6-8 ms more)."""
        return self._report is not None

    def add(self, n: int) -> None:
        self.done += n
        if self._report is not None and self.done < self.total:
            self._report(self.done, self.total)

    def finish(self) -> None:
        if self._report is not None:
            self._report(self.total, self.total)


# While progress is listened to, copies of a transfer written or read in
# place are cut into pieces of at most this many bytes, so that progress
# moves within one large shard (the C++ client's PieceProgress).
PIECE_BYTES = 64 << 20


def row_pieces(rows: int, row_bytes: int) -> Iterator[Tuple[int, int]]:
    """[r0, r1) over `rows` rows of `row_bytes` each, at most PIECE_BYTES
    (and at least one row) per piece."""
    step = max(1, PIECE_BYTES // max(1, row_bytes))
    for r0 in range(0, rows, step):
        yield r0, min(rows, r0 + step)
