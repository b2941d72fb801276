"""Tests for the window targets: n-step returns, V-trace, Retrace (issue 3, item 4), and the docs page."""

from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np
import pytest

from lcpo.envs.chain import ContinuingChainEnv
from lcpo.memory import ReplayBuffer
from lcpo.numerics.targets import nstep_returns, retrace, vtrace


def _random_windows(rng, B=64, n=5, p_end=0.15):
    """Random padded windows: prefix masks, flags only on the last valid step (as the buffer makes them)."""
    length = rng.integers(1, n + 1, size=B)
    mask = np.arange(n)[None, :] < length[:, None]
    last = np.zeros((B, n), dtype=bool)
    last[np.arange(B), length - 1] = True
    kind = rng.random(B)
    term = last & (kind < p_end)[:, None]
    trunc = last & ((kind >= p_end) & (kind < 2 * p_end))[:, None]
    rewards = np.where(mask, rng.normal(size=(B, n)), 0.0)
    return rewards, term, trunc, mask, length


def _ref_nstep(r, boot, term_last, L, gammas):
    """Scalar reference: sum_k (prod_{j<k} g_j) r_k + prod_{j<L} g_j * boot (0 if terminated)."""
    out, disc = 0.0, 1.0
    for k in range(L):
        out += disc * r[k]
        disc *= gammas[k]
    return out + (0.0 if term_last else disc * boot)


def test_nstep_returns_by_hand():
    # 3-step windows, gamma 0.5, rewards 1: truncated at step 2 -> 1 + .5 + .25 + .125 * V; terminated -> no V.
    r = np.ones((3, 3))
    mask = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0]], dtype=bool)
    term = np.array([[0, 0, 1], [0, 0, 0], [0, 0, 0]], dtype=bool)
    trunc = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 0]], dtype=bool)
    got = nstep_returns(r, [8.0, 8.0, 8.0], term, trunc, mask, 0.5)
    np.testing.assert_allclose(got, [1.75, 1.75 + 1.0, 1.5 + 2.0])  # last row: 2 steps, bootstrap 0.25 * 8


@pytest.mark.parametrize("per_step_gamma", [False, True])
def test_nstep_returns_match_scalar_reference(per_step_gamma):
    rng = np.random.default_rng(0)
    r, term, trunc, mask, L = _random_windows(rng)
    gamma = rng.uniform(0.5, 1.0, size=r.shape) if per_step_gamma else 0.93
    g = gamma if per_step_gamma else np.full(r.shape, gamma)
    nv = rng.normal(size=r.shape)
    got = nstep_returns(r, nv, term, trunc, mask, gamma)  # (B, n) bootstrap values: entry at L - 1 used
    got_b = nstep_returns(r, nv[np.arange(len(L)), L - 1], term, trunc, mask, gamma)  # (B,) form
    for b in range(len(L)):
        ref = _ref_nstep(r[b], nv[b, L[b] - 1], term[b, L[b] - 1], L[b], g[b])
        assert got[b] == pytest.approx(ref, abs=1e-12) and got_b[b] == pytest.approx(ref, abs=1e-12)


def test_targets_cut_at_an_episode_end_inside_the_mask():
    """A flag before the last masked step ends the window: the later steps are not used."""
    r = np.array([[1.0, 1.0, 100.0]])
    mask = np.ones((1, 3), dtype=bool)
    none = np.zeros((1, 3), dtype=bool)
    term = np.array([[False, True, False]])
    assert nstep_returns(r, [[5.0, 5.0, 5.0]], term, none, mask, 0.9)[0] == pytest.approx(1.9)
    assert nstep_returns(r, [[5.0, 6.0, 7.0]], none, term, mask, 0.9)[0] == pytest.approx(1.9 + 0.81 * 6.0)
    # deterministic pi that took the logged actions: E_pi Q(next_obs_0) = Q(obs_1, a_1) = 5
    q = retrace(np.full((1, 3), 5.0), np.full((1, 3), 5.0), np.zeros((1, 3)), r, term, none, mask, 0.9, 1.0)
    assert q[0, 0] == pytest.approx(1.9) and q[0, 2] == 0.0
    vs, _ = vtrace(r, np.full((1, 3), 5.0), np.full((1, 3), 5.0), np.zeros((1, 3)), term, none, mask, 0.9)
    assert vs[0, 0] == pytest.approx(1.9) and vs[0, 2] == 0.0


