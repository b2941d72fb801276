"""A run's episode rows, held as one growing NumPy array rather than a list of tuples.

A row is ``(episode, end_step, return, length, *context_means)``
(:data:`lcpo.online.loop.EPISODE_COLUMNS` plus one mean per context dimension). Long runs end millions of
episodes (windy InvertedPendulum at 20M steps: about 8M), and a Python tuple per row costs about 220 bytes
against 8 bytes per value here (48 bytes for a 6-value row). :class:`EpisodeRows` still reads as the list of
tuples it replaces: ``len``, indexing and slicing (tuples with ``int`` episode, end step and length and ``float``
return and context means), iteration, ``==`` against any sequence of rows, pickling, ``pandas.DataFrame(rows)``
and ``np.asarray`` (a float64 ``(n, width)`` copy). ``+`` with a list gives a list. It is not a ``list``: :meth:`EpisodeRows.tolist` gives
one (for ``json.dumps``).

Every value is stored as float64: the integer columns are exact up to 2**53 (the largest step count
:class:`lcpo.online.run.RunConfig` accepts), and the float columns are the Python floats the loop computed, so a
row read back is equal, bit for bit, to the one appended.

An environment may report a context in some episodes only (an episode that saw none has no context means): such a
row is padded with NaN to the table's width, and a row wider than the table widens it (the earlier rows' new
columns are NaN).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

__all__ = ["EpisodeRows"]

_EXACT = 2**53  # float64 holds every integer up to here
_COLUMNS = ("episode", "end step", "return", "length")


def _all_floats(row: Sequence) -> bool:
    for v in row[4:]:
        if type(v) is not float:
            return False
    return True


def _check(row: Sequence) -> None:
    """Raise ValueError for a value float64 would change: an integer column that is not an integer within
    +-2**53, or a return or context mean that is not a number."""
    for j in (0, 1, 3):  # stored as float64: exact for integers up to 2**53 only
        v = row[j]
        if (type(v) is not int and not isinstance(v, np.integer)) or not -_EXACT <= v <= _EXACT:
            raise ValueError(f"episode row {_COLUMNS[j]} must be an integer within +-2**53, got {v!r}")
    for j in range(2, len(row)):
        v = row[j]
        if j != 3 and (not isinstance(v, (float, int, np.integer, np.floating)) or isinstance(v, bool)):
            raise ValueError(f"episode row {_COLUMNS[j] if j < 4 else f'context mean {j - 4}'} must be a "
                             f"number, got {v!r}")


class EpisodeRows(Sequence):
    """Append-only episode rows of one run, columnar.

    Rows are added by :meth:`append` and :meth:`extend` only: item assignment, ``del``, ``pop``, ``sort``, ``clear``
    and ``*`` are not offered (a TypeError or AttributeError, as for a tuple); :meth:`tolist` gives a list that has
    them.

    Args:
        rows: initial rows (tuples or lists, or a float64 ``(n, width)`` array), e.g. from a checkpoint.

    Raises:
        ValueError: a row that :meth:`append` refuses, or an array of another shape.
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
            ValueError: fewer than 4 values; an episode, end step or length that is not an integer within
                +-2**53 (float64 would round it); a return or context mean that is not a number (``None``
                would become NaN).
        """
        w = len(row)
        if w < 4:
            raise ValueError(f"an episode row has at least 4 values (episode, step, return, length), got {w}")
        e, t, r, n = row[0], row[1], row[2], row[3]
        if not (type(e) is int and type(t) is int and type(n) is int and type(r) is float  # the loop's rows
                and -_EXACT <= e <= _EXACT and -_EXACT <= t <= _EXACT and -_EXACT <= n <= _EXACT
                and (w == 4 or _all_floats(row))):
            _check(row)
        if self._a is None:
            self._a = np.empty((1024, w))
        width = self._a.shape[1]
        if w > width or self._n == self._a.shape[0]:  # wider rows widen the table (earlier rows: NaN)
            # np.empty, not a NaN fill: rows past _n are never read and each append writes its whole row, so
            # the capacity not yet used stays untouched, and the OS maps no memory for it (a large array's pages
            # become resident when first written: a NaN fill made the doubling's spare half resident too)
            grown = np.empty((max(2 * self._a.shape[0], 1024) if self._n == self._a.shape[0] else self._a.shape[0],
                              max(w, width)))
            grown[: self._n, :width] = self._a[: self._n]
            if w > width:
                grown[: self._n, width:] = np.nan
            self._a = grown
            width = grown.shape[1]
        if w < width:  # an episode that saw no context (or fewer dimensions): NaN means
            self._a[self._n, w:] = np.nan
            self._a[self._n, :w] = row
        else:
            self._a[self._n] = row
        self._n += 1

    def __getstate__(self):
        """Pickle (and copy) the rows alone, a float64 ``(n, width)`` view, not the capacity past them: growth
        leaves it unwritten, so its bytes are arbitrary, and a pickle of equal rows is the same bytes. A
        subclass's own attributes are kept (the default state with ``_a`` cut to the rows)."""
        state = super().__getstate__()
        dict_state, slots = state if isinstance(state, tuple) else (state, {})
        slots = dict(slots)
        if self._a is not None:
            slots["_a"] = self._a[: self._n]  # a view: pickling writes only these bytes; no copy in memory
        return (dict_state, slots)

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
        j = operator.index(i)  # a float or a string is a TypeError, as for a list
        k = j + n if j < 0 else j
        if not 0 <= k < n:
            raise IndexError(f"episode row {j} out of range (the run has {n})")
        return self._row(self._a[k])

    def __iter__(self) -> Iterator[tuple]:
        for v in self.array():
            yield self._row(v)

    def __eq__(self, other) -> bool:
        if isinstance(other, EpisodeRows):
            return self._n == other._n and (self._n == 0 or np.array_equal(self.array(), other.array(),
                                                                            equal_nan=True))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and all(tuple(a) == b for a, b in zip(other, self))
        return NotImplemented

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        head = ", ".join(repr(r) for r in self[:3])
        more = f", ... ({self._n:,} rows)" if self._n > 3 else ""
        return f"EpisodeRows([{head}{more}])"

    def __add__(self, other) -> list[tuple]:
        return self.tolist() + list(other)

    def __radd__(self, other) -> list[tuple]:
        return list(other) + self.tolist()

    def copy(self) -> "EpisodeRows":
        """An independent copy."""
        return EpisodeRows(self.array())

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
