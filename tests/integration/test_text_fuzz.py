"""Random secrets, escape sequences and cut points, through every exit of the process.

Each example prints a text holding a credential (an environment variable, as a runner
has it) and a webhook URL's secret path, with terminal escape sequences anywhere (inside
a secret too), and sends it through the real exits at random cut points: the local
executor's stderr tail (a real file), a GitHub leg's outcome, the HTML brief, its
Markdown twin, a Markdown cell, an issue's body, both webhook payloads, the job summary
and ``runs show`` as the CLI prints it. None may hold a secret, whole or any eight
characters of it, nor an escape byte.

``ORCHESTRATOR_TEXT_FUZZ_EXAMPLES`` sets the number of examples (the acceptance run:
10,000); the default keeps the suite fast.
"""

from __future__ import annotations

import functools
import io
import json
import os
import string
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import brief
from orchestrator.brief import tails
from orchestrator.cli import main
from orchestrator.commands._operate import report
from orchestrator.commands.outcome import STDERR_READ
from orchestrator.config.channels import EventKind
from orchestrator.executors import local_outcome
from orchestrator.notify.events import Event, summary_line
from orchestrator.notify.text import issue_body, json_payload, md, slack_payload
from orchestrator.runs.views import run_text
from orchestrator.support.credentials import redactor
from orchestrator.support.text import Outgoing
from tests.briefdata import four_track_run

EXAMPLES = int(os.environ.get("ORCHESTRATOR_TEXT_FUZZ_EXAMPLES", "40"))
HOOK_BASE = "https://hooks.example.com/services/T0/B0/"
RUN_ID = "x--20261201T0700Z"
SECRET_ALPHABET = string.ascii_letters + string.digits
FILLER = " .,;:!?()<>&'\"\n\t\réßλ…"
"""Text around the secrets, none of their characters: an eight-character run of a
secret found in an output can only come from the secret."""
ESCAPES = [
    "\x1b[31m", "\x1b[0m", "\x1b[38;5;196m", "\x1b[2K", "\x1b[?25l", "\x9b1;31m",
    "\x1b]0;title\x07", "\x1b]8;;https://evil.invalid\x1b\\", "\x1b]8;;\x1b\\",
    "\x1b]52;c;Y3VybA==\x07", "\x9d2;t\x9c", "\x1bP1$r0m\x1b\\", "\x90q#0\x9c",
    "\x1bX s \x1b\\", "\x1b^ p \x1b\\", "\x1b_ a \x1b\\", "\x1b(B", "\x1b7", "\x1b8", "\x1bc",
    "\x07", "\x08", "\x00", "\x7f", "\x85", "\x9c", "\x0b", "\x0c", "\x1a",
]
"""Whole sequences: an escape cut short would swallow the next characters on a terminal
too, and with them a piece of what follows."""
BAD = frozenset("\x1b\x07\x08\x9b\x9d\x90\x9c\x00\x7f\x85")


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, str, str]:
    """(credential, webhook secret, text holding both with escapes anywhere)."""
    token = draw(st.text(SECRET_ALPHABET, min_size=8, max_size=60))
    hook = draw(st.text(SECRET_ALPHABET, min_size=16, max_size=40))
    said = [token, f"Cannot POST /services/T0/B0/{hook}", token, HOOK_BASE + hook]
    pieces = []
    for piece in draw(st.lists(st.sampled_from(said), min_size=1, max_size=6)):
        pieces += [draw(st.text(FILLER, max_size=30)), piece]
    base = "".join(pieces) + draw(st.text(FILLER, max_size=30))
    # escape sequences at random places of the text, inside a secret too
    places = draw(st.lists(st.tuples(st.integers(0, len(base)), st.sampled_from(ESCAPES)),
                           max_size=12))
    text = base
    for at, seq in sorted(places, reverse=True):
        text = text[:at] + seq + text[at:]
    return token, hook, text


