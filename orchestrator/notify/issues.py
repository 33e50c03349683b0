"""GitHub issues, the Upptime way: one issue per failing schedule.

- The first failure of a streak opens an issue titled after the schedule, labelled
  ``orchestrator`` and the schedule id (cut to GitHub's 50 characters for a label),
  its body the run's Markdown brief with links. Each later failure comments on it; the
  first run that completes comments and closes it. A dead letter or a pause of the
  schedule comments on the open issue, with the command that settles it.
- Exactly once: the tick whose commit starts the streak is the only one that opens
  the issue, and the number goes to ``state/notify.json``. A claim taken again after a
  tick died first looks for the issue by its streak's marker (a comment in the body,
  found by listing the repository's issues with both labels), and so does a comment:
  an event's comment carries the event's id and is looked for before posting again.
- An issue closed by hand while the schedule still fails stays closed: the streak
  remembers it, and no comment reopens the conversation until a new streak.
- A token without ``issues: write`` (``403 Resource not accessible by integration``)
  costs one line, once per tick; nothing else fails.
- ``tick_stale`` has an issue of its own (label ``orchestrator-watchdog``): opened when
  the watchdog finds no recent tick, unless one is open, and closed once ticks resume.
- ``keepalive_due`` likewise (label ``orchestrator-keepalive``): opened when the 60 days
  of GitHub's inactivity rule are near, closed by the first weekly check after a commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config.channels import EventKind
from ..github import GitHubError
from ..github.issues import IssuesAPI
from ..github.issues import IssuesRefused as Refused
from ..support.credentials import Redactor
from .channel import ISSUES, Deadline, Delivery, Item, dropped
from .events import Event
from .text import GITHUB_BODY_LIMIT, cut, issue_body, link, md

LABEL = "orchestrator"
WATCHDOG_LABEL = "orchestrator-watchdog"
KEEPALIVE_LABEL = "orchestrator-keepalive"
LABEL_LIMIT = 50
"""Characters of a label name (GitHub: ``name is too long (maximum is 50 characters)``)."""
MAX_PAGES = 3
"""Pages of 100 issues or comments read when looking for a marker."""
CALL_TIMEOUT = 10.0
BRIEF_ROOM = 48_000
"""Bytes of the Markdown brief in an issue body; the body stays under GitHub's limit."""


def schedule_label(schedule: str) -> str:
    return schedule[:LABEL_LIMIT]


def streak_marker(since: str) -> str:
    return f"<!-- orchestrator:streak {since} -->"


def event_marker(event_id: str) -> str:
    return f"<!-- orchestrator:event {event_id} -->"


