"""What the tick writes: the records of the state branch and the rules they obey.

Owns: the record models, the track and run state machines, the layout (every path
of ``state/`` and the one parser of run ids), the codec (records as bytes), the parsed
state tree, the index of open runs, the circuit breaker and runner health.

May import: :mod:`orchestrator.config`, :mod:`orchestrator.store`,
:mod:`orchestrator.support`, :mod:`orchestrator.cron`, :mod:`orchestrator.errors`.
"""
