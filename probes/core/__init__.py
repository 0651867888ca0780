"""The words every room of ``probes`` shares: records, errors, specs, profiles, statistics and the backend seam."""
