"""One reader for every JSON input: schedules, state records, track results, reports;
and :func:`read_tail`, the same guarded open for the end of a log a track leaves.

Anything read here may be hostile (a pull request brings schedules, a track writes its
result, anyone who can push the state branch writes records), and one bad input must
cost only itself. So a read is bounded in every direction Python's own ``json`` is not:

- size: the cap is enforced while reading, not from ``st_size`` (``/dev/zero`` and a
  FIFO say 0 bytes);
- kind: only regular files are read, opened with ``O_NONBLOCK`` (a FIFO never blocks),
  and a symlink only when it stays inside ``root`` (a loop or a link out is refused);
- depth: nesting is counted before parsing, so no parser (``json``, pydantic, jinja2)
  ever recurses deeper than :data:`MAX_DEPTH` (``RecursionError`` otherwise);
- numbers: integers longer than :data:`MAX_INT_DIGITS` digits are refused (Python's
  integer string conversion limit raises a bare ``ValueError`` at 4,300), and so are
  ``NaN`` and ``Infinity``, which are not JSON;
- text: a lone surrogate (``"\\ud800"``) is refused, since it cannot be written back
  as UTF-8 and would break every later commit of the record.

Every refusal is an :class:`UnsafeJSON` whose message says what is wrong in words.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted; real records use fewer than 10."""

MAX_INT_DIGITS = 100
"""Longest integer accepted, in digits (a 64-bit integer has at most 20)."""

DEFAULT_MAX_BYTES = 1024 * 1024

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_BRACKET = re.compile(r"[\[\]{}]")
_CHUNK = 64 * 1024


class UnsafeJSON(ValueError):
    """A JSON input was refused; the message says why, in one line."""

    def __init__(self, problem: str, where: str = "") -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.problem = problem
        self.where = where
        """Where in the text (``line 3 column 5``), when the parser knows."""


