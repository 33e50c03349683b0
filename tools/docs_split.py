"""Split a long README.md into the pages of the documentation site under docs/.

This tool was used once to move README's reference into the site, and can be rerun on
a long README (for instance after other branches added sections to the old one):

    python3 tools/docs_split.py OLD-README.md --out .

It owns the table that says where each README heading lands (PAGES and PLACES), the
rules for headings the table does not know (KEYWORDS), the blocks marked to run
(RUNNABLE) and the corrections made to the README's text on the way (FIXES).

Its invariants:

- No text is lost: every heading and paragraph of the input lands on exactly one page.
- A heading the table does not know is printed, one line each, with where it went.
- Running it twice on the same input writes the same bytes.
- It writes docs/<pages>.md, docs/changelog.md (a copy of CHANGELOG.md) and
  mkdocs.yml. It never writes README.md (the short README is written by hand), nor
  docs/cli.md (generated from the click tree by ``python3 -m orchestrator.clidoc``).
- Generated parts: the schedule reference's field tables (from
  schedules/schedule.schema.json) and the table of environment variables.
- Links to ``#anchors`` of the README point at the page where that heading landed;
  links relative to the repository root become relative to the page, and *Heading*
  mentions of a known heading become links.

``--inventory`` prints the headings, bold sub-headings and schedule fields of the
input instead, one per line: tests/data/readme-before-headings.txt was made with it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Page:
    """One page of the site: its file under docs/, its title, its introduction."""

    path: str
    title: str
    intro: str
    section: str  # the nav section it is listed under ("" for the top level)
    optional: bool = False  # written only when some README text lands on it
    outro: str = ""  # text of the site's own, after what the README gave


DOCS_SITE = """\
## The documentation site

The site is `docs/`, built by MkDocs with the Material theme from `mkdocs.yml`.
`pip install -e '.[docs]' && mkdocs serve` shows it at <http://127.0.0.1:8000/> while
you edit; `.ci/run` builds it with `mkdocs build --strict`, so a broken link, a
missing anchor or a page left out of the navigation fails CI.

The docs are tested by `tests/unit/test_docs.py` and `tests/integration/test_docs_site.py`.
Every fenced `sh` block right after a `<!-- run -->` line is run in a throwaway
workspace, so mark only blocks that work from an empty folder. Every JSON example that
is a schedule or an `orchestrator.json` is validated, every `--flag` after an
`orchestrator` command must exist in its `--help`, and every link and anchor between
pages must resolve. `cli.md` is generated: `python3 -m orchestrator.clidoc >
docs/cli.md`.

Where it is published: this project's own site goes out with
`.github/workflows/docs.yml`, which builds it on every push to `main` and deploys it to
GitHub Pages when the repository variable `ORCHESTRATOR_DOCS_PAGES` is `true`. A
repository has one Pages site, so in a repository whose `pages.yml` publishes the
briefs, leave that variable unset. `docs.yml` is not scaffolded: a user's repository
gets `pages.yml`, which publishes the briefs only.

