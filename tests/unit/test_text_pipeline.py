"""The one road out of the process: decode, clean, redact, then cut."""

from __future__ import annotations

import io

import pytest

from orchestrator import brief
from orchestrator.brief import tails
from orchestrator.executors import outcomes
from orchestrator.notify.events import Event
from orchestrator.notify.text import json_payload, slack_payload
from orchestrator.support.credentials import Redactor, redactor
from orchestrator.support.text import (
    Outgoing,
    before_last_word,
    clean,
    last_lines,
    outgoing,
    past_first_word,
)

TOKEN = "ghs_" + "Tk7" * 12 + "tail"
HOOK = "https://hooks.example.com/services/T0/B0/" + "Wh4" * 8
SECRET_PATH = "/services/T0/B0/" + "Wh4" * 8


@pytest.mark.parametrize("sequence", [
    "\x1b[31m", "\x1b[38;5;196m", "\x1b[?25l", "\x9b2J",  # CSI, 7-bit and 8-bit
    "\x1b]0;owned title\x07", "\x1b]8;;https://evil.invalid\x1b\\",  # OSC: title, link
    "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07", "\x9d0;title\x9c",  # OSC 52, the 8-bit form
    "\x1bP1$r0m\x1b\\", "\x1bX sos \x1b\\", "\x1b^ pm \x1b\\", "\x1b_ apc \x1b\\",
    "\x1b(B", "\x1b7", "\x1bc", "\x1b\x7f", "\x07", "\x08", "\x00", "\x7f", "\x85", "\x0c",
])
def test_every_escape_sequence_and_control_is_removed(sequence: str) -> None:
    assert clean(f"a{sequence}b") == "ab"


def test_newline_and_tab_stay_and_line_ends_become_newlines() -> None:
    assert clean(b"a\tb\r\nc\rd\n\xff") == "a\tb\nc\nd\n\ufffd"


def test_an_unterminated_string_sequence_takes_what_a_terminal_would_swallow() -> None:
    assert clean("shown \x1b]0;title without end") == "shown "
    assert clean("a \x1b]0;t\x1b[1mb") == "a b"  # the next escape ends it


def test_a_token_with_a_colour_code_inside_is_redacted() -> None:
    redact = redactor({"GITHUB_TOKEN": TOKEN})
    split = f"token {TOKEN[:10]}\x1b[1m{TOKEN[10:]}\x1b[0m."
    assert redact(split) == "token ***."
    unknown = "ghp_" + "A1" * 18
    assert Redactor()(f"{unknown[:9]}\x1b]8;;x\x1b\\{unknown[9:]}") == "***"


def test_a_webhook_url_s_path_and_query_are_secrets_of_their_own() -> None:
    redact = redactor({"TEAM_WEBHOOK": HOOK + "?token=q1w2e3r4t5y6u7i8o9"})
    for said in (f"Cannot POST {SECRET_PATH}", f"404 {SECRET_PATH.lstrip('/')} not found",
                 "bad token=q1w2e3r4t5y6u7i8o9", f"no route {'Wh4' * 8}",
                 f"Cannot POST {SECRET_PATH.replace('/', '%2F')}"):
        shown = redact(said)
        assert "Wh4Wh4Wh4" not in shown and "q1w2e3r4" not in shown, shown
    assert redact("Cannot POST /services/other") == "Cannot POST /services/other"
    channel = Redactor()
    channel.add(HOOK)  # a webhook channel adds its URL, whatever its variable's name
    assert channel(f"Cannot POST {SECRET_PATH}") == "Cannot POST ***"


def test_a_credential_s_piece_at_a_text_s_edge_is_redacted() -> None:
    redact = redactor({"GITHUB_TOKEN": TOKEN})
    assert redact(TOKEN[20:] + " rest") == "*** rest"  # a window that starts inside it
    assert redact("start " + TOKEN[:12]) == "start ***"  # a read that stopped inside it
    assert redact(TOKEN[-7:] + " x") == TOKEN[-7:] + " x"  # under eight: no credential
    assert redact(" \n" + TOKEN[30:] + " rest") == " \n*** rest"  # after blanks too


