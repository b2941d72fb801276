"""`lcpo agents list`: one clean sentence per agent."""

from __future__ import annotations

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

