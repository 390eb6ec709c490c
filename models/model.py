"""The `Model` resource (sympozium.ai/v1alpha1): in Sympozium, a model that its controller downloads and serves
with an inference server inside the cluster (llama.cpp, vLLM, TGI).

agentrun serves no models: an Agent reaches a model through its provider and `baseURL` (README, "Model providers
and keys"). The kind exists so that Sympozium YAML that carries a Model applies unchanged with
`kubectl apply --validate=strict` and nothing of it is pruned; the schema follows Sympozium's `ModelCRDSpec` field
for field (names, types, enums, defaults, the required `source`). The bridge then says on the object itself that
it does nothing here (`not_offered_status`), so nobody waits for an endpoint that never comes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .agentrun import Condition
from .base import K8sModel
from .skillpack import Whole

MODELS = "models"

NOT_OFFERED = ("agentrun does not download or serve models: point an Agent's model.baseURL (or its provider's "
               "default endpoint) at an inference server of your own; this Model has no effect here")


class ModelSource(K8sModel):
    url: str | None = None
    filename: str = "model.gguf"
    model_id: str | None = Field(None, alias="modelID")
    sha256: str | None = None


class ModelStorage(K8sModel):
    size: str = "10Gi"
    storage_class: str | None = None


class InferenceSpec(K8sModel):
    server_type: Literal["llama-cpp", "vllm", "tgi", "custom"] = "llama-cpp"
    image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    port: int | None = None  # upstream: the server type's own (llama-cpp 8080, vllm 8000, tgi 8080)
    context_size: int = 4096
    args: list[str] | None = None
    env: list[Whole] | None = None  # core/v1 EnvVar items, every valueFrom kind: kept whole
    hugging_face_token_secret: str | None = None


class ModelResources(K8sModel):
    gpu: int = 0
    memory: str = "16Gi"
    cpu: str = "4"


class ModelPlacement(K8sModel):
    mode: Literal["auto", "manual", "dra"] = "manual"
    min_tps: int | None = Field(None, ge=1)
    min_compute_tflops: int | None = Field(None, ge=1, alias="minComputeTFLOPS")


class ModelSpec(K8sModel):
    source: ModelSource
    storage: ModelStorage | None = None
    inference: InferenceSpec | None = None
    resources: ModelResources | None = None
    node_selector: dict[str, str] | None = None
    placement: ModelPlacement | None = None
    tolerations: list[Whole] | None = None


class ModelStatus(K8sModel):
    phase: str | None = None  # Placing, Pending, Downloading, Loading, Ready or Failed (a plain string upstream)
    endpoint: str | None = None
    message: str | None = None
    placed_node: str | None = None
    placement_score: int | None = None
    placement_message: str | None = None
    conditions: list[Condition] | None = None


def not_offered_status(generation: int, since: str) -> ModelStatus:
    """What the bridge writes on every Model: Failed (Sympozium's phase for a model that will not be served), with a
    condition that says why, in the status that tools and `kubectl get models` show."""
    return ModelStatus(phase="Failed", message=NOT_OFFERED, conditions=[Condition(
        type="Ready", status="False", reason="NotOffered", message=NOT_OFFERED, last_transition_time=since,
        observed_generation=generation)])