The pages were first cut from the long README by `tools/docs_split.py`, whose table
maps each README heading to a page. It can be run again on a long README:
`python3 tools/docs_split.py OLD-README.md --out .` prints one line per heading its
table does not know."""

PAGES: list[Page] = [
    Page("index.md", "orchestrator", "", ""),
    Page("get-started/local.md", "Get started on your machine",
         "Install the orchestrator, run the whole loop once, then start a repository of "
         "your own. Everything here runs on one machine with a local git remote.",
         "Get started"),
    Page("get-started/github.md", "Get started on GitHub",
         "Run the same repository on GitHub Actions, step by step. The tick runs on "
         "GitHub's cron and the tracks run as matrix legs of a workflow.",
         "Get started"),
    Page("how-to/pipelines.md", "Pipelines: needs and consolidate",
         "Make a run's tracks wait for each other, and finish a run with one step that "
         "sees every track's result.", "How-to"),
    Page("how-to/poll-tracks.md", "Poll tracks",
         "Wait for something outside without holding a runner: a poll track answers "
         "\"not yet\" and is asked again later.", "How-to"),
    Page("how-to/failure-policies.md", "Failure policies",
         "Say what happens when a track fails for good: undo, pause the schedule, or "
         "alert someone.", "How-to"),
    Page("how-to/caps-and-routing.md", "Caps and runner routing",
         "Keep a burst of runs from flooding your runners, and send legs to the runners "
         "that are healthy.", "How-to"),
    Page("how-to/cadence.md", "The cadence and its cost",
         "Choose when the tick runs on GitHub, and see what a month of it costs in "
         "runner-minutes, pushes and API calls.", "How-to"),
    Page("how-to/operate.md", "Operate runs",
         "Know that the clock is ticking, and act on runs between ticks.", "How-to"),
    Page("how-to/briefs.md", "Read and publish briefs",
         "Every finished run has one HTML brief. Render it, change its template, or "
         "publish it with GitHub Pages.", "How-to"),
    Page("how-to/queues.md", "Work queues",
         "Feed a schedule's runs from a queue of items.", "How-to", optional=True),
    Page("how-to/notifications.md", "Notifications",
         "Hear about runs and failures where you already look.", "How-to", optional=True),
    Page("how-to/external-clock.md", "An external clock",
         "Start ticks from a clock outside GitHub's cron.", "How-to", optional=True),
    Page("how-to/upgrade.md", "Upgrade",
         "Install the new version on your machine (`pip install -U git-orchestrator`, or "
         "from a checkout). On GitHub the workflows install the wheel committed in "
         "`.github/orchestrator/`: run `orchestrator upgrade` in your repository, which "
         "replaces that wheel and its hash-pinned `requirements.txt` with the version "
         "you run and names the workflows that differ from the ones it ships. "
         "`orchestrator init --force` rewrites the scaffold's own files, such as the "
         "workflows, and leaves your schedules alone; review the diff and commit it.\n\n"
         "`orchestrator validate` notes when `track.yml` is not the shipped one, so an "
         "out-of-date workflow shows up in the pull request. The state branch needs "
         "no migration step: records it cannot read are quarantined, one line each.\n\n"
         "What changed between versions is in the [changelog](../changelog.md).",
         "How-to"),
    Page("concepts/tick.md", "How a tick works",
         "A tick is one look at the schedules and the state. It decides, commits the "
         "decision, then acts on it.", "Concepts"),
    Page("concepts/state.md", "State on git",
         "The state branch is the database. This page says what is on it and how "
         "writes stay safe when several ticks race.", "Concepts"),
    Page("concepts/exactly-once.md", "Exactly-once firing",
         "Each slot fires at most once, however many ticks race for it. The run id is "
         "the idempotency key and each decision is a compare-and-swap push "
         "([How a tick works](tick.md), step 4).", "Concepts"),
    Page("concepts/trust-model.md", "Trust model",
         "Who can change what the orchestrator does, and what it defends against.",
         "Concepts"),
    Page("concepts/daylight-saving.md", "Daylight saving",
         "What a schedule in a zone with daylight saving does on the two days a year "
         "the clocks change.", "Concepts"),
    Page("reference/index.md", "Reference",
         "Exact behaviour, field by field and command by command. The layout of the "
         "state branch, file by file, is in [State on git](../concepts/state.md).",
         "Reference"),
    Page("reference/schedules.md", "Schedule files",
         "Every field of `schedules/<id>.json`. The JSON Schema in "
         "`schedules/schedule.schema.json` says the same to an editor, and a test keeps "
         "this page listing every field of it.", "Reference"),
    Page("reference/orchestrator-json.md", "orchestrator.json",
         "Repository-wide settings, in an optional `orchestrator.json` at the "
         "repository's root. It is strict like a schedule, `orchestrator schema "
         "--config` prints its JSON Schema, and `validate` checks it.\n\n"
         "| field | default | meaning |\n|---|---|---|\n"
         "| `cadence` | derived | when `tick.yml` runs: `mode` (`derived`, `fixed` or "
         "`external`), "
         "`lead_minutes`, `safety_every_hours`, `linger_min_interval_hours`, "
         "`gather_minutes`, `linger_schedules`, `fixed_cron` "
         "([the cadence](../how-to/cadence.md)) |\n"
         "| `max_concurrent_tracks` | none | tracks in flight across all runs "
         "([caps](../how-to/caps-and-routing.md)) |\n"
         "| `max_dispatches_per_tick` | none | tracks one tick dispatches "
         "([caps](../how-to/caps-and-routing.md)) |\n"
         "| `keep_finished_runs_days` | `30` | retention the tick applies itself; "
         "`null` keeps every run ([state on git](../concepts/state.md)) |\n"
         "| `notify` | none | where events go: `github_issues`, `webhooks`, `budget_seconds`, "
         "`brief_url` ([notifications](../how-to/notifications.md)) |\n"
         "| `$schema` | | ignored; lets editors validate the file |",
         "Reference"),
    Page("reference/local-executor.md", "Local executor",
         "How a track runs as a process on your machine: its environment, its output "
         "and its result.", "Reference"),
    Page("reference/environment.md", "Environment variables",
         "Every environment variable these pages mention, and where each is explained. "
         "The variables behind the CLI's options are also listed, option by option, in "
         "the [CLI reference](../cli.md).", "Reference"),
    Page("reference/exit-codes.md", "Exit codes",
         "Every command exits with one of these codes, so scripts and CI can tell "
         "failures apart.", "Reference"),
    Page("more.md", "More",
         "Sections the documentation's table does not place yet.", "", optional=True),
    Page("glossary.md", "Glossary", "The words these pages use, in one table.", ""),
    Page("develop.md", "Develop",
         "How the code is organised and tested. CONTRIBUTING.md says how to send a "
         "change.", "", outro=DOCS_SITE),
]

# Pages the site lists that this tool does not write.
EXTRA_NAV = {"Reference": [("CLI reference", "cli.md")]}
CHANGELOG = ("Changelog", "changelog.md")


@dataclass(frozen=True)
class Place:
    """Where one README heading (or bold sub-heading) lands.

    ``blocks``: for a bold sub-heading, how many blocks (paragraphs, lists, code
    blocks) it takes; 0 means up to the next placed bold sub-heading or heading.
    """

    page: str
    blocks: int = 0


# Keyed by heading text; "**Text" keys are bold sub-headings, matched at the start
# of a paragraph inside their heading's text. The order here is the order on a page.
PLACES: dict[str, Place] = {
    "orchestrator": Place("index.md"),
    "Quick start": Place("get-started/local.md"),
    "Start a repository": Place("get-started/local.md"),
    "Run it on your own machine": Place("get-started/local.md"),
    "Open a brief": Place("get-started/local.md"),
    "Set up on GitHub": Place("get-started/github.md"),
    "**Tracks that wait for others.": Place("how-to/pipelines.md"),
    "**The consolidate step.": Place("how-to/pipelines.md"),
    "**Poll tracks.": Place("how-to/poll-tracks.md", blocks=2),
    "Failure policies": Place("how-to/failure-policies.md"),
    "**Stampede caps.": Place("how-to/caps-and-routing.md"),
    "**Runner health and fallback routing.": Place("how-to/caps-and-routing.md"),
    "The cadence": Place("how-to/cadence.md"),
    "Operate": Place("how-to/operate.md"),
    "Watch the clock": Place("how-to/operate.md"),
    "The brief": Place("how-to/briefs.md"),
    "Work queues": Place("how-to/queues.md"),
    "Notifications": Place("how-to/notifications.md"),
    "How a tick works": Place("concepts/tick.md"),
    "State on git": Place("concepts/state.md"),
    "**A rewound state branch fires nothing.": Place("concepts/exactly-once.md"),
    "**Trust model.": Place("concepts/trust-model.md"),
    "**Daylight saving": Place("concepts/daylight-saving.md", blocks=1),
    "Reference": Place("reference/index.md"),
    "Commands": Place("reference/index.md"),
    "Schedules": Place("reference/schedules.md"),
    "Local executor": Place("reference/local-executor.md"),
    "Exit codes": Place("reference/exit-codes.md"),
    "Glossary": Place("glossary.md"),
    "Develop": Place("develop.md"),
}

# A heading the table does not know goes by the first keyword a word of its text
# starts with (lower case), else with the heading above it, else to more.md.
KEYWORDS: list[tuple[str, str]] = [
    ("queue", "how-to/queues.md"),
    ("notif", "how-to/notifications.md"),
    ("alert", "how-to/notifications.md"),
    ("external clock", "how-to/external-clock.md"),
    ("clock", "how-to/external-clock.md"),
    ("operat", "how-to/operate.md"),
    ("reliab", "concepts/state.md"),
    ("github", "get-started/github.md"),
    ("daily use", "how-to/operate.md"),
    ("upgrad", "how-to/upgrade.md"),
    ("cadence", "how-to/cadence.md"),
    ("brief", "how-to/briefs.md"),
    ("polic", "how-to/failure-policies.md"),
    ("exit code", "reference/exit-codes.md"),
    ("environment", "reference/index.md"),
    ("variable", "reference/index.md"),
    ("event", "reference/index.md"),
]
FALLBACK = "more.md"

# Headings whose `sh` blocks work from an empty folder: each gets RUN_MARK before it,
# and the docs tests run it in a throwaway workspace.
RUNNABLE = {"Start a repository"}
RUN_MARK = "<!-- run -->"

# Exact corrections to the README's text, applied before it is split: figures that
# went stale or disagreed. A correction that no longer matches is printed.
FIXES: list[tuple[str, str]] = [
    ("The words in bold and the others this README uses are explained",
     "The words in bold and the others these pages use are explained"),
    ("installs the test tools and runs the test\nsuite: about 16 minutes on 2 cores "
     "(mostly real-clock waits).",
     "installs the test tools and runs the test\nsuite (mostly real-clock waits; "
     "`--durations` prints the slowest tests)."),
]

MKDOCS_HEAD = """\
# Written by tools/docs_split.py (its table holds the navigation); edit the table there.
site_name: orchestrator
site_description: Scheduled, multi-track work on CI runners with a git repository as the database
docs_dir: docs
strict: true
theme:
  name: material
  features:
    - navigation.sections
    - navigation.top
    - content.code.copy
    - search.highlight
