"""Shared checks for the continual-learning baselines: resume equality through runs and save/load equality."""

import gymnasium as gym
import numpy as np
import pandas as pd

import lcpo.envs  # noqa: F401
from lcpo.online.run import RunConfig, execute
from summaries import comparable


def check_resume_equality(tmp_path, agent: str, overrides: dict, steps: int = 3000, stop_at: int = 2000,
                          checkpoint_every: int = 1000) -> dict:
    """Run ``agent`` on windy Pendulum uninterrupted and interrupted at ``stop_at`` then resumed; assert the
    summaries (apart from timing), episodes and diagnostics are identical. Returns the full run's summary."""
    cfg = RunConfig(trace="wind-3", trace_length=20_000, agent=agent, steps=steps, seed=4,
                    checkpoint_every=checkpoint_every, overrides=overrides)
    full = execute(cfg, tmp_path / "full")
    assert full["steps"] == steps and full["updates"] > 0 and np.isfinite(full["lifelong_return"])
    assert execute(cfg, tmp_path / "part", stop_at=stop_at) == {"interrupted_at": stop_at}
    resumed = execute(cfg, tmp_path / "part")
    assert comparable(resumed, "resumed_from") == comparable(full, "resumed_from")
    assert (tmp_path / "part" / "episodes.csv").read_text() == (tmp_path / "full" / "episodes.csv").read_text()
    diag = [pd.read_csv(tmp_path / d / "diagnostics.csv") for d in ("part", "full")]
    pd.testing.assert_frame_equal(diag[0].sort_index(axis=1), diag[1].sort_index(axis=1))
    return full


def check_save_load_actions(tmp_path, cls, overrides: dict, steps: int = 600, continue_steps: int = 200):
    """Train ``cls`` for ``steps``, save, load into a twin; assert identical sampled and greedy actions on 50
    random observations, then identical episodes after ``continue_steps`` more steps of both. Returns both."""
    def make():
        return gym.make("lcpo/WindyPendulum-v0", trace="wind-3")

    agent = cls(make(), seed=3, **overrides).learn(steps)
    agent.save(tmp_path / "a")
    twin = cls.load(tmp_path / "a", make())
    obs = np.random.default_rng(0).normal(size=(50, agent.obs_dim)).astype(np.float32)
    for o in obs:
        np.testing.assert_array_equal(agent.act(o), twin.act(o))
        np.testing.assert_array_equal(agent.act(o, deterministic=True), twin.act(o, deterministic=True))
    return agent, twin
