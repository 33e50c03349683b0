"""The static JSON API a script reads instead of cloning the state branch:
``orchestrator render --api`` and ``schema --api``, through the installed CLI."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

from tests.acceptance.cliuser import User


def test_render_api_answers_did_the_last_run_succeed_and_validates(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "hourly", "--cron", "0 * * * *", "--track", "c=false")
    user.run("schedules", "add", "daily", "--cron", "30 2 * * *", "--track", "t=true")
    for minute in ("01", "02", "03"):
        user.tick(f"2026-12-01T07:{minute}:00Z")

    site = user.cwd / "site"
    printed = user.run("render", "--api", str(site), "--now", "2026-12-01T08:00:00Z").stdout
    assert "files written" in printed
    schemas = json.loads(user.run("schema", "--api").stdout)
    index = json.loads((site / "api/v1/index.json").read_text())
    hourly = {s["id"]: s for s in index["schedules"]}["hourly"]
    assert hourly["last_run"]["run_id"] == "hourly--20261201T0700Z"
    assert hourly["last_run"]["status"] == "failed"
    # every link of the index resolves in the site, and every file is valid by its schema
    assert (site / hourly["href"]).is_file() and (site / hourly["last_run"]["href"]).is_file()
    for path in (site / "api" / "v1").rglob("*.json"):
        if "schemas" in path.parts:
            continue
        doc = json.loads(path.read_text())
        kind = doc["$schema"].rpartition("/")[2].removesuffix(".schema.json")
        jsonschema.validate(doc, schemas[kind])
    badge = ET.parse(site / hourly["badge"]).getroot()
    title = badge.find("{http://www.w3.org/2000/svg}title")
    # its age is counted from when the track ended, within the minute the tick ran
    assert title is not None and re.fullmatch(r"hourly: failed 5\dm ago", title.text or "")
