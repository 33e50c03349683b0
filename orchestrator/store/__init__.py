"""The state store: the repository as the database, written by compare-and-swap.

- :mod:`.base`: the :class:`StateStore` contract (what is compared, what a lost race
  does, when a retry is allowed), :class:`Snapshot` and its :class:`StateFiles`,
  :class:`TransactResult`, the :data:`Change` type and the path rules;
- :mod:`.memory`: :class:`InMemoryStateStore`, the fake with a contention hook, and
  :func:`as_state_files` for plain mappings;
- :mod:`.push`: how a push ended, read from git's output;
- :mod:`.plumbing`: the git command wrapper, the transport, redaction, the token header;
- :mod:`.tree`: the files of one commit, listed by folder and loaded in bulk;
- :mod:`.links`: the folders kept in a commit of their own, behind a link entry;
- :mod:`.git`: :class:`GitStateStore`, the compare-and-swap loop over a git remote.

The store knows nothing of the domain: it writes files under ``state/``, whatever
they mean.

May import: errors and support only.
"""

from .base import (
    STATE_PREFIX,
    ArchiveFn,
    Change,
    ChangeFn,
    Snapshot,
    Stamped,
    StateFiles,
    StateStore,
    TransactResult,
    blob_id,
    changes,
    check_path,
    committable,
    effective,
)
from .git import FALLBACK_EMAIL, FALLBACK_NAME, GitStateStore
from .memory import InMemoryStateStore, MemoryFiles, as_state_files
from .plumbing import (
    GIT_TIMEOUT,
    Git,
    GitTransport,
    Transport,
    TransportError,
    auth_env,
    display_url,
    token_allowed,
)
from .push import PushOutcome, PushStatus, classify_push

__all__ = [
    "FALLBACK_EMAIL",
    "FALLBACK_NAME",
    "GIT_TIMEOUT",
    "STATE_PREFIX",
    "ArchiveFn",
    "Change",
    "ChangeFn",
    "Git",
    "GitStateStore",
    "GitTransport",
    "InMemoryStateStore",
    "MemoryFiles",
    "PushOutcome",
    "PushStatus",
    "Snapshot",
    "Stamped",
    "StateFiles",
    "StateStore",
    "TransactResult",
    "Transport",
    "TransportError",
    "as_state_files",
    "auth_env",
    "blob_id",
    "changes",
    "check_path",
    "classify_push",
    "committable",
    "display_url",
    "effective",
    "token_allowed",
]
