"""What leaves the orchestrator, made safe and small: redacted, escaped, cut.

- Every text passes the redactor the brief's records pass (the orchestrator's
  credentials, then anything shaped like a token) before it is put in a message.
- Each channel's limits are kept, with a pointer to the brief for the rest: GitHub
  refuses an issue body or comment over 65,536 characters (``422 body is too long``);
  Slack takes at most 3,000 characters in a block's text, 150 in a header and 50
  blocks in a message (api.slack.com/reference/block-kit/blocks).
- Text from tracks is inert wherever it lands: Markdown and HTML escaped in issues,
  where an ``@name`` mentions no one; ``&``, ``<`` and ``>`` escaped in Slack (so
  ``<!channel>`` mentions no one); links only to ``http`` and ``https`` URLs.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from ..config.channels import EventKind
from ..support.credentials import Redactor, redact_value
from .events import Event

GITHUB_BODY_LIMIT = 65_536
"""Characters of an issue body or comment GitHub accepts."""
SLACK_TEXT_LIMIT = 3000
SLACK_HEADER_LIMIT = 150

TITLES = {
    EventKind.RUN_FAILED: "Run failed",
    EventKind.RUN_RECOVERED: "Run recovered",
    EventKind.DEAD_LETTER: "Dead letter",
    EventKind.QUEUE_DEAD_LETTER: "Queue item dead",
    EventKind.SCHEDULE_PAUSED: "Schedule paused",
    EventKind.RUNNER_DEGRADED: "Runner degraded",
    EventKind.RUNNER_RECOVERED: "Runner recovered",
    EventKind.TICK_STALE: "No tick",
    EventKind.RECORD_QUARANTINED: "Record quarantined",
    EventKind.REWIND_REFUSED: "State branch rewound",
    EventKind.SLA_MISSED: "SLA missed",
    EventKind.KEEPALIVE_DUE: "Scheduled workflows stop soon",
    EventKind.APPROVAL_WAITING: "Approval waiting",
}

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
"""What Markdown reads inside a line: emphasis, code, links and images, tables,
strike-through (a line's start, where ``#`` or ``-`` would count, is never a value)."""
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")


def title(event: Event) -> str:
    what = TITLES[event.kind]
    count = event.details.get("count", "1")
    if event.kind is EventKind.QUEUE_DEAD_LETTER and count != "1":
        what = f"{count} queue items dead"  # one event for a queue's many, in one tick
    return f"{what}: {event.schedule}" if event.schedule else what


def link(url: str | None) -> str | None:
    """``url`` when it is an http(s) URL that is safe inside Markdown and Slack links."""
    if not url or any(c in url for c in " <>|\"'`\\") or not url.isprintable():
        return None
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return None
    return url if scheme in ("http", "https") else None


def md(text: str) -> str:
    """``text`` as inert Markdown on one line: HTML neutralised, syntax escaped."""
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def quiet(text: str) -> str:
    """``text`` that mentions no one on GitHub: a word joiner after each ``@``."""
    return _MENTION.sub("@\u2060", text)


def cut(text: str, limit: int, rest: str | None = None) -> str:
    """``text`` within ``limit`` characters; a cut one ends saying where the rest is."""
    if len(text) <= limit:
        return text
    note = f"\n\n… cut to {limit:,} characters" + (f"; the rest: {rest}" if rest else "")
    return text[: max(0, limit - len(note))] + note


def issue_body(parts: list[str], redact: Redactor, rest: str | None = None) -> str:
    """An issue's body or comment: the non-empty ``parts``, redacted, mentioning no one,
    then cut to what GitHub takes (a pointer to ``rest`` ending a cut one)."""
    text = "\n\n".join(p for p in parts if p)
    return cut(quiet(redact(text)), GITHUB_BODY_LIMIT, rest)


def slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def json_payload(event: Event, redact: Redactor) -> dict[str, Any]:
    """The event as the JSON webhook posts it, every string redacted."""
    payload: dict[str, Any] = redact_value(event.to_json(), redact)
    return payload


def slack_payload(event: Event, redact: Redactor) -> dict[str, Any]:
    """A Slack incoming-webhook message: ``text`` (the notification's line) and
    ``blocks`` (a header, the summary with links, the event's id and time)."""
    head = cut(redact(title(event)), SLACK_HEADER_LIMIT)
    brief, ci = link(event.brief_url), link(event.link)
    links = " · ".join(f"<{url}|{name}>" for url, name in ((brief, "Brief"), (ci, "CI run"))
                       if url and not (name == "CI run" and url == brief))
    summary = slack_escape(redact(event.summary))
    more = f"\n{links}" if links else ""
    body = cut(summary, SLACK_TEXT_LIMIT - len(more), brief) + more
    context = slack_escape(f"{event.kind.value} · {event.id} · {event.at:%Y-%m-%d %H:%M:%S} UTC")
    return {
        "text": cut(f"{slack_escape(head)}: {summary}", SLACK_TEXT_LIMIT, brief),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": head}},
            {"type": "section", "text": {"type": "mrkdwn", "text": body}},
            {"type": "context", "elements": [
                {"type": "mrkdwn", "text": cut(redact(context), SLACK_TEXT_LIMIT)}]},
        ],
    }
