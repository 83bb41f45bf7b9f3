"""Continuous validation: GPU metrics exporters on every GPU pool, scraped by the engine the cluster already runs
(Azure Monitor managed Prometheus, or a Prometheus Operator), and the health and waste alert rules as code.

Pure builders (``exporter_pins``, ``exporters``, ``rules``, ``azure``) take the resolved model and return data;
``component.GpuMonitoring`` registers them; ``aksgpu rules`` prints the rules. This package imports no Pulumi
outside ``component``.
"""