markdown_extensions:
  - admonition
  - attr_list
  - tables
  - toc:
      permalink: true
  - pymdownx.superfences
validation:
  nav:
    omitted_files: warn
    not_found: warn
  links:
    not_found: warn
    anchors: warn
    unrecognized_links: warn
"""

# --------------------------------------------------------------------------- parsing

HEADING = re.compile(r"^(#{1,6}) +(.*?) *#* *$")
FENCE = re.compile(r"^ {0,3}(```+|~~~+)")


@dataclass
class Unit:
    """A heading (or bold sub-heading) with the lines that belong to it."""

    key: str  # the heading's text, or "**Text" for a bold sub-heading
    level: int  # the heading's level; a bold sub-heading: its heading's level + 1
    parent: Unit | None
    index: int  # position in the README
    lines: list[str] = field(default_factory=list)
    page: str = ""
    known: bool = True

    @property
    def bold(self) -> bool:
        return self.key.startswith("**")

    @property
    def title(self) -> str:
        return self.key.lstrip("*").rstrip(".")


def fenced(lines: list[str]) -> list[bool]:
    """Per line: whether it is inside (or opens or closes) a fenced code block."""
    inside: str | None = None
    flags: list[bool] = []
    for line in lines:
        m = FENCE.match(line)
        if inside is None and m:
            inside = m.group(1)[0] * 3
            flags.append(True)
        elif inside is not None:
            flags.append(True)
            if line.strip().startswith(inside) and line.strip().strip(inside[0]) == "":
                inside = None
        else:
            flags.append(False)
    return flags


def headings(text: str) -> list[Unit]:
    """The README cut at its headings (outside code blocks), in order."""
    lines = text.splitlines()
    code = fenced(lines)
    units: list[Unit] = []
    stack: list[Unit] = []
    current: Unit | None = None
    for line, in_code in zip(lines, code, strict=True):
        m = None if in_code else HEADING.match(line)
        if m:
            level = len(m.group(1))
            while stack and stack[-1].level >= level:
                stack.pop()
            current = Unit(m.group(2), level, stack[-1] if stack else None, len(units))
            units.append(current)
            stack.append(current)
        elif current is None:
            current = Unit("", 1, None, 0)
            units.append(current)
            current.lines.append(line)
        else:
            current.lines.append(line)
    return units


def blocks(lines: list[str]) -> list[list[str]]:
    """Lines grouped into blocks: runs of non-blank lines, a code block kept whole
    with any blank lines in it. Each block keeps the blank lines that follow it."""
    code = fenced(lines)
    out: list[list[str]] = []
    fresh = True
    for i, line in enumerate(lines):
        if line.strip() == "" and not code[i]:
            if out:
                out[-1].append(line)
            else:
                out.append([line])
            fresh = True
            continue
        if fresh or (code[i] and not (i and code[i - 1])):
            out.append([line])
        else:
            out[-1].append(line)
        fresh = False
    return out


def split_bold(unit: Unit, counter: list[int]) -> list[Unit]:
    """The unit, then its placed bold sub-headings cut out as units of their own."""
    keys = [k for k in PLACES if k.startswith("**")]
    result = [unit]
    body, unit.lines = unit.lines, []
    target = unit
    left = 0  # blocks the current bold sub-heading still takes (when it counts)
    for block in blocks(body):
        key = next((k for k in keys if block[0].startswith(k)), None)
        if key is not None:
            counter[0] += 1
            target = Unit(key, unit.level + 1, unit, counter[0])
            result.append(target)
            left = PLACES[key].blocks
        elif target is not unit and PLACES[target.key].blocks and left == 0:
            target = unit  # the bold sub-heading took its blocks: back to the heading
        target.lines.extend(block)
        if target is not unit and left:
            left -= 1
    return result


def parse(text: str) -> list[Unit]:
    """Every unit of the README, bold sub-headings cut out, in README order."""
    counter = [0]
    units: list[Unit] = []
    for unit in headings(text):
        counter[0] += 1
        unit.index = counter[0]
        units.extend(split_bold(unit, counter))
    return units


# --------------------------------------------------------------------------- placing


def place(units: list[Unit], say: list[str]) -> None:
    """Give every unit its page: the table, else a keyword, else its heading's page."""
    for unit in units:
        if unit.key in PLACES:
            unit.page = PLACES[unit.key].page
            continue
        if unit.key == "":
            unit.page = "index.md"
            continue
        unit.known = False
        lowered = unit.title.lower()
        by_word = next((page for word, page in KEYWORDS
                        if re.search(rf"\b{re.escape(word)}", lowered)), None)
        if by_word:
            unit.page, why = by_word, "keyword"
        elif unit.parent is not None and unit.parent.page:
            unit.page, why = unit.parent.page, f"with {unit.parent.title!r}"
        else:
            unit.page, why = FALLBACK, "no rule"
        say.append(f"unknown heading {'#' * unit.level} {unit.title!r} -> "
                   f"docs/{unit.page} ({why}); add it to PLACES in tools/docs_split.py")


