"""Comparing the ``summary.json`` of two runs that must agree (a resumed run and an uninterrupted one, a
population seed and its solo run, a killed and resumed CLI run and a straight one).

Every key is compared except those that differ between identical runs by design:

* ``wall_time_s``, ``wall_share_s``, ``steps_per_s``: timing;
* ``code``: the provenance record of :mod:`lcpo.persistence.provenance` (``code.dirty`` flips, and ``commit``
  moves, when the source tree is edited or committed to while the tests run, so comparing it made these tests
  flaky). That it is recorded, and how, is asserted in ``tests/persistence/test_provenance.py``; here only its
  presence is checked.

Callers name the further keys their two runs differ in on purpose (``resumed_from``, ``population``).
"""

from __future__ import annotations

#: keys that differ between two identical runs: timing, and the code provenance record
UNCOMPARED = ("wall_time_s", "wall_share_s", "steps_per_s", "offline_train_s", "code")


def comparable(summary: dict, *also: str) -> dict:
    """``summary`` without :data:`UNCOMPARED` and the keys ``also``, for an equality with another run's.

    Raises:
        AssertionError: if ``summary`` has no ``code`` record (every finished run writes one).
    """
    assert isinstance(summary.get("code"), dict), f"summary without a code record: {sorted(summary)}"
    drop = {*UNCOMPARED, *also}
    return {k: v for k, v in summary.items() if k not in drop}
