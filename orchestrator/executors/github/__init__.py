"""The GitHub Actions executor, by role: the HTTP client (:mod:`.client`), batching
and naming (:mod:`.batching`), reading jobs (:mod:`.observation`) and the executor
(:mod:`.executor`)."""

from ...spec.github_limits import MAX_INPUTS_CHARS, MAX_LEGS
from .batching import Batch, batch_digest, plan_batches
from .client import API_VERSION, DEFAULT_API_URL, GitHubClient, GitHubError
from .executor import GitHubExecutor

__all__ = [
    "API_VERSION",
    "DEFAULT_API_URL",
    "MAX_INPUTS_CHARS",
    "MAX_LEGS",
    "Batch",
    "GitHubClient",
    "GitHubError",
    "GitHubExecutor",
    "batch_digest",
    "plan_batches",
]
