"""The study configs of issue 27 item 6 (configs/study-*.toml) and the cost arithmetic of benchmarks/study_cost.py.

The configs must say what their comments claim: the issue's seed counts per agent, the paper's lengths, the
straggler runs with the paper's preset and LCPO-Med's threshold (the authors' ``--lcpo_thresh -6``, i.e.
``D^2 > 24``) on the authors' 4,608 x 4,500 steps; the cost script groups the cells by what sets their speed and
adds up ``seeds x steps / rate`` (plus a prescient agent's offline training).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cost(load_benchmark):
    return load_benchmark("study_cost")


def _seeds(cells) -> dict[tuple[str, str], int]:
    return {(c["config"]["trace"], c["config"]["agent"]): len(c["seeds"]) for c in cells}


def test_pendulum_extra_has_the_issues_seed_counts_and_the_papers_lengths(cost):
    cells = cost.cells_of(REPO / "configs" / "study-pendulum-extra.toml")
    seeds = _seeds(cells)
    agents = {"ppo": 5, "ddqn": 3, "sac": 3, "prescient-a2c": 5, "prescient-trpo": 5, "prescient-ddqn": 5,
              "prescient-sac": 5}
    assert seeds == {(t, a): n for t in ("wind-1", "wind-2", "wind-3", "wind-4") for a, n in agents.items()}
    steps = {c["config"]["trace"]: (c["steps"], c["config"]["trace_length"], c["config"]["warmup_steps"])
             for c in cells}
    assert steps == {"wind-1": (20_000_000, 20_000_000, 6_000_000), "wind-2": (20_000_000, 20_000_000, 6_000_000),
                     "wind-3": (8_000_000, 8_000_000, 6_000_000), "wind-4": (8_000_000, 8_000_000, 6_000_000)}
    # one speed group per agent: the trace changes the wind, not the work
    assert len({c["group"] for c in cells}) == len(agents)


def test_straggler_study_is_lcpo_med_and_a2c_with_the_papers_preset(cost):
    from lcpo.envs.straggler.presets import OOD_THRESHOLDS, straggler_overrides
    from lcpo.online.run import RunConfig

    cells = cost.cells_of(REPO / "configs" / "study-straggler.toml")
    assert _seeds(cells) == {(w, a): 10 for w in ("azure-llm", "synthetic-ramp") for a in ("lcpo", "a2c")}
    for c in cells:
        agent = c["config"]["agent"]
        assert c["steps"] == 4608 * 4500 and c["config"]["reset"] == "never"
        assert c["config"]["overrides"] == straggler_overrides(agent)  # the preset, spelled out in the TOML
        if agent == "lcpo":
            assert c["config"]["overrides"]["ood_threshold"] == OOD_THRESHOLDS["med"] == 24.0
            # the reservoir is left to the run: 1% of it, the authors' 4,608 x 4,500 // 100
            assert RunConfig.from_dict(c["config"]).agent_overrides()["reservoir_size"] == 207_360


def test_mujoco_studies_run_three_agents_at_five_seeds_on_four_traces(cost):
    for name, envs in (("study-mujoco", ("WindyInvertedPendulum-v0", "WindyInvertedDoublePendulum-v0")),
                       ("study-hopper-reacher", ("WindyHopper-v0", "WindyReacher-v0"))):
        cells = cost.cells_of(REPO / "configs" / f"{name}.toml")
        got = {(c["config"]["env"].split("/")[-1], c["config"]["trace"], c["config"]["agent"]): len(c["seeds"])
               for c in cells}
        assert got == {(e, t, a): 5 for e in envs for t in ("wind-1", "wind-2", "wind-3", "wind-4")
                       for a in ("lcpo", "a2c", "trpo")}


def test_core_hours_are_seeds_times_steps_over_the_rate_plus_offline_training(cost):
    cell = {"seeds": [0, 1, 2], "steps": 8_000_000}
    online = {"steps_per_cpu_s": 20_000.0, "train_steps_per_cpu_s": None, "full_train_steps": 0}
    assert cost.cell_core_hours(cell, online) == pytest.approx(3 * 8e6 / 2e4 / 3600)
    prescient = {"steps_per_cpu_s": 25_000.0, "train_steps_per_cpu_s": 10_000.0, "full_train_steps": 1_600_000}
    assert cost.cell_core_hours(cell, prescient) == pytest.approx(3 * (8e6 / 2.5e4 + 1.6e6 / 1e4) / 3600)
