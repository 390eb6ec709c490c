"""Per-kind strategies: what each kind adds to the generic store (defaults, validation, the status it starts with,
graceful deletion, printer columns), one module per kind or family, as kube-apiserver keeps them in
`pkg/registry/<group>/<kind>/strategy.go`. `strategy_for` is the one lookup the API server and the table printer
use; a kind not listed has the base `Strategy` (nothing of its own).
"""

from __future__ import annotations

from ..registry import ResourceType
from .base import Cause, Objects, Strategy
from .cluster import (
    EventStrategy,
    LeaseStrategy,
    NodeStrategy,
    RuntimeClassStrategy,
    ServiceAccountStrategy,
    StorageClassStrategy,
)
from .configdata import ConfigMapStrategy, SecretStrategy
from .crds import CustomResourceDefinitionStrategy
from .custom import CustomResourceStrategy
from .jobs import JobStrategy
from .namespaces import NamespaceStrategy
from .pods import PodStrategy
from .pvcs import PersistentVolumeClaimStrategy
from .rbac import BindingStrategy, RoleStrategy
from .services import EndpointsStrategy, ServiceStrategy
from .webhookconfigs import WebhookConfigurationStrategy
from .workloads import WorkloadStrategy

__all__ = ["Cause", "Objects", "Strategy", "strategy_for"]

DEFAULT = Strategy()
CUSTOM = CustomResourceStrategy()

# Built-in kinds by name (localkube serves each built-in kind in one group).
BUILTIN: dict[str, Strategy] = {
    "Pod": PodStrategy(),
    "Job": JobStrategy(),
    "PersistentVolumeClaim": PersistentVolumeClaimStrategy(),
    "ConfigMap": ConfigMapStrategy(),
    "Secret": SecretStrategy(),
    "Namespace": NamespaceStrategy(),
    "CustomResourceDefinition": CustomResourceDefinitionStrategy(),
    "Role": RoleStrategy(),
    "ClusterRole": RoleStrategy(),
    "RoleBinding": BindingStrategy(),
    "ClusterRoleBinding": BindingStrategy(),
    "RuntimeClass": RuntimeClassStrategy(),
    "Node": NodeStrategy(),
    "Event": EventStrategy(),
    "ServiceAccount": ServiceAccountStrategy(),
    "Lease": LeaseStrategy(),
    "StorageClass": StorageClassStrategy(),
    "Service": ServiceStrategy(),
    "Endpoints": EndpointsStrategy(),
    "Deployment": WorkloadStrategy(),
    "ReplicaSet": WorkloadStrategy(),
    "ValidatingWebhookConfiguration": WebhookConfigurationStrategy(),
    "MutatingWebhookConfiguration": WebhookConfigurationStrategy(),
}


def strategy_for(rt: ResourceType) -> Strategy:
    """The strategy of a resource type: a custom resource's is its schema's, whatever its kind is called."""
    if rt.is_custom:
        return CUSTOM
    return BUILTIN.get(rt.kind, DEFAULT)
