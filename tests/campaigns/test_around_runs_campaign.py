"""The generated campaign of hostile edges, families 5-8 (tests/campaigns/around_runs_campaign.py), on this checkout:
not one case broken. Long: some thirty job-script runs and four runs beside busy loops."""
import around_runs_campaign
import pytest

from conftest import ROOT

pytestmark = pytest.mark.long


def test_no_case_of_the_campaign_is_broken(subset):
    found = around_runs_campaign.campaign(ROOT)
    assert {family: broken for family, (_, broken) in found.items() if broken} == {}
    assert sum(count for count, _ in found.values()) >= 200