def order(unit: Unit) -> tuple[int, int]:
    """Where a unit goes on its page: the table's order, unknown ones after their
    nearest known ancestor on the same page, else at the end."""
    keys = list(PLACES)
    probe: Unit | None = unit
    while probe is not None:
        if probe.known and probe.key in PLACES and probe.page == unit.page:
            return keys.index(probe.key), unit.index
        probe = probe.parent
    return len(keys), unit.index


def page_level(unit: Unit, on_page: set[int]) -> int:
    """A heading's level on its page: 2 under the page's H1, nested as before."""
    probe = unit.parent
    while probe is not None:
        if probe.index in on_page and not probe.bold:
            return min(6, page_level(probe, on_page) + unit.level - probe.level)
        probe = probe.parent
    return 2


# --------------------------------------------------------------------------- links


def github_slug(title: str) -> str:
    """The anchor GitHub gives a README heading."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def site_slug(title: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def link_to(target_page: str, slug: str, from_page: str) -> str:
    if target_page == from_page:
        return f"#{slug}"
    rel = os.path.relpath(target_page, os.path.dirname(from_page) or ".")
    return f"{Path(rel).as_posix()}#{slug}" if slug else Path(rel).as_posix()


LINK = re.compile(r"\]\(([^)\s]+)\)")
CROSS = re.compile(r"(?<![*\w])\*([A-Z][^*\n]{2,60})\*(?![*\w])|\"([A-Z][^\"\n]{2,60})\"")


def rewrite(line: str, page: str, where: dict[str, tuple[str, str]],
            by_title: dict[str, tuple[str, str]], say: list[str]) -> str:
    """A line's links made true on its page; *Heading* mentions made links."""

    def fix_link(m: re.Match[str]) -> str:
        target = m.group(1)
        if target.startswith("#"):
            found = where.get(target[1:])
            if found is None:
                say.append(f"link to an unknown anchor {target} on docs/{page}")
                return m.group(0)
            return f"]({link_to(found[0], found[1], page)})"
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        if path.startswith("docs/"):
            rel = link_to(path[len("docs/"):], "", page)
        else:
            rel = Path(os.path.relpath(Path("..") / path, Path(page).parent)).as_posix()
            say.append(f"link to {path} (outside docs/) on docs/{page}: a site page "
                       f"cannot link it; link its address on GitHub instead")
        return f"]({rel}#{anchor})" if anchor else f"]({rel})"

    def fix_cross(m: re.Match[str]) -> str:
        title = m.group(1) or m.group(2)
        found = by_title.get(title)
        if found is None:
            return m.group(0)
        return f"[{title}]({link_to(found[0], found[1], page)})"

    parts = re.split(r"(`[^`]*`)", line)  # leave inline code alone
    for i in range(0, len(parts), 2):
        parts[i] = CROSS.sub(fix_cross, LINK.sub(fix_link, parts[i]))
    return "".join(parts)


