"""Text on its way out of the process, and text for one-line views.

Everything that leaves (committed records, the brief, Markdown, issue bodies, webhook
payloads, the job summary, CLI output) takes one road, in this order:

- decode: bytes to text, invalid UTF-8 replaced (:func:`decode`);
- clean: line ends made ``\\n``, terminal escape sequences (CSI, OSC, DCS, SOS, PM,
  APC, other ESC sequences) and C0 and C1 controls but newline and tab removed
  (:func:`clean`), so a token broken by a colour code is whole again;
- redact: :class:`orchestrator.support.credentials.Redactor` cleans, then redacts;
- cut, last (:func:`outgoing`, :func:`last_lines`): a cut made before redaction
  would leave a secret's tail that no redactor recognises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TextIO

ONE_LINE_LIMIT = 200
_SEQUENCES = (
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    # OSC (titles, hyperlinks, the clipboard), DCS, SOS, PM and APC strings, to their
    # end (BEL or ST); an unterminated one to the next escape or the end of the text
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]")  # other ESC sequences: a character set, a keypad mode
_ESCAPES = re.compile(
    _SEQUENCES + r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 and C1 controls but tab, newline
"""What must not reach a reader's terminal: nothing a track prints may move the
cursor, retitle a window, hide a link or write the clipboard (OSC 52)."""
_LINE_ENDS = re.compile(r"\r\n?")


def decode(data: bytes | str) -> str:
    """``data`` as text, invalid UTF-8 replaced (lone surrogates too)."""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data.encode("utf-8", "replace").decode("utf-8") if not data.isascii() else data


def clean(data: bytes | str) -> str:
    """``data`` decoded, line ends made ``\\n``, escape sequences and other control
    characters removed: newline and tab are the only controls left."""
    text = decode(data)
    if text.isprintable():  # no control character at all: the common case, made quick
        return text
    return _ESCAPES.sub("", _LINE_ENDS.sub("\n", text))


Redact = Callable[[str], str]
"""Cleans and redacts (:class:`orchestrator.support.credentials.Redactor`)."""


def outgoing(data: bytes | str, redact: Redact, cut: Callable[[str], str] | None = None) -> str:
    """``data`` fit to leave the process: decoded, cleaned and redacted by ``redact``,
    then ``cut``, last."""
    text = redact(decode(data))
    return cut(text) if cut is not None else text


class Outgoing:
    """A text stream whose every write is cleaned and redacted first: the CLI's stdout
    and stderr, so no view can forget to (each ``click.echo`` is one write)."""

    def __init__(self, stream: TextIO, redact: Redact) -> None:
        self._stream = stream
        self._redact = redact

    def write(self, text: str) -> int:
        self._stream.write(outgoing(text, self._redact))
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


MAX_PIECE = 300
"""More characters than any credential or token shape holds (GitHub's: 255 at most)."""
_PIECE = r"[^\s\x00-\x1a\x1c-\x1f\x7f]*"
"""A run of text that no space and no control character but ESC interrupts: a token,
or an escape sequence glued to one."""
_FIRST_PIECE = re.compile(_PIECE)
_WHOLE_SEQUENCES = re.compile(_SEQUENCES)
_STRING_REST = re.compile(r"[\x08-\x0d -~]*(?:\x07|\x1b\\|\x9c)")
"""The rest of an escape string (OSC, DCS, SOS, PM, APC) a text starts inside: up to
its end (BEL or ST), of what ECMA-48 allows in one (printable ASCII, and BS to CR)."""
_LAST_PIECE = re.compile(_PIECE + r"\Z")


def past_first_word(text: str) -> str:
    """``text`` (raw, not yet cleaned) without its first piece (:data:`_PIECE`), which
    a window read from a file's middle starts inside: a token's tail, or the rest of an
    escape sequence glued to one. A window that starts inside an escape string (a
    title, a link) loses it up to its end first. A text that is one piece loses its
    first :data:`MAX_PIECE` characters instead."""
    inside = _STRING_REST.match(text)
    # whole sequences go first: the piece a window starts inside ends where a sequence
    # inside a token ends, not at the sequence's own first space
    text = _WHOLE_SEQUENCES.sub("", text[inside.end():] if inside else text)
    found = _FIRST_PIECE.match(text)
    rest = text[found.end():] if found else text
    return rest if rest.strip() else text[MAX_PIECE:]


def before_last_word(text: str) -> str:
    """``text`` without its last piece, which a read stopped at a limit ends inside:
    the mirror of :func:`past_first_word`."""
    found = _LAST_PIECE.search(text)
    rest = text[:found.start()] if found else text
    return rest if rest.strip() else text[:-MAX_PIECE]


def last_lines(data: bytes | str, lines: int, chars: int, redact: Redact,
               whole: bool = True) -> str:
    """The last ``lines`` non-empty lines of ``data`` cleaned and redacted, at most
    ``chars`` characters (the end is kept: that is where a command says how it ended).

    ``whole``: ``data`` starts where its text starts; else it is the end of a longer
    text, and its first, partial word is dropped before anything else.
    """
    text = decode(data)
    text = redact(text if whole else past_first_word(text))
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])[-chars:]


def one_line(text: str, limit: int = ONE_LINE_LIMIT) -> str:
    """``text`` on one line: its first line, then its last non-empty one.

    A failed command's error is ``exit code 2; stderr ends with:`` and the tail of
    its stderr on the lines below; the point is usually the last line (the exception,
    the message), so a view with room for one line keeps both ends. When the result
    is longer than ``limit``, the middle of the first line gives way, never the end.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    head, last = lines[0], lines[-1]
    if len(lines) == 1:
        return head if len(head) <= limit else head[: limit - 1] + "…"
    sep = " " if head.endswith(":") else " … "
    if len(head) + len(sep) + len(last) <= limit:
        return f"{head}{sep}{last}"
    if len(last) > limit // 2:
        last = "…" + last[-(limit // 2 - 1):]
    room = limit - len(sep) - len(last)
    return f"{head[: room - 1]}…{sep}{last}"


def error_location(loc: tuple[int | str, ...], limit: int = 60) -> str:
    """Where a validation error is (pydantic's ``loc``) as one printable line: a key of
    a mapping in the input may hold anything, a line break or a megabyte too, so a key
    that is not printable is quoted and a long one cut."""
    parts = []
    for part in loc:
        text = str(part) if isinstance(part, int) or part.isprintable() else repr(part)
        parts.append(text if len(text) <= limit else text[:limit - 3] + "...")
    return ".".join(parts) or "(root)"
