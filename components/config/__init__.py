"""Stack config: models, loading from a stack file or Pulumi's runtime config, and the rules across keys."""

from components.config.loader import (
    PROJECT,
    ValidatedConfig,
    load_stack_file,
    stack_file_path,
    validate_config,
)
from components.config.models import GpuPoolConfig, StackConfig, WorkloadConfig
from components.config.problems import ConfigError, Problem

__all__ = [
    "PROJECT",
    "ConfigError",
    "GpuPoolConfig",
    "Problem",
    "StackConfig",
    "ValidatedConfig",
    "WorkloadConfig",
    "load_stack_file",
    "stack_file_path",
    "validate_config",
]
