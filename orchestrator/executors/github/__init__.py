"""The GitHub Actions executor, by role: batching and naming (:mod:`.batching`),
finding a batch again (:mod:`.correlation`), reading jobs (:mod:`.watching`,
:mod:`.observation`), a leg's job log (:mod:`.leglogs`) and the executor
(:mod:`.executor`). Its HTTP goes through :mod:`orchestrator.github`."""

from ...config.github_limits import MAX_INPUTS_CHARS, MAX_LEGS
from .batching import Batch, batch_digest, plan_batches
from .executor import GitHubExecutor

__all__ = [
    "MAX_INPUTS_CHARS",
    "MAX_LEGS",
    "Batch",
    "GitHubExecutor",
    "batch_digest",
    "plan_batches",
]
