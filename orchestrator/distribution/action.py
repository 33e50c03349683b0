"""The workflows' other install route: ``uses: OWNER/REPO@SHA``, this repository's
``action.yml``, instead of the wheel committed under ``.github/orchestrator``.

Owns: reading ``OWNER/REPO@REF`` (a tag or branch is resolved to its commit with
``git ls-remote``), turning the shipped workflows' install steps into steps that use
the action, and reading or moving the pin of a repository's workflows.

Invariants:

- a workflow always uses the action pinned by a full commit SHA, never by a tag that
  can move; the tag it came from stays beside it as a comment;
- every install step is turned, or none: a shipped workflow whose step no longer reads
  as expected is refused, never left half converted.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from ..errors import UserError
from . import INSTALL_COMMAND

_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100})@([^\s@]+)$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
VENDOR_COMMENT = (
    "# The orchestrator in a virtual environment of its own, from the wheel and the\n",
    "# hash-pinned lock in .github/orchestrator (`orchestrator init`, `upgrade`).\n")
ACTION_COMMENT = (
    "# The orchestrator in a virtual environment of its own, from the action's commit\n",
    "# and its hash-pinned lock (`orchestrator init --action`, `upgrade --action`).\n")
_STEP = re.compile(
    r"(?m)^(?P<indent> +)" + re.escape(VENDOR_COMMENT[0]) + r"(?P=indent)"
    + re.escape(VENDOR_COMMENT[1])
    + r"(?P<head>(?P=indent)- name: Install the orchestrator\n(?:(?P=indent)  if: .*\n)?)"
    + r"(?P=indent)  run: " + re.escape(INSTALL_COMMAND) + r"\n")
_USES = re.compile(r"(?m)^(?P<lead> +uses: )(?P<repo>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40})"
                   r"(?: # (?P<ref>\S+))?$")


@dataclass(frozen=True)
class Pin:
    repo: str
    """``OWNER/REPO``: the repository whose root holds ``action.yml``."""
    sha: str
    ref: str = ""
    """The tag or branch the SHA was resolved from, kept as a comment ("" for a SHA)."""

    def uses(self) -> str:
        return f"{self.repo}@{self.sha}" + (f" # {self.ref}" if self.ref else "")


def parse(spec: str) -> tuple[str, str]:
    """``OWNER/REPO@REF`` -> (``OWNER/REPO``, ``REF``); :class:`UserError` when malformed."""
    found = _SPEC.match(spec)
    if found is None:
        raise UserError(f"--action {spec!r}: expected OWNER/REPO@REF, e.g. "
                        "octo-org/orchestrator@v1 or a commit SHA")
    return f"{found.group(1)}/{found.group(2)}", found.group(3)


def resolve(spec: str) -> Pin:
    """The pin of ``OWNER/REPO@REF``: a SHA as given, a tag or branch through ``git
    ls-remote`` of ``$GITHUB_SERVER_URL/OWNER/REPO`` (GitHub Enterprise sets it)."""
    repo, ref = parse(spec)
    if _SHA.match(ref):
        return Pin(repo, ref)
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    url = f"{server}/{repo}"
    proc = subprocess.run(["git", "ls-remote", "--", url, ref, f"{ref}^{{}}"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    refs: dict[str, str] = {}
    for line in proc.stdout.splitlines():  # <sha> TAB <ref name>
        sha, _, name = line.partition("\t")
        refs[name] = sha
    found = next((refs[name] for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}",
                                        f"refs/heads/{ref}") if name in refs), None)
    if proc.returncode != 0 or found is None:
        why = proc.stderr.strip().splitlines()[-1:] or ["no such tag or branch"]
        raise UserError(f"--action {spec}: cannot resolve {ref!r} at {url} ({why[0]}); "
                        "give the commit SHA instead")
    return Pin(repo, found, ref)


def action_form(text: str, pin: Pin) -> str:
    """A shipped workflow with each install step turned into one that uses ``pin``."""
    def step(found: re.Match[str]) -> str:
        indent = found.group("indent")
        return (f"{indent}{ACTION_COMMENT[0]}{indent}{ACTION_COMMENT[1]}{found.group('head')}"
                f"{indent}  uses: {pin.uses()}\n")

    turned, count = _STEP.subn(step, text)
    if count != text.count("- name: Install the orchestrator"):
        raise ValueError("an install step does not read as the shipped one")
    return turned


def pinned(text: str) -> Pin | None:
    """The pin of the first install step of a workflow that uses the action."""
    head = text.find("- name: Install the orchestrator")
    found = _USES.search(text, head) if head >= 0 else None
    if found is None or text.find("- name", head + 1, found.start()) >= 0:
        return None
    return Pin(found.group("repo"), found.group("sha"), found.group("ref") or "")


def repin(text: str, old: Pin, new: Pin) -> str:
    """``text`` with every use of ``old``'s repository pinned to ``new`` instead."""
    def line(found: re.Match[str]) -> str:
        if found.group("repo") != old.repo:
            return found.group(0)
        return f"{found.group('lead')}{new.uses()}"

    return _USES.sub(line, text)
