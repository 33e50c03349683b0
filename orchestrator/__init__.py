"""Scheduled, multi-track work on CI runners, with a git repository as the database."""

__version__ = "0.1.0"
