"""``aksgpu advise``: right-sizing GPU workloads from the exporters' history. Pure but for ``advise.sources`` (reading a
folder of query_range responses, the live Prometheus client): series (query_range JSON) -> usage per workload ->
recommendations and pool changes -> the report (JSON rows)."""
