"""Sweep configuration files: a data-only TOML grid expanded into run specs with stable ids.

A sweep file describes the cross product env x trace x agent x seed x hyperparameter overrides of a study
like the paper's (Section 5, appendix F: 5 environments x 4 traces x 12+ agents x up to 25 seeds). It is
read with :mod:`tomllib` (pure data, never executed) and validated; every error names the offending key,
e.g. ``overrides.lcpo.ood_treshold``. The format is documented in ``docs/experiments.md``::

    name = "smoke"
    steps = 2000
    warmup_steps = 0
    seeds = 2                          # an integer n means seeds 0..n-1; or a list [0, 3, 7]
    envs = ["lcpo/WindyPendulum-v0"]
    traces = ["ndbc-46002"]
    agents = ["lcpo", "a2c"]
    trace_length = 5000                # optional; a list makes it a grid axis
    reset = "end"                      # end | never | every:N; default: per env, what the env declares
    checkpoint_every = 1000
    diagnostics_every = 1000           # optional; rows of diagnostics.csv

    [overrides.lcpo]                   # per-agent hyperparameter grid: every list is an axis
    ood_threshold = [0.5, 1.0]

    [env_kwargs."lcpo/WindyPendulum-v0"]   # keyword arguments for one environment (not a grid)

    [per_trace."wind-3"]               # optional per-trace steps / trace_length / warmup_steps
    steps = 8000000                    # (paper: traces 1-2 run 20M steps, traces 3-4 8M)

    [per_agent.ppo]                    # optional per-agent seeds (a count or a list), replacing ``seeds``
    seeds = 5

A list-valued hyperparameter is written as a list of lists (``hidden = [[64, 64]]``), since a bare list
is a grid axis. ``envs`` may name a user's environment as ``"MODULE:ID"`` or ``"MODULE:CLASS"``
(:mod:`lcpo.envs.registration`); without ``reset`` each env gets the reset its declared kind calls for
(``"end"`` episodic, ``"never"`` continuing: :mod:`lcpo.envs.task`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10: the same parser from PyPI
    import tomli as tomllib

from lcpo.persistence.strict_json import show

__all__ = [
    "DEFAULT_EXECUTOR",
    "ConfigError",
    "RunSpec",
    "SweepConfig",
    "config_hash",
    "expand",
    "load_config",
    "make_run_id",
    "parse_config",
    "slug",
]

#: Module that provides ``RunConfig`` (with ``from_dict``/``to_dict``), ``execute`` and ``AGENTS``.
DEFAULT_EXECUTOR = "lcpo.online.run"

_RESET_RE = re.compile(r"^(end|never|every:[1-9][0-9]*)$")
_TOP_KEYS = {
    "name", "out", "steps", "warmup_steps", "seeds", "envs", "traces", "agents", "trace_length", "reset",
    "checkpoint_every", "diagnostics_every", "probe_every", "tensorboard", "overrides", "env_kwargs", "per_trace",
    "per_agent",
}
_REQUIRED = ("steps", "envs", "traces", "agents")
_PER_TRACE_KEYS = {"steps", "trace_length", "warmup_steps"}
_PER_AGENT_KEYS = {"seeds"}


class ConfigError(ValueError):
    """A sweep configuration is malformed; the message starts with the source and the dotted key path."""


@dataclass(frozen=True)
class SweepConfig:
    """A validated sweep description (see the module docstring for the file format).

    Attributes:
        name: sweep name (used in the report title).
        envs: environment ids (``lcpo/...``), grid axis.
        traces: trace names or file paths, grid axis.
        agents: agent names (keys of ``lcpo.online.run.AGENTS``), grid axis.
        seeds: run seeds, grid axis.
        steps: environment steps per run (positive).
        warmup_steps: steps excluded from the lifelong return (paper: 6M); ``0 <= warmup_steps < steps``.
        trace_lengths: trace length(s); ``(None,)`` means each trace's default length.
        reset: reset condition, ``"end"``, ``"never"`` or ``"every:N"``; ``None``: per environment, the one its
            declared kind calls for (resolved by :func:`expand`).
        checkpoint_every: steps between checkpoints (0: none; an interrupted run then starts over).
        tensorboard: write TensorBoard event files in each run folder.
        overrides: agent -> hyperparameter -> tuple of values (grid axes, one per hyperparameter).
        env_kwargs: env id -> keyword arguments (fixed, not a grid).
        per_trace: trace -> ``{"steps", "trace_length", "warmup_steps"}`` (any subset), overriding the global
            values for runs on that trace (paper: traces 1-2 run 20M steps, traces 3-4 8M).
        out: default output folder (the CLI's ``--out`` wins), or ``None``.
        probe_every: steps between policy probes for the drift diagnostic (``lcpo.experiments.drift``; 0 or
            absent: none). Not needed for forgetting: every run keeps compact snapshots (``snapshots.npz``).
        diagnostics_every: steps per row of each run's ``diagnostics.csv``; ``None`` keeps the executor's
            default (and leaves the key out of the run config).
        per_agent: agent -> ``{"seeds": tuple}``: that agent's seeds instead of :attr:`seeds` (a study with
            10 seeds of LCPO and 3 of an expensive baseline in one file).
    """

    name: str
    envs: tuple[str, ...]
    traces: tuple[str, ...]
    agents: tuple[str, ...]
    seeds: tuple[int, ...]
    steps: int
    warmup_steps: int = 0
    trace_lengths: tuple[int | None, ...] = (None,)
    reset: str | None = None
    checkpoint_every: int = 50_000
    tensorboard: bool = False
    overrides: Mapping[str, Mapping[str, tuple[Any, ...]]] = field(default_factory=dict)
    env_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    per_trace: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    out: str | None = None
    diagnostics_every: int | None = None
    probe_every: int = 0
    per_agent: Mapping[str, Mapping[str, tuple[int, ...]]] = field(default_factory=dict)

    def seeds_of(self, agent: str) -> tuple[int, ...]:
        """The seeds of ``agent``: its ``per_agent`` seeds, else :attr:`seeds`."""
        return tuple(self.per_agent.get(agent, {}).get("seeds", self.seeds))


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep.

    Attributes:
        run_id: folder name, ``<readable name>-<8 hex digits of the config hash>``; stable across machines and
            Python versions for the same resolved config.
        config: the resolved run config in ``RunConfig.to_dict`` form (JSON-serialisable).
    """

    run_id: str
    config: Mapping[str, Any]


