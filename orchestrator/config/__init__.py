"""What users write: schedule files, their models and the repository's configuration.

Owns: the schedule models and their field types, the track graph (``needs``), the
opt-in policies, triggers (``cron`` and ``at``), reading ``schedules/*.json`` and
``orchestrator.json``, the preview ``validate`` prints, and whether ``track.yml`` is
the shipped one.

May import: :mod:`orchestrator.support`, :mod:`orchestrator.cron`,
:mod:`orchestrator.errors`. Nothing here knows the state branch.
"""
