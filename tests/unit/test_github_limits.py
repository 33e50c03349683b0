"""The limits GitHub puts on a job, as validate warns of them: the 6 hours of a hosted
runner counted with the leg's set-up, and the 5 days of any runner."""

from __future__ import annotations

from orchestrator.config.github_limits import hosted_runner_warnings
from orchestrator.config.models import TrackSpec


def _warned(minutes: float) -> list[str]:
    return hosted_runner_warnings([TrackSpec(name="t", run="true", timeout_minutes=minutes)])


def test_a_limit_from_350_minutes_is_cut_by_the_hosted_cap_before_its_own_timeout() -> None:
    assert _warned(349) == []
    [at] = _warned(350)
    assert "its job needs 360" in at and "keep it under 350" in at
    [over] = _warned(355.5)
    assert "its job needs 366" in over


def test_past_six_hours_a_hosted_runner_and_past_five_days_any_runner_stops_it() -> None:
    [hosted] = _warned(361)
    assert "GitHub-hosted runner after 360 minutes" in hosted and "self-hosted" in hosted
    assert _warned(7190) == [hosted.replace("361", "7190")]
    [days] = _warned(7191)
    assert "after 7200 minutes (5 days), on a self-hosted runner too" in days
