"""The aks-gpu Pulumi program: load and validate the stack config, build the platform, export outputs."""

import pulumi

from components.args import spec_of
from components.config.pulumi_source import load_from_pulumi
from components.platform import GpuPlatform, stack_exports

validated = load_from_pulumi()
platform = GpuPlatform(pulumi.get_stack(), spec_of(validated.config))
for output_name, value in stack_exports(platform).items():
    pulumi.export(output_name, value)
