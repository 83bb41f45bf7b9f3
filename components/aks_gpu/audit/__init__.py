"""``aksgpu audit``: hold any AKS GPU cluster against the GPU best-practices article, with or without a stack.

Pure: a ``ClusterSnapshot`` (and, with ``--stack``, what the stack expects) in, findings and a summary out, no I/O.
``registry`` lists every finding once (id, severity, practice, what it checks, what to do); ``inventory`` reads
the cluster (GPU nodes, pools, what pods request); ``engine`` judges it, one module per practice (``placement``,
``node_images``, ``isolation``, ``utilisation``, ``health``), into ``report``'s results; ``html`` renders the
one-page report.
"""