def _err(source: str, key: str, msg: str) -> ConfigError:
    return ConfigError(f"{source}: {key}: {msg}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_int(source: str, key: str, v: Any, minimum: int) -> int:
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)  # 1e5 and 2.5e6 are whole numbers (TOML has no exponent for integers)
    if not _is_int(v):
        raise _err(source, key, f"expected an integer, got {show(v)}")
    if v < minimum:
        raise _err(source, key, f"expected an integer >= {minimum}, got {v}")
    return int(v)


#: the largest seed: torch's generators take seeds below 2**64 (a larger one failed deep in the run with
#: "Overflow when unpacking long long", naming no value)
MAX_SEED = 2**64 - 1
#: the most seeds one command or one ``seeds`` value names (a mistyped count or range such as 1000000000 is
#: refused at once, not expanded)
MAX_SEEDS = 10_000


def _seeds(source: str, key: str, raw: Any) -> tuple[int, ...]:
    """A ``seeds`` value: a positive count ``n <= MAX_SEEDS`` (seeds ``0..n-1``) or a non-empty list of at most
    :data:`MAX_SEEDS` distinct seeds in ``0..MAX_SEED``."""
    if _is_int(raw):
        n = _check_int(source, key, raw, 1)
        if n > MAX_SEEDS:
            raise _err(source, key, f"{n:,} seeds; at most {MAX_SEEDS:,}")
        return tuple(range(n))
    if isinstance(raw, list) and raw:
        if len(raw) > MAX_SEEDS:
            raise _err(source, key, f"{len(raw):,} seeds; at most {MAX_SEEDS:,}")
        seeds = tuple(_check_int(source, f"{key}[{i}]", s, 0) for i, s in enumerate(raw))
        for i, s in enumerate(seeds):
            if s > MAX_SEED:
                raise _err(source, f"{key}[{i}]", f"seeds must lie in 0..2**64-1 ({MAX_SEED}), got {s}")
        if len(set(seeds)) != len(seeds):
            raise _err(source, key, f"duplicate seeds in {list(seeds)}")
        return seeds
    raise _err(source, key, f"expected a positive integer count or a non-empty list, got {show(raw)}")


