"""The imperative shell of one tick around the pure planner.

Owns: the tick's inputs read once, the pipeline (observe, mark, dispatch, record,
retain), consolidation of finished runs, the poll and heartbeat logs, what a tick did
(its result), the scope of a fan-in tick, and the memo of quiet schedules.

May import: planner, executors, brief, runs, cadence, notify, state, config, store, cron,
support, errors. Only :mod:`orchestrator.commands` imports it.
"""
