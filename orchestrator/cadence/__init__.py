"""The clock and its cost: when ticks run, and what that costs on GitHub Actions.

Owns: the next due moment and why (wake), ``tick --linger``'s wait, the wake-up loop
of ``serve``, ``tick.yml``'s cron derived from the schedules (``cron-sync``), the
external clock that calls tick.yml at each slot (its calls, file and requests), and
the month's estimate of runner-minutes, pushes and API calls.

May import: planner, executors, github, state, config, store, cron, support, errors. It
drives a tick through a callable it is given, never by importing the tick shell.
"""
