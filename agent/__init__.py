"""Discovery (NVML, sysfs) into a :class:`topology.Snapshot`, the node daemon loop and the CLI."""
