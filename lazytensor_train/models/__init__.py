"""Models built from lazytensor.nn."""
from .gpt import CONFIGS, GPT, GPTConfig

__all__ = ["GPT", "GPTConfig", "CONFIGS"]