def test_secrets_that_overlap_are_all_found_before_any_is_replaced() -> None:
    """Found by the fuzz test: replacing one secret first moved another's piece away
    from the text's edge, where it was no longer recognised."""
    base = "https://hooks.example.com/services/T0/B0/"
    redact = redactor({"ACTIONS_RUNTIME_TOKEN": "0" * 23, "TEAM_WEBHOOK": base + "0" * 31 + "2"})
    assert redact(("0" * 31 + "2" + "0" * 23)[-54:]) == "***"
    redact = redactor({"ACTIONS_RUNTIME_TOKEN": "0" * 23 + "2", "TEAM_WEBHOOK": base + "0" * 16})
    assert redact("0" * 23 + "2; exit 1") == "***; exit 1"
    assert Redactor(["SECRETabcdefghij1234"])("abcdefgh xyz") == "abcdefgh xyz"


def test_the_partial_piece_at_a_window_s_edge_is_dropped() -> None:
    assert past_first_word("7Tk7Tk7Tk7tail rest\nmore") == " rest\nmore"
    assert past_first_word("1m7Tk7\x1b[0m7Tk7tail rest") == " rest"  # an escape's rest
    assert past_first_word("\x00\x00the last line") == "\x00\x00the last line"
    assert past_first_word("x" * 500) == "x" * 200  # one piece: longer than any token
    # a window that starts inside a title string printed inside a token
    assert past_first_word(" s \x1b\\00tail rest") == " rest"
    assert past_first_word("\x1bX s \x1b\\00tail rest") == " rest"  # a whole one
    assert before_last_word("Cannot POST /x ghp_A1A1A1A1A1") == "Cannot POST /x "
    assert before_last_word("x" * 500) == "x" * 200


def test_the_tail_is_redacted_before_it_is_cut() -> None:
    redact = redactor({"GITHUB_TOKEN": TOKEN})
    text = "first\n" + "x" * 10 + TOKEN + "\nlast line"
    for chars in range(len("\nlast line") + 1, len(text)):
        tail = last_lines(text, 20, chars, redact)
        assert "Tk7Tk7Tk" not in tail, (chars, tail)
    # a GitHub leg's stderr, cut to its last 4,000 characters
    leg = "x" * 10 + " " + TOKEN + " " + "y" * (outcomes.STDERR_CHARS - 20)
    assert "Tk7Tk7Tk" not in outcomes.stderr_tail(leg)
    window = (TOKEN + " " + "z" * 100).encode()[20:]
    assert "Tk7Tk7Tk" not in tails.tail_of(window, redact, window=len(window))


def test_markdown_cells_are_redacted_before_they_are_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", TOKEN)
    for limit in range(5, 60):
        cell = brief.md("see " + TOKEN + " and more", limit)
        assert "Tk7Tk7Tk" not in cell, (limit, cell)
    assert "\x1b" not in brief.md("\x1b]8;;https://evil.invalid\x1b\\click\x1b]8;;\x1b\\")


def test_webhook_payloads_are_cleaned_and_redacted() -> None:
    from datetime import UTC, datetime

    from orchestrator.config.channels import EventKind

    event = Event(id="run_failed:x--20261201T0700Z:1", kind=EventKind.RUN_FAILED,
                  at=datetime(2026, 12, 1, tzinfo=UTC), schedule="x",
                  summary=f"failed \x1b]0;t\x07 {TOKEN[:5]}\x1b[1m{TOKEN[5:]}")
    redact = redactor({"GITHUB_TOKEN": TOKEN})
    for payload in (json_payload(event, redact), slack_payload(event, redact)):
        text = repr(payload)
        assert "Tk7Tk7Tk" not in text and "\\x1b" not in text and "\\x07" not in text


def test_the_cli_s_streams_clean_and_redact_every_write() -> None:
    out = io.StringIO()
    stream = Outgoing(out, redactor({"GITHUB_TOKEN": TOKEN}))
    assert stream.write(f"reason \x1b]52;c;eA==\x07{TOKEN}\n") == len(
        f"reason \x1b]52;c;eA==\x07{TOKEN}\n")
    assert out.getvalue() == "reason ***\n"
    assert outgoing(b"\x1b[31mred\xff", Redactor(), str.upper) == "RED\ufffd"
