"""Where a process finds the cluster and how fast it may call it: part of each process's settings (worker, bridge,
API: AGENTRUN_KUBE__*), and the one place a `kubernetes` client is built from them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from kubernetes.client import ApiClient


class KubeSettings(BaseModel):
    # Empty: in-cluster config when running in a pod, else the default kubeconfig (KUBECONFIG).
    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = 100

    def api_client(self, *, user_agent: str = "") -> ApiClient:
        """A client whose User-Agent names the process, so the API server's audit log tells them apart."""
        from kubernetes import client, config

        if self.kubeconfig:
            api = config.new_client_from_config(self.kubeconfig)
        else:
            try:
                config.load_incluster_config()
                api = client.ApiClient()
            except config.ConfigException:
                api = config.new_client_from_config()
        if user_agent:
            api.user_agent = user_agent
        return api


__all__ = ["KubeSettings"]
