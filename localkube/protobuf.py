"""The protobuf request bodies kubectl sends, decoded into the JSON form localkube's API layer works on.

kubectl's generators (`kubectl create namespace|configmap|secret|serviceaccount|role|rolebinding|job`,
`kubectl auth can-i`) send built-in objects as application/vnd.kubernetes.protobuf, and client-go does not fall
back to JSON on a 415. This is kube-apiserver's protobuf serializer (k8s.io/apimachinery/pkg/runtime/serializer/
protobuf) reduced to decoding the kinds those commands send. Field numbers are those of k8s.io/api's
generated.proto. gogo-protobuf writes every non-pointer field, zero or not, so zero scalars are dropped as
`omitempty` would drop them; pointer fields ("*" types) keep an explicit zero. A non-empty field this table does
not know is refused rather than silently lost.

Why a module of its own: it is a codec, not HTTP handling; `server.py` only asks it for the JSON form of a body.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]

PROTOBUF = "application/vnd.kubernetes.protobuf"
_PB_MAGIC = b"k8s\x00"
_META = ("metadata", "ObjectMeta")
_NAME = ("name", "s")
_PB_TYPES: dict[str, dict[int, tuple[str, str]]] = {
    "ObjectMeta": {1: _NAME, 2: ("generateName", "s"), 3: ("namespace", "s"), 4: ("selfLink", "s"),
                   5: ("uid", "s"), 6: ("resourceVersion", "s"), 7: ("generation", "i"),
                   8: ("creationTimestamp", "Time"), 9: ("deletionTimestamp", "Time"),
                   10: ("deletionGracePeriodSeconds", "*i"), 11: ("labels", "{s"), 12: ("annotations", "{s"),
                   13: ("ownerReferences", "[OwnerReference"), 14: ("finalizers", "[s")},
    "OwnerReference": {1: ("kind", "s"), 3: _NAME, 4: ("uid", "s"), 5: ("apiVersion", "s"),
                       6: ("controller", "*b"), 7: ("blockOwnerDeletion", "*b")},
    "LabelSelector": {1: ("matchLabels", "{s"), 2: ("matchExpressions", "[LabelSelectorRequirement")},
    "LabelSelectorRequirement": {1: ("key", "s"), 2: ("operator", "s"), 3: ("values", "[s")},
    "ObjectReference": {1: ("kind", "s"), 2: ("namespace", "s"), 3: _NAME, 4: ("uid", "s"),
                        5: ("apiVersion", "s"), 6: ("resourceVersion", "s"), 7: ("fieldPath", "s")},
    "LocalObjectReference": {1: _NAME},
    "Namespace": {1: _META, 2: ("spec", "NamespaceSpec"), 3: ("status", "NamespaceStatus")},
    "NamespaceSpec": {1: ("finalizers", "[s")},
    "NamespaceStatus": {1: ("phase", "s")},
    "ConfigMap": {1: _META, 2: ("data", "{s"), 3: ("binaryData", "{y"), 4: ("immutable", "*b")},
    "Secret": {1: _META, 2: ("data", "{y"), 3: ("type", "s"), 4: ("stringData", "{s"), 5: ("immutable", "*b")},
    "ServiceAccount": {1: _META, 2: ("secrets", "[ObjectReference"),
                       3: ("imagePullSecrets", "[LocalObjectReference"),
                       4: ("automountServiceAccountToken", "*b")},
    "Role": {1: _META, 2: ("rules", "[PolicyRule")},
    "ClusterRole": {1: _META, 2: ("rules", "[PolicyRule"), 3: ("aggregationRule", "AggregationRule")},
    "AggregationRule": {1: ("clusterRoleSelectors", "[LabelSelector")},
    "PolicyRule": {1: ("verbs", "[s"), 2: ("apiGroups", "[s"), 3: ("resources", "[s"), 4: ("resourceNames", "[s"),
                   5: ("nonResourceURLs", "[s")},
    "RoleBinding": {1: _META, 2: ("subjects", "[Subject"), 3: ("roleRef", "RoleRef")},
    "ClusterRoleBinding": {1: _META, 2: ("subjects", "[Subject"), 3: ("roleRef", "RoleRef")},
    "Subject": {1: ("kind", "s"), 2: ("apiGroup", "s"), 3: _NAME, 4: ("namespace", "s")},
    "RoleRef": {1: ("apiGroup", "s"), 2: ("kind", "s"), 3: _NAME},
    "SelfSubjectAccessReview": {1: _META, 2: ("spec", "SelfSubjectAccessReviewSpec"),
                                3: ("status", "SubjectAccessReviewStatus")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                    2: ("nonResourceAttributes", "NonResourceAttributes")},
    "ResourceAttributes": {1: ("namespace", "s"), 2: ("verb", "s"), 3: ("group", "s"), 4: ("version", "s"),
                           5: ("resource", "s"), 6: ("subresource", "s"), 7: _NAME},
    "NonResourceAttributes": {1: ("path", "s"), 2: ("verb", "s")},
    "SubjectAccessReviewStatus": {1: ("allowed", "b"), 2: ("reason", "s"), 3: ("evaluationError", "s"),
                                  4: ("denied", "b")},
    "TokenRequest": {1: _META, 2: ("spec", "TokenRequestSpec"), 3: ("status", "TokenRequestStatus")},
    "TokenRequestSpec": {1: ("audiences", "[s"), 3: ("boundObjectRef", "BoundObjectReference"),
                         4: ("expirationSeconds", "*i")},
    "TokenRequestStatus": {1: ("token", "s"), 2: ("expirationTimestamp", "Time")},
    "BoundObjectReference": {1: ("kind", "s"), 2: ("apiVersion", "s"), 3: _NAME, 4: ("uid", "s")},
    "Job": {1: _META, 2: ("spec", "JobSpec"), 3: ("status", "JobStatus")},
    "JobSpec": {1: ("parallelism", "*i"), 2: ("completions", "*i"), 3: ("activeDeadlineSeconds", "*i"),
                4: ("selector", "LabelSelector"), 5: ("manualSelector", "*b"), 6: ("template", "PodTemplateSpec"),
                7: ("backoffLimit", "*i"), 8: ("ttlSecondsAfterFinished", "*i"), 9: ("completionMode", "*s"),
                10: ("suspend", "*b")},
    "JobStatus": {4: ("active", "i"), 5: ("succeeded", "i"), 6: ("failed", "i"), 7: ("completedIndexes", "s")},
    "PodTemplateSpec": {1: _META, 2: ("spec", "PodSpec")},
    "PodSpec": {2: ("containers", "[Container"), 3: ("restartPolicy", "s"),
                4: ("terminationGracePeriodSeconds", "*i"), 5: ("activeDeadlineSeconds", "*i"),
                6: ("dnsPolicy", "s"), 7: ("nodeSelector", "{s"), 8: ("serviceAccountName", "s"),
                9: ("serviceAccount", "s"), 10: ("nodeName", "s"), 11: ("hostNetwork", "b"), 12: ("hostPID", "b"),
                13: ("hostIPC", "b"), 15: ("imagePullSecrets", "[LocalObjectReference"), 16: ("hostname", "s"),
                17: ("subdomain", "s"), 19: ("schedulerName", "s"), 20: ("initContainers", "[Container"),
                21: ("automountServiceAccountToken", "*b"), 24: ("priorityClassName", "s")},
    "Container": {1: _NAME, 2: ("image", "s"), 3: ("command", "[s"), 4: ("args", "[s"), 5: ("workingDir", "s"),
                  6: ("ports", "[ContainerPort"), 7: ("env", "[EnvVar"), 8: ("resources", "ResourceRequirements"),
                  9: ("volumeMounts", "[VolumeMount"), 13: ("terminationMessagePath", "s"),
                  14: ("imagePullPolicy", "s"), 16: ("stdin", "b"), 17: ("stdinOnce", "b"), 18: ("tty", "b"),
                  20: ("terminationMessagePolicy", "s")},
    "ContainerPort": {1: _NAME, 2: ("hostPort", "i"), 3: ("containerPort", "i"), 4: ("protocol", "s"),
                      5: ("hostIP", "s")},
    "EnvVar": {1: _NAME, 2: ("value", "s")},
    "ResourceRequirements": {1: ("limits", "{q"), 2: ("requests", "{q")},
    "VolumeMount": {1: _NAME, 2: ("readOnly", "b"), 3: ("mountPath", "s"), 4: ("subPath", "s"),
                    5: ("mountPropagation", "*s"), 6: ("subPathExpr", "s")},
}


class ProtobufError(ValueError):
    """A body that is not the protobuf of a kind this codec knows."""


def _pb_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, varint value or length-delimited bytes) of one message."""
    i, n = 0, len(data)

    def varint() -> int:
        nonlocal i
        shift = result = 0
        while True:
            if i >= n or shift > 63:
                raise ProtobufError("truncated varint")
            b = data[i]
            i += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while i < n:
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            yield num, wire, varint()
        elif wire == 2:
            size = varint()
            if i + size > n:
                raise ProtobufError("truncated field")
            yield num, wire, data[i:i + size]
            i += size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            yield num, wire, data[i:i + size]
            i += size
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _pb_value(typ: str, raw: int | bytes) -> Any:
    """One field's value: "s" string, "y" bytes (base64 in JSON), "b" bool, "i" int, or an embedded message."""
    if typ in ("b", "i"):
        if not isinstance(raw, int):
            raise ProtobufError("expected a varint field")
        return bool(raw) if typ == "b" else raw - (1 << 64) if raw >= 1 << 63 else raw
    if not isinstance(raw, bytes):
        raise ProtobufError(f"expected a length-delimited {typ} field")
    if typ == "s":
        return raw.decode()
    if typ == "y":
        return base64.b64encode(raw).decode()
    fields = {num: v for num, _, v in _pb_fields(raw)}
    if typ == "Time":  # metav1.Time: seconds and nanos; JSON carries whole seconds, and null for zero
        seconds = fields.get(1, 0)
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(seconds))) if seconds else None
    if typ == "Quantity":  # resource.Quantity: its canonical string
        text = fields.get(1, b"")
        return text.decode() if isinstance(text, bytes) else ""
    return _pb_message(typ, raw)


