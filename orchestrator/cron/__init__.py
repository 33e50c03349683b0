"""Cron: parsing (:mod:`.fields`), slots with daylight-saving semantics
(:mod:`.evaluate`), the DST policy (:mod:`.dst`) and descriptions in words
(:mod:`.words`).

Nothing here knows schedule files: functions take the expression, the zone and the
DST policy. :mod:`orchestrator.config.triggers` puts a schedule's ``cron`` or ``at`` behind
one interface.

May import: errors and support only.
"""

from .dst import DstFold, DstGap, DstPolicy
from .evaluate import (
    FOLD_LOOKBACK,
    NEXT_HORIZON,
    Search,
    SlotInfo,
    SlotKind,
    Spacing,
    ZoneChange,
    dst_note,
    explain,
    local_to_utc,
    next_slots,
    search,
    slots,
    spacing,
    zone_changes,
)
from .fields import ALIASES, EXTENSIONS, CronExpr, parse_cron, validate_cron
from .words import cron_words, describe

__all__ = [
    "ALIASES",
    "EXTENSIONS",
    "FOLD_LOOKBACK",
    "NEXT_HORIZON",
    "CronExpr",
    "DstFold",
    "DstGap",
    "DstPolicy",
    "Search",
    "SlotInfo",
    "SlotKind",
    "Spacing",
    "ZoneChange",
    "cron_words",
    "describe",
    "dst_note",
    "explain",
    "local_to_utc",
    "next_slots",
    "parse_cron",
    "search",
    "slots",
    "spacing",
    "validate_cron",
    "zone_changes",
]
