"""RankAgreement decides one check late, the same on every rank, without a sync per step."""
import torch

from utils.launch import World
from utils.training.rank_agreement import RankAgreement

CPU = torch.device("cpu")


def test_a_non_finite_loss_is_acted_on_at_the_next_check():
    losses = []
    agreement = RankAgreement(CPU, World(), losses, watch_losses=True)
    assert agreement.every == 1  # one CPU process: checking is cheap, so at every step
    losses.append(torch.tensor(2.0))
    assert agreement.check(1, False) == (False, False)
    losses.append(torch.tensor(float("nan")))
    assert agreement.check(2, False) == (False, False)  # seen now, acted on at the next check
    losses.append(torch.tensor(1.0))
    assert agreement.check(3, False) == (True, False)
    assert agreement.check(4, False) == (True, False)  # a divergence stays a divergence


def test_without_a_stopping_policy_the_losses_are_not_tested():
    losses = [torch.tensor(float("inf"))]
    agreement = RankAgreement(CPU, World(), losses, watch_losses=False)
    assert [agreement.check(step, False) for step in (1, 2, 3)] == [(False, False)] * 3


def test_a_stop_signal_is_agreed_one_check_later():
    agreement = RankAgreement(CPU, World(), [], watch_losses=False)
    assert agreement.check(1, True) == (False, False)
    assert agreement.check(2, False) == (False, True)


def test_between_checks_nothing_is_launched():
    """Several ranks check every CHECK_EVERY steps: the steps between launch no collective."""
    agreement = RankAgreement(CPU, World(0, 2, 0, 2, "torchrun"), [torch.tensor(float("nan"))], watch_losses=True)
    assert agreement.every == RankAgreement.CHECK_EVERY
    for step in range(1, RankAgreement.CHECK_EVERY):
        assert agreement.check(step, True) == (False, False)
    assert agreement.pending is None and agreement.checked == 0
