"""Bandwidth and latency probes: plan (pure) -> backend (cuda | cpu) -> statistics -> measurements."""
