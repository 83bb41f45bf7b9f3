"""``aksgpu local``: a stack's in-cluster layer on a local Kubernetes control plane (kwokctl, simulated nodes) with the
real Pulumi CLI. ``nodes``, ``control_plane`` and ``crds`` are pure; ``engine`` runs the processes."""
