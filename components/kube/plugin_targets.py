"""Moved to ``components.resolved.targets`` (where a pool's SMI runs belongs to the model). This name stays only until
the branches written against it have merged; import from there."""

from components.resolved.targets import PluginTarget as PluginTarget
from components.resolved.targets import plugin_targets as plugin_targets
