"""The torch backend of the native windy Pendulum vector env (issue 26 item 6) against its numba kernel, on the CPU.

The numba kernel is bit-identical to ``lcpo/WindyPendulum-v0`` (tests/envs/test_vector.py); the torch backend runs
the same float64 arithmetic with torch's ``sin``/``cos`` (which differ from the C library's in the last bit for
about 0.15% of arguments), so it is held to a tolerance: observations within 1e-5, the angle within 1e-9 rad,
rewards within 1e-9 relative; truncations, contexts, trace positions and reset states exactly equal. Thousands of
steps with random actions, mixed traces and time limits (episodes end every 13 to 200 steps), in every autoreset
mode, so resets and truncations are crossed many times.
"""

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from lcpo.envs.vector import VectorStream
from lcpo.envs.windy_pendulum_vector import WindyPendulumVectorEnv

LIMITS = [200, 37, 50, 200, 199, 64, 200, 13]


def _kwargs():
    return [{"trace": f"wind-{1 + k % 4}", "time_limit": LIMITS[k]} for k in range(len(LIMITS))]


def _check_close(ra, rb, step):
    obs_a, rew_a, term_a, trunc_a, info_a = ra
    obs_b, rew_b, term_b, trunc_b, info_b = rb
    assert obs_b.dtype == np.float32 and rew_b.dtype == np.float64 and trunc_b.dtype == np.bool_
    np.testing.assert_allclose(obs_b, obs_a, rtol=0, atol=1e-5, err_msg=f"step {step}")
    np.testing.assert_allclose(rew_b, rew_a, rtol=1e-9, atol=0, err_msg=f"step {step}")
    np.testing.assert_array_equal(term_b, term_a)
    np.testing.assert_array_equal(trunc_b, trunc_a, err_msg=f"step {step}")
    np.testing.assert_array_equal(info_b["context"], info_a["context"])


@pytest.mark.parametrize("mode,steps", [(AutoresetMode.NEXT_STEP, 1000), (AutoresetMode.SAME_STEP, 500),
                                        (AutoresetMode.DISABLED, 1000)])
def test_torch_backend_equals_numba_within_tolerance_across_resets_and_truncations(mode, steps):
    numba_env = WindyPendulumVectorEnv(env_kwargs=_kwargs(), autoreset_mode=mode)
    torch_env = WindyPendulumVectorEnv(env_kwargs=_kwargs(), autoreset_mode=mode, device="cpu")
    assert numba_env.device is None and str(torch_env.device) == "cpu"
    seeds = list(range(10, 10 + len(LIMITS)))
    oa, ia = numba_env.reset(seed=seeds)
    ob, ib = torch_env.reset(seed=seeds)
    np.testing.assert_array_equal(ob, oa)  # reset states come from the same host generators
    rng = np.random.default_rng(0)
    rec_a, rec_b, th_a, th_b = [], [], [], []
    for t in range(steps):
        actions = rng.integers(0, 15, size=(len(LIMITS), 1))
        ra, rb = numba_env.step(actions), torch_env.step(actions)
        rec_a.append(ra)
        rec_b.append(rb)
        th_a.append(numba_env._th.copy())
        th_b.append(torch_env._dev["_th"].numpy().copy())
        trunc = ra[3]
        if mode is AutoresetMode.DISABLED and trunc.any():
            rec_a.append((numba_env.reset(options={"reset_mask": trunc.copy()})[0],))
            rec_b.append((torch_env.reset(options={"reset_mask": trunc.copy()})[0],))
    for name, i, atol, rtol in (("observations", 0, 1e-5, 0), ("rewards", 1, 0, 1e-9)):
        a = np.stack([r[i] for r in rec_a if len(r) > i])
        b = np.stack([r[i] for r in rec_b if len(r) > i])
        assert b.dtype == a.dtype, name
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=name)
    for i in (2, 3):  # terminated (never), truncated
        np.testing.assert_array_equal(np.stack([r[i] for r in rec_b if len(r) > i]),
                                      np.stack([r[i] for r in rec_a if len(r) > i]))
    np.testing.assert_array_equal(np.stack([r[4]["context"] for r in rec_b if len(r) > 4]),
                                  np.stack([r[4]["context"] for r in rec_a if len(r) > 4]))
    np.testing.assert_allclose(np.stack(th_b), np.stack(th_a), rtol=0, atol=1e-9)
    ends = int(np.stack([r[3] for r in rec_a if len(r) > 3]).sum())
    assert ends >= steps // 200 * len(LIMITS)  # many episode ends were crossed
    if mode is AutoresetMode.SAME_STEP:
        finals = [(ra[4]["final_obs"], rb[4]["final_obs"]) for ra, rb in zip(rec_a, rec_b) if "final_obs" in ra[4]]
        assert finals and all(fb is not None for _, b in finals for fb in b if fb is not None)
        for fa, fb in finals:
            for x, y in zip(fa, fb):
                assert (x is None) == (y is None)
                if x is not None:
                    np.testing.assert_allclose(y, x, rtol=0, atol=1e-5)
    sa, sb = numba_env.get_state(), torch_env.get_state()
    assert [s["wind"]["index"] for s in sb] == [s["wind"]["index"] for s in sa]
    assert [s["elapsed"] for s in sb] == [s["elapsed"] for s in sa]
    np.testing.assert_allclose([s["th"] for s in sb], [s["th"] for s in sa], rtol=0, atol=1e-9)


def test_torch_backend_state_round_trips_into_the_numba_kernel_and_back():
    a = WindyPendulumVectorEnv(env_kwargs=_kwargs(), autoreset_mode=AutoresetMode.DISABLED, device="cpu")
    a.reset(seed=3)
    rng = np.random.default_rng(1)
    for _ in range(150):
        a.step(rng.integers(0, 15, size=(len(LIMITS), 1)))
    state = a.get_state()  # pulled from the device
    b = WindyPendulumVectorEnv(env_kwargs=_kwargs(), autoreset_mode=AutoresetMode.DISABLED)
    b.set_state(state)
    c = WindyPendulumVectorEnv(env_kwargs=_kwargs(), autoreset_mode=AutoresetMode.DISABLED, device="cpu")
    c.set_state(state)  # pushed to the device
    np.testing.assert_array_equal(c.current_observation(), b.current_observation())
    for t in range(60):
        actions = rng.integers(0, 15, size=(len(LIMITS), 1))
        ra, rc = b.step(actions), c.step(actions)
        _check_close(ra, rc, t)
        ends = ra[3]
        if ends.any():
            b.reset(options={"reset_mask": ends.copy()})
            c.reset(options={"reset_mask": ends.copy()})


def test_torch_backend_through_the_vector_stream_and_its_errors():
    env = WindyPendulumVectorEnv(env_kwargs=_kwargs()[:2], autoreset_mode=AutoresetMode.DISABLED, device="cpu")
    stream = VectorStream(env)
    obs = stream.reset([0, 1])
    assert obs.shape == (2, 9)
    with pytest.raises(ValueError, match=r"sub-env 1: bin index out of range \[0, 15\)"):
        env.step(np.array([[3], [15]]))
    with pytest.raises(ValueError, match=r"^device 'meta': the meta device holds no data"):
        WindyPendulumVectorEnv(num_envs=2, device="meta")
    with pytest.raises(ValueError, match=r"^device 'gpu0': not a torch device"):
        WindyPendulumVectorEnv(num_envs=2, device="gpu0")