def _str_list(source: str, key: str, v: Any) -> tuple[str, ...]:
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not items:
        raise _err(source, key, f"expected a string or a non-empty list of strings, got {show(v)}")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise _err(source, f"{key}[{i}]", f"expected a non-empty string, got {show(item)}")
    if len(set(items)) != len(items):
        raise _err(source, key, f"duplicate entries in {show(items)}")
    return tuple(items)


def _check_value(source: str, key: str, v: Any) -> Any:
    """Reject values that cannot be a hyperparameter (non-finite floats, tables, datetimes)."""
    if isinstance(v, float) and not math.isfinite(v):
        raise _err(source, key, f"non-finite value {show(v)}")
    if isinstance(v, list):
        return [_check_value(source, f"{key}[{i}]", x) for i, x in enumerate(v)]
    if not isinstance(v, (str, int, float, bool, list)):
        raise _err(source, key, f"unsupported value {show(v)} ({type(v).__name__}); use numbers, strings, "
                                "booleans or lists")
    return v


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _known_names(executor: str) -> tuple[set[str] | None, set[str] | None]:
    """Agent names from ``<executor>.AGENTS`` and env ids from ``lcpo.envs.ENV_IDS``, where importable."""
    agents = envs = None
    if _importable(executor):
        agents = set(getattr(importlib.import_module(executor), "AGENTS", {}) or ()) or None
    try:
        from lcpo.envs import ENV_IDS
        envs = set(ENV_IDS)
    except ImportError:  # pragma: no cover - envs is part of the package
        envs = None
    return agents, envs


#: Environment id -> (module, attribute) of the name registry its ``trace`` argument understands; environments
#: not listed resolve their trace with :func:`lcpo.contexts.resolve_trace` (names in ``TRACE_NAMES``).
_TRACE_REGISTRIES: dict[str, tuple[str, str]] = {
    "lcpo/StragglerMitigation-v0": ("lcpo.envs.straggler.workloads", "WORKLOAD_NAMES"),
}
_DEFAULT_TRACE_REGISTRY = ("lcpo.contexts.canonical", "TRACE_NAMES")


def _trace_names(env: str) -> set[str] | None:
    """Trace names the run of ``env`` accepts (its registry's keys; no trace is built), or ``None`` if the
    registry cannot be imported."""
    module, attr = _TRACE_REGISTRIES.get(env, _DEFAULT_TRACE_REGISTRY)
    try:
        return set(getattr(importlib.import_module(module), attr))
    except (ImportError, AttributeError):  # pragma: no cover - both registries are part of the package
        return None


def _check_traces(source: str, traces: tuple[str, ...], envs: tuple[str, ...]) -> None:
    """Reject a trace that is neither a registered name for every env of the grid nor an existing file.

    Only the name registries are consulted and file existence is checked with :meth:`pathlib.Path.is_file`
    (relative paths against the current directory, as the runs resolve them); no trace is generated or loaded.
    """
    for i, trace in enumerate(traces):
        if Path(trace).is_file():
            continue
        for env in envs:
            names = _trace_names(env)
            if names is None or trace in names:
                continue
            looks_like_file = "/" in trace or "\\" in trace or Path(trace).suffix.lower() in (".npy", ".csv")
            what = "trace file not found" if looks_like_file else "unknown trace name"
            raise _err(source, f"traces[{i}]", f"{what} {trace!r} for environment {env!r}; valid names: "
                                               f"{sorted(names)}, or the path of an existing .npy/.csv file")


