"""The prod stack's model and its device plugin targets: the same fixtures the validation tests use."""

from tests.validation.conftest import model, targets

__all__ = ["model", "targets"]