def read_file(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
              root: Path | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Raises :class:`FileNotFoundError` when nothing is there (callers treat that as
    "absent") and :class:`UnsafeJSON` for anything else that is wrong: not a regular
    file, a symlink loop, a symlink out of ``root``, too large, unreadable.
    """
    fd = _open(path, root)
    try:
        data = _read_up_to(fd, max_bytes + 1)  # one byte more tells a file too large
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UnsafeJSON(f"larger than {max_bytes} bytes")
    return data


def read_tail(path: Path, keep: int, *, root: Path | None = None) -> tuple[bytes, int]:
    """The last ``keep`` bytes of the regular file ``path`` and the file's size.

    Opened as :func:`read_file` opens (the same refusals), but only the tail is read:
    a log of gigabytes costs ``keep`` bytes of memory.
    """
    fd = _open(path, root)
    try:
        try:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - keep), os.SEEK_SET)
        except OSError as exc:
            raise UnsafeJSON(f"cannot read: {exc.strerror or exc}") from None
        return _read_up_to(fd, keep), size  # it may grow meanwhile: keep bytes at most
    finally:
        os.close(fd)


def _read_up_to(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from ``fd``, read in chunks until its end."""
    chunks: list[bytes] = []
    got = 0
    try:
        while got < limit:
            chunk = os.read(fd, min(_CHUNK, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise UnsafeJSON(f"cannot read: {exc.strerror or exc}") from None
    return b"".join(chunks)


def _open(path: Path, root: Path | None) -> int:
    """A descriptor of the regular file ``path`` (a symlink only inside ``root``),
    opened without blocking; the caller closes it."""
    fd = _open_target(_target(path, root))
    try:
        kind = kind_of(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise UnsafeJSON(f"cannot read: {exc.strerror or exc}") from None
    if kind:
        os.close(fd)
        raise UnsafeJSON(f"not a regular file ({kind})")
    return fd


def _target(path: Path, root: Path | None) -> Path:
    """``path``, or where the symlink ``path`` leads when that is allowed."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnsafeJSON(f"cannot read: {exc.strerror or exc}") from None
    return _follow(path, root) if stat.S_ISLNK(info.st_mode) else path


def _open_target(target: Path) -> int:
    """``target`` opened without blocking and without following a symlink (one put
    there since it was looked at is refused)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(target, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeJSON("is a symlink (changed while reading)") from None
        raise UnsafeJSON(f"cannot read: {exc.strerror or exc}") from None


def _follow(path: Path, root: Path | None) -> Path:
    """Where the symlink ``path`` leads, when that is allowed."""
    try:
        os.stat(path)
    except FileNotFoundError:
        raise UnsafeJSON("a symlink to nothing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeJSON("a symlink loop") from None
        raise UnsafeJSON(f"cannot read: {exc.strerror or exc}") from None
    target = Path(os.path.realpath(path))
    if root is None:
        raise UnsafeJSON(f"a symlink (to {target})")
    base = Path(os.path.realpath(root))
    if target != base and base not in target.parents:
        raise UnsafeJSON(f"a symlink out of the repository (to {target})")
    return target


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words; ``""`` for a regular file."""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def decode(data: bytes | str) -> str:
    """``data`` as text (UTF-8, a byte order mark allowed), else :class:`UnsafeJSON`."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnsafeJSON(f"not UTF-8 text (byte {exc.start})") from None


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`UnsafeJSON` when brackets outside strings nest deeper than allowed."""
    if text.count("[") + text.count("{") <= max_depth:
        return  # cannot nest deeper than it has brackets (the common case, at once)
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > max_depth:
                raise UnsafeJSON(f"nested deeper than {max_depth} levels")
        else:
            depth -= 1


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise UnsafeJSON(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _constant(name: str) -> Any:
    raise UnsafeJSON(f"{name} is not a JSON number")


def loads(data: bytes | str, *, max_bytes: int = DEFAULT_MAX_BYTES,
          max_depth: int = MAX_DEPTH, object_pairs_hook: Any = None) -> Any:
    """Parse ``data`` within the limits above; :class:`UnsafeJSON` says what is wrong.

    ``object_pairs_hook`` is passed to :func:`json.loads` (the schedule loader uses it
    to refuse duplicate keys); its own exceptions propagate.
    """
    if len(data) > max_bytes:
        raise UnsafeJSON(f"larger than {max_bytes} bytes")
    text = decode(data)
    check_depth(text, max_depth)
    try:
        value = json.loads(text, parse_int=_int, parse_constant=_constant,
                           object_pairs_hook=object_pairs_hook)
    except UnsafeJSON:
        raise
    except json.JSONDecodeError as exc:
        raise UnsafeJSON(f"invalid JSON: {exc.msg}",
                         f"line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # the belt to check_depth's braces
        raise UnsafeJSON(f"invalid JSON: {type(exc).__name__}") from None
    # Text decoded as strict UTF-8 holds no surrogate, but a \\ud800 escape does.
    if isinstance(data, str) or _SURROGATE.search(text):
        check_text(value)
    return value


def check_text(value: Any) -> None:
    """Raise :class:`UnsafeJSON` when a string in ``value`` cannot be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UnsafeJSON(f"a lone surrogate ({exc.object[exc.start:exc.end]!r}) in a "
                         "string") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise UnsafeJSON(f"cannot be written back as JSON: {type(exc).__name__}") from None


def load_file(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
              root: Path | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`read_file` then :func:`loads`."""
    return loads(read_file(path, max_bytes=max_bytes, root=root), max_bytes=max_bytes,
                 max_depth=max_depth)


def tail_bytes(path: Path, max_bytes: int, start: int = 0, end: int | None = None) -> bytes:
    """At most the last ``max_bytes`` of ``path`` between ``start`` and ``end`` (default:
    its size); nothing when it is missing or not a regular file. A track can replace the
    files it writes with a FIFO or a symlink: it is opened without blocking and without
    following a link, and any trouble reads as nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return b""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b""
        stop = info.st_size if end is None else end
        begin = max(start, stop - max_bytes)
        os.lseek(fd, begin, os.SEEK_SET)
        return os.read(fd, max(0, stop - begin))
    except OSError:
        return b""
    finally:
        os.close(fd)
