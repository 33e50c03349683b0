"""GitHub's cron lateness as this repository measured it, for ``validate``'s Markdown.

- Read from the lateness ledger on the state branch (:mod:`orchestrator.cadence.lateness`).
- Says nothing when the branch cannot be read (a pull request from a fork has no token
  for it), or holds no sample of the last :data:`~orchestrator.cadence.lateness.RISK_DAYS`
  days: a preview must not fail for the want of a measurement.
- Flags the schedules whose ``max_lateness_minutes`` (else the repository's) is below
  the measured p95, with enough samples, as the tick's ``cron_late`` does.
"""

from __future__ import annotations

from datetime import datetime

from ..cadence import lateness
from ..cadence.pending import tick_crons
from ..config.models import Schedule
from ..config.repository import load_repo_config
from ..errors import OrchestratorError
from ..notify.events import CLOCK_SETUP
from ..state import layout
from .context import Config


def ledger(cfg: Config) -> bytes | None:
    """The ledger's bytes, or ``None`` when the state branch cannot be read."""
    try:
        return cfg.store().read().files.get(layout.LATENESS)
    except OrchestratorError:
        return None


def _tolerances(cfg: Config, schedules: list[Schedule]) -> dict[str, float | None]:
    try:
        default = load_repo_config(cfg.repo).cadence.max_lateness_minutes
    except OrchestratorError:  # an invalid orchestrator.json is a problem of its own
        default = None
    return {s.id: s.spec.max_lateness_minutes or default for s in schedules}


def markdown(cfg: Config, schedules: list[Schedule], now: datetime) -> str:
    """The measured lateness and the schedules at risk; empty without a measurement."""
    data = ledger(cfg)
    samples = lateness.read(data)
    days = lateness.RISK_DAYS
    found = lateness.overall(lateness.recent(samples, now, days), tick_crons(cfg.repo))
    if not found.samples:
        return ""
    out = ["### GitHub's cron, as measured", "",
           f"Over the last {days} days GitHub created the scheduled ticks "
           f"{lateness.minutes(found.p50)} (p50) and {lateness.minutes(found.p95)} (p95) "
           f"after their slots, {found.samples} samples, {found.dropped} slots dropped "
           "(`orchestrator lateness`).", ""]
    tolerances = _tolerances(cfg, schedules)
    risk = lateness.at_risk(samples, tolerances, now)
    if risk is not None and risk.schedules:
        names = ", ".join(f"`{sid}` ({tolerances[sid]:g} min)" for sid in risk.schedules)
        out += [f"> ⚠️ max_lateness_minutes below that p95: {names}. The fix: "
                f"{CLOCK_SETUP}.", ""]
    return "\n".join(out)
