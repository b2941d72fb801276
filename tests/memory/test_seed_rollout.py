"""SeedRollout.add_batch: the lockstep fast path (every seed at the same slot) and the general path (seeds whose
fill pointers differ, e.g. a seed loaded from a solo run mid-rollout) store exactly what per-seed adds store."""

import numpy as np
import pytest

from lcpo.memory.rollout import RolloutBuffer, SeedRollout


def _step(rng, n, obs_dim=3, dims=2):
    return (rng.standard_normal((n, obs_dim)).astype(np.float32), rng.integers(0, 5, (n, dims)),
            rng.standard_normal(n), rng.standard_normal((n, obs_dim)).astype(np.float32), rng.random(n) < 0.2,
            rng.random(n) < 0.2, rng.random(n), rng.random(n) < 0.8)


@pytest.mark.parametrize("start", [[0, 0, 0], [0, 2, 1]], ids=["lockstep", "pointers-differ"])
def test_add_batch_equals_per_seed_adds(start):
    rng = np.random.default_rng(0)
    n, size = 3, 5
    stack = SeedRollout(n, size, 3, 2)
    solo = [RolloutBuffer(size, 3, 2) for _ in range(n)]
    for k, s in enumerate(start):  # pre-fill each seed to its own pointer
        for _ in range(s):
            o, a, r, no, te, tr, g, m = _step(rng, 1)
            stack.seed(k).add(o[0], a[0], float(r[0]), no[0], bool(te[0]), bool(tr[0]), float(g[0]), bool(m[0]))
            solo[k].add(o[0], a[0], float(r[0]), no[0], bool(te[0]), bool(tr[0]), float(g[0]), bool(m[0]))
    for _ in range(size - max(start)):
        o, a, r, no, te, tr, g, m = _step(rng, n)
        stack.add_batch(o, a, r, no, te, tr, g, m)
        for k in range(n):
            solo[k].add(o[k], a[k], float(r[k]), no[k], bool(te[k]), bool(tr[k]), float(g[k]), bool(m[k]))
    for k in range(n):
        got, want = stack.seed(k).state_dict(), solo[k].state_dict()
        assert got["ptr"] == want["ptr"] == size - max(start) + start[k]
        for f in RolloutBuffer._FIELDS:
            np.testing.assert_array_equal(got[f], want[f], err_msg=f)
    if start[0] == max(start):  # seed 0 is full now
        with pytest.raises(OverflowError, match="seed slot 0 is full"):
            stack.add_batch(*_step(rng, n))
