"""Policy snapshots during a run and the per-regime drift table (lcpo.experiments.drift)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import lcpo.envs  # noqa: F401
from lcpo.agents import A2C
from lcpo.envs.context import get_context_spec
from lcpo.experiments.drift import PolicyProbe, drift_table, load_snapshots
from lcpo.online.run import RunConfig, execute


def _agent_with_two_regimes(n_calm: int, n_windy: int):
    env = gym.make("lcpo/WindyPendulum-v0", trace="zero")
    agent = A2C(env, seed=0, rollout_steps=n_calm + n_windy, hidden=(8,))
    idx = list(get_context_spec(env).indices)
    rng = np.random.default_rng(0)
    for i in range(n_calm + n_windy):
        o = rng.normal(size=env.observation_space.shape).astype(np.float32)
        o[idx] = 0.0 if i < n_calm else 3.0  # two context regimes
        agent.rollout.add(o, np.zeros(agent.action_dims, np.int64), 0.0, o, False, False, 0.99)
    return env, agent, idx


def test_snapshot_cadence_resume_and_drift_equal_the_analytic_kl(tmp_path):
    env, agent, idx = _agent_with_two_regimes(40, 24)
    probe = PolicyProbe(tmp_path, every=100, per_snapshot=16, seed=3)
    probe.on_update(50, agent)          # before the first multiple: nothing
    probe.on_update(100, agent)         # k = 1
    probe.on_update(150, agent)         # still k = 1: nothing new
    # shift the logits of action bin 0 by +1 on every state: the same known KL everywhere
    last = [m for m in agent.actor.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        delta = torch.zeros_like(last.bias)
        delta[0] = 1.0
        last.bias += delta
    probe.on_update(230, agent)         # k = 2
    snaps = load_snapshots(tmp_path)
    assert [s["step"] for s in snaps] == [100, 230]
    assert all(s["obs"].shape == (16, agent.obs_dim) for s in snaps)
    table = drift_table(tmp_path, A2C(env, seed=1, hidden=(8,)).actor, idx, regimes=2, lag=1)
    assert sorted(table["regime"]) == [0, 1] and (table["step"] == 230).all()
    assert table["n_states"].sum() == 32
    # KL(p_old || p_new) for logits z and z + e_0: sum_a p_a (log p_a - log p'_a) = log(1 + p_0 (e - 1)) - p_0,
    # only in the first action dimension: mean over D dimensions
    # (the bias shift does not depend on the state, but the body's output does: compare with the exact per-state KL)
    with torch.no_grad():
        x = torch.from_numpy(np.concatenate([s["obs"] for s in snaps]))
        agent_logits_new = agent.actor.log_probs(x).double()
        last.bias -= delta
        agent_logits_old = agent.actor.log_probs(x).double()
    p = agent_logits_old.exp()
    exact = (p * (agent_logits_old - agent_logits_new)).sum(-1).mean(-1)
    assert table["kl"].min() > 0
    state_mean = float((table["kl"] * table["n_states"]).sum() / table["n_states"].sum())
    assert state_mean == pytest.approx(float(exact.mean()), rel=1e-4)
    p0 = p[:, 0, 0]
    closed = (torch.log1p(p0 * (np.e - 1)) - p0) / agent.action_dims
    np.testing.assert_allclose(exact.numpy(), closed.numpy(), rtol=1e-4)  # float32 logits
    # W1 over the ordered bins: sum_k |CDF_old(k) - CDF_new(k)|; here only the first bin of the first dimension
    # gains mass, so every CDF entry of that dimension below the last moves by the same amount as p_0
    p_new0 = agent_logits_new.exp()[:, 0, :]
    w1_exact = ((p[:, 0, :].cumsum(-1) - p_new0.cumsum(-1)).abs().sum(-1) / agent.action_dims).numpy()
    state_w1 = float((table["w1"] * table["n_states"]).sum() / table["n_states"].sum())
    assert state_w1 == pytest.approx(float(w1_exact.mean()), rel=1e-4)
    # closed form: with D = 1 + p0 (e - 1), CDF'(k) - CDF(k) = (e - 1) p0 (1 - CDF(k)) / D for every bin k
    p0d = p[:, 0, 0]
    cdf = p[:, 0, :].cumsum(-1)
    closed_w1 = ((np.e - 1) * p0d * (1 - cdf).sum(-1) / (1 + p0d * (np.e - 1)) / agent.action_dims).numpy()
    np.testing.assert_allclose(w1_exact, closed_w1, rtol=1e-4)  # float32 logits
    # regime 0 is the calm one (smaller context norm); the active regime at step 230 holds most of its draws
    assert table.loc[table["active"], "regime"].tolist() in ([0], [1])
    # resume: a probe restarted from a checkpoint at step 230 does not record k = 2 again
    again = PolicyProbe(tmp_path, every=100, seed=3)
    again.resume_from(230)
    again.on_update(260, agent)
    assert len(load_snapshots(tmp_path)) == 2


def test_a_probe_resumed_between_an_update_and_a_multiple_records_the_next_update(tmp_path):
    """A run checkpointed at step 210 (probes every 100 steps; the last update at 150, the next at 240) and
    resumed never recorded k = 2: the resume took 210 // 100 as the multiple already recorded (the same defect
    as the compact snapshots', lcpo.experiments.snapshots)."""
    _, agent, _ = _agent_with_two_regimes(40, 24)
    probe = PolicyProbe(tmp_path / "once", every=100, per_snapshot=8, seed=3)
    for step in (150, 240, 330):
        probe.on_update(step, agent)
    cut = PolicyProbe(tmp_path / "cut", every=100, per_snapshot=8, seed=3)
    cut.on_update(150, agent)
    again = PolicyProbe(tmp_path / "cut", every=100, per_snapshot=8, seed=3)
    again.resume_from(210)
    for step in (240, 330):
        again.on_update(step, agent)
    assert [s["step"] for s in load_snapshots(tmp_path / "cut")] == [150, 240, 330]
    assert [s["step"] for s in load_snapshots(tmp_path / "once")] == [150, 240, 330]


def test_run_records_snapshots_only_when_asked_and_keeps_old_run_ids(tmp_path):
    cfg = RunConfig(trace="wind-3", trace_length=2000, agent="a2c", steps=1000, probe_every=400,
                    checkpoint_every=0)
    execute(cfg, tmp_path / "p")
    assert [s["step"] for s in load_snapshots(tmp_path / "p")] == [400, 800]
    assert "probe_every" not in RunConfig(agent="a2c").to_dict()  # run ids of unprobed runs are unchanged
    with pytest.raises(ValueError, match="probe_every"):
        RunConfig(agent="a2c", probe_every=-1)
    with pytest.raises(ValueError, match="lag"):
        drift_table(tmp_path / "p", None, [3], lag=0)
