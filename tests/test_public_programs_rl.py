"""pytorch/examples' reinforcement-learning programs (REINFORCE and actor-critic on gymnasium's CartPole) run
with lazytensor as written: only their imports change. Each program's own `main()` runs for a few episodes
under both frameworks from the same weights; the one thing replaced is where `Categorical.sample` gets its
randomness: both frameworks draw the action by inverse CDF from one shared uniform stream (their own random
streams differ), so the episodes are the same and every policy loss the program backpropagates agrees with
PyTorch's within 1e-5 relative."""
import numpy as np
import pytest

import lazytensor as lt
import program_compare as C
import program_loader as P

REINFORCE = {"reinforce": "pytorch_examples/reinforcement_learning/reinforce.py"}
ACTOR_CRITIC = {"actor_critic": "pytorch_examples/reinforcement_learning/actor_critic.py"}


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def gymnasium():
    return pytest.importorskip("gymnasium")


class _Enough(Exception):
    """Ends the program's endless episode loop after the episodes a test asked for."""


class _Episodes:
    """The program's environment, unchanged, except that the reset after the last wanted episode stops."""

    def __init__(self, env, episodes):
        self.env, self.left = env, episodes

    def reset(self, **kwargs):
        if self.left == 0:
            raise _Enough
        self.left -= 1
        return self.env.reset(**kwargs)

    def __getattr__(self, name):
        return getattr(self.env, name)


def _shared_draws(framework, base, uniforms):
    """`base` (the framework's Categorical) whose samples come from `uniforms` by inverse CDF."""

    class Categorical(base):
        def sample(self, sample_shape=()):
            probs = np.asarray(self.probs.detach().numpy(), dtype=np.float64)
            u = next(uniforms) * probs.sum(-1, keepdims=True)
            index = np.minimum((np.cumsum(probs, -1) < u).sum(-1), probs.shape[-1] - 1)
            return framework.tensor(index)

    return Categorical


def _losses_of_main(torch, monkeypatch, files, name, episodes):
    """Per framework, the value of every loss the program's main() calls backward() on."""
    weights, losses = C.Weights(), {}
    for fw in ("torch", "lazytensor"):
        framework = torch if fw == "torch" else lt
        program = P.load(fw, files, argv=["--log-interval", "2"])[name]
        model = getattr(program, "policy", None) or program.model
        C.dropout_off(model)  # (reinforce's Policy has dropout 0.6; the two frameworks draw different masks)
        C.same_weights(torch, weights, fw, model)
        uniforms = iter(np.random.default_rng(5).random(10**5))
        program.Categorical = _shared_draws(framework, program.Categorical, uniforms)
        program.env = _Episodes(program.env, episodes)
        seen = losses[fw] = []
        backward = framework.Tensor.backward

        def recording(self, *args, **kwargs):
            seen.append(float(self.detach()))
            return backward(self, *args, **kwargs)

        with monkeypatch.context() as m:
            m.setattr(framework.Tensor, "backward", recording)
            with pytest.raises(_Enough):
                program.main()
    assert len(losses["torch"]) == episodes
    return losses


def test_reinforce_policy_losses_match_pytorch_episode_by_episode(torch, monkeypatch, capsys):
    losses = _losses_of_main(torch, monkeypatch, REINFORCE, "reinforce", episodes=6)
    C.close(losses["lazytensor"], losses["torch"])
    assert capsys.readouterr().out.count("Average reward") == 6  # both frameworks logged every 2nd episode


def test_actor_critic_losses_match_pytorch_episode_by_episode(torch, monkeypatch):
    losses = _losses_of_main(torch, monkeypatch, ACTOR_CRITIC, "actor_critic", episodes=6)
    C.close(losses["lazytensor"], losses["torch"])
