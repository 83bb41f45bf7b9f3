"""Reading a cluster: the live probe (I/O), kubeconfigs read as kubectl reads them, cluster snapshots on disk, the
nodes and pods as the checks and the audit read them, and where an SMI command can run on a node."""
