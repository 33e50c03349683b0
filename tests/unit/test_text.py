"""One-line views keep both ends of a multi-line message."""

from __future__ import annotations

from orchestrator.support.text import one_line


def test_a_stderr_tail_is_reduced_to_its_last_non_empty_line() -> None:
    error = "local: exit code 2; stderr ends with:\nreading\nKeyError: 'price'\n\n  \n"
    assert one_line(error) == "local: exit code 2; stderr ends with: KeyError: 'price'"


def test_one_line_text_is_kept_and_blank_text_is_empty() -> None:
    assert one_line("seen by local") == "seen by local"
    assert one_line("\n \n") == ""
    assert one_line("first\nlast") == "first … last"


def test_a_long_message_loses_the_middle_of_its_first_line_never_the_end() -> None:
    error = "local: " + "x" * 300 + " stderr ends with:\nRuntimeError: the point"
    short = one_line(error, limit=80)
    assert len(short) == 80
    assert short.startswith("local: xxx") and short.endswith(" RuntimeError: the point")
    huge = one_line("head:\n" + "y" * 500 + "END", limit=80)
    assert len(huge) <= 80 and huge.endswith("END")
    assert len(one_line("z" * 300, limit=80)) == 80
