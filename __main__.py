"""The aks-gpu Pulumi program: load and validate the stack config, build the platform, export outputs."""

import pulumi

from components.args import spec_of
from components.platform import GpuPlatform, stack_exports
from components.program import load_from_pulumi, stack_secrets

validated = load_from_pulumi()
platform = GpuPlatform(pulumi.get_stack(), spec_of(validated.config))
secrets = stack_secrets(validated)
for output_name, value in stack_exports(platform).items():
    # An export that holds secret config (a cluster name set with --secret) stays a secret output.
    pulumi.export(output_name, secrets.protect(value))