def parse_config(data: Mapping[str, Any], source: str = "<config>",
                 executor: str = DEFAULT_EXECUTOR) -> SweepConfig:
    """Validate a parsed sweep table and build a :class:`SweepConfig`.

    Args:
        data: the parsed TOML document (a mapping of plain values).
        source: name used in error messages (usually the file path).
        executor: module whose ``AGENTS`` lists valid agent names (checked when the module is importable).

    Returns:
        The validated config.

    Raises:
        ConfigError: for an unknown or missing key, a wrong type, a non-finite number, an unknown agent or env
            name, a trace that is neither a name the env's trace registry knows (``lcpo.contexts.TRACE_NAMES``;
            the straggler env's ``WORKLOAD_NAMES``) nor an existing file, an override/env_kwargs/per_trace table for an agent, env or trace not in the grid, or
            ``warmup_steps >= steps``; the message names the key.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table at the top level, got {type(data).__name__}")
    for key in data:
        if key not in _TOP_KEYS:
            raise _err(source, key, f"unknown key; valid keys are {sorted(_TOP_KEYS)}")
    for key in _REQUIRED:
        if key not in data:
            raise _err(source, key, "missing required key")

    name = data.get("name", Path(source).stem if source != "<config>" else "sweep")
    if not isinstance(name, str) or not name:
        raise _err(source, "name", f"expected a non-empty string, got {show(name)}")
    out = data.get("out")
    if out is not None and (not isinstance(out, str) or not out):
        raise _err(source, "out", f"expected a non-empty string, got {show(out)}")

    steps = _check_int(source, "steps", data["steps"], 1)
    warmup = _check_int(source, "warmup_steps", data.get("warmup_steps", 0), 0)
    checkpoint_every = _check_int(source, "checkpoint_every", data.get("checkpoint_every", 50_000), 0)
    diagnostics_every = data.get("diagnostics_every")
    if diagnostics_every is not None:
        diagnostics_every = _check_int(source, "diagnostics_every", diagnostics_every, 1)
    probe_every = _check_int(source, "probe_every", data.get("probe_every", 0), 0)
    tensorboard = data.get("tensorboard", False)
    if not isinstance(tensorboard, bool):
        raise _err(source, "tensorboard", f"expected true or false, got {show(tensorboard)}")
    reset = data.get("reset")
    if reset is not None and (not isinstance(reset, str) or not _RESET_RE.match(reset)):
        raise _err(source, "reset", f"expected 'end', 'never' or 'every:N' (N >= 1), got {show(reset)}")

    seeds = _seeds(source, "seeds", data.get("seeds", 1))

    envs = _str_list(source, "envs", data["envs"])
    traces = _str_list(source, "traces", data["traces"])
    agents = _str_list(source, "agents", data["agents"])
    known_agents, known_envs = _known_names(executor)
    for i, env in enumerate(envs):
        if known_envs is not None and env in known_envs:
            continue
        from lcpo.envs.registration import check_env_name

        try:  # a Gymnasium id, or a user's MODULE:ID / MODULE:CLASS (imports the module)
            check_env_name(env)
        except ValueError as exc:
            raise _err(source, f"envs[{i}]", str(exc)) from None
    if known_agents is not None:
        for i, agent in enumerate(agents):
            if agent not in known_agents:
                raise _err(source, f"agents[{i}]", f"unknown agent {agent!r}; known: {sorted(known_agents)}")
    _check_traces(source, traces, envs)

    tl_raw = data.get("trace_length")
    if tl_raw is None:
        trace_lengths: tuple[int | None, ...] = (None,)
    elif isinstance(tl_raw, list) and tl_raw:
        trace_lengths = tuple(_check_int(source, f"trace_length[{i}]", t, 1) for i, t in enumerate(tl_raw))
    else:
        trace_lengths = (_check_int(source, "trace_length", tl_raw, 1),)

    per_trace_raw = data.get("per_trace", {})
    if not isinstance(per_trace_raw, Mapping):
        raise _err(source, "per_trace", 'expected a table of per-trace tables, e.g. [per_trace."wind-3"]')
    per_trace: dict[str, dict[str, int | None]] = {}
    for trace, table in per_trace_raw.items():
        key = f"per_trace.{trace}"
        if trace not in traces:
            raise _err(source, key, f"trace {trace!r} is not in traces {list(traces)}")
        if not isinstance(table, Mapping):
            raise _err(source, key, f"expected a table with keys {sorted(_PER_TRACE_KEYS)}, got {show(table)}")
        entry: dict[str, int | None] = {}
        for k, v in table.items():
            if k not in _PER_TRACE_KEYS:
                raise _err(source, f"{key}.{k}", f"unknown key; valid keys are {sorted(_PER_TRACE_KEYS)}")
            entry[k] = _check_int(source, f"{key}.{k}", v, 0 if k == "warmup_steps" else 1)
        if "trace_length" in entry and len(trace_lengths) > 1:
            raise _err(source, f"{key}.trace_length", "cannot combine with a list-valued trace_length grid")
        per_trace[trace] = entry
    for trace in traces:
        t_steps = per_trace.get(trace, {}).get("steps", steps)
        t_warm = per_trace.get(trace, {}).get("warmup_steps", warmup)
        if t_warm >= t_steps:
            key = f"per_trace.{trace}.warmup_steps" if "warmup_steps" in per_trace.get(trace, {}) else "warmup_steps"
            raise _err(source, key, f"warmup_steps={t_warm} must be smaller than the run length {t_steps} "
                                    f"(trace {trace!r})")

    per_agent_raw = data.get("per_agent", {})
    if not isinstance(per_agent_raw, Mapping):
        raise _err(source, "per_agent", "expected a table of per-agent tables, e.g. [per_agent.ppo]")
    per_agent: dict[str, dict[str, tuple[int, ...]]] = {}
    for agent, table in per_agent_raw.items():
        key = f"per_agent.{agent}"
        if agent not in agents:
            raise _err(source, key, f"agent {agent!r} is not in agents {list(agents)}")
        if not isinstance(table, Mapping):
            raise _err(source, key, f"expected a table with keys {sorted(_PER_AGENT_KEYS)}, got {show(table)}")
        for k in table:
            if k not in _PER_AGENT_KEYS:
                raise _err(source, f"{key}.{k}", f"unknown key; valid keys are {sorted(_PER_AGENT_KEYS)}")
        per_agent[agent] = {k: _seeds(source, f"{key}.{k}", v) for k, v in table.items()}

    overrides_raw = data.get("overrides", {})
    if not isinstance(overrides_raw, Mapping):
        raise _err(source, "overrides", "expected a table of per-agent tables, e.g. [overrides.lcpo]")
    overrides: dict[str, dict[str, tuple[Any, ...]]] = {}
    for agent, table in overrides_raw.items():
        key = f"overrides.{agent}"
        if agent not in agents:
            raise _err(source, key, f"agent {agent!r} is not in agents {list(agents)}")
        if not isinstance(table, Mapping):
            raise _err(source, key, f"expected a table of hyperparameters, got {show(table)}")
        axes = {}
        for hp, value in table.items():
            value = _check_value(source, f"{key}.{hp}", value)
            if isinstance(value, list):
                if not value:
                    raise _err(source, f"{key}.{hp}", "empty list: a list is a grid axis and needs >= 1 value")
                axes[hp] = tuple(value)
            else:
                axes[hp] = (value,)
        overrides[agent] = axes

    env_kwargs_raw = data.get("env_kwargs", {})
    if not isinstance(env_kwargs_raw, Mapping):
        raise _err(source, "env_kwargs", 'expected a table of per-env tables, e.g. [env_kwargs."lcpo/..."]')
    env_kwargs: dict[str, dict[str, Any]] = {}
    for env, table in env_kwargs_raw.items():
        key = f"env_kwargs.{env}"
        if env not in envs:
            raise _err(source, key, f"environment {env!r} is not in envs {list(envs)}")
        if not isinstance(table, Mapping):
            raise _err(source, key, f"expected a table of keyword arguments, got {show(table)}")
        env_kwargs[env] = {k: _check_value(source, f"{key}.{k}", v) for k, v in table.items()}

    return SweepConfig(name=name, envs=envs, traces=traces, agents=agents, seeds=seeds, steps=steps,
                       warmup_steps=warmup, trace_lengths=trace_lengths, reset=reset,
                       checkpoint_every=checkpoint_every, tensorboard=tensorboard, overrides=overrides,
                       env_kwargs=env_kwargs, per_trace=per_trace, out=out,
                       diagnostics_every=diagnostics_every, probe_every=probe_every, per_agent=per_agent)


def load_config(path: str | Path, executor: str = DEFAULT_EXECUTOR) -> SweepConfig:
    """Read and validate a TOML sweep file.

    Args:
        path: the ``.toml`` file.
        executor: see :func:`parse_config`.

    Raises:
        ConfigError: if the file is missing, is not valid TOML, or fails validation (message names the file
            and the key).
    """
    path = Path(path)
    try:
        # UTF-8, as TOML requires; a byte-order mark (some editors write one) is skipped, not a syntax error
        data = tomllib.loads(path.read_bytes().decode("utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: sweep config file not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc}); TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_config(data, source=str(path), executor=executor)


def config_hash(config: Mapping[str, Any]) -> str:
    """First 8 hex digits of the SHA-256 of the canonical JSON of a resolved run config."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def slug(value: Any) -> str:
    """A filesystem-safe rendering of a value for folder and file names (``[A-Za-z0-9._=+-]`` only).

    >>> slug("lcpo/WindyPendulum-v0")
    'lcpo-WindyPendulum-v0'
    """
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ""))
    return re.sub(r"[^A-Za-z0-9._=+-]+", "-", text).strip("-") or "x"


