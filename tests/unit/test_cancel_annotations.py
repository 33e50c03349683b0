"""Who cancelled a leg, from GitHub's annotation on its job's check run ("The run was
canceled by @octocat."), and what the record says when that cannot be known."""

from __future__ import annotations

from orchestrator.executors.base import Observation
from orchestrator.executors.github.observation import cancelled_by, canceller
from orchestrator.state.phases import TrackPhase

SEEN = Observation(key="r--20261201T0700Z--a--1", phase=TrackPhase.CANCELLED)


def test_the_canceller_is_read_from_the_annotation_a_bot_s_too() -> None:
    assert canceller([{"message": "Process completed with exit code 1."},
                      {"message": "The run was canceled by @octocat."}]) == "octocat"
    assert canceller([{"message": "The run was canceled by @my-app[bot]."}]) == "my-app[bot]"
    assert canceller([{"message": 7}, "junk", {"message": "Canceling since a higher "
                                                          "priority waiting request"}]) is None


def test_the_record_says_who_or_why_it_cannot() -> None:
    named = cancelled_by(SEEN, 5, "octocat").error or ""
    assert "cancelled on GitHub by @octocat (workflow run 5)" in named
    nobody = cancelled_by(SEEN, 5, None, readable=True).error or ""
    assert "name nobody" in nobody and "checks: read" not in nobody
    unread = cancelled_by(SEEN, 5, None, readable=False).error or ""
    assert "checks: read" in unread
