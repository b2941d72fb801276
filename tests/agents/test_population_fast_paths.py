"""The per-step fast paths of the batch-native agents (issue 26, speed): ``observe_batch`` of one seed takes the
single agent's scalar storage, and per-seed info dicts are read only when a vector env's infos carry ``gamma``
or ``forced`` (:meth:`lcpo.envs.vector.StepInfos.has`)."""

import gymnasium as gym
import numpy as np
import pytest

import lcpo.envs  # noqa: F401
from lcpo.agents import A2C
from lcpo.envs.vector import StepInfos
from lcpo.online.loop import Transition

KW = dict(hidden=(8,), rollout_steps=50)


def _env():
    return gym.make("lcpo/WindyPendulum-v0", trace="zero")


def _stream(steps, seed=0):
    """``steps`` (obs, action, reward, next_obs, terminated, truncated) of one pendulum under random bins."""
    env = _env()
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    for t in range(steps):
        a = rng.integers(0, 15, size=1)
        nxt, r, term, trunc, _ = env.step(a)
        out.append((obs, a, float(r), nxt, bool(term), bool(trunc)))
        obs = env.reset()[0] if term or trunc else nxt
    return out


def test_step_infos_has_a_key_only_where_a_sub_env_has_it():
    infos = StepInfos({"gamma": np.array([0.5, 0.0]), "_gamma": np.array([True, False]),
                       "x": np.zeros(2), "_x": np.zeros(2, bool)}, 2)
    assert infos.has("gamma") and not infos.has("x") and not infos.has("forced")
    assert StepInfos({"context": np.zeros((2, 2))}, 2).has("context")
    assert StepInfos({}, 2, overrides={1: {"forced": True}}).has("forced")


def test_one_seed_observe_batch_equals_observe_and_honours_gamma_and_forced():
    """A population of one fed by ``observe_batch`` (the scalar path) and the single agent fed by ``observe``
    store the same rollout, including per-step ``gamma`` and ``forced`` from the infos (a list of dicts and a
    StepInfos), and update to the same state bit for bit."""
    single, one = A2C(_env(), seed=3, **KW), A2C.population(_env(), [3], **KW)
    for t, (o, a, r, nxt, term, trunc) in enumerate(_stream(120)):
        info = {"gamma": 0.5} if t % 7 == 3 else {"forced": True} if t % 11 == 5 else {}
        single.observe(Transition(o, a, r, nxt, term, trunc, info))
        if t % 2:
            infos = [info]
        else:  # the vector env's form: batched arrays with masks
            infos = StepInfos({k: np.array([v]) for k, v in info.items()}
                              | {f"_{k}": np.array([True]) for k in info}, 1)
        one.observe_batch(o[None], a[None], np.array([r]), nxt[None], np.array([term]), np.array([trunc]), infos)
        if t == 60:  # mid-rollout (the first update was at 50): the stored gammas and masks
            p = int(one.rollouts.ptr[0])
            np.testing.assert_array_equal(one.rollouts.gammas[0, :p], single.rollout.gammas[:p])
            assert set(one.rollouts.gammas[0, :p].tolist()) == {0.5, single.hp.gamma}
            assert not one.rollouts.policy_mask[0, :p].all()
    a_state, b_state = single.state_dict(), one.seed_state_dict(0)
    for key in ("actor", "critic"):
        for name in a_state[key]:
            assert np.array_equal(a_state[key][name].numpy(), b_state[key][name].numpy()), (key, name)
    np.testing.assert_array_equal(a_state["rollout"]["gammas"], b_state["rollout"]["gammas"])
    assert single.updates == one.updates == 2


def test_many_seeds_read_gamma_from_step_infos_per_seed():
    """Two seeds, a StepInfos whose ``gamma`` only sub-env 1 has: seed 1 stores it, seed 0 the default; without
    the key both store the default."""
    pop = A2C.population(_env(), [0, 1], **KW)
    (o, a, r, nxt, term, trunc), = _stream(1)
    args = (np.stack([o, o]), np.stack([a, a]), np.array([r, r]), np.stack([nxt, nxt]), np.zeros(2, bool),
            np.zeros(2, bool))
    pop.observe_batch(*args, StepInfos({"gamma": np.array([0.0, 0.25]), "_gamma": np.array([False, True])}, 2))
    pop.observe_batch(*args, StepInfos({"context": np.zeros((2, 2))}, 2))
    np.testing.assert_array_equal(pop.rollouts.gammas[:, :2], [[pop.hp.gamma, pop.hp.gamma], [0.25, pop.hp.gamma]])


