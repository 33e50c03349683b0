"""Notifications: every event worth a person's attention reaches one.

Owns: the events and their JSON shape (:mod:`.events`), what the state branch
remembers for them (:mod:`.record`: failing streaks and their issues, the outbox), the
outbox's moves (:mod:`.outbox`), the one channel interface (:mod:`.channel`), the
channels (:mod:`.issues`, :mod:`.webhook`) with what they send (:mod:`.text`), running
them within a budget (:mod:`.deliver`), and the watchers' alerts (:mod:`.watch`).

Invariants: events are derived from decisions, never from log lines; a channel never
raises into the tick and never outlives its deadline; every text that leaves is
redacted and cut to the channel's limits; a webhook URL is never written anywhere.

May import: :mod:`orchestrator.planner`, :mod:`orchestrator.executors`,
:mod:`orchestrator.github` (the REST client), :mod:`orchestrator.state`,
:mod:`orchestrator.config`, :mod:`orchestrator.store`, :mod:`orchestrator.support`,
:mod:`orchestrator.errors`.
"""
