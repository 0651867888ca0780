"""Sinks: Prometheus collector, HTTP API, node labels, ResourceSlices, NFD feature file."""
