"""Who a request is: bearer tokens (the admin's, a pod's ServiceAccount token, a TokenRequest's) and impersonation.

Why a module of its own: kube-apiserver keeps authentication (k8s.io/apiserver/pkg/authentication, the
ServiceAccount token authenticator) and the impersonation filter (endpoints/filters/impersonation.go) apart from
the handlers that serve resources; so does localkube. `server.py` asks `Auth.authenticate` and `impersonate` for
the request's user, and the TokenReview and TokenRequest handlers (`reviews.py`) ask the same code, so a token is
valid for a review exactly when it is valid for a request.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import StatusError
from .rbac import Attributes, RBACSource, UserInfo, authorize, forbidden_message

Obj = dict[str, Any]

ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))

# The audience kube-apiserver accepts tokens for (its --api-audiences, by default its issuer's).
API_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)


class Objects(Protocol):
    """What a token's validity is checked against: the stored objects (localkube's Store)."""

    def get(self, key: tuple[str, str], namespace: str, name: str) -> Obj | None: ...


@dataclass
class TokenInfo:
    """A ServiceAccount token: a pod's (valid while that pod lives) or a TokenRequest's (valid until it
    expires, while its ServiceAccount and the object it is bound to exist, and for the API server's audience)."""

    namespace: str
    service_account: str
    pod_name: str = ""
    pod_uid: str = ""
    sa_uid: str = ""
    expires: float | None = None  # time.time() of expiry
    bound: tuple[str, str, str] | None = None  # (resource, name, uid) in the token's namespace
    audiences: tuple[str, ...] = ()


@dataclass
class Auth:
    admin_token: str = field(default_factory=lambda: "lk-admin-" + secrets.token_hex(16))
    tokens: dict[str, TokenInfo] = field(default_factory=dict)

    def issue(self, namespace: str, sa: str, pod_name: str, pod_uid: str) -> str:
        token = "lk-sa-" + secrets.token_hex(20)
        self.tokens[token] = TokenInfo(namespace, sa, pod_name, pod_uid)
        return token

    def request(self, info: TokenInfo) -> str:
        """A TokenRequest's token; tokens that expired are forgotten meanwhile."""
        now = time.time()
        for t in [t for t, i in self.tokens.items() if i.expires is not None and i.expires <= now]:
            del self.tokens[t]
        token = "lk-sa-" + secrets.token_hex(20)
        self.tokens[token] = info
        return token

    def revoke_pod(self, pod_uid: str) -> None:
        for t in [t for t, i in self.tokens.items() if i.pod_uid == pod_uid]:
            del self.tokens[t]

    def authenticate(self, authorization: str, objects: Objects) -> UserInfo:
        """The user of an `Authorization: Bearer` header, or 401."""
        if not authorization.lower().startswith("bearer "):
            raise StatusError(401, "Unauthorized")
        user, _ = self.lookup(authorization[7:].strip(), objects)
        if user is None:
            raise StatusError(401, "Unauthorized")
        return user

    def lookup(self, token: str, objects: Objects) -> tuple[UserInfo | None, tuple[str, ...]]:
        """Who a token authenticates as (None: nobody, or no longer) and the audiences it is valid for."""
        if secrets.compare_digest(token, self.admin_token):
            return ADMIN, API_AUDIENCES
        info = self.tokens.get(token)
        if info is None:
            return None, API_AUDIENCES
        # A pod's token is the API server's.
        return token_user(info, objects), info.audiences or API_AUDIENCES


def token_user(info: TokenInfo, objects: Objects) -> UserInfo | None:
    """Who a ServiceAccount token authenticates as, or None when it is no longer valid."""
    sa = objects.get(("", "serviceaccounts"), info.namespace, info.service_account)
    if info.sa_uid:  # a TokenRequest's
        if info.expires is not None and time.time() >= info.expires:
            return None
        if sa is None or sa["metadata"]["uid"] != info.sa_uid:
            return None
        if not set(info.audiences) & set(API_AUDIENCES):
            return None
        if info.bound is not None:
            resource, name, uid = info.bound
            obj = objects.get(("", resource), info.namespace, name)
            if obj is None or obj["metadata"]["uid"] != uid:
                return None
    else:
        pod = objects.get(("", "pods"), info.namespace, info.pod_name)
        if pod is None or pod["metadata"]["uid"] != info.pod_uid:
            return None
    return UserInfo.service_account(info.namespace, info.service_account, sa["metadata"]["uid"] if sa else "")


def impersonate(user: UserInfo, headers: Sequence[tuple[str, str]], rbac: RBACSource) -> UserInfo:
    """Impersonate-User/-Group (kubectl --as, --as-group), each allowed only by the `impersonate` verb.
    `headers`: the request's (lower-case name, value) pairs, repeated names kept."""
    name = next((v for k, v in reversed(headers) if k == "impersonate-user"), "")
    groups = [v for k, v in headers if k == "impersonate-group"]
    if not name:
        if groups or any(k.startswith("impersonate-") for k, _ in headers):
            raise StatusError(500, "Internal error occurred: requested impersonation of groups or extras "
                                   "without impersonating a user")
        return user
    checks = [Attributes(verb="impersonate", resource_request=True, resource="groups", name=g) for g in groups]
    sa = name.split(":")
    if name.startswith("system:serviceaccount:") and len(sa) == 4:
        checks.insert(0, Attributes(verb="impersonate", resource_request=True, resource="serviceaccounts",
                                    namespace=sa[2], name=sa[3]))
        if not groups:
            groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa[2]}"]
    else:
        checks.insert(0, Attributes(verb="impersonate", resource_request=True, resource="users", name=name))
    if user is not ADMIN:
        for attrs in checks:
            allowed, reason = authorize(user, attrs, rbac)
            if not allowed:
                raise StatusError(403, forbidden_message(user, attrs, reason),
                                  details={"name": attrs.name, "kind": attrs.resource})
    if name != "system:anonymous" and not {"system:authenticated", "system:unauthenticated"} & set(groups):
        groups.append("system:authenticated")
    return UserInfo(name, tuple(groups))
