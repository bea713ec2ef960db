"""Reading YAML files into validated models, with one clear error per bad value."""
from twin.config.errors import ConfigError, load_model

__all__ = ["ConfigError", "load_model"]
