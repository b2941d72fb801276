"""Non-finite and overflowing values caught where they arise, naming the step and the value (issue 24 item 6):
rewards at the loop boundary and in every agent's observe, returns and advantages (GAE, V-trace), TD targets and
critic losses, and the return normaliser's float64 statistics."""

import math
import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from lcpo.agents import AGENTS
from lcpo.numerics.finite import F32_MAX, check_finite, check_reward, check_transition, to_float32
from lcpo.numerics.normalize import ReturnNormalizer
from lcpo.online.loop import OnlineLoop


class BigRewardEnv(gym.Env):
    """Reward 1 per step, ``big`` from global step ``at`` on; episodes of 100 steps."""

    metadata = {"continuing": False}

    def __init__(self, big: float, at: int = 50):
        self.observation_space = gym.spaces.Box(-1e3, 1e3, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.big, self.at, self.t, self.elapsed = big, at, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.elapsed = 0
        return np.zeros(2, np.float32), {}

    def step(self, a):
        r = self.big if self.t >= self.at else 1.0
        self.t, self.elapsed = self.t + 1, self.elapsed + 1
        return np.array([self.elapsed / 100, a], np.float32), r, False, self.elapsed >= 100, {}


def _weights_finite(agent) -> bool:
    return all(torch.isfinite(p).all() for m in vars(agent).values() if isinstance(m, torch.nn.Module)
               for p in m.parameters())


def test_check_reward_bounds_and_messages():
    for ok in (0.0, -1.0, F32_MAX, -F32_MAX, 3, np.float32(2.5)):
        check_reward(ok, "at step 0")
    for bad, text in ((1e39, "reward 1e+39 at step 7 is beyond the float32 range"),
                      (-1e200, "reward -1e+200 at step 7 is beyond the float32 range"),
                      (math.nan, "non-finite reward nan at step 7"), (math.inf, "non-finite reward inf at step 7")):
        with pytest.raises(ValueError, match=re.escape(text)):
            check_reward(bad, "at step 7")


def test_check_transition_refuses_a_bad_reward_or_next_observation():
    check_transition(F32_MAX, np.zeros(3, np.float32), "at agent step 4")
    with pytest.raises(ValueError, match=re.escape("reward 1e+39 at agent step 4 is beyond the float32 range")):
        check_transition(1e39, np.zeros(3), "at agent step 4")
    with pytest.raises(ValueError, match=re.escape("non-finite next_obs [0.0, nan] at agent step 4")):
        check_transition(1.0, np.array([0.0, np.nan]), "at agent step 4")


@pytest.mark.parametrize("name", ["a2c", "clear", "ddqn"])
def test_observe_refuses_a_non_finite_next_observation_naming_the_step(name):
    from lcpo.online.loop import Transition

    env = BigRewardEnv(1.0)
    agent = AGENTS[name](env, seed=0)
    obs, _ = env.reset(seed=0)
    bad = np.array([0.0, np.inf], np.float32)
    with pytest.raises(ValueError, match=re.escape("non-finite next_obs [0.0, inf] at agent step 0")):
        agent.observe(Transition(obs, agent.act(obs), 0.0, bad, False, False, {}))


def test_to_float32_names_the_step_and_value_of_the_first_overflow():
    v = np.array([1.0, -2.5, 1e39, 5e39])
    with pytest.raises(ValueError, match=r"advantages 1e\+39 at agent step 12 overflows float32"):
        to_float32("advantages", v, 10)
    with pytest.raises(ValueError, match=r"returns nan at agent step 3 is non-finite"):
        to_float32("returns", np.array([0.0, np.nan]), 2)
    out = to_float32("advantages", v[:2], 0)
    assert out.dtype == np.float32 and out.tolist() == [1.0, -2.5]
    with pytest.raises(ValueError, match="TD targets at update 4: inf"):
        check_finite("TD targets", torch.tensor([1.0, float("inf")]), "at update 4")
    check_finite("TD targets", torch.tensor([1.0, 3e38]), "at update 4")


@pytest.mark.parametrize("name", ["a2c", "ppo", "ddqn", "sac"])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("big", [1e39, 1e200])
def test_a_reward_beyond_float32_stops_the_run_at_its_step(name, normalize, big):
    """1e39 (finite in float64, inf in float32) and 1e200 (which overflowed the normaliser's variance and then
    divided every later reward to 0) are refused at the step they arrive, before any update uses them."""
    env = BigRewardEnv(big, at=50)
    agent = AGENTS[name](env, seed=0, normalize_returns=normalize)
    with pytest.raises(ValueError, match=re.escape(f"reward {big:.0e} at agent step 50 is beyond the float32 range")):
        agent.learn(2_000)
    assert agent.steps == 50 and _weights_finite(agent)
    if normalize:
        assert math.isfinite(agent.return_norm.scale)


def test_the_loop_refuses_a_reward_beyond_float32_for_any_agent():
    class Constant:
        def act(self, obs):
            return 0

        def observe(self, tr):
            return None

    with pytest.raises(ValueError, match=r"reward 1e\+39 at step 5 is beyond the float32 range"):
        OnlineLoop(BigRewardEnv(1e39, at=5), Constant()).run(100)


@pytest.mark.parametrize("name", ["a2c", "ppo", "clear"])
def test_returns_overflowing_float32_stop_the_update_that_meets_them(name):
    """Rewards of 1e38 fit float32 but their discounted sums do not: the first update names the advantages
    instead of training on inf and acting on with a NaN policy."""
    agent = AGENTS[name](BigRewardEnv(1e38, at=50), seed=0, normalize_returns=False)
    before = {k: v.clone() for k, v in agent.actor.state_dict().items()}
    with pytest.raises(ValueError, match=r"advantages \d\.\d+e\+3\d at (agent step \d+|entry \d+ of the batch) "
                                         r"overflows float32.*normalize_returns"):
        agent.learn(2_000)
    assert agent.updates == 0 and _weights_finite(agent)
    assert all(torch.equal(before[k], v) for k, v in agent.actor.state_dict().items())


def test_a_critic_loss_overflowing_float32_stops_the_update():
    """Rewards of 1e20: finite returns (about 1e21) whose squared error overflows float32."""
    agent = AGENTS["a2c"](BigRewardEnv(1e20, at=50), seed=0, normalize_returns=False)
    with pytest.raises(ValueError, match=r"critic loss at the update( at agent step 200)?: inf"):
        agent.learn(2_000)
    assert _weights_finite(agent)
    sac = AGENTS["sac"](BigRewardEnv(1e38, at=50), seed=0, normalize_returns=False)
    with pytest.raises(ValueError, match=r"critic loss at the update at agent step \d+: inf"):
        sac.learn(2_000)
    assert sac.updates == 0 and _weights_finite(sac)


def test_normaliser_refuses_returns_whose_variance_overflows_float64():
    norm = ReturnNormalizer()
    norm.update(np.array([1.0, 2.0, 3.0]))
    state = norm.state_dict()
    with pytest.raises(ValueError, match=r"return of 1e\+200 overflows the float64 variance"):
        norm.update(np.array([1.0, 1e200]))
    assert norm.state_dict() == state and math.isfinite(norm.scale)
    norm.push(1e200, False, 0.99)
    with pytest.raises(ValueError, match="overflows the float64 variance"):
        norm.flush()
    big = ReturnNormalizer()
    big.update(np.array([1e150, -1e150]))  # variance 1e300: large, finite, kept
    assert big.scale == pytest.approx(1e150, rel=1e-4)


@pytest.mark.parametrize("replay", [0, 10])
def test_clear_vtrace_value_loss_overflowing_float32_stops_the_update(replay):
    """CLEAR: rewards of 1e20 give finite V-trace targets (about 1e21) whose squared error overflows float32;
    the update names the V-trace value loss and the agent step, before any weight changes or the rollout enters
    the replay buffer (without the check the critic's weights turned NaN)."""
    agent = AGENTS["clear"](BigRewardEnv(1e20, at=50), seed=0, normalize_returns=False, replay_windows=replay)
    before = {k: v.clone() for k, v in agent.critic.state_dict().items()}
    with pytest.raises(ValueError, match=r"V-trace value loss at the update at agent step 200: inf .*"
                                         r"normalize_returns"):
        agent.learn(2_000)
    assert agent.updates == 0 and _weights_finite(agent) and agent.replay.size == 0
    assert all(torch.equal(before[k], v) for k, v in agent.critic.state_dict().items())
