"""Delivering: channels built from their names and the environment, run side by side.

- A channel is named in the outbox (``github_issues``, ``webhook:<format>:<VARIABLE>``)
  and built here when a tick delivers: a webhook's URL is read from its variable then,
  the issue channel needs ``GITHUB_REPOSITORY`` and a token (``ORCHESTRATOR_TOKEN``,
  ``GITHUB_TOKEN`` or ``GH_TOKEN``). A channel that cannot be built costs one line per
  event it owed, never the tick.
- Each channel delivers its events in order in a thread of its own, so a receiver that
  hangs holds up no other channel; all share one deadline, the ``budget_seconds`` of
  ``orchestrator.json``. A channel still busy at the deadline is not waited for.
- Any exception a channel lets through is caught here: it never reaches the tick.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime

from ..support.credentials import Redactor
from .channel import ISSUES, Channel, Deadline, Delivery, Item, dropped
from .webhook import Webhook, url_problem

TOKENS = ("ORCHESTRATOR_TOKEN", "GITHUB_TOKEN", "GH_TOKEN")
"""Where the issue channel's token is looked for, in order."""

Built = Channel | str
"""A channel, or why it cannot be built (one line)."""


def build(name: str, environ: Mapping[str, str], redact: Redactor, now: datetime,
          budget: float) -> Built:
    """The channel called ``name``, or why there is none."""
    if name == ISSUES:
        return issue_channel(environ, redact, now, budget)
    kind, _, rest = name.partition(":")
    fmt, _, variable = rest.partition(":")
    if kind != "webhook" or fmt not in ("json", "slack") or not variable:
        return f"{name} is no channel this version knows"
    url = environ.get(variable, "").strip()
    if not url:
        return f"{variable} is not set (it holds the webhook's URL)"
    problem = url_problem(url)
    if problem is not None:
        return f"{variable} {problem}"
    return Webhook(name, variable, url, fmt, redact)


def issue_channel(environ: Mapping[str, str], redact: Redactor, now: datetime,
                  budget: float) -> Built:
    """The GitHub issue channel of ``GITHUB_REPOSITORY``, or why there is none."""
    from ..github import connect, valid_repository
    from ..github.issues import IssuesAPI
    from .issues import CALL_TIMEOUT, IssueChannel

    repository = environ.get("GITHUB_REPOSITORY", "")
    token = next((environ[n] for n in TOKENS if environ.get(n)), "")
    if not repository or not token:
        return ("GITHUB_REPOSITORY and a token (GITHUB_TOKEN) are needed for issues; "
                "neither the tick nor anything else is affected")
    if not valid_repository(repository):
        return f"GITHUB_REPOSITORY {repository!r} is not owner/name"
    redact.add(token)
    client = connect(token, environ, now=now, max_wait_seconds=budget,
                     timeout=CALL_TIMEOUT, max_attempts=2)
    return IssueChannel(IssuesAPI(client, repository), redact)


def deliver(items: Mapping[str, Sequence[Item]], channels: Mapping[str, Built],
            deadline: Deadline) -> list[Delivery]:
    """Every item to its channel, each channel in a thread, all within ``deadline``;
    one :class:`Delivery` per item, in the order of ``items``."""
    results: dict[str, list[Delivery]] = {}
    threads = []
    for name, batch in items.items():
        built = channels.get(name, f"{name} is not configured")
        if isinstance(built, str):
            results[name] = [dropped(name, item, built) for item in batch]
            continue
        thread = threading.Thread(target=_run, args=(built, batch, deadline, results, name),
                                  name=f"notify {name}", daemon=True)
        threads.append(thread)
        thread.start()
    for thread in threads:
        thread.join(timeout=deadline.left() + 1.0)
    out = []
    for name, batch in items.items():
        done = results.get(name) or []
        out += done[:len(batch)]
        out += [dropped(name, item, f"no answer within the {deadline.budget:g}s budget")
                for item in batch[len(done):]]
    return out


def _run(channel: Channel, batch: Sequence[Item], deadline: Deadline,
         results: dict[str, list[Delivery]], name: str) -> None:
    try:
        results[name] = list(channel.deliver(batch, deadline))
    except Exception as exc:  # a channel's bug must not reach the tick
        results[name] = [dropped(name, item, f"{type(exc).__name__}: {exc}")
                         for item in batch]


def by_channel(items: Sequence[tuple[str, Item]]) -> dict[str, list[Item]]:
    grouped: dict[str, list[Item]] = {}
    for name, item in items:
        grouped.setdefault(name, []).append(item)
    return grouped
