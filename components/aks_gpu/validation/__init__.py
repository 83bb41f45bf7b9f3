"""A stack's validation: the checks of every GPU pool's promises over a cluster snapshot, their registry and report,
the post-deploy hook inside `pulumi up`, and the smoke Jobs (GpuValidation)."""
