"""Model builders, registered as data (after Optimum's model_configs)."""

from __future__ import annotations

from trtconv.zoo.registry import MODELS, ModelConfig, get_model

__all__ = ["MODELS", "ModelConfig", "get_model"]
