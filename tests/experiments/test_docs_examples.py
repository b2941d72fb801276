"""The examples of docs/experiments.md and docs/population.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_experiments_md_full_sample_config_is_valid(tmp_path):
    """The sample config that lists every key loads and expands (before: its [per_agent.ppo] named an agent
    outside `agents`, and its traces a file that does not exist)."""
    from lcpo.experiments.config import expand, load_config

    text = (DOCS / "experiments.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if 'name = "my-study"' in b)
    path = tmp_path / "my-study.toml"
    path.write_text(block)
    specs = expand(load_config(path))
    agents = {s.config["agent"] for s in specs}
    assert agents == {"lcpo", "a2c", "trpo", "ppo"}
    ppo_seeds = {s.config["seed"] for s in specs if s.config["agent"] == "ppo"}
    assert ppo_seeds == set(range(5))


def test_population_md_slots_are_positions_in_seeds():
    """docs/population.md: `pop.episodes[k]` and `seed_state_dict(k)` index slots (positions in `seeds`)."""
    import numpy as np

    from lcpo.online.population import Population

    pop = Population("a2c", "lcpo/WindyPendulum-v0", seeds=[10, 11], trace="wind-3", trace_length=600)
    solo = Population("a2c", "lcpo/WindyPendulum-v0", seeds=[11], trace="wind-3", trace_length=600)
    pop.learn(400)
    solo.learn(400)
    a, b = pop.agents.seed_state_dict(1), solo.agents.seed_state_dict(0)
    for key in ("actor", "critic"):
        for name, value in a[key].items():
            assert np.array_equal(value.numpy(), b[key][name].numpy()), (key, name)
    assert pop.episodes[1] == solo.episodes[0]


def test_a_population_closes_its_vector_env_and_refuses_to_learn_after(monkeypatch):
    from lcpo.online.population import Population

    closed = []
    with Population("a2c", seeds=[0, 1], trace="wind-3", trace_length=600, hidden=[16]) as pop:
        monkeypatch.setattr(pop.stream.venv, "close", lambda: closed.append(True))
        assert pop.learn(200).steps == 200
    assert closed == [True]
    pop.close()  # idempotent
    assert closed == [True]
    import pytest

    with pytest.raises(RuntimeError, match="this Population is closed"):
        pop.learn(1)
