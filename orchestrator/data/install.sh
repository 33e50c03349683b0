#!/usr/bin/env bash
# Installs the orchestrator for the rest of a GitHub Actions job, from the folder whose
# .github/orchestrator/requirements.txt pins its wheel and every dependency by hash.
# It goes into a virtual environment of its own under $RUNNER_TEMP, and only its
# `orchestrator` command goes on PATH: a track's `pip install` changes the workflow's
# Python, never the orchestrator's. Written by `orchestrator init` and `upgrade`;
# action.yml runs the same script.
set -euo pipefail
home="${RUNNER_TEMP:?RUNNER_TEMP is not set (this script runs in a GitHub Actions job)}/orchestrator-install"
python="${ORCHESTRATOR_PYTHON:-python3}"
"$python" -m venv --clear "$home/venv"
"$home/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes --no-deps --only-binary :all: -r .github/orchestrator/requirements.txt
# The venv's bin folder also holds its python and pip: a folder with the one command
# keeps a track's `python` and `pip` the workflow's own.
mkdir -p "$home/bin"
ln -sf "$home/venv/bin/orchestrator" "$home/bin/orchestrator"
echo "$home/bin" >> "${GITHUB_PATH:?GITHUB_PATH is not set}"
"$home/bin/orchestrator" --version
