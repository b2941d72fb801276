"""``lcpo envs list`` and ``lcpo agents list|show``: what the library offers, with context and settings."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re

__all__ = ["add_parsers", "doc_summary", "hyperparameter_docs"]


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
    from lcpo.envs.registration import ENV_IDS, make_env

    for env_id in ENV_IDS:
        try:
            env = make_env(env_id)
            spec = getattr(env.unwrapped, "context_spec", None)
            ctx = "none" if spec is None else ", ".join(spec.names)
            print(f"{env_id}\n    observation {env.observation_space.shape}, action {env.action_space}\n"
                  f"    context: {ctx}")
            env.close()
        except Exception as exc:  # an environment whose optional parts are missing still gets listed
            print(f"{env_id}\n    unavailable: {type(exc).__name__}: {exc}")
    return 0


def _agents_list(args) -> int:
    from lcpo.agents import AGENTS

    for name, cls in sorted(AGENTS.items()):
        print(f"{name:<16} {doc_summary(cls)}")
    return 0


def doc_summary(obj, width: int = 120) -> str:
    """One clean sentence summarising ``obj``: the first sentence of its docstring's first paragraph, with
    reST markup (``:class:`x```, double backquotes) and "(see module docstring)" removed, cut at a word boundary
    with an ellipsis if longer than ``width`` characters ("" without a docstring)."""
    doc = inspect.getdoc(obj) or ""
    text = " ".join(doc.split("\n\n", 1)[0].split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")
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
        print(f"{f.name} = {json.dumps(getattr(cls(), f.name))}\n    {docs.get(f.name, '')}")
    return 0


def add_parsers(subparsers) -> None:
    """Add the ``envs`` and ``agents`` commands."""
    p = subparsers.add_parser("envs", help="list environments and their declared context")
    s = p.add_subparsers(dest="envs_command", required=True)
    s.add_parser("list", help="all lcpo environment ids").set_defaults(func=_envs_list)
    p = subparsers.add_parser("agents", help="list agents and show their hyperparameters")
    s = p.add_subparsers(dest="agents_command", required=True)
    s.add_parser("list", help="all agent names").set_defaults(func=_agents_list)
    sp = s.add_parser("show", help="hyperparameters of an agent, with defaults and meaning")
    sp.add_argument("name")
    sp.set_defaults(func=_agents_show)
