"""The static read API on GitHub Pages: versioned JSON files, their schemas, badges.

Owns: ``api/v1/`` (the index, one file per schedule, run and queue, pages of runs),
the JSON Schema of each kind of file, and ``badges/*.svg``. ``render --api`` writes
them; ``pages.yml`` publishes them beside the dashboard.

- Pure: the tree is built from the branch's files, the schedules and an instant;
  only :func:`orchestrator.api.incremental.render` touches the disk.
- Every file passes the redactor the brief's tails pass, and carries no track output
  beyond what the brief shows (a result's ``summary``, error lines cut).
- Every file is bounded whatever the history: old runs are reached through pages.
- Every name that becomes a file name is checked as an id first (no ``..``, no ``/``).
- Rendered incrementally onto an earlier rendering (:mod:`.incremental`): a file is
  built again only when what it is built from changed, and its bytes are the same.

May import: brief, runs, cadence (the cron lateness ledger), state, config, cron, store
(a snapshot's files), support, errors.
"""
