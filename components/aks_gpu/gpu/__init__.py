"""Reading GPUs: the SMI parsers (smi/), GPU health from SMI output, kernel logs and node conditions, NVIDIA's Xid
catalog and driver versions. Pure: text and dicts in, frozen reports out; nothing here reads a cluster."""
