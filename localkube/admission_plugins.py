"""kube-apiserver's built-in admission plug-ins that a cluster's clients notice (plugin/pkg/admission/...):

- NamespaceLifecycle: nothing is created in a namespace that does not exist or is being deleted;
- ServiceAccount: a pod runs as its ServiceAccount (`default` if it names none), which must exist, and gets the
  projected token volume mounted in every container unless automounting is off;
- RuntimeClass: a pod naming a RuntimeClass that does not exist is refused;
- DefaultStorageClass: a claim that names no StorageClass gets the default one;
- StorageObjectInUseProtection: a claim gets the `kubernetes.io/pvc-protection` finalizer (the PVC controller
  removes it once no running pod uses the claim).

Why a module of their own: they are neither a kind's strategy nor the generic store, and in kube-apiserver they run
between the two (after decoding and defaulting, before `PrepareForCreate` and validation); `apiserver.py` calls
`admit_create` there. Admission webhooks are another matter (`webhooks.py`).
"""

from __future__ import annotations

from typing import Any

from .errors import StatusError, not_found
from .kinds import Objects
from .registry import ResourceType
from .util import rand_suffix

Obj = dict[str, Any]

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def namespace_lifecycle(objects: Objects, ns: str, rt: ResourceType, name: str) -> None:
    nsobj = objects.get(("", "namespaces"), "", ns)
    if nsobj is None:
        raise not_found("namespaces", ns)
    if nsobj["metadata"].get("deletionTimestamp"):
        raise StatusError(
            403,
            f'{rt.qualified} "{name}" is forbidden: unable to create new content in namespace {ns} '
            "because it is being terminated",
        )


def admit_create(rt: ResourceType, obj: Obj, objects: Objects) -> None:
    """The mutating plug-ins a new object of a built-in kind passes through, in kube-apiserver's order."""
    if rt.is_custom:
        return
    if rt.kind == "Pod":
        account = _service_account(obj, objects)
        _runtime_class(obj, objects)
        _mount_token(obj, account)
    elif rt.kind == "PersistentVolumeClaim":
        _default_storage_class(obj, objects)
        fins = obj["metadata"].setdefault("finalizers", [])
        if PVC_PROTECTION not in fins:
            fins.append(PVC_PROTECTION)


def _service_account(obj: Obj, objects: Objects) -> Obj:
    """The pod's ServiceAccount, which must exist."""
    spec = obj["spec"]
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = sa
    spec["serviceAccount"] = sa
    ns = obj["metadata"]["namespace"]
    sa_obj = objects.get(("", "serviceaccounts"), ns, sa)
    if sa_obj is None:
        raise StatusError(
            403,
            f'pods "{obj["metadata"]["name"]}" is forbidden: error looking up service account {ns}/{sa}: '
            f'serviceaccount "{sa}" not found',
        )
    return sa_obj


def _mount_token(obj: Obj, sa_obj: Obj) -> None:
    """The projected token volume, in every container, unless the pod or its ServiceAccount turns it off."""
    spec = obj["spec"]
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = sa_obj.get("automountServiceAccountToken", True)
    # A create computed again after mutating webhooks was defaulted already: the volume is not added twice.
    defaulted = any(isinstance(v, dict) and str(v.get("name", "")).startswith("kube-api-access-")
                    and v.get("projected") for v in spec.get("volumes") or [])
    if automount is not False and not defaulted:
        vol_name = "kube-api-access-" + rand_suffix()
        spec.setdefault("volumes", []).append({
            "name": vol_name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                        "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
            },
        })
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            if isinstance(c, dict) and not any(
                vm.get("mountPath") == SA_MOUNT for vm in c.get("volumeMounts") or []
            ):
                c.setdefault("volumeMounts", []).append(
                    {"name": vol_name, "readOnly": True, "mountPath": SA_MOUNT})


def _runtime_class(obj: Obj, objects: Objects) -> None:
    rc = obj["spec"].get("runtimeClassName")
    if rc and objects.get(("node.k8s.io", "runtimeclasses"), "", str(rc)) is None:
        # The RuntimeClass admission plug-in refuses the pod (kube-apiserver answers the same words).
        raise StatusError(403, f'pods "{obj["metadata"]["name"]}" is forbidden: pod rejected: RuntimeClass '
                               f'"{rc}" not found')


def _default_storage_class(obj: Obj, objects: Objects) -> None:
    spec = obj.setdefault("spec", {})
    if "storageClassName" in spec:
        return
    for sc in objects.select(("storage.k8s.io", "storageclasses")):
        if (sc["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
            spec["storageClassName"] = str(sc["metadata"]["name"])
            return
