"""Reading input files into validated models, with one clear error per bad value: bounded, strict
reading (:mod:`twin.config.load`) and the error type (:mod:`twin.config.errors`)."""
from twin.config.errors import ConfigError, Located, short
from twin.config.load import load_model, load_yaml, named_file, named_input, read_input_text

__all__ = ["ConfigError", "Located", "short", "load_model", "load_yaml", "named_file", "named_input", "read_input_text"]
