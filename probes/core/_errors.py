"""Errors a probe raises on purpose. A backend raises :class:`Waived` when a test cannot run here
(it is reported, never timed) and :class:`ProbeError` when it tried and failed."""

from __future__ import annotations

from topology import TopolinkError


class ProbeError(TopolinkError):
    """A probe could not be planned or run."""


class Waived(ProbeError):
    """The test cannot run here, for a stated reason: not a failure."""
