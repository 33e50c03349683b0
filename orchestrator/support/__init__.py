"""Leaf utilities every other package may use.

Owns: atomic file writes, the one safe JSON reader, one-line text views, timestamps,
the CLI process's own settings, the credentials kept out of tracks (the redactor), and
the named points of no return that crash tests hook into.

May import: :mod:`orchestrator.errors` and the standard library only.
"""
