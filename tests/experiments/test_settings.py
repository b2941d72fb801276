"""docs/settings.md is the rendered settings table, and the defaults it states hold (issue 27, item 3)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lcpo.agents import AGENTS
from lcpo.agents.base import resolve_hyperparameters
from lcpo.experiments import settings as S
from lcpo.online.run import RunConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_committed_page_is_the_rendered_table():
    """A default changed without regenerating the page (or a page edited by hand) fails here."""
    assert DOC.read_text() == S.render_document(), (
        "docs/settings.md is stale: python -m lcpo.experiments.settings > docs/settings.md")


@pytest.mark.parametrize("spec", S.SETTINGS, ids=lambda s: s.title.split(" (")[0])
def test_every_same_row_matches_our_live_value_and_every_difference_has_a_reason(spec):
    values = S.agent_values(spec)
    for row in spec.rows:
        status = S.row_status(spec, row, values)
        if status == "differs":
            assert row.reason, f"{spec.title}: {row.name} differs without a reason"
        else:
            assert not row.reason, f"{spec.title}: {row.name} is the same but keeps a reason; drop it"
            if row.ours is None and not row.run_length:  # field row: the live default equals the target
                assert S._equal(values[row.name], row.target()), (spec.title, row.name)


def test_a_changed_default_flips_its_row():
    """The status is computed, not written: the same row with another target reads ``differs``."""
    row = S.Row("entropy_base", 0.03, 0.03)
    assert S.row_status(S._LCPO, row) == "same"
    assert S.row_status(S._LCPO, dataclasses.replace(row, authors=0.05)) == "differs"
    rl = next(r for r in S._LCPO.rows if r.name == "reservoir_size")
    assert S.row_status(S._LCPO, dataclasses.replace(rl, expect={20_000_000: 200_000, 8_000_000: 200_000})) \
        == "differs"


def test_every_row_names_a_real_field():
    for spec in S.SETTINGS:
        names = {f.name for f in dataclasses.fields(AGENTS[spec.agent].Hyperparameters)}
        for row in spec.rows:
            if row.ours is None:
                assert row.name in names, (spec.title, row.name)


def test_stale_runs_finds_a_changed_default(tmp_path):
    """A run recorded with the old 200K reservoir on an 8M-step trace is listed; one recorded with today's
    values is not."""
    run = RunConfig(agent="lcpo", steps=8_000_000).to_dict()
    today = dataclasses.asdict(resolve_hyperparameters(AGENTS["lcpo"].Hyperparameters, None,
                                                       {"reservoir_size": 80_000}))
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps({"run": run, "hyperparameters":
                                                             {**today, "reservoir_size": 200_000}}))
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "config.json").write_text(json.dumps({"run": run, "hyperparameters": today}))
    stale = S.stale_runs(tmp_path)
    assert [(r.path, r.changes) for r in stale] == [("old", {"reservoir_size": (200_000, 80_000)})]
    assert "`reservoir_size` 200,000 -> 80,000" in S.stale_runs_markdown([tmp_path], tmp_path)


def test_settings_markdown_heading_level():
    text = S.settings_markdown(level=3)
    assert text.startswith("### LCPO\n")
    assert "| `entropy_base` | 0.03 | 0.03 | 0.03 | same |" in text


def test_continual_baselines_replay_row_names_the_agents_that_keep_a_fixed_buffer():
    """The continual baselines' `buffer_size` row is computed from EWC ("all samples", same) but its table also
    stands for CLEAR and BF-DQN (and PT-DQN beside it), whose replay does not follow the run's length: the
    row's note must say so with their live sizes, not leave "same" unqualified."""
    from lcpo.agents.run_length import RUN_LENGTH_RULES

    (spec,) = [s for s in S.SETTINGS if s.title.startswith("Continual-learning baselines")]
    (row,) = [r for r in spec.rows if r.name == "buffer_size"]
    note = S._note(spec, row)
    for agent, label in (("clear", "CLEAR"), ("bfdqn", "BF-DQN"), ("ptdqn", "PT-DQN")):
        assert "buffer_size" not in RUN_LENGTH_RULES.get(agent, {})
        size = AGENTS[agent].Hyperparameters().buffer_size
        assert label in note and f"{size:,}" in note, (agent, size, note)