def leaks(output: str, secrets: tuple[str, ...], known: str = "") -> list[str]:
    """The escape bytes, and the eight-character pieces of ``secrets``, in ``output``
    (but those in ``known``: what the page holds whatever the text)."""
    found = sorted(BAD & set(output))
    for secret in secrets:
        found += [secret[i:i + 8] for i in range(len(secret) - 7)
                  if secret[i:i + 8] in output and secret[i:i + 8] not in known]
    return found


def strings(value: Any) -> str:
    """Every string value in a JSON value, one a line (the keys are the format's own
    words: ``elements`` is no leak of a secret that happens to be ``elements``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    return "\n".join(strings(v) for v in value) if isinstance(value, list) else ""


@functools.cache
def page_text() -> str:
    """Both renderings of the brief without hostile text, for :func:`leaks`."""
    ctx = four_track_run()
    return brief.render_html(ctx) + brief.render_markdown(ctx)


def _exits(text: str, cut: int, window: int, folder: Path) -> dict[str, str]:
    """What each exit makes of ``text``: ``cut`` is a limit in characters, ``window``
    the bytes of a file's end read."""
    redact = redactor(os.environ)
    data = text.encode()
    ctx = four_track_run(summaries={"ingest": text}, errors=[text])
    ctx.tails["ingest"] = tails.tail_of(data[-window:], redact, window)
    event = Event(id="run_failed:x--20261201T0700Z:1", kind=EventKind.RUN_FAILED,
                  at=datetime(2026, 12, 1, tzinfo=UTC), schedule="x",
                  summary=summary_line(text))
    summary = Path(os.environ["GITHUB_STEP_SUMMARY"])
    summary.unlink(missing_ok=True)
    report("pause", text)
    shown = io.StringIO()
    Outgoing(shown, redact).write("\n".join(run_text(ctx.run, {t.name: t for t in ctx.tracks})))
    return {**_files(text, cut, window, folder), **{
        "html brief": brief.render_html(ctx),
        "markdown brief": brief.render_markdown(ctx, limit_bytes=8192 + cut * 64),
        "markdown cell": brief.md(text, cut),
        "issue body": issue_body([f"**{md(redact(event.summary))}**", text], redact),
        "json webhook": strings(json_payload(event, redact)),
        "slack webhook": strings(slack_payload(event, redact)),
        "job summary": summary.read_text(),
        "runs show": shown.getvalue(),
    }}


def _files(text: str, cut: int, window: int, folder: Path) -> dict[str, str]:
    """What the executors make of ``text`` printed to stderr, read ``window`` bytes
    from its end: the local one's tail, and a GitHub leg's outcome (``orchestrator
    outcome``, with ``text`` as its message too)."""
    data = text.encode()
    stderr = folder / "stderr.log"
    stderr.write_bytes(data)
    # the leg reads the last STDERR_READ bytes: padded so that they start `window`
    # bytes before the end of the text
    (folder / "leg.stderr").write_bytes(data + b"\n" + b" " * (STDERR_READ - window - 1))
    assert main(["outcome", "--run", RUN_ID, "--track", "a", "--attempt", "1",
                 "--exit-code", "1", "--started-at", "2026-12-01T00:00:00Z",
                 "--finished-at", "2026-12-01T00:01:00Z", "--stderr",
                 str(folder / "leg.stderr"), "--message", text,
                 "--output", str(folder / "legs")]) == 0
    leg = json.loads((folder / "legs" / f"{RUN_ID}--a--1.json").read_text())
    return {"local stderr tail": local_outcome.stderr_tail(stderr, lines=cut % 25 + 1,
                                                           max_bytes=window),
            "github leg outcome": leg["error"]}


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(hostile(), st.integers(1, 400), st.integers(1, 600))
def test_no_exit_lets_a_secret_or_an_escape_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: tuple[str, str, str],
        cut: int, window: int) -> None:
    token, hook, text = case
    with monkeypatch.context() as env:
        env.setenv("ACTIONS_RUNTIME_TOKEN", token)
        env.setenv("TEAM_WEBHOOK", HOOK_BASE + hook)
        env.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
        outputs = _exits(text, cut, window, tmp_path)
    for name, output in outputs.items():
        assert not leaks(output, (token, hook), page_text()), (name, output)
