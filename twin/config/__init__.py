"""Reading YAML files into validated models, with one clear error per bad value."""
from twin.config.errors import ConfigError, Located, load_model

__all__ = ["ConfigError", "Located", "load_model"]