def test_vtrace_on_policy_equals_nstep_returns():
    rng = np.random.default_rng(1)
    B, n, gamma = 64, 6, 0.9
    r, term, trunc, mask, L = _random_windows(rng, B, n)
    # Consistent value function over the trajectory: V(next_obs_t) = V(obs_{t+1}).
    v_traj = rng.normal(size=(B, n + 1))
    values, next_values = v_traj[:, :-1], v_traj[:, 1:]
    vs, adv = vtrace(r, values, next_values, np.zeros((B, n)), term, trunc, mask, gamma)
    for t in range(n):
        rows = L > t
        # v_t is the n-step return from step t to the window's end, bootstrapped from V(next_obs_{L-1})
        sub = nstep_returns(r[rows, t:], next_values[rows, t:], term[rows, t:], trunc[rows, t:], mask[rows, t:],
                            gamma)
        np.testing.assert_allclose(vs[rows, t], sub, atol=1e-12)
        # on-policy advantage: r_t + gamma v_{t+1} - V(obs_t), with v_L = V(next_obs_{L-1}) and 0 if terminated
        v_next = np.where(L[rows] > t + 1, vs[rows, min(t + 1, n - 1)], next_values[rows, t])
        v_next = np.where(term[rows, t], 0.0, v_next)
        np.testing.assert_allclose(adv[rows, t], r[rows, t] + gamma * v_next - values[rows, t], atol=1e-12)
    assert np.all(vs[~mask] == 0.0) and np.all(adv[~mask] == 0.0)


def test_vtrace_off_policy_matches_the_sum_form_of_eq_1():
    """v_s = V(x_s) + sum_t gamma^{t-s} (prod_{i=s}^{t-1} c_i) rho_t delta_t (Espeholt et al. 2018, eq. 1)."""
    rng = np.random.default_rng(2)
    B, n, gamma, rho_bar, c_bar = 32, 5, 0.95, 1.3, 0.8
    r, term, trunc, mask, L = _random_windows(rng, B, n)
    values, next_values = rng.normal(size=(B, n)), rng.normal(size=(B, n))
    log_rhos = rng.normal(scale=0.7, size=(B, n))
    vs, _ = vtrace(r, values, next_values, log_rhos, term, trunc, mask, gamma, rho_bar, c_bar)
    rho = np.minimum(rho_bar, np.exp(log_rhos))
    c = np.minimum(c_bar, np.exp(log_rhos))
    for b in range(B):
        for s in range(L[b]):
            tot, coef = values[b, s], 1.0
            for t in range(s, L[b]):
                nv = 0.0 if term[b, t] else next_values[b, t]
                # V(x_{t+1}) inside delta_t is the value of the real next_obs_t
                delta = rho[b, t] * (r[b, t] + gamma * nv - values[b, t])
                tot += coef * delta
                coef *= gamma * c[b, t]
            assert vs[b, s] == pytest.approx(tot, abs=1e-12)


def test_retrace_lambda_one_on_policy_equals_nstep_with_expected_q_bootstrap():
    """lambda=1, pi=mu (deterministic pi that took the logged actions): Q_ret = n-step return + E_pi Q at the end."""
    rng = np.random.default_rng(3)
    B, n, gamma = 64, 6, 0.9
    r, term, trunc, mask, L = _random_windows(rng, B, n, p_end=0.3)
    q_taken = rng.normal(size=(B, n))
    # The policy is deterministic and took the logged actions, so E_pi Q(next_obs_t, .) = Q(obs_{t+1}, a_{t+1}).
    eq_next = np.concatenate([q_taken[:, 1:], rng.normal(size=(B, 1))], axis=1)
    eq_end = rng.normal(size=B)
    eq_next[np.arange(B), L - 1] = eq_end  # E_pi Q at the real last state of each window
    q = retrace(q_taken, eq_next, np.zeros((B, n)), r, term, trunc, mask, gamma, lam=1.0)
    ref = nstep_returns(r, eq_end, term, trunc, mask, gamma)
    np.testing.assert_allclose(q[:, 0], ref, atol=1e-12)
    t_rows = term[np.arange(B), L - 1]
    assert t_rows.any()
    # termination inside the window: zero bootstrap (the expected Q at the end does not enter)
    np.testing.assert_allclose(q[t_rows, 0], nstep_returns(r[t_rows], np.full(t_rows.sum(), 1e6), term[t_rows],
                                                           trunc[t_rows], mask[t_rows], gamma), atol=1e-9)


