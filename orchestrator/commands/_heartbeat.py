"""Signals to an external monitor (e.g. Healthchecks.io): the tick's ping after each
tick, and the failure signal of a tick that parked a dead letter or of a failed
``status`` (the watchdog's). Kept apart from ``tick`` so ``status`` loads none of it."""

from __future__ import annotations


def heartbeat_target(url: str, fail_url: str | None, parked: bool) -> str | None:
    """Where the heartbeat goes: ``url`` after a tick, or its failure signal when the
    tick parked a dead letter (``<url>/fail``, the Healthchecks way, unless
    ``fail_url`` names another; ``none`` sends nothing then)."""
    if not parked:
        return url
    if fail_url is None:
        return url.rstrip("/") + "/fail"
    return None if fail_url.lower() == "none" else fail_url


def ping(url: str) -> str | None:
    """Tell an external monitor (e.g. Healthchecks.io) the tick ran; never raises."""
    import httpx

    try:
        httpx.get(url, timeout=10).raise_for_status()
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return f"heartbeat ping failed: {type(exc).__name__}"
    return None