def make_run_id(config: Mapping[str, Any]) -> str:
    """A readable, filesystem-safe, stable folder name for a resolved run config.

    ``<env>_<trace>_<agent>[_<hp>=<value>...]_s<seed>-<hash>``, e.g.
    ``WindyPendulum-v0_ndbc-46002_lcpo_ood_threshold=0.5_s0-1a2b3c4d``. The hash covers the whole config, so
    two configs differing only in fields not shown (steps, env kwargs) still get different ids.

    Args:
        config: a resolved run config in ``RunConfig.to_dict`` form.
    """
    env = str(config["env"]).split("/")[-1]
    trace = Path(str(config["trace"])).stem if ("/" in str(config["trace"])) else str(config["trace"])
    parts = [slug(env), slug(trace), slug(config["agent"])]
    parts += [f"{slug(k)}={slug(v)}" for k, v in sorted(dict(config.get("overrides") or {}).items())]
    readable = "_".join(parts)[:120]
    return f"{readable}_s{config['seed']}-{config_hash(config)}"


def _run_config_class(executor: str):
    if not _importable(executor):
        return None
    return getattr(importlib.import_module(executor), "RunConfig", None)


def _env_resets(config: SweepConfig, validate: bool, notices: list[str] | None, executor: str) -> dict[str, str]:
    """Per environment of the grid: the sweep's ``reset``, else the one its declared kind calls for.

    With the default executor (:mod:`lcpo.online.run`, which makes the environments with
    :func:`lcpo.envs.registration.make_env`), each environment is made once
    (:func:`lcpo.envs.preflight.inspect_env`: with its ``env_kwargs`` and no trace, or with the grid's first
    trace if it needs one) when its reset must be resolved or ``validate`` asks for the run checks
    (:func:`lcpo.envs.preflight.check_env`: context for LCPO, get_state/set_state for checkpoints). Another
    executor makes its environments its own way: the kinds then come from :data:`lcpo.cli.catalog.ENVS`
    (episodic for ids not in it) and nothing is checked.

    Raises:
        ConfigError: an environment that cannot be made or fails a check (the message names it and the key).
    """
    from lcpo.envs.preflight import check_env, inspect_env

    resets = {}
    for i, env in enumerate(config.envs):
        if executor != DEFAULT_EXECUTOR or (config.reset is not None and not validate):
            from lcpo.cli.catalog import ENVS

            info = ENVS.get(env)
            resets[env] = config.reset or ("never" if info is not None and info.continuing else "end")
            continue
        kwargs = config.env_kwargs.get(env, {})
        try:
            try:
                facts = inspect_env(env, kwargs)
            except (TypeError, ValueError):  # an environment that needs its trace to be made
                facts = inspect_env(env, kwargs, config.traces[0], config.trace_lengths[0])
            resets[env] = config.reset if config.reset is not None else facts.default_reset
            found = check_env(facts, resets[env], config.checkpoint_every, config.agents) if validate else \
                list(facts.notices)
        except ValueError as exc:
            raise ConfigError(f"envs[{i}] ({env!r}): {exc}") from None
        if notices is not None:
            notices.extend(found)
    return resets


