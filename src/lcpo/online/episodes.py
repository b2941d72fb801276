"""A run's episode rows, held as one growing NumPy array rather than a list of tuples.

A row is ``(episode, end_step, return, length, *context_means)``
(:data:`lcpo.online.loop.EPISODE_COLUMNS` plus one mean per context dimension). Long runs end millions of
episodes (windy InvertedPendulum at 20M steps: about 8M), and a Python tuple per row costs about 220 bytes
against 8 bytes per value here (48 bytes for a 6-value row). :class:`EpisodeRows` still reads as the list of
tuples it replaces: ``len``, indexing and slicing (tuples with ``int`` episode, end step and length and ``float``
return and context means), iteration, ``==`` against any sequence of rows, pickling, ``pandas.DataFrame(rows)``
and ``np.asarray`` (a float64 ``(n, width)`` copy). It is not a ``list``: :meth:`EpisodeRows.tolist` gives one
(for ``json.dumps``, or to concatenate with ``+``).

Every value is stored as float64: the integer columns are exact up to 2**53 (the largest step count
:class:`lcpo.online.run.RunConfig` accepts), and the float columns are the Python floats the loop computed, so a
row read back is equal, bit for bit, to the one appended.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

__all__ = ["EpisodeRows"]


class EpisodeRows(Sequence):
    """Append-only episode rows of one run, columnar.

    Args:
        rows: initial rows (tuples or lists, or a float64 ``(n, width)`` array), e.g. from a checkpoint.

    Raises:
        ValueError: a row has fewer than 4 values, or not the width of the first row (a run's context has one
            dimension), naming the row's episode index and both widths.
    """

    __slots__ = ("_a", "_n")

    def __init__(self, rows: Iterable | np.ndarray = ()):
        self._a: np.ndarray | None = None  # (capacity, width) float64; rows [0, _n) are valid
        self._n = 0
        if isinstance(rows, np.ndarray):
            if rows.size:
                arr = np.asarray(rows, dtype=np.float64)
                if arr.ndim != 2 or arr.shape[1] < 4:
                    raise ValueError(f"episode rows must be an (n, >=4) array, got shape {rows.shape}")
                self._a, self._n = arr.copy(), arr.shape[0]
        else:
            self.extend(rows)

    @property
    def width(self) -> int | None:
        """Values per row (4 + context dimensions), or None before the first row."""
        return None if self._a is None else self._a.shape[1]

    def append(self, row: Sequence[float]) -> None:
        """Add one row ``(episode, end_step, return, length, *context_means)``.

        Raises:
            ValueError: see the class docstring.
        """
        w = len(row)
        if self._a is None:
            if w < 4:
                raise ValueError(f"an episode row has at least 4 values (episode, step, return, length), got {w}")
            self._a = np.empty((1024, w))
        elif w != self._a.shape[1]:
            raise ValueError(f"episode {row[0]} has {w - 4} context value(s) where the run's first episode had "
                             f"{self._a.shape[1] - 4}: a run's context has one width")
        if self._n == self._a.shape[0]:
            grown = np.empty((2 * self._n, w))
            grown[: self._n] = self._a
            self._a = grown
        self._a[self._n] = row
        self._n += 1

    def extend(self, rows: Iterable[Sequence[float]]) -> None:
        """Append each of ``rows`` (see :meth:`append`)."""
        for r in rows:
            self.append(r)

    def __len__(self) -> int:
        return self._n

    @staticmethod
    def _row(v: np.ndarray) -> tuple:
        vals = v.tolist()
        return (int(vals[0]), int(vals[1]), vals[2], int(vals[3]), *vals[4:])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(v) for v in self.array()[i]]
        n = self._n
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"episode row {i} out of range (the run has {n})")
        return self._row(self._a[i])

    def __iter__(self) -> Iterator[tuple]:
        for v in self.array():
            yield self._row(v)

    def __eq__(self, other) -> bool:
        if isinstance(other, EpisodeRows):
            return self._n == other._n and (self._n == 0 or np.array_equal(self.array(), other.array()))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and all(tuple(a) == b for a, b in zip(other, self))
        return NotImplemented

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return f"EpisodeRows({self._n} rows, width {self.width})"

    def tolist(self) -> list[tuple]:
        """The rows as a list of tuples (the form before :class:`EpisodeRows`)."""
        return list(self)

    def array(self) -> np.ndarray:
        """The rows as a read-only float64 ``(n, width)`` view (``(0, 4)`` before the first row); it stays valid
        after later appends but does not see them."""
        if self._a is None:
            return np.empty((0, 4))
        v = self._a[: self._n]
        v = v.view()
        v.flags.writeable = False
        return v

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.array(self.array(), dtype=dtype)

    @property
    def returns(self) -> np.ndarray:
        """``(n,)`` float64 episode returns (read-only view)."""
        return self.array()[:, 2]

    @property
    def end_steps(self) -> np.ndarray:
        """``(n,)`` float64 global step at which each episode ended (exact integers; read-only view)."""
        return self.array()[:, 1]
