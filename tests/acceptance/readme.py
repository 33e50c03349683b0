"""Commands as a README shows them: the ``sh`` code blocks under a heading, one
command per line once backslash continuations are joined, comments dropped."""

from __future__ import annotations

import re


def section(markdown: str, heading: str) -> str:
    """The text under ``heading`` (any level), up to the next heading of its level or
    higher."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+) (.*)", line)
        if m and m.group(2).strip() == heading:
            level = len(m.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (h := re.match(r"(#+) ", lines[j])) and len(h.group(1)) <= level),
                       len(lines))
            return "\n".join(lines[i + 1:end])
    raise AssertionError(f"no heading {heading!r}")


def commands(markdown: str) -> list[str]:
    """The commands of every ``sh`` block of ``markdown``, in order."""
    found: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", markdown, flags=re.M | re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                found.append(line)
    return found
