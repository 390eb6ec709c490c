"""The kubelet: runs each pod's containers as local processes, as the real kubelet runs them in a container runtime.

- `kubelet.py`: the node's one kubelet: binds pods to the node, runs their containers in order, reports status,
  stops them on deletion or deadline;
- `runtime.py`: the pod runtime (bubblewrap sandboxes, PID namespaces, signals) and `PodRuntime`, the interface the
  prober uses;
- `env.py`: a container's environment and command line;
- `volumes.py`: a pod's volumes as host directories;
- `logs.py`: container logs in the CRI format, served to `/log`;
- `prober.py`: startup, readiness and liveness probes.

Images are not pulled: an image is only needed when a container has no `command`, and is then resolved through
the image map. `KUBECONFIG` in the container points at a kubeconfig carrying the pod's own ServiceAccount token,
so `kubectl` and the `kubernetes` client inside act with exactly the pod's RBAC.
"""

from __future__ import annotations

from .env import DEFAULT_IMAGE_MAP, expand, image_base
from .kubelet import Kubelet
from .runtime import NODE_NAME

__all__ = ["DEFAULT_IMAGE_MAP", "NODE_NAME", "Kubelet", "expand", "image_base"]
