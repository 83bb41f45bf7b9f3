"""Validation of GPU node pools: SMI output parsers, checks over a cluster snapshot, the live probe."""
