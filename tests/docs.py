"""The documentation as a whole: README.md, CONTRIBUTING.md and the site's pages in
docs/. Tests that read the documents for content read them here, so text moving from
README into a page (or back) does not break them. Also the docs checks themselves:
links and anchors, runnable blocks, JSON examples and CLI flags, as pure functions over
page texts, so a test can hand them a broken page without touching the real ones."""

from __future__ import annotations

import itertools
import json
import os
import re
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN_MARK = "<!-- run -->"
FENCE = re.compile(r"^(```+|~~~+)(.*)$")


def pages(root: Path = REPO) -> dict[str, str]:
    """Every document, path relative to the repository -> text; README.md first."""
    found = {"README.md": (root / "README.md").read_text(encoding="utf-8")}
    if (root / "CONTRIBUTING.md").is_file():
        found["CONTRIBUTING.md"] = (root / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for path in sorted((root / "docs").rglob("*.md")):
        found[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
    return found


def documentation(root: Path = REPO) -> str:
    """All documents as one text, README.md first, then the others in path order."""
    return "\n\n".join(pages(root).values())


def fences(text: str) -> Iterator[tuple[str, str, str]]:
    """Each fenced block: (info string, body, the line before the fence)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].startswith(m.group(1)) and not lines[j].strip(m.group(1)[0])),
                   len(lines))
        yield m.group(2).strip(), "\n".join(lines[i + 1:end]), lines[i - 1] if i else ""
        i = end + 1


def prose(text: str) -> str:
    """The text with fenced blocks blanked out (lines kept, so positions hold)."""
    out: list[str] = []
    inside: str | None = None
    for line in text.splitlines():
        m = FENCE.match(line)
        if inside is None and m:
            inside = m.group(1)[0] * 3
            out.append("")
        elif inside is not None:
            if line.startswith(inside) and not line.strip(inside[0]):
                inside = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def headings(text: str) -> list[str]:
    return [m.group(2).strip() for m in re.finditer(r"^(#{1,6}) +(.*?) *#* *$", prose(text),
                                                    flags=re.M)]


def site_slug(title: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc)."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def github_slug(title: str) -> str:
    """The anchor GitHub gives a heading of a Markdown file it shows."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(path: str, text: str) -> set[str]:
    """The anchors a page offers: its headings' (as GitHub and MkDocs make them)."""
    titles = [re.sub(r"`([^`]*)`", r"\1", t) for t in headings(text)]
    return {site_slug(t) for t in titles} | {github_slug(t) for t in titles}


LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)|<(https?://[^>\s]+)>")


def broken_links(docs: Mapping[str, str], exists: set[str]) -> list[str]:
    """Every link between documents that leads nowhere: a missing file or anchor.

    ``docs``: path -> text of the Markdown files; ``exists``: every other file of the
    repository (paths relative to it) a link may point at."""
    problems: list[str] = []
    for path, text in docs.items():
        body = re.sub(r"`[^`\n]*`", "", prose(text))
        for m in LINK.finditer(body):
            target = m.group(1)
            if target is None or re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            file, _, anchor = target.partition("#")
            resolved = (os.path.normpath(os.path.join(os.path.dirname(path), file))
                        if file else path)
            resolved = Path(resolved).as_posix()
            if resolved.endswith("/") or resolved in {Path(p).parent.as_posix() for p in docs}:
                resolved = f"{resolved.rstrip('/')}/index.md"
            if resolved not in docs and resolved not in exists:
                problems.append(f"{path}: link to {target}: no file {resolved}")
            elif anchor and resolved in docs and anchor not in anchors(resolved, docs[resolved]):
                problems.append(f"{path}: link to {target}: no heading #{anchor}")
    return problems


def runnable_blocks(docs: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each ``sh`` block marked to run: (page, body)."""
    return [(path, body) for path, text in docs.items()
            for info, body, before in fences(text)
            if info.split()[:1] == ["sh"] and before.strip() == RUN_MARK]


def json_examples(docs: Mapping[str, str]) -> list[tuple[str, object]]:
    """Each ``json`` block, parsed: (page, value); a block that is not JSON raises."""
    found: list[tuple[str, object]] = []
    for path, text in docs.items():
        for info, body, _ in fences(text):
            if info.split()[:1] == ["json"]:
                try:
                    found.append((path, json.loads(body)))
                except json.JSONDecodeError as exc:
                    raise AssertionError(f"{path}: a json block is not JSON: {exc}") from None
    return found


def command_lines(text: str) -> list[str]:
    """Each ``orchestrator ...`` command the text shows: a line of a shell block (with
    backslash continuations joined) or an inline code span."""
    found: list[str] = []
    for info, body, _ in fences(text):
        if info.split()[:1] in (["sh"], ["bash"], ["console"]):
            joined = re.sub(r"\\\n\s*", " ", body)
            for line in joined.splitlines():
                line = re.sub(r"\s#\s.*$", "", line).strip().removeprefix("$ ")
                found += [part.strip() for part in re.split(r"&&|;", line)
                          if part.strip().startswith("orchestrator ")]
    for span in re.findall(r"`([^`\n]+)`", prose(text)):
        if span.startswith("orchestrator "):
            found.append(span)
    return found


# The prose rule (CONTRIBUTING.md, "Style"): no sentence over 30 words.
LONGEST_SENTENCE = 30
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.")
_NOT_PROSE = re.compile(r"^\s*(#{1,6}\s|\||<|!!!|\[[^\]]+\]:\s)")  # heading, table, HTML, ...
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_END = re.compile(r"(?<=[.?!])[\"')\]*_]*\s+")


def _plain(text: str) -> str:
    """Prose as it reads: a code span one word, a link its text, no tags; each line
    break kept, so a sentence's line can be counted."""
    for pattern, replacement in _AS_READ:
        text = re.sub(pattern, lambda m, r=replacement: _same_lines(m, r), text)
    for short in _ABBREVIATIONS:
        text = text.replace(short, short.rstrip("."))
    return text


_AS_READ = ((r"``.+?``|`[^`]+`", "CODE"), (r"!\[[^\]]*\]\([^)]*\)", ""),
            (r"\[([^\]]*)\]\([^)]*\)|\[([^\]]*)\]\[[^\]]*\]", r"\1\2"),
            (r"<https?://[^>]+>", "LINK"), (r"<[^>]+>", " "))


def _same_lines(found: re.Match[str], replacement: str) -> str:
    text = found.expand(replacement)
    return text + "\n" * (found.group().count("\n") - text.count("\n"))


def _starts_item(line: str, may_start_list: bool) -> bool:
    """A bullet always starts an item; "40) ..." in a paragraph is no item of a list."""
    found = _ITEM.match(line)
    return found is not None and (found.group().strip()[0] in "-*+" or may_start_list)


def _blocks(text: str) -> Iterator[tuple[int, str]]:
    """Runs of prose lines (a paragraph or one list item): (first line, joined text)."""
    start, parts, in_list = 0, [], False
    for number, line in enumerate(prose(text).splitlines(), 1):
        new_item = _starts_item(line, in_list or not parts)
        if line.strip() and not new_item and not parts and not line.startswith(" "):
            in_list = False
        in_list = in_list or new_item
        if not line.strip() or _NOT_PROSE.match(line) or new_item:
            if parts:
                yield start, _plain("\n".join(parts))
            start, parts = number, []
            if not new_item:
                continue
            line = _ITEM.sub("", line)
        if not parts:
            start = number
        parts.append(line.strip())
    if parts:
        yield start, _plain("\n".join(parts))


def sentences(text: str) -> Iterator[tuple[int, int, str]]:
    """Each sentence of a page's prose: (line it starts on, its word count, the text).

    Fenced blocks, tables, headings, HTML and link targets are left out; a code span
    counts as one word; a paragraph and a list item each end a sentence."""
    for start, block in _blocks(text):
        begin = 0
        for end in [m.end() for m in _END.finditer(block)] + [len(block)]:
            sentence = block[begin:end]
            words = [w for w in sentence.split() if re.search(r"\w", w)]
            if words:
                yield start + block[:begin].count("\n"), len(words), " ".join(sentence.split())
            begin = end


def long_sentences(docs: Mapping[str, str], most: int = LONGEST_SENTENCE) -> list[str]:
    """Every sentence over ``most`` words: 'file:line: N words: start of it'."""
    return [f"{path}:{line}: {count} words: {sentence[:60]}..."
            for path, text in docs.items()
            for line, count, sentence in sentences(text) if count > most]


def cut_sentences(docs: Mapping[str, str]) -> list[str]:
    """Every sentence cut in two with other text pasted in between: a paragraph that
    stops on a comma, or a line that stops on a comma with a new sentence after it."""
    return [problem for path, text in docs.items() for problem in _cuts(path, text)]


_SENTENCE_START = re.compile(r"\s*[A-Z][a-z]*['\s]")


def _cuts(path: str, text: str) -> Iterator[str]:
    for line, block in _blocks(text):
        if block.rstrip().endswith(","):
            yield f"{path}:{line}: ends on a comma: ...{block[-60:]}"
    lines = prose(text).splitlines()
    for number, (line, after) in enumerate(itertools.pairwise(lines), 1):
        if (line.rstrip().endswith(",") and _SENTENCE_START.match(after)
                and not _NOT_PROSE.match(after)):
            yield f"{path}:{number}: a sentence starts after a comma: {after.strip()[:60]}"