# --------------------------------------------------------------------------- the schema

# The objects of schedules/schedule.schema.json the schedule reference tabulates.
SCHEMA_OBJECTS = [("A schedule", None), ("A track (`tracks`)", "TrackSpec"),
                  ("`consolidate`", "ConsolidateSpec"), ("A track's `compensate`",
                                                         "Compensation"),
                  ("`dst`", "DstPolicy")]
SCHEMA_PAGE = "reference/schedules.md"


def _kind(node: dict[str, Any]) -> str:
    """A property's type in a word or two, as the schema says it."""
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[1]
    if "anyOf" in node:
        return " or ".join(_kind(n) for n in node["anyOf"])
    kind = node.get("type", "any")
    if kind == "array" and "items" in node:
        return f"array of {_kind(node['items'])}"
    return str(kind)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def schema_tables(schema: dict[str, Any]) -> str:
    """Every field of the schedule schema, one table per object, from its descriptions."""
    out = ["## Every field, from the JSON Schema", "",
           "Generated by `tools/docs_split.py` from `schedules/schedule.schema.json`. "
           "The enumerations (`OverlapPolicy` and the like) are in the schema itself."]
    for title, name in SCHEMA_OBJECTS:
        node = schema if name is None else schema.get("$defs", {}).get(name)
        if not node:
            continue
        out += ["", f"### {title}", "", "| field | type | default | meaning |",
                "|---|---|---|---|"]
        for field_name, prop in node.get("properties", {}).items():
            default = json.dumps(prop["default"]) if "default" in prop else ""
            out.append(f"| `{field_name}` | {_cell(_kind(prop))} | "
                       f"{_cell(f'`{default}`') if default else ''} | "
                       f"{_cell(prop.get('description', ''))} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- variables

ENV_PAGE = "reference/environment.md"
ENV_VAR = re.compile(r"`\$?((?:ORCHESTRATOR|GITHUB|GH|ACTIONS)_[A-Z0-9_]*[A-Z0-9])(?:=[^`]*)?`")


def environment_table(files: dict[str, str], titles: dict[str, str]) -> str:
    """Each variable the pages name in code, with links to the pages that name it."""
    seen: dict[str, list[str]] = {}
    for name, text in sorted(files.items()):
        page = name.removeprefix("docs/")
        if page == ENV_PAGE or page not in titles:
            continue
        for var in sorted(set(ENV_VAR.findall(text))):
            seen.setdefault(var, []).append(page)
    rows = ["| variable | explained in |", "|---|---|"]
    for var in sorted(seen):
        links = ", ".join(f"[{titles[p]}]({link_to(p, '', ENV_PAGE)})" for p in seen[var])
        rows.append(f"| `{var}` | {links} |")
    return "\n".join(rows)


# --------------------------------------------------------------------------- writing


def render_page(page: Page, units: list[Unit], where: dict[str, tuple[str, str]],
                by_title: dict[str, tuple[str, str]], say: list[str],
                schema: dict[str, Any] | None = None) -> str:
    mine = sorted((u for u in units if u.page == page.path), key=order)
    on_page = {u.index for u in mine}
    out = [f"# {page.title}", ""]
    if page.intro:
        out += [page.intro, ""]
    for unit in mine:
        if unit.key and not unit.bold and not (unit.level == 1 and page.path == "index.md"):
            out += [f"{'#' * page_level(unit, on_page)} {unit.title}", ""]
        body = unit.lines
        while body and body[0].strip() == "":
            body = body[1:]
        code = fenced(body)
        runnable = unit.key in RUNNABLE
        for i, (line, in_code) in enumerate(zip(body, code, strict=True)):
            opens = in_code and line.startswith("```sh") and not (i and code[i - 1])
            if runnable and opens and (i == 0 or body[i - 1] != RUN_MARK):
                out.append(RUN_MARK)
            out.append(line if in_code else rewrite(line, page.path, where, by_title, say))
        while out and out[-1] == "":
            out.pop()
        out.append("")
    if page.outro:
        out += [page.outro, ""]
    if page.path == SCHEMA_PAGE and schema is not None:
        out += [schema_tables(schema), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def mkdocs_yml(written: list[Page]) -> str:
    lines = [MKDOCS_HEAD, "nav:"]
    sections: dict[str, list[tuple[str, str]]] = {}
    for page in written:
        if page.section:
            sections.setdefault(page.section, []).append((page.title, page.path))
        else:
            sections[page.path] = [(page.title, page.path)]
    for name, items in sections.items():
        items = items + EXTRA_NAV.get(name, [])
        if name.endswith(".md"):
            title, path = items[0]
            lines.append(f"  - {'Home' if path == 'index.md' else title}: {path}")
            continue
        lines.append(f"  - {name}:")
        lines += [f"      - {quote(title)}: {path}" for title, path in items]
    lines.append(f"  - {CHANGELOG[0]}: {CHANGELOG[1]}")
    return "\n".join(lines) + "\n"


def quote(text: str) -> str:
    return f'"{text}"' if re.search(r"[:#'\"]", text) else text


def split(text: str, changelog: str | None, schema: dict[str, Any] | None = None,
          others: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The files to write (path relative to the output folder -> text), and the lines
    to print. ``others``: pages of the site this tool does not write (docs/cli.md), by
    path under docs/, read for the table of environment variables."""
    say: list[str] = []
    for old, new in FIXES:
        if old in text:
            text = text.replace(old, new)
        else:
            say.append(f"a correction in FIXES no longer matches: {old[:50]!r}...")
    units = parse(text)
    place(units, say)
    where: dict[str, tuple[str, str]] = {}
    by_title: dict[str, tuple[str, str]] = {}
    for unit in units:
        if unit.key and not unit.bold:
            where.setdefault(github_slug(unit.title), (unit.page, site_slug(unit.title)))
            by_title.setdefault(unit.title, (unit.page, site_slug(unit.title)))
    pages = {p.path: p for p in PAGES}
    written = [p for p in PAGES if not p.optional or any(u.page == p.path for u in units)]
    files = {f"docs/{p.path}": render_page(p, units, where, by_title, say, schema)
             for p in written}
    env = f"docs/{ENV_PAGE}"
    if env in files:
        titles = {p.path: p.title for p in written}
        titles |= {path: title for items in EXTRA_NAV.values() for title, path in items}
        read = {**{f"docs/{k}": v for k, v in (others or {}).items()}, **files}
        files[env] = files[env].rstrip("\n") + "\n\n" + environment_table(read, titles) + "\n"
    missing = sorted({u.page for u in units} - set(pages))
    if missing:
        raise SystemExit(f"pages missing from PAGES: {missing}")
    if changelog is not None:
        files["docs/" + CHANGELOG[1]] = changelog
    files["mkdocs.yml"] = mkdocs_yml(written)
    return files, say


# --------------------------------------------------------------------------- inventory


def inventory(text: str) -> list[str]:
    """The headings, bold sub-headings and schedule fields a README documents."""
    lines = text.splitlines()
    code = fenced(lines)
    found: list[str] = []
    for line, in_code in zip(lines, code, strict=True):
        if in_code:
            continue
        if m := HEADING.match(line):
            found.append(f"heading\t{m.group(2)}")
        elif m := re.match(r"\*\*([^*]+?)\.?\*\*", line):
            found.append(f"bold\t{m.group(1)}")
    schedules = next(u for u in headings(text) if u.key == "Schedules")
    for line in schedules.lines:
        if m := re.match(r"\| `([a-z_$]+)` \|", line):
            found.append(f"field\t{m.group(1)}")
            if m.group(1) == "tracks":
                found += [f"field\ttracks.{name}"
                          for name in re.findall(r"`([a-z_]+)` \(", line)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readme", type=Path, help="the long README.md to split")
    parser.add_argument("--out", type=Path, default=Path("."),
                        help="the repository root to write docs/ and mkdocs.yml into")
    parser.add_argument("--inventory", action="store_true",
                        help="print the headings and schedule fields instead")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    if args.inventory:
        sys.stdout.write("".join(f"{line}\n" for line in inventory(text)))
        return 0
    changelog_path = args.out / "CHANGELOG.md"
    changelog = changelog_path.read_text(encoding="utf-8") if changelog_path.is_file() else None
    schema_path = args.out / "schedules" / "schedule.schema.json"
    schema = (json.loads(schema_path.read_text(encoding="utf-8"))
              if schema_path.is_file() else None)
    others = {path: (args.out / "docs" / path).read_text(encoding="utf-8")
              for items in EXTRA_NAV.values() for _, path in items
              if (args.out / "docs" / path).is_file()}
    files, say = split(text, changelog, schema, others)
    for name, content in files.items():
        target = args.out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != content:
            target.write_text(content, encoding="utf-8")
    for line in say:
        print(line)
    print(f"wrote {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
