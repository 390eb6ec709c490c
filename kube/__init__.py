"""The Kubernetes access layer, apart from the domain (models/): everything that knows how to talk to the cluster.

- `errors`: the typed errors every failure becomes (kopf's `_cogs/clients/errors.py`), mapped once at each boundary.
- `client`: `Kube`, one process's client with its rate limit and call wrapper; `settings`: where it comes from.
- `resources`: typed accessors of custom resources, `Resource(group, version, plural)`, with client-go's
  `RetryOnConflict` as `update_with_retry`; `finalizers`: the version-guarded finalizer patches.
- `listwatch`: client-go's reflector loop (list, watch, resume, list again after 410), shared by the bridge's
  watches, the API's run view and `informer`, the worker's shared view of Jobs, pods and definitions.

Layering: `kube` may read the domain's names (models/names.py); nothing in `models` imports `kube`.
"""

from .client import Kube, RateLimiter
from .errors import (
    BadRequest,
    ClientError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    Transient,
    Unauthorized,
    kube_error,
    typed_errors,
)
from .finalizers import finalizer_added, finalizer_removed
from .listwatch import watch_events
from .resources import Ref, Resource, sympozium

__all__ = ["BadRequest", "ClientError", "Conflict", "Forbidden", "Gone", "Invalid", "Kube", "KubeError", "NotFound",
           "RateLimiter", "Ref", "Resource", "Transient", "Unauthorized", "finalizer_added", "finalizer_removed", "kube_error",
           "sympozium", "typed_errors", "watch_events"]
