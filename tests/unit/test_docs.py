"""The documentation is checked like code: nothing the long README documented was
lost in the move to the site, the reference lists every field of the JSON Schemas,
every JSON example validates, every CLI flag it mentions exists, and every link between
documents resolves."""

from __future__ import annotations

import json
import re

import click
import jsonschema
import pytest

from orchestrator.cli import cli
from orchestrator.config.calendar_file import Calendar, calendar_json_schema
from orchestrator.config.models import ScheduleSpec
from orchestrator.config.repository import parse_repo_config, repo_config_json_schema
from tests.docs import (
    REPO,
    broken_links,
    command_lines,
    documentation,
    fences,
    headings,
    json_examples,
    pages,
    runnable_blocks,
)

BEFORE = REPO / "tests" / "data" / "readme-before-headings.txt"
SCHEMA = json.loads((REPO / "schedules" / "schedule.schema.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- nothing lost


def test_every_heading_and_field_of_the_long_readme_is_still_documented() -> None:
    docs = pages()
    text = documentation()
    titles = {t for page in docs.values() for t in headings(page)}
    missing: list[str] = []
    for line in BEFORE.read_text(encoding="utf-8").splitlines():
        kind, _, name = line.partition("\t")
        present = {"heading": lambda n: n in titles,
                   "bold": lambda n: f"**{n}" in text,
                   "field": lambda n: f"`{n.rpartition('.')[2]}`" in text}[kind](name)
        if not present:
            missing.append(line)
    assert missing == []
    assert len(BEFORE.read_text(encoding="utf-8").splitlines()) > 60


def _properties(schema: dict[str, object], name: str | None = None) -> list[str]:
    node = schema if name is None else schema["$defs"][name]  # type: ignore[index]
    return list(node["properties"])  # type: ignore[index]


def test_the_schedule_reference_lists_every_field_of_the_schema() -> None:
    page = (REPO / "docs" / "reference" / "schedules.md").read_text(encoding="utf-8")
    fields = {*_properties(SCHEMA), *_properties(SCHEMA, "TrackSpec"),
              *_properties(SCHEMA, "ConsolidateSpec"), *_properties(SCHEMA, "DstPolicy")}
    assert sorted(f for f in fields if f"`{f}`" not in page) == []


def test_the_orchestrator_json_reference_lists_every_setting() -> None:
    page = (REPO / "docs" / "reference" / "orchestrator-json.md").read_text(encoding="utf-8")
    schema = repo_config_json_schema()
    fields = {*_properties(schema), *_properties(schema, "Cadence")}
    assert sorted(f for f in fields if f"`{f}`" not in page) == []


# --------------------------------------------------------------------------- examples


def _check_example(page: str, value: object) -> str:
    """What the example is, once checked: a schedule, a settings file, or a fragment."""
    if isinstance(value, dict) and "tracks" in value:
        jsonschema.validate(value, SCHEMA)
        ScheduleSpec.model_validate_json(json.dumps(value))
        return "schedule"
    if isinstance(value, dict) and "dates" in value:
        jsonschema.validate(value, calendar_json_schema())
        Calendar.model_validate_json(json.dumps(value))
        return "calendar"
    config_keys = set(_properties(repo_config_json_schema()))
    if isinstance(value, dict) and value and set(value) <= config_keys:
        parse_repo_config(json.dumps(value).encode())
        return "orchestrator.json"
    return "fragment"


def test_every_json_example_parses_and_every_schedule_or_setting_validates() -> None:
    kinds = [_check_example(page, value) for page, value in json_examples(pages())]
    assert kinds.count("schedule") >= 3 and kinds.count("orchestrator.json") >= 2, kinds
    assert kinds.count("calendar") >= 1, kinds


def test_a_schedule_example_with_a_wrong_field_fails_the_check() -> None:
    with pytest.raises(jsonschema.ValidationError):
        _check_example("x.md", {"cron": "0 1 * * *", "tracks": [{"name": "a", "run": "x"}],
                                "overlaps": "skip"})


# --------------------------------------------------------------------------- CLI flags


def _options(command: click.Command) -> set[str]:
    found = {"--help"}
    for param in command.params:
        found |= {o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")}
    return found


def _sub(group: click.Command, name: str) -> click.Command | None:
    if not isinstance(group, click.Group):
        return None
    return group.get_command(click.Context(group), name)


def unknown_flags(line: str) -> list[str]:
    """The ``--flags`` of an ``orchestrator ...`` command line its command lacks."""
    tokens = line.split()[1:]
    stack: list[click.Command] = [cli]
    problems: list[str] = []
    for i, token in enumerate(tokens):
        word = token.strip("[](){}\"',.;:")
        if token == "|":  # `a [--x] | b [--y]`: b is a sibling (or an uncle) of a
            after = tokens[i + 1].strip("[](){}") if i + 1 < len(tokens) else ""
            for depth in range(len(stack) - 2, -1, -1):
                if _sub(stack[depth], after) is not None:
                    del stack[depth + 1:]
                    break
            continue
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            if flag not in _options(stack[-1]):
                problems.append(f"{line!r}: {flag} is no option of {stack[-1].name}")
        elif (found := _sub(stack[-1], word.split("|", 1)[0])) is not None:
            stack.append(found)  # `resume|unpause ID`: either verb, the first checked
    return problems


def test_every_cli_flag_the_documents_mention_exists() -> None:
    lines = [line for text in pages().values() for line in command_lines(text)]
    assert len(lines) > 50
    assert [p for line in lines for p in unknown_flags(line)] == []


def test_the_flag_check_catches_a_made_up_flag() -> None:
    assert unknown_flags("orchestrator tick --dry-run") == []
    assert unknown_flags("orchestrator --repo . dlq list [--all] | show KEY") == []
    assert len(unknown_flags("orchestrator tick --dry-runs")) == 1
    assert unknown_flags("orchestrator schedules resume|unpause ID --reason R") == []
    assert len(unknown_flags("orchestrator schedules resume|unpause ID --reasons R")) == 1
    assert len(unknown_flags("orchestrator cron-sync [--check] | estimate [--checks]")) == 1


# --------------------------------------------------------------------------- links


def _repository_files() -> set[str]:
    return {p.relative_to(REPO).as_posix() for p in REPO.rglob("*")
            if ".git" not in p.parts and p.is_file()} | {
        p.relative_to(REPO).as_posix() for p in REPO.rglob("*") if p.is_dir()}


@pytest.mark.slow
def test_every_link_and_anchor_between_the_documents_resolves() -> None:
    docs = pages()
    assert broken_links(docs, _repository_files()) == []


@pytest.mark.slow
def test_a_deliberately_broken_link_or_anchor_is_caught() -> None:
    docs = {**pages(), "docs/broken.md": "# Broken\n\n[gone](nowhere.md) and "
            "[lost](concepts/tick.md#no-such-heading) and "
            "[fine](concepts/tick.md#how-a-tick-works)\n"}
    problems = broken_links(docs, _repository_files())
    assert [p.split(":")[0] for p in problems] == ["docs/broken.md"] * 2, problems


def test_the_readme_is_short_and_leads_into_the_site() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 300
    assert readme.count("](docs/") >= 15
    assert runnable_blocks({"README.md": readme}), "the tour's first block is marked to run"



def test_the_site_s_changelog_is_the_changelog() -> None:
    """docs/changelog.md is a copy (MkDocs reads only docs/): copy CHANGELOG.md over it."""
    assert (REPO / "docs" / "changelog.md").read_text(encoding="utf-8") == (
        REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## Unreleased" in (REPO / "CHANGELOG.md").read_text(encoding="utf-8")


def test_every_variable_the_pages_name_is_on_the_environment_page() -> None:
    environment = (REPO / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    named = {var for path, text in pages().items() if path.startswith("docs/")
             and path != "docs/changelog.md"
             for var in re.findall(r"`\$?(ORCHESTRATOR_[A-Z0-9_]*[A-Z0-9])(?:=[^`]*)?`", text)}
    assert len(named) > 15
    assert sorted(v for v in named if f"| `{v}` |" not in environment) == []


def test_the_home_page_starts_a_newcomer_and_its_diagram_fits_a_phone() -> None:
    """The site shows a fenced block unwrapped: at 40 columns it fits beside the
    navigation at 1280 px and alone at 390 px (measured in Chromium)."""
    home = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    before_diagram = home.split("```", 1)[0]
    assert "**New here? Start with [Get started on your machine](get-started/local.md" in (
        before_diagram)
    assert [line for _, body, _ in fences(home) for line in body.splitlines()
            if len(line) > 40] == []