@pytest.mark.parametrize("case", ["every sub-env", "masked", "override", "int gamma, float override",
                                  "object dtype", "dicts"])
def test_discounts_and_masks_read_as_arrays_equal_the_one_by_one_reading(case):
    """Where every sub-env reports ``gamma`` and ``forced`` (the straggler env on every step) both are read as
    whole arrays; the values equal reading the N dicts one by one, and the cases the arrays cannot serve (a
    sub-env without the key, a SAME_STEP final-info override, values of mixed types, plain dicts) fall back."""
    from lcpo.agents.batched import _discounts_and_masks

    g, f = np.array([0.5, 0.9, 0.25]), np.array([False, True, False])
    batched = {"gamma": g, "_gamma": np.ones(3, bool), "forced": f, "_forced": np.ones(3, bool)}
    if case == "every sub-env":
        infos = StepInfos(batched, 3)
    elif case == "masked":  # sub-env 2 reports neither key
        infos = StepInfos(batched | {"_gamma": np.array([True, True, False]),
                                     "_forced": np.array([True, True, False])}, 3)
    elif case == "override":
        infos = StepInfos(batched, 3, overrides={0: {"gamma": 0.125, "forced": True}})
    elif case == "int gamma, float override":  # the override's 0.5 is not truncated to an int
        infos = StepInfos(batched | {"gamma": np.array([1, 1, 1])}, 3, overrides={0: {"gamma": 0.5}})
    elif case == "object dtype":
        infos = StepInfos(batched | {"forced": np.array([False, True, None], dtype=object)}, 3)
    else:
        infos = [{"gamma": 0.5, "forced": False}, {"gamma": 0.9, "forced": True}, {}]
    gammas, masks = _discounts_and_masks(infos, 3, 0.99)
    want_g = np.full(3, 0.99)
    want_m = np.ones(3, bool)
    for k in range(3):
        info = infos[k]
        if info:
            want_g[k] = info.get("gamma", 0.99)
            want_m[k] = not info.get("forced", False)
    assert gammas.dtype == np.float64 and masks.dtype == np.bool_
    np.testing.assert_array_equal(gammas, want_g)
    np.testing.assert_array_equal(masks, want_m)
    if case == "every sub-env":
        np.testing.assert_array_equal(masks, [True, False, True])

        class NoDicts(StepInfos):  # the array path builds no per-sub-env dict
            def __getitem__(self, i):
                raise AssertionError("a per-sub-env info dict was built")

        g2, m2 = _discounts_and_masks(NoDicts(batched, 3), 3, 0.99)
        np.testing.assert_array_equal(g2, gammas)
        np.testing.assert_array_equal(m2, masks)
    if case == "override":
        assert gammas[0] == 0.125 and not masks[0]
    if case == "int gamma, float override":
        np.testing.assert_array_equal(gammas, [0.5, 1.0, 1.0])
        assert infos.batched("gamma").tolist() == [0.5, 1.0, 1.0]


@pytest.mark.parametrize("n", [1, 2])
def test_observe_batch_refuses_a_non_finite_reward_naming_it(n):
    pop = A2C.population(_env(), list(range(n)), **KW)
    (o, a, r, nxt, term, trunc), = _stream(1)
    rewards = np.full(n, r)
    rewards[-1] = np.nan
    where = r" \(seed 1, slot 1\)" if n > 1 else "$"
    with pytest.raises(ValueError, match="non-finite reward nan at agent step 0" + where):
        pop.observe_batch(np.stack([o] * n), np.stack([a] * n), rewards, np.stack([nxt] * n), np.zeros(n, bool),
                          np.zeros(n, bool), [{}] * n)
