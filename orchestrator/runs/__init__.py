"""Operations on runs that exist: what a person reads and does between ticks.

Owns: read-only views of runs, the dead letter queue, pauses and resumes, a track's
own report, compaction and the tick's retention, and the status report.

May import: planner, executors, brief, cadence (the next wake-up), state, config, store,
cron, support, errors.
Never the tick shell: a read-only command must not load it.
"""
