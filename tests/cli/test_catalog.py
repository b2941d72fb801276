"""The static tables of lcpo.cli.catalog agree with the code they describe (so the fast list commands cannot lie)."""

from __future__ import annotations

import pytest

from lcpo.cli import catalog
from lcpo.contexts import canonical
from lcpo.envs import make_env
from lcpo.envs.registration import ENV_IDS
from lcpo.envs.task import declared_continuing


def test_env_ids_match():
    assert list(catalog.ENVS) == list(ENV_IDS)


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_env_facts_match_the_environment(env_id):
    env = make_env(env_id)
    info = catalog.ENVS[env_id]
    spec = getattr(env.unwrapped, "context_spec", None)
    assert env.observation_space.shape == info.observation
    assert str(env.action_space) == info.action
    assert (() if spec is None else tuple(spec.names)) == info.context
    assert declared_continuing(env) is info.continuing
    env.close()


def test_trace_and_workload_names_match_the_registries():
    from lcpo.envs.straggler.workloads import WORKLOAD_NAMES

    assert canonical.TRACE_NAMES is catalog.TRACE_NAMES and set(canonical._MAKERS) == set(catalog.TRACE_NAMES)
    assert canonical.DEFAULT_TRACE == catalog.DEFAULT_TRACE == "ndbc-46002"
    assert list(catalog.WORKLOADS) == list(WORKLOAD_NAMES)


def test_traces_cli_default_length_matches():
    from lcpo.cli import traces
    from lcpo.contexts import DEFAULT_LENGTH

    assert traces._DEFAULT_LENGTH == DEFAULT_LENGTH