def _refused_part(run_config_cls, cfg: dict, agent: str) -> str:
    """Which part of a sweep a refused run configuration ``cfg`` names: ``overrides.AGENT`` when the same run
    without its overrides passes (the overrides are at fault), else ``runs of AGENT`` (a top-level setting)."""
    try:
        run_config_cls.from_dict({**cfg, "overrides": {}})
    except (ValueError, TypeError):
        return f"runs of {agent}"
    return f"overrides.{agent}"


def expand(config: SweepConfig, executor: str = DEFAULT_EXECUTOR, validate: bool = True,
           notices: list[str] | None = None) -> list[RunSpec]:
    """Expand a sweep into its run specs (the cross product of all axes), in a deterministic order.

    The count is ``len(envs) * len(traces) * len(trace_lengths) * sum_a(prod of agent a's override axis
    lengths * len(seeds of a))`` (an agent's ``per_agent`` seeds where given, else ``seeds``). Seeds vary
    fastest, so a partial sweep covers whole (env, trace, agent) cells early.

    Args:
        config: a validated sweep.
        executor: module providing ``RunConfig``; when importable and ``validate``, every spec is round-tripped
            through ``RunConfig.from_dict`` so unknown hyperparameters are reported before anything runs.
        validate: see ``executor``; also make each environment once and check it suits the runs (see
            :func:`lcpo.envs.preflight.check_env`).
        notices: if given, one-line notices for the user are appended (e.g. an environment that does not
            declare whether it is episodic).

    Returns:
        The specs, with unique run ids; ``reset`` resolved per environment when the sweep gives none.

    Raises:
        ConfigError: if ``RunConfig.from_dict`` rejects a spec (the message names the agent's override key), or
            an environment cannot be made or does not suit the runs.
    """
    run_config_cls = _run_config_class(executor) if validate else None
    resets = _env_resets(config, validate, notices, executor)
    specs: list[RunSpec] = []
    for env, trace, trace_length, agent in itertools.product(config.envs, config.traces, config.trace_lengths,
                                                             config.agents):
        per = config.per_trace.get(trace, {})
        axes = dict(config.overrides.get(agent, {}))
        names = sorted(axes)
        for values in itertools.product(*(axes[n] for n in names)):
            overrides = dict(zip(names, values))
            for seed in config.seeds_of(agent):
                cfg = {
                    "env": env, "trace": trace, "trace_length": per.get("trace_length", trace_length),
                    "agent": agent, "steps": per.get("steps", config.steps), "seed": seed,
                    "overrides": overrides, "env_kwargs": dict(config.env_kwargs.get(env, {})),
                    "warmup_steps": per.get("warmup_steps", config.warmup_steps), "reset": resets[env],
                    "checkpoint_every": config.checkpoint_every, "tensorboard": config.tensorboard,
                }
                if config.diagnostics_every is not None:
                    cfg["diagnostics_every"] = config.diagnostics_every
                if config.probe_every:
                    cfg["probe_every"] = config.probe_every
                if run_config_cls is not None:
                    try:
                        cfg = dict(run_config_cls.from_dict(cfg).to_dict())
                    except (ValueError, TypeError) as exc:
                        raise ConfigError(f"{_refused_part(run_config_cls, cfg, agent)} (env {env!r}, trace "
                                          f"{trace!r}): {exc}") from None
                specs.append(RunSpec(run_id=make_run_id(cfg), config=cfg))
    ids = [s.run_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ConfigError("two runs resolved to the same config; check for duplicate grid values")
    return specs
