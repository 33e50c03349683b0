"""The model of a calendar file, ``calendars/<name>.json``, and its JSON Schema.

Imported only when a calendar is parsed or its schema printed; the reader that finds
and reads the files is :mod:`orchestrator.config.calendars`.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from pydantic import Field

from .fieldtypes import Frozen

MAX_DATES = 10000
"""As many dates as a schedule's own ``exclude`` may list."""


class Calendar(Frozen):
    """A calendar file: dates on which the schedules that name it fire nothing."""

    schema_ref: str | None = Field(
        None, alias="$schema", description="Path or URL of the JSON Schema, for editors.")
    description: str = Field("", max_length=1000, description="What these dates are.")
    dates: list[date] = Field(
        max_length=MAX_DATES,
        description="Dates (YYYY-MM-DD), read in the time zone of each schedule that "
        "names the calendar in `exclude_calendars`; no slot fires on them.")


def calendar_json_schema() -> dict[str, Any]:
    """The JSON Schema of a calendar file (``calendars/calendar.schema.json``)."""
    schema = Calendar.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://orchestrator.invalid/calendar.schema.json",
        "title": "Orchestrator calendar",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def schema_text() -> str:
    return json.dumps(calendar_json_schema(), indent=2, ensure_ascii=False) + "\n"
