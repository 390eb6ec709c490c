"""The fields each kind can be selected by: kube-apiserver's per-kind selectable fields (the registry strategies'
`GetAttrs`) and field-label conversion functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# --------------------------------------------------------------------------------------------------
# Selectable fields per kind (kube-apiserver registry strategies + field-label conversion functions)
# --------------------------------------------------------------------------------------------------

_META_NAME = "metadata.name"
_META_NAMESPACE = "metadata.namespace"
_META_FIELDS = (_META_NAME, _META_NAMESPACE)

# Kinds with their own field-label conversion function, mapped to the fields it accepts.
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (
        *_META_FIELDS,
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        # Accepted by the conversion function but absent from the pod field set, so it only ever
        # compares against "" (as upstream).
        "status.podIPs",
        "status.nominatedNodeName",
    ),
    "Event": (
        *_META_FIELDS,
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "Secret": (*_META_FIELDS, "type"),
    "Namespace": (_META_NAME, "status.phase"),
    "Node": (_META_NAME, "spec.unschedulable"),
    "Service": (*_META_FIELDS, "spec.clusterIP", "spec.type"),
    "ReplicationController": (*_META_FIELDS, "status.replicas"),
    "Job": (*_META_FIELDS, "status.successful"),
    "CertificateSigningRequest": (_META_NAME, "spec.signerName"),
    "ClusterTrustBundle": (_META_NAME, "spec.signerName"),
}


def supported_fields(kind: str) -> frozenset[str]:
    """The field labels kube-apiserver accepts in a ``fieldSelector`` for ``kind``.

    Kinds without their own conversion function (ConfigMap, Deployment, custom resources, ...) accept
    ``metadata.name`` and ``metadata.namespace``. Note the upstream quirks kept here: Namespace, Node,
    CertificateSigningRequest and ClusterTrustBundle reject ``metadata.namespace``, and Pod accepts
    ``status.podIPs`` although its value always reads as ``""``.
    """
    return frozenset(_KIND_FIELDS.get(kind, _META_FIELDS))


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _sub(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _int_str(value: Any) -> str:
    try:
        return str(int(value or 0))
    except (TypeError, ValueError):
        return "0"


def object_fields(obj: Mapping[str, Any], kind: str) -> dict[str, str]:
    """The field set kube-apiserver matches field selectors against (``GetAttrs`` of the registry).

    Always contains ``metadata.name`` and ``metadata.namespace`` (``""`` for cluster-scoped objects).
    Values the real server would have filled in through API defaulting on create (Pod
    ``restartPolicy``/``schedulerName``/``phase``, Secret ``type``, Namespace ``phase``, Service
    ``type``) are reported with those defaults when the stored object lacks them.
    """
    meta = _sub(obj, "metadata")
    spec = _sub(obj, "spec")
    status = _sub(obj, "status")
    fields: dict[str, str] = {
        _META_NAME: _str(meta.get("name")),
        _META_NAMESPACE: _str(meta.get("namespace")),
    }
    if kind == "Pod":
        pod_ips = status.get("podIPs")
        pod_ip = _str(status.get("podIP"))
        if not pod_ip and isinstance(pod_ips, list) and pod_ips and isinstance(pod_ips[0], Mapping):
            pod_ip = _str(pod_ips[0].get("ip"))
        fields.update(
            {
                "spec.nodeName": _str(spec.get("nodeName")),
                "spec.restartPolicy": _str(spec.get("restartPolicy")) or "Always",
                "spec.schedulerName": _str(spec.get("schedulerName")) or "default-scheduler",
                "spec.serviceAccountName": _str(spec.get("serviceAccountName") or spec.get("serviceAccount")),
                "spec.hostNetwork": "true" if spec.get("hostNetwork") is True else "false",
                "status.phase": _str(status.get("phase")) or "Pending",
                "status.podIP": pod_ip,
                "status.nominatedNodeName": _str(status.get("nominatedNodeName")),
            }
        )
    elif kind == "Event":
        involved = _sub(obj, "involvedObject")
        reporting = _str(obj.get("reportingComponent"))
        fields.update(
            {
                "involvedObject.kind": _str(involved.get("kind")),
                "involvedObject.namespace": _str(involved.get("namespace")),
                "involvedObject.name": _str(involved.get("name")),
                "involvedObject.uid": _str(involved.get("uid")),
                "involvedObject.apiVersion": _str(involved.get("apiVersion")),
                "involvedObject.resourceVersion": _str(involved.get("resourceVersion")),
                "involvedObject.fieldPath": _str(involved.get("fieldPath")),
                "reason": _str(obj.get("reason")),
                "reportingComponent": reporting,
                "source": _str(_sub(obj, "source").get("component")) or reporting,
                "type": _str(obj.get("type")),
            }
        )
    elif kind == "Secret":
        fields["type"] = _str(obj.get("type")) or "Opaque"
    elif kind == "Namespace":
        fields["status.phase"] = _str(status.get("phase")) or "Active"
    elif kind == "Node":
        fields["spec.unschedulable"] = "true" if spec.get("unschedulable") is True else "false"
    elif kind == "Service":
        fields["spec.clusterIP"] = _str(spec.get("clusterIP"))
        fields["spec.type"] = _str(spec.get("type")) or "ClusterIP"
    elif kind == "ReplicationController":
        fields["status.replicas"] = _int_str(status.get("replicas"))
    elif kind == "Job":
        fields["status.successful"] = _int_str(status.get("succeeded"))
    elif kind in ("CertificateSigningRequest", "ClusterTrustBundle"):
        fields["spec.signerName"] = _str(spec.get("signerName"))
    return fields
