"""TRPO, PPO, LCPO-P and the prescient agents through ``lcpo.online.run.execute``: interrupted-and-resumed runs equal
uninterrupted ones, and save/load gives identical actions (as tests/test_run.py does for A2C and LCPO)."""

import numpy as np
import pytest

from lcpo.agents import AGENTS
from lcpo.contexts import resolve_trace
from lcpo.envs.registration import make_env
from lcpo.online.run import RunConfig, execute
from lcpo.online.threads import limit_threads
from summaries import comparable

TRACE = resolve_trace("wind-3", length=20_000)

#: small but non-trivial settings: every agent updates (or trains) several times within 3,000 steps
OVERRIDES = {
    "trpo": {"rollout_steps": 500},
    "ppo": {},
    "lcpo-p": {"reservoir_size": 1000},
    "prescient-a2c": {"train_steps": 2000},
    "prescient-trpo": {"train_steps": 2000, "rollout_steps": 500},
    "prescient-ddqn": {"train_steps": 500, "learning_starts": 100, "batch_size": 32},
    "prescient-sac": {"train_steps": 500, "learning_starts": 100, "batch_size": 32},
}


@pytest.fixture(autouse=True)
def _one_thread():
    with limit_threads(1):  # torch and BLAS: updates are also called directly, outside learn()
        yield


def _stable(summary):
    return comparable(summary, "resumed_from")


@pytest.mark.parametrize("agent", list(OVERRIDES))
def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path, agent):
    cfg = RunConfig(trace="wind-3", trace_length=20_000, agent=agent, steps=3000, seed=4, checkpoint_every=1000,
                    overrides=OVERRIDES[agent])
    full = execute(cfg, tmp_path / "full")
    assert full["steps"] == 3000 and full["episodes"] == 15 and np.isfinite(full["lifelong_return"])
    if agent.startswith("prescient"):
        assert full["updates"] == 0  # frozen online
    else:
        assert full["updates"] == 3000 // AGENTS[agent].Hyperparameters(**OVERRIDES[agent]).rollout_steps
    part = execute(cfg, tmp_path / "part", stop_at=2000)
    assert part == {"interrupted_at": 2000}
    resumed = execute(cfg, tmp_path / "part")
    assert _stable(resumed) == _stable(full)
    assert (tmp_path / "part" / "episodes.csv").read_text() == (tmp_path / "full" / "episodes.csv").read_text()


@pytest.mark.parametrize("agent", list(OVERRIDES))
def test_save_load_gives_identical_actions(tmp_path, agent):
    cls = AGENTS[agent]
    a = cls(make_env("lcpo/WindyPendulum-v0", trace=TRACE), seed=3, **OVERRIDES[agent]).learn(1100)
    a.save(tmp_path / "a")
    b = cls.load(tmp_path / "a", make_env("lcpo/WindyPendulum-v0", trace=TRACE))
    obs = np.random.default_rng(0).normal(size=(50, 9)).astype(np.float32)
    for o in obs:
        np.testing.assert_array_equal(a.act(o), b.act(o))
        np.testing.assert_array_equal(a.act(o, deterministic=True), b.act(o, deterministic=True))
    assert b.state_dict().keys() == a.state_dict().keys()
