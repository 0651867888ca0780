"""The cpu backend: NUMA-bound host copies and a gloo all-reduce across processes."""
