"""Azure resources: the AKS cluster (created or adopted), its maintenance windows and kubeconfig login mode (pure
builders), and the ``GpuCluster`` and ``GpuNodePool`` components."""