def _pb_message(name: str, data: bytes) -> Obj:
    schema = _PB_TYPES[name]
    out: Obj = {}
    for num, _, raw in _pb_fields(data):
        field_def = schema.get(num)
        if field_def is None:
            if raw in (0, b""):
                continue  # a zero value the table does not name: nothing is lost
            raise ProtobufError(f"field {num} of {name} is not supported in protobuf by localkube; send JSON")
        key, typ = field_def
        if typ.startswith("["):
            out.setdefault(key, []).append(_pb_value(typ[1:], raw))
        elif typ.startswith("{"):  # a map: repeated entries of key (1) and value (2)
            if not isinstance(raw, bytes):
                raise ProtobufError(f"malformed map entry in {key}")
            entry = {n: v for n, _, v in _pb_fields(raw)}
            k, v = entry.get(1, b""), entry.get(2, b"")
            if not isinstance(k, bytes) or not isinstance(v, bytes):
                raise ProtobufError(f"malformed map entry in {key}")
            out.setdefault(key, {})[k.decode()] = _pb_value({"{q": "Quantity"}.get(typ, typ[1:]), v)
        elif typ.startswith("*"):
            out[key] = _pb_value(typ[1:], raw)
        else:
            value = _pb_value(typ, raw)
            # Scalars are dropped at their zero value (0 also matches False); embedded structs stay, even
            # empty, as they do in the JSON a client would have sent ("resources": {}).
            if value is None or (not isinstance(value, dict) and value in ("", 0)):
                out.pop(key, None)
            else:
                out[key] = value
    return out


def decode_protobuf(data: bytes, kind: str) -> Obj | None:
    """The JSON form of a `k8s\\x00`-framed runtime.Unknown carrying a built-in object of `kind`.

    None when this server cannot decode that kind from protobuf (or the body holds another kind).
    """
    if not data.startswith(_PB_MAGIC):
        raise ProtobufError("the protobuf body does not start with the k8s magic prefix")
    envelope = {num: v for num, _, v in _pb_fields(data[len(_PB_MAGIC):])}
    type_meta, raw = envelope.get(1, b""), envelope.get(2, b"")
    if not isinstance(type_meta, bytes) or not isinstance(raw, bytes):
        raise ProtobufError("malformed runtime.Unknown envelope")
    tm = {num: v.decode() for num, _, v in _pb_fields(type_meta) if isinstance(v, bytes)}
    if (tm.get(2) or kind) != kind or kind not in _PB_TYPES:
        return None
    return {"apiVersion": tm.get(1, ""), "kind": kind, **_pb_message(kind, raw)}
