"""The circuit breaker as pure transitions of ``(breaker, now, policy)``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.state.breaker import (
    Breaker,
    BreakerPolicy,
    breaker_allows,
    breaker_failure,
    breaker_now,
    breaker_success,
    merge_breaker,
)

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
POLICY = BreakerPolicy(threshold=3, cooldown=timedelta(minutes=15))


def test_the_breaker_opens_at_the_threshold_of_consecutive_failures() -> None:
    breaker = Breaker()
    for n in range(1, 3):
        breaker = breaker_failure(breaker, T0, f"500 #{n}", POLICY)
        assert breaker.state == "closed" and breaker.failures == n
        assert breaker_allows(breaker, T0, POLICY)
    breaker = breaker_failure(breaker, T0 + timedelta(seconds=5), "500 #3", POLICY)
    assert breaker == Breaker(state="open", failures=3, opened_at=T0 + timedelta(seconds=5),
                              last_error="500 #3")
    assert not breaker_allows(breaker, T0 + timedelta(minutes=15), POLICY)


def test_a_success_closes_the_breaker_and_keeps_the_last_error() -> None:
    failing = breaker_failure(Breaker(), T0, "timeout", POLICY)
    assert breaker_success(failing) == Breaker(last_error="timeout")
    closed = Breaker()
    assert breaker_success(closed) is closed


def test_an_open_breaker_is_half_open_after_its_cooldown_and_one_failure_reopens_it() -> None:
    opened = Breaker(state="open", failures=3, opened_at=T0, last_error="502")
    assert breaker_now(opened, T0 + timedelta(minutes=14, seconds=59), POLICY) == opened
    probing = breaker_now(opened, T0 + timedelta(minutes=15), POLICY)
    assert probing.state == "half_open" and probing.opened_at == T0 and probing.failures == 3
    assert breaker_allows(opened, T0 + timedelta(minutes=15), POLICY)
    again = breaker_failure(probing, T0 + timedelta(minutes=16), "502", POLICY)
    assert again.state == "open" and again.opened_at == T0 + timedelta(minutes=16)
    assert breaker_success(probing) == Breaker(last_error="502")


def test_an_open_breaker_without_an_opening_time_stays_open() -> None:
    # A hand-edited health.json: without opened_at there is no cooldown to end.
    broken = Breaker(state="open", failures=9)
    assert breaker_now(broken, T0 + timedelta(days=30), POLICY) == broken


def test_a_lost_race_never_closes_a_breaker_another_tick_opened() -> None:
    closed = Breaker()
    mine = Breaker(failures=2, last_error="500")
    opened = Breaker(state="open", failures=5, opened_at=T0)
    assert merge_breaker(closed, closed, mine) == mine  # nobody else touched it
    assert merge_breaker(closed, None, mine) == mine
    assert merge_breaker(closed, opened, mine) == opened  # theirs is more cautious
    later = Breaker(state="open", failures=5, opened_at=T0 + timedelta(minutes=1))
    assert merge_breaker(closed, opened, later) == later
    half = Breaker(state="half_open", failures=5, opened_at=T0)
    assert merge_breaker(closed, half, mine) == half
    assert merge_breaker(closed, mine, Breaker(failures=3)) == Breaker(failures=3)
