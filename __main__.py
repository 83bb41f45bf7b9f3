"""The aks-gpu Pulumi program: validate and resolve the stack config once, build the platform from it, export."""

import pulumi

from aks_gpu.naming import PLATFORM_COMPONENT_NAME
from aks_gpu.platform import GpuPlatform, stack_exports
from aks_gpu.program import check_subscription, load_from_pulumi, stack_secrets

validated = load_from_pulumi()
# A fresh subscription stops here with one message, before the first resource (docs/deploying.md).
check_subscription(validated)
platform = GpuPlatform.of(
    PLATFORM_COMPONENT_NAME,
    validated.model,
    # The root's name no longer follows the stack's (a `pulumi stack rename` would have replaced everything). Stacks
    # deployed before are found under their old name, the stack's; every child is named after the root, so the engine
    # carries them all over with it (it renames a child's name prefix with its parent's alias: inheritedChildAlias).
    pulumi.ResourceOptions(aliases=[pulumi.Alias(name=pulumi.get_stack())]),
)
secrets = stack_secrets(validated)
for output_name, value in stack_exports(platform).items():
    # An export that holds secret config (a cluster name set with --secret) stays a secret output.
    pulumi.export(output_name, secrets.protect(value))
