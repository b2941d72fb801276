"""``lcpo envs list`` and ``lcpo agents list|show``: what the library offers, with context and settings.

``envs list`` and ``agents list`` print static tables (:data:`lcpo.cli.catalog.ENVS`, :data:`lcpo.agents.SUMMARIES`)
and import no environment, no agent and no PyTorch; ``agents show`` imports the one agent it describes.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re

__all__ = ["add_parsers", "doc_summary", "hyperparameter_docs", "plain_text"]


def hyperparameter_docs(cls) -> dict[str, str]:
    """Field descriptions from the ``Attributes:`` docstring sections of a hyperparameter dataclass and its bases
    (a subclass's description of a field wins)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        out.update(_attribute_docs(klass.__dict__.get("__doc__") or ""))
    return out


def _attribute_docs(doc: str) -> dict[str, str]:
    doc = inspect.cleandoc(doc)
    out, current = {}, None
    in_attrs = False
    for line in doc.splitlines():
        if line.strip() == "Attributes:":
            in_attrs = True
            continue
        if not in_attrs:
            continue
        if line.startswith("    ") and not line.startswith("        ") and ":" in line:
            current, text = line.strip().split(":", 1)
            out[current] = text.strip()
        elif line.startswith("        ") and current:
            out[current] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break
    return out


def _envs_list(args) -> int:
    from lcpo.cli.catalog import ENVS

    for env_id, info in ENVS.items():
        kind = ("continuing (default --reset never; lifelong return per 200-step window)" if info.continuing
                else "episodic (default --reset end)")
        ctx = ", ".join(info.context) if info.context else "none"
        print(f"{env_id}\n    {info.summary}\n    {kind}; observation {info.observation}, action {info.action}\n"
              f"    context: {ctx}")
    print("\nThe windy environments become continuing with --env-arg continuing=true. Your own environment: "
          "--env MODULE:ID or MODULE:CLASS (docs/bring-your-own.md).")
    return 0


def _agents_list(args) -> int:
    from lcpo.agents import AGENTS, SUMMARIES

    for name in sorted(AGENTS):
        print(f"{name:<16} {SUMMARIES.get(name, '')}")
    return 0


def plain_text(text: str) -> str:
    """Docstring text without reST markup: ``:class:`~a.B``` -> ``a.B``, double backquotes dropped, spaces
    collapsed (for terminal output)."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")
    return " ".join(text.split())


def doc_summary(obj, width: int = 120) -> str:
    """One clean sentence summarising ``obj``: the first sentence of its docstring's first paragraph, with
    reST markup (``:class:`x```, double backquotes) and "(see module docstring)" removed, cut at a word boundary
    with an ellipsis if longer than ``width`` characters ("" without a docstring)."""
    doc = inspect.getdoc(obj) or ""
    text = plain_text(doc.split("\n\n", 1)[0])
    text = re.sub(r"\s*\(see (the )?module docstring\)", "", text)
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = match.group(1) if match else text
    if len(sentence) > width:
        sentence = sentence[:width - 1].rsplit(" ", 1)[0].rstrip(",;:(") + "\u2026"
    return sentence


def _agents_show(args) -> int:
    from lcpo.agents import AGENTS

    if args.name not in AGENTS:
        raise ValueError(f"unknown agent {args.name!r}; known: {sorted(AGENTS)}")
    cls = AGENTS[args.name].Hyperparameters
    docs = hyperparameter_docs(cls)
    for f in dataclasses.fields(cls):
        print(f"{f.name} = {json.dumps(getattr(cls(), f.name))}\n    {plain_text(docs.get(f.name, ''))}")
    return 0


def add_parsers(subparsers) -> None:
    """Add the ``envs`` and ``agents`` commands."""
    p = subparsers.add_parser("envs", help="list environments: declared context, episodic or continuing")
    s = p.add_subparsers(dest="envs_command", required=True)
    s.add_parser("list", help="all lcpo environment ids").set_defaults(func=_envs_list)
    p = subparsers.add_parser("agents", help="list agents and show their hyperparameters")
    s = p.add_subparsers(dest="agents_command", required=True)
    s.add_parser("list", help="all agent names").set_defaults(func=_agents_list)
    sp = s.add_parser("show", help="hyperparameters of an agent, with defaults and meaning")
    sp.add_argument("name")
    sp.set_defaults(func=_agents_show)
