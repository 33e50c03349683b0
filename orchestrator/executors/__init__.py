"""Executors run the tracks of a run somewhere: local subprocesses or GitHub Actions."""
