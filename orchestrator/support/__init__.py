"""Leaf utilities every other package may use.

Owns: atomic file writes, the one safe JSON reader, one-line text views, timestamps,
the CLI process's own settings, and the credentials kept out of tracks (the redactor).

May import: :mod:`orchestrator.errors` and the standard library only.
"""