def test_retrace_off_policy_matches_the_sum_form():
    """Q_ret(x_s, a_s) = Q(x_s, a_s) + sum_t gamma^{t-s} (prod_{i=s+1}^t c_i) [r_t + gamma E_pi Q_{t+1} - Q_t]."""
    rng = np.random.default_rng(4)
    B, n, gamma, lam = 32, 5, 0.9, 0.7
    r, term, trunc, mask, L = _random_windows(rng, B, n)
    q_taken, eq_next = rng.normal(size=(B, n)), rng.normal(size=(B, n))
    log_ratios = rng.normal(scale=0.8, size=(B, n))
    q = retrace(q_taken, eq_next, log_ratios, r, term, trunc, mask, gamma, lam)
    c = lam * np.minimum(1.0, np.exp(log_ratios))
    for b in range(B):
        for s in range(L[b]):
            tot, coef = q_taken[b, s], 1.0
            for t in range(s, L[b]):
                if t > s:
                    coef *= gamma * c[b, t]
                eq = 0.0 if term[b, t] else eq_next[b, t]
                tot += coef * (r[b, t] + gamma * eq - q_taken[b, t])
            assert q[b, s] == pytest.approx(tot, abs=1e-12)


def test_invalid_entries_are_ignored_and_bad_input_raises():
    r = np.array([[1.0, np.nan]])
    mask = np.array([[True, False]])
    f = np.zeros((1, 2), dtype=bool)
    f3 = np.zeros((1, 3), dtype=bool)
    assert nstep_returns(r, [[2.0, np.nan]], f, f, mask, 0.5)[0] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="rewards holds non-finite"):
        nstep_returns(np.array([[np.nan, 0.0]]), [0.0], f, f, mask, 0.5)
    with pytest.raises(ValueError, match="prefix"):
        nstep_returns(np.ones((1, 3)), [0.0], f3, f3, np.array([[True, False, True]]), 0.5)
    with pytest.raises(ValueError, match="at least one valid step"):
        nstep_returns(np.ones((1, 2)), [0.0], f, f, np.array([[False, False]]), 0.5)
    with pytest.raises(ValueError, match="gamma"):
        nstep_returns(np.ones((1, 2)), [0.0], f, f, mask, 1.5)
    with pytest.raises(ValueError, match="terminated must have shape"):
        nstep_returns(np.ones((1, 2)), [0.0], np.zeros(2, dtype=bool), f, mask, 0.5)
    with pytest.raises(ValueError, match="log_rhos"):
        vtrace(np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 2)), [[np.inf, 0.0]], f, f, mask, 0.5)
    with pytest.raises(ValueError, match="lam"):
        retrace(np.ones((1, 2)), np.ones((1, 2)), np.zeros((1, 2)), np.ones((1, 2)), f, f, mask, 0.5, 2.0)
    # log ratio -inf (pi(a) = 0) is allowed: rho = c = 0
    vs, adv = vtrace(np.ones((1, 2)), np.zeros((1, 2)), np.zeros((1, 2)), [[-np.inf, 0.0]], f, f, mask, 0.5)
    assert vs[0, 0] == 0.0 and adv[0, 0] == 0.0


@pytest.mark.parametrize("n", [1, 3])
def test_off_policy_td_from_replay_learns_the_true_value_under_truncation(n):
    """Reward 1, gamma 0.9, truncated every 10 steps, never terminated: TD(n) from replay converges to 10."""
    gamma, steps = 0.9, 2000
    env = ContinuingChainEnv(n_states=5, max_episode_steps=10)
    buf = ReplayBuffer(1000, obs_shape=(5,), seed=0)
    rng = np.random.default_rng(0)  # behaviour policy: uniform random actions (value is policy-independent)
    obs, _ = env.reset(seed=0)
    for _ in range(steps):
        a = int(rng.integers(2))
        nxt, r, term, trunc, _ = env.step(a)
        buf.add(obs, a, r, nxt, term, trunc)  # next_obs is the real state also on the truncated step
        obs = env.reset()[0] if (term or trunc) else nxt
    assert buf.episode_spans()["truncated"].sum() >= 99

    def train(treat_truncation_as_termination: bool) -> np.ndarray:
        v, alpha = np.zeros(5), 0.5
        for _ in range(600):
            w = buf.sample_windows(64, n)
            s0 = w["obs"][:, 0].argmax(1)
            s_end = w["next_obs"][np.arange(64), w["length"] - 1].argmax(1)
            term = w["terminated"] | w["truncated"] if treat_truncation_as_termination else w["terminated"]
            g = nstep_returns(w["rewards"], v[s_end], term, w["truncated"], w["mask"], gamma)
            err = np.zeros(5)
            np.add.at(err, s0, g - v[s0])
            v += alpha * err / np.maximum(np.bincount(s0, minlength=5), 1)
        return v

    v = train(False)
    np.testing.assert_allclose(v, env.value_function(gamma), atol=1e-6)
    biased = train(True)  # the classic bug, for contrast: far below 10 where the cut happens (state 4)
    assert np.all(biased < 7.0)  # about 3.7-5.8 here, lowest at the state where the cut happens


def test_docs_page_examples_run():
    page = Path(__file__).resolve().parents[2] / "docs" / "episodic-truncated-continuing.md"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
