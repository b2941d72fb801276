"""The permutation-invariant network: exact invariance, the paper's architecture, the NumPy mirror, wiring."""

import numpy as np
import pytest
import torch

from lcpo.agents import A2C, LCPO
from lcpo.envs.straggler import StragglerMitigationEnv
from lcpo.envs.straggler.nets import (
    NumpyPermInvariantPolicy,
    NumpyPermInvariantStack,
    PermInvariantNet,
    perm_invariant_body,
)
from lcpo.agents.nets import CategoricalPolicy, make_actor_critic, make_body, make_fast_policy


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small networks on a shared 2-core machine: intra-op threads only add contention."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _obs(batch=64, n=10, seed=0):
    """Observations with integer queues (many ties), float average queues and 12 other features."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 4, (batch, n)).astype(np.float32)
    q[:4] = rng.integers(0, 200, (4, n))  # a few overloaded rows
    qbar = rng.gamma(1.0, 1.5, (batch, n)).astype(np.float32)
    if n > 5:
        qbar[:, 3] = qbar[:, 5]  # exact ties in the average queue too
    other = rng.uniform(0, 2, (batch, 12)).astype(np.float32)
    return np.concatenate([q, qbar, other], axis=1)


def _permute(x, perm, n=10):
    y = x.copy()
    y[:, :n] = x[:, :n][:, perm]
    y[:, n:2 * n] = x[:, n:2 * n][:, perm]
    return y


@pytest.mark.parametrize("out_dim", [9, 1])
def test_output_is_bit_identical_under_every_tried_server_permutation(out_dim):
    torch.manual_seed(0)
    net = PermInvariantNet(10, out_dim)
    x = _obs()
    ref = net(torch.from_numpy(x))
    rng = np.random.default_rng(1)
    for _ in range(50):
        perm = rng.permutation(10)
        assert torch.equal(net(torch.from_numpy(_permute(x, perm))), ref)
    # per-row permutations (each sample permuted differently) too
    y = x.copy()
    for i in range(len(y)):
        y[i:i + 1] = _permute(x[i:i + 1], rng.permutation(10))
    assert torch.equal(net(torch.from_numpy(y)), ref)


def test_network_is_the_papers_deep_sets_formula():
    """rho([mean_j phi(log1p q_j, log1p qbar_j), other 12]) computed directly, without the sorting step."""
    torch.manual_seed(3)
    net = PermInvariantNet(10, 9)
    assert [m.in_features for m in net.phi if isinstance(m, torch.nn.Linear)] == [2, 32, 16]
    assert [m.out_features for m in net.phi if isinstance(m, torch.nn.Linear)] == [32, 16, 1]
    assert [m.in_features for m in net.rho if isinstance(m, torch.nn.Linear)] == [13, 32, 16]
    assert [m.out_features for m in net.rho if isinstance(m, torch.nn.Linear)] == [32, 16, 9]
    x = torch.from_numpy(_obs(seed=5))
    pairs = torch.stack((torch.log1p(x[:, :10]), torch.log1p(x[:, 10:20])), dim=-1)  # (B, 10, 2)
    pooled = net.phi(pairs).mean(dim=1)
    expected = net.rho(torch.cat((pooled, x[:, 20:]), dim=1))
    torch.testing.assert_close(net(x), expected, rtol=1e-6, atol=1e-6)


def test_output_depends_on_queues_and_on_the_other_features():
    torch.manual_seed(0)
    net = PermInvariantNet(10, 9)
    x = torch.from_numpy(_obs(batch=8))
    base = net(x)
    y = x.clone()
    y[:, 0] += 5.0
    assert not torch.allclose(net(y), base)
    z = x.clone()
    z[:, 25] += 1.0
    assert not torch.allclose(net(z), base)


def test_gradients_reach_phi_and_rho():
    torch.manual_seed(0)
    net = PermInvariantNet(10, 1)
    net(torch.from_numpy(_obs())).sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert net.phi[0].weight.grad.abs().sum() > 0 and net.rho[0].weight.grad.abs().sum() > 0


def test_factory_and_auto_kind_use_the_environment():
    env = StragglerMitigationEnv("constant-60x28")
    assert env.default_network == "perm-invariant"
    body = make_body(env, 32, 9)
    assert isinstance(body, PermInvariantNet) and body.n_servers == 10 and body.out_dim == 9
    actor, critic = make_actor_critic(env, 32, 1, 9)
    assert isinstance(actor.body, PermInvariantNet) and isinstance(critic.body, PermInvariantNet)
    assert critic(torch.zeros(3, 32)).shape == (3,)
    small = StragglerMitigationEnv("constant-60x28", n_servers=4)
    assert perm_invariant_body(small, 20, 9, (64, 64)).n_servers == 4
    for agent_cls in (A2C, LCPO):
        agent = agent_cls(env, seed=0, detector="mahalanobis", ood_threshold=24.0) if agent_cls is LCPO \
            else agent_cls(env, seed=0)
        assert isinstance(agent.actor.body, PermInvariantNet)
        assert isinstance(agent_cls(env, seed=0, network="mlp").actor.body, torch.nn.Sequential)


def test_bad_shapes_raise_clear_errors():
    env = StragglerMitigationEnv("constant-60x28")
    with pytest.raises(ValueError, match="obs_dim 30"):
        perm_invariant_body(env, 30, 9)
    with pytest.raises(ValueError, match="obs_dim 31"):
        perm_invariant_body(object(), 31, 9)
    net = PermInvariantNet(10, 9)
    with pytest.raises(ValueError, match=r"\(B, 32\)"):
        net(torch.zeros(2, 30))
    with pytest.raises(ValueError, match="n_servers"):
        PermInvariantNet(0, 9)
    with pytest.raises(TypeError, match="PermInvariantNet"):
        NumpyPermInvariantPolicy(CategoricalPolicy(32, 1, 9))


def test_numpy_mirror_matches_torch_and_is_exactly_invariant():
    torch.manual_seed(0)
    policy = CategoricalPolicy(32, 1, 9, body=PermInvariantNet(10, 9))
    fast = NumpyPermInvariantPolicy(policy)
    x = _obs(batch=16, seed=2)
    with torch.no_grad():
        ref = policy(torch.from_numpy(x)).numpy()
    for i in range(len(x)):
        np.testing.assert_allclose(fast.logits(x[i]), ref[i], rtol=1e-5, atol=1e-6)
        perm = np.random.default_rng(i).permutation(10)
        np.testing.assert_array_equal(fast.logits(_permute(x[i:i + 1], perm)[0]), fast.logits(x[i]))
        assert fast.greedy(x[i])[0] == ref[i, 0].argmax()
    # sync picks up new weights; sample with zero noise is the greedy action
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.1)
        ref2 = policy(torch.from_numpy(x[:1])).numpy()[0]
    fast.sync()
    np.testing.assert_allclose(fast.logits(x[0]), ref2, rtol=1e-5, atol=1e-6)
    assert fast.sample(x[0], np.zeros(9, np.float32))[0] == ref2[0].argmax()
    # the generic fast path falls back to torch for this body (not a plain MLP); the body offers the mirror
    assert isinstance(make_fast_policy(policy), NumpyPermInvariantPolicy)
    assert isinstance(policy.body.fast_policy(policy), NumpyPermInvariantPolicy)


@pytest.mark.parametrize("phi_hidden, rho_hidden, dims",
                         [((), (), 1), ((8,), (), 2), ((), (8, 4), 3), ((32, 16), (32, 16), 1)])
@pytest.mark.parametrize("n", [10, 1])
def test_numpy_mirror_matches_torch_for_any_layer_count(phi_hidden, rho_hidden, dims, n):
    """The mirror folds biases into the weights and phi's last layer after the mean: exact in real
    arithmetic for any depth (no hidden layer at all included) and any number of action dimensions."""
    torch.manual_seed(1)
    policy = CategoricalPolicy(2 * n + 12, dims, 9, body=PermInvariantNet(n, dims * 9, phi_hidden, rho_hidden))
    fast = NumpyPermInvariantPolicy(policy)
    x = _obs(batch=8, n=n, seed=3)
    with torch.no_grad():
        ref = policy(torch.from_numpy(x)).numpy().reshape(8, dims, 9)
    for i in range(len(x)):
        a = fast.logits(x[i])
        assert a.shape == (dims, 9)
        np.testing.assert_allclose(a, ref[i], rtol=1e-5, atol=1e-6)
        b = fast.logits(x[(i + 1) % len(x)])
        assert a is not b and not np.shares_memory(a, b)  # logits are new arrays, not the internal buffer
        np.testing.assert_array_equal(fast.greedy(x[i]), ref[i].argmax(axis=1))
        # Gumbel-max with noise that favours bin 8 strongly enough picks it in every dimension
        noise = np.zeros(dims * 9, np.float32)
        noise[8::9] = 1e3
        np.testing.assert_array_equal(fast.sample(x[i], noise), np.full(dims, 8))


@pytest.mark.parametrize("phi_hidden, rho_hidden, dims", [((), (), 1), ((8,), (8, 4), 2), ((32, 16), (32, 16), 1)])
def test_population_mirror_rows_do_not_depend_on_the_population(phi_hidden, rho_hidden, dims):
    """Seed k's logits in a stack of N are its logits in a stack of one, bit for bit (so a seed acts the same in
    any population), agree with the single mirror and with torch to float32 rounding, and follow sync."""
    torch.manual_seed(4)
    n_seeds, n = 5, 10
    policies = [CategoricalPolicy(2 * n + 12, dims, 9, body=PermInvariantNet(n, dims * 9, phi_hidden, rho_hidden))
                for _ in range(n_seeds)]
    stack = NumpyPermInvariantStack(policies)
    ones = [NumpyPermInvariantStack([p]) for p in policies]
    singles = [NumpyPermInvariantPolicy(p) for p in policies]
    for t in range(20):
        x = _obs(batch=n_seeds, n=n, seed=10 + t)
        got = stack.logits(x)
        assert got.shape == (n_seeds, dims, 9) and got.dtype == np.float32
        with torch.no_grad():
            ref = np.stack([p(torch.from_numpy(x[k:k + 1])).numpy().reshape(dims, 9) for k, p in enumerate(policies)])
        for k in range(n_seeds):
            np.testing.assert_array_equal(got[k].view(np.uint32), ones[k].logits(x[k:k + 1])[0].view(np.uint32))
            np.testing.assert_allclose(got[k], singles[k].logits(x[k]), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(stack.greedy(x), ref.argmax(axis=2))
        # Gumbel-max: noise that favours bin 3 of every dimension of seed 0 only picks it there
        noise = np.zeros((n_seeds, dims * 9), np.float32)
        noise[0].reshape(dims, 9)[:, 3] = 1e4
        drawn = stack.sample(x, noise)
        assert drawn.shape == (n_seeds, dims) and (drawn[0] == 3).all()
        np.testing.assert_array_equal(drawn[1:], ref[1:].argmax(axis=2))
    with torch.no_grad():
        for p in policies[2].parameters():
            p.add_(0.05)
    stack.sync()
    x = _obs(batch=n_seeds, n=n, seed=99)
    with torch.no_grad():
        ref2 = policies[2](torch.from_numpy(x[2:3])).numpy().reshape(dims, 9)
    np.testing.assert_allclose(stack.logits(x)[2], ref2, rtol=1e-5, atol=1e-6)
    # a permutation of one seed's servers changes nothing, bit for bit
    perm = np.random.default_rng(5).permutation(n)
    y = x.copy()
    y[1:2] = _permute(x[1:2], perm)
    np.testing.assert_array_equal(stack.logits(y), stack.logits(x))


def test_population_mirror_refuses_bad_input():
    torch.manual_seed(0)
    a = CategoricalPolicy(32, 1, 9, body=PermInvariantNet(10, 9))
    with pytest.raises(ValueError, match="at least one"):
        NumpyPermInvariantStack([])
    with pytest.raises(TypeError, match="PermInvariantNet"):
        NumpyPermInvariantStack([a, CategoricalPolicy(32, 1, 9)])
    with pytest.raises(ValueError, match="policy 1's network"):
        NumpyPermInvariantStack([a, CategoricalPolicy(32, 1, 9, body=PermInvariantNet(10, 9, (8,)))])
    # the same weight shapes in all, split differently between phi and rho
    with pytest.raises(ValueError, match="policy 1's network"):
        NumpyPermInvariantStack([CategoricalPolicy(32, 1, 9, body=PermInvariantNet(10, 9, (13, 13), (13,))),
                                 CategoricalPolicy(32, 1, 9, body=PermInvariantNet(10, 9, (13,), (13, 13)))])
    stack = NumpyPermInvariantStack([a, a])
    with pytest.raises(ValueError, match=r"\(2, 32\), got \(3, 32\)"):
        stack.logits(np.zeros((3, 32), np.float32))


def test_straggler_populations_act_through_the_population_mirror():
    """A2C and LCPO populations on the straggler env act through one NumpyPermInvariantStack (not a loop of
    single mirrors), and a seed's actions in a population of 3 equal its actions alone."""
    from lcpo.online.population import Population

    for agent in ("a2c", "lcpo"):
        kw = {"rollout_steps": 300} if agent == "a2c" else {"rollout_steps": 300, "reservoir_size": 2000}
        with Population(agent, "lcpo/StragglerMitigation-v0", seeds=[0, 1, 2], trace="synthetic-ramp",
                        **kw) as pop, Population(agent, "lcpo/StragglerMitigation-v0", seeds=[1],
                                                 trace="synthetic-ramp", **kw) as one:
            assert isinstance(pop.agents._acting.group, NumpyPermInvariantStack)
            pop.learn(700)
            one.learn(700)
            assert len(one.episodes[0]) == 3  # 200-step windows of the continuing task: a real comparison
            assert pop.episodes[1] == one.episodes[0]


def test_population_mirror_adds_float64_noise_as_the_single_mirror_does():
    """Gumbel noise of another float dtype is added in its precision and rounded once, as the single mirror adds
    it: near-ties are broken the same way (not by rounding the noise to float32 first)."""
    torch.manual_seed(2)
    policies = [CategoricalPolicy(32, 1, 9, body=PermInvariantNet(10, 9)) for _ in range(4)]
    stack, singles = NumpyPermInvariantStack(policies), [NumpyPermInvariantPolicy(p) for p in policies]
    rng = np.random.default_rng(6)
    for t in range(200):
        x = _obs(batch=4, seed=200 + t)
        lg = stack.logits(x).reshape(4, 9).astype(np.float64)
        # noise that brings bins 0 and 1 within float32 rounding of each other
        noise = -lg + rng.normal(0.0, 1e-7, (4, 9))
        noise[:, 2:] -= 10.0
        got = stack.sample(x, noise)
        want = np.stack([singles[k].sample(x[k], noise[k]) for k in range(4)])
        np.testing.assert_array_equal(got, want)
