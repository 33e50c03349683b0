"""GitHub's REST API behind one door: the only package that speaks it.

- :mod:`.client`: authentication, paging, rate limits, retries, the circuit breaker.
- :mod:`.settings`: the repository, token and API a call uses, from the variables
  GitHub Actions sets; ``owner/name`` checked before it enters a path.
- :mod:`.admin`: workflow admin (state, enable, runs waiting to start, cancel, the
  external clock's dispatch).
- :mod:`.joblogs`: a job and the end of its log.
- :mod:`.issues`: a repository's issues and comments (the issue channel's calls).

Modules outside this package and the GitHub executor import these names from here,
never :mod:`.client` itself (``tests/unit/test_architecture.py`` checks it).

May import: :mod:`orchestrator.state` (the breaker), :mod:`orchestrator.config`,
:mod:`orchestrator.support`, :mod:`orchestrator.errors`.
"""

from .admin import WorkflowAdmin
from .client import API_VERSION, DEFAULT_API_URL, GitHubClient, GitHubError, message
from .connect import api_url_of, connect, token_of, valid_repository

__all__ = [
    "API_VERSION",
    "DEFAULT_API_URL",
    "GitHubClient",
    "GitHubError",
    "WorkflowAdmin",
    "api_url_of",
    "connect",
    "message",
    "token_of",
    "valid_repository",
]