class IssueChannel:
    """Issues of one repository through the REST client (see the module docstring)."""

    name = ISSUES

    def __init__(self, api: IssuesAPI, redact: Redactor) -> None:
        self.api = api
        self.redact = redact
        self.learned: dict[str, tuple[int, str | None]] = {}
        """Streak -> its issue, as this channel opened or found it."""
        self.refused: str | None = None
        self.deadline: Deadline | None = None

    # ------------------------------------------------------------------ delivery

    def deliver(self, items: Sequence[Item], deadline: Deadline) -> list[Delivery]:
        self.deadline = deadline
        failures = {i.pending.event.run_id for i in items
                    if i.pending.event.kind is EventKind.RUN_FAILED}
        out = []
        for item in items:
            if self.refused is not None:
                out.append(dropped(self.name, item, self.refused))
                continue
            try:
                out.append(self._one(item, failures))
            except Refused as exc:
                self.refused = str(exc)
                out.append(dropped(self.name, item, self.refused))
            except GitHubError as exc:
                out.append(dropped(self.name, item, self.redact(exc.message)))
        return out

    def _one(self, item: Item, failures: set[str | None]) -> Delivery:
        kind = item.pending.event.kind
        if kind is EventKind.RUN_FAILED:
            return self._failed(item)
        if kind is EventKind.RUN_RECOVERED:
            return self._recovered(item)
        if kind is EventKind.TICK_STALE:
            return self._stale(item)
        if kind is EventKind.KEEPALIVE_DUE:
            return self._keepalive(item)
        if kind is EventKind.DEAD_LETTER and item.pending.event.run_id in failures:
            return self._done(item, "listed with its run's failure")
        return self._remark(item)

    def _failed(self, item: Item) -> Delivery:
        event, since = item.pending.event, item.pending.streak or item.pending.event.run_id
        assert since is not None and event.schedule is not None
        first = event.run_id == since
        found = self._known(item, since)
        if found is None and item.opener_elsewhere and not first:
            return Delivery(self.name, event.id, "deferred", f"notify: {self.name}: "
                            f"{event.id}: waits for the issue of {since} to be opened")
        if found is None and (not first or item.pending.attempt > 1):
            found = self._find(event.schedule, since)
        if found is None:
            number, url = self._open(item, since)
            return self._done(item, f"opened #{number} for {event.schedule}", number, url)
        number, url = found
        if first:
            return self._done(item, f"#{number} was opened by an earlier attempt", number, url)
        if item.streak is not None and item.streak.closed_by_hand:
            return self._done(item, f"#{number} was closed by hand: left closed for this "
                              "streak", number, url)
        if self._state(number) == "closed":
            return Delivery(self.name, event.id, "delivered",
                            f"notify: {self.name}: {event.id}: #{number} was closed by hand: "
                            "left closed for this streak", event.schedule, since, number,
                            url, closed_by_hand=True)
        self._comment(item, number, self._failure_body(item, since, comment=True))
        return self._done(item, f"commented on #{number}", number, url)

    def _recovered(self, item: Item) -> Delivery:
        event, since = item.pending.event, item.pending.streak
        if since is None or event.schedule is None:
            return self._done(item, "no streak, no issue to close")
        found = self._known(item, since) or self._find(event.schedule, since)
        if found is None:
            return self._done(item, "no issue to close")
        number, url = found
        if self._state(number) == "closed":
            return self._done(item, f"#{number} is closed already", number, url)
        self._comment(item, number, self._recovery_body(item))
        self._call("PATCH", f"issues/{number}", {"state": "closed", "state_reason": "completed"})
        return self._done(item, f"commented on #{number} and closed it", number, url)

    def _remark(self, item: Item) -> Delivery:
        """A dead letter or a pause: a comment on the schedule's open issue, if any."""
        event, since = item.pending.event, item.pending.streak
        if since is None or event.schedule is None:
            return self._done(item, "no open issue of the schedule")
        found = self._known(item, since) or self._find(event.schedule, since)
        if found is None or (item.streak is not None and item.streak.closed_by_hand):
            return self._done(item, "no open issue of the schedule")
        number, url = found
        self._comment(item, number, self._remark_body(item))
        return self._done(item, f"commented on #{number}", number, url)

    def _stale(self, item: Item) -> Delivery:
        since = item.pending.event.details.get("last_tick")
        title = f"orchestrator: no tick since {since}" if since else \
            "orchestrator: no tick recorded"
        return self._watch_issue(item, WATCHDOG_LABEL, title, "This issue closes itself "
                                 "once ticks resume (the next watchdog run, or `serve`'s "
                                 "next check).")

    def _keepalive(self, item: Item) -> Delivery:
        at = item.pending.event.details.get("disabled_at", "")
        return self._watch_issue(item, KEEPALIVE_LABEL, "orchestrator: scheduled workflows "
                                 f"stop at {at} without a commit", "This issue closes itself "
                                 "at the tick's first weekly check after a commit.")

    def _watch_issue(self, item: Item, label: str, title: str, closing: str) -> Delivery:
        """One open issue per watcher's label: opened unless one is open already."""
        event = item.pending.event
        issues = self.open_watchdog_issues(label)
        if issues:
            number = issues[0]["number"]
            return self._done(item, f"#{number} is open already", number)
        body = self._body([event_marker(event.id), f"**{md(self.redact(event.summary))}**",
                           self._links(event), closing])
        data = self._call("POST", "issues", {"title": cut(title, 200), "body": body,
                                             "labels": [LABEL, label]}, expect=201)
        return self._done(item, f"opened #{data['number']}", data["number"], data.get("html_url"))

    def open_watchdog_issues(self, label: str = WATCHDOG_LABEL) -> list[dict[str, Any]]:
        return self._listed({"labels": f"{LABEL},{label}", "state": "open"})

    def close_watchdog(self, line: str, deadline: Deadline,
                       label: str = WATCHDOG_LABEL) -> list[str]:
        """Close every open issue of the watcher's ``label`` with ``line`` as its last
        comment."""
        self.deadline = deadline
        done = []
        try:
            for issue in self.open_watchdog_issues(label):
                number = issue["number"]
                self._call("POST", f"issues/{number}/comments",
                           {"body": cut(self.redact(line), GITHUB_BODY_LIMIT)}, expect=201)
                self._call("PATCH", f"issues/{number}",
                           {"state": "closed", "state_reason": "completed"})
                done.append(f"notify: {self.name}: closed #{number}: {line}")
        except (GitHubError, Refused) as exc:
            done.append(f"notify: {self.name}: watchdog issue not closed: "
                        f"{self.redact(getattr(exc, 'message', str(exc)))}")
        return done

    def try_out(self, event: Event, deadline: Deadline) -> Delivery:
        """``notify test``: open an issue for ``event`` and close it again at once, which
        proves the token may write issues."""
        self.deadline = deadline
        body = self._body([event_marker(event.id), f"**{md(self.redact(event.summary))}**",
                           "A test of the orchestrator's notifications: nothing happened."])
        try:
            data = self._call("POST", "issues", {
                "title": f"orchestrator: notification test ({event.kind.value})",
                "body": body, "labels": [LABEL]}, expect=201)
            number = int(data["number"])
            self._call("PATCH", f"issues/{number}", {"state": "closed",
                                                     "state_reason": "completed"})
        except (GitHubError, Refused) as exc:
            why = self.redact(getattr(exc, "message", str(exc)))
            return Delivery(self.name, event.id, "dropped", f"{self.name}: not sent: {why}")
        return Delivery(self.name, event.id, "delivered", f"{self.name}: opened #{number} "
                        f"({data.get('html_url')}) and closed it", issue=number)

    # ------------------------------------------------------------------ bodies

    def _failure_body(self, item: Item, since: str, *, comment: bool = False) -> str:
        event = item.pending.event
        parts = [streak_marker(since) if not comment else "", event_marker(event.id),
                 f"**{md(self.redact(event.summary))}**", self._links(event)]
        if item.letters:
            rows = "\n".join(f"- `{key}`: {md(self.redact(why))}. Requeue: "
                             f"`orchestrator dlq requeue {key} --reason REASON`; discard: "
                             f"`orchestrator dlq discard {key} --reason REASON`"
                             for key, why in item.letters)
            parts.append(f"**Dead letters** (each waits for a person):\n\n{rows}")
        room = BRIEF_ROOM // 4 if comment else BRIEF_ROOM
        brief = item.markdown(room)
        if brief:
            brief = self.redact(brief)
            parts.append(f"<details><summary>Brief</summary>\n\n{brief}\n\n</details>"
                         if comment else brief)
        if not comment:
            parts.append(f"Further failures of {event.schedule} add comments here; the "
                         "first run that completes closes this issue.")
        return self._body(parts, link(event.brief_url))

    def _recovery_body(self, item: Item) -> str:
        event = item.pending.event
        return self._body([event_marker(event.id), f"**{md(self.redact(event.summary))}**",
                           self._links(event), "Closing: the schedule recovered."],
                          link(event.brief_url))

    def _remark_body(self, item: Item) -> str:
        event = item.pending.event
        extra = [f"`{event.details[k]}`" for k in ("requeue", "discard", "resume")
                 if k in event.details]
        return self._body([event_marker(event.id), f"**{md(self.redact(event.summary))}**",
                           " · ".join(extra), self._links(event)], link(event.brief_url))

    def _links(self, event: Event) -> str:
        brief, ci = link(event.brief_url), link(event.link)
        shown = [f"[Brief]({brief})"] if brief else []
        if ci and ci != brief:
            shown.append(f"[CI run]({ci})")
        return " · ".join(shown)

    def _body(self, parts: list[str], rest: str | None = None) -> str:
        return issue_body(parts, self.redact, rest)

    # ------------------------------------------------------------------ issues

    def _known(self, item: Item, since: str) -> tuple[int, str | None] | None:
        if since in self.learned:
            return self.learned[since]
        streak = item.streak
        if streak is not None and streak.since == since and streak.issue is not None:
            return streak.issue, streak.issue_url
        if item.pending.issue is not None:
            return item.pending.issue, None
        return None

    def _find(self, schedule: str, since: str) -> tuple[int, str | None] | None:
        marker = streak_marker(since)
        for issue in self._listed({"labels": f"{LABEL},{schedule_label(schedule)}",
                                   "state": "all"}):
            if marker in str(issue.get("body") or ""):
                found = issue["number"], issue.get("html_url")
                self.learned[since] = found
                return found
        return None

    def _open(self, item: Item, since: str) -> tuple[int, str | None]:
        event = item.pending.event
        assert event.schedule is not None
        data = self._call("POST", "issues", {
            "title": f"orchestrator: {event.schedule} is failing",
            "body": self._failure_body(item, since),
            "labels": [LABEL, schedule_label(event.schedule)]}, expect=201)
        found = int(data["number"]), data.get("html_url")
        self.learned[since] = found
        return found

    def _state(self, number: int) -> str:
        return str(self._call("GET", f"issues/{number}").get("state"))

    def _comment(self, item: Item, number: int, body: str) -> None:
        marker = event_marker(item.event_id)
        if item.pending.attempt > 1:
            for comment in self._listed({}, f"issues/{number}/comments"):
                if marker in str(comment.get("body") or ""):
                    return  # an earlier attempt posted it
        self._call("POST", f"issues/{number}/comments", {"body": body}, expect=201)

    def _done(self, item: Item, what: str, number: int | None = None,
              url: str | None = None) -> Delivery:
        event = item.pending.event
        return Delivery(self.name, event.id, "delivered", f"notify: {self.name}: {event.id}: "
                        f"{what}", event.schedule, item.pending.streak, number, url)

    # ------------------------------------------------------------------ HTTP

    def _listed(self, query: dict[str, str], path: str = "issues") -> list[dict[str, Any]]:
        return self.api.listed(query, path, pages=MAX_PAGES, timeout=self._timeout)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, *,
              params: dict[str, str] | None = None, expect: int = 200) -> Any:
        return self.api.call(method, path, body, params=params, expect=expect,
                             timeout=self._timeout(method, path))

    def _timeout(self, method: str, path: str) -> float:
        """The seconds a call may take within the delivery's budget."""
        deadline = self.deadline
        if deadline is None:
            return CALL_TIMEOUT
        if deadline.passed:
            raise GitHubError(f"{method} {path}: no time left in the "
                              f"{deadline.budget:g}s budget")
        return min(CALL_TIMEOUT, deadline.left())
