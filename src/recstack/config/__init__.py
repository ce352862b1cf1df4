"""Validated configuration: YAML loading with errors that name the field."""

from recstack.config.loading import load_yaml_file, parse_config, validation_message

__all__ = ["load_yaml_file", "parse_config", "validation_message"]
