"""Host memory bound to a NUMA node, as both backends use it."""
