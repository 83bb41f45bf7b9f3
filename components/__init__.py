"""aks-gpu: Microsoft's GPU best practices for AKS as Pulumi components.

The folders read like the feature list: ``config`` (stack config and its rules), ``catalog`` (GPU VM facts),
``model`` (what each pool exposes), ``azure`` (cluster and GPU pools), ``kube`` (what runs in the cluster),
``validation`` (post-deploy checks), ``platform`` (all of it composed), ``plan`` and ``cli`` (``aksgpu``).
"""

__version__ = "0.1.0"
