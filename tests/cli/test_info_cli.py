"""`lcpo agents list`: one clean sentence per agent."""

from __future__ import annotations

import re

from lcpo.agents import AGENTS
from lcpo.cli.info import doc_summary
from lcpo.cli.main import main


def test_agents_list_one_clean_sentence_each(capsys):
    assert main(["agents", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(AGENTS)
    for line in lines:
        summary = line.split(None, 1)[1]
        assert "module docstring" not in summary and "`" not in summary and ":class:" not in summary
        assert summary.endswith((".", "\u2026")) and summary.count(". ") == 0
    bfdqn = next(line for line in lines if line.startswith("bfdqn "))
    assert bfdqn.endswith("after every optimizer step.")


def test_doc_summary_first_sentence_markup_and_word_boundary():
    class Thing:
        """Uses :class:`lcpo.Foo` and ``bar`` (see module docstring). Second sentence.

        Details.
        """

    assert doc_summary(Thing) == "Uses lcpo.Foo and bar."

    class Long:
        """Alpha beta gamma delta epsilon zeta eta theta."""

    cut = doc_summary(Long, width=20)
    assert cut == "Alpha beta gamma\u2026" and len(cut) <= 20



def test_static_summaries_are_the_docstrings_first_sentences():
    from lcpo.agents import SUMMARIES

    assert set(SUMMARIES) == set(AGENTS)
    for name in AGENTS:
        assert SUMMARIES[name] == doc_summary(AGENTS[name]), name


def test_agents_show_prints_no_raw_markup(capsys):
    for name in sorted(AGENTS):
        assert main(["agents", "show", name]) == 0
        out = capsys.readouterr().out
        assert "``" not in out and not re.search(r":\w+:`", out), name
    main(["agents", "show", "lcpo"])
    out = capsys.readouterr().out
    assert '"auto" (the environment\'s default_network, else "mlp")' in out  # markup gone, words kept


def test_envs_list_shows_each_kind(capsys):
    assert main(["envs", "list"]) == 0
    out = capsys.readouterr().out
    block = out.split("lcpo/StragglerMitigation-v0\n", 1)[1].split("\nlcpo/", 1)[0]
    assert "continuing (default --reset never" in block
    block = out.split("lcpo/WindyPendulum-v0\n", 1)[1].split("\nlcpo/", 1)[0]
    assert "episodic (default --reset end)" in block and "MultiDiscrete([15])" in block
    assert "--env MODULE:ID or MODULE:CLASS" in out


def test_agents_show_table_is_what_the_dataclasses_say():
    """`lcpo agents show` prints lcpo.cli.agent_table (no PyTorch import); it must equal the live rendering."""
    from lcpo.cli.agent_table import SHOW
    from lcpo.cli.info import render_hyperparameters

    assert set(SHOW) == set(AGENTS)
    stale = [name for name in sorted(AGENTS) if SHOW[name] != render_hyperparameters(name)]
    assert not stale, (f"lcpo/cli/agent_table.py is stale for {stale}: regenerate it with "
                       "python -c 'from lcpo.cli.info import write_agent_table; write_agent_table()'")
