"""What an NCCL item's record says about how it was timed: the mode the plan asked for, the nccl-tests
command line it follows, its windows and warm-up, and one description per timing mode it used (each cell
names its mode; the runner gives it the description of that mode). The differences from nccl-tests that
remain are named here, not hidden: the launches come from Python, and nccl-tests' warm-up pass over every
size before the sweep is not run."""

from __future__ import annotations

from ..core import GRAPH, Pairs


def timing_conditions(*, asked: str, launches: int, windows: int, warmup: int, refused: str,
                      command: str) -> Pairs:
    stream = ("the host's wall clock after every GPU's stream is synchronised, around the operations issued "
              "one by one from Python; divided by iterations (nccl-tests -G 0; each grouped call costs Python's "
              "few microseconds per GPU more than nccl-tests' C loop, which reads low at small sizes"
              + (f"; graph capture refused: {refused}" if refused else "") + ")")
    graph = (f"the timed loop captured and instantiated afresh for every window as one CUDA graph per GPU; the "
             f"host's wall clock after every GPU's stream is synchronised, around {launches} launch(es) of every "
             f"GPU's graph issued from Python; divided by iterations x launches (nccl-tests -G {launches})")
    texts: Pairs = (("timing_graph", graph),) if asked == GRAPH else ()
    texts += (("timing_stream", stream),) if asked != GRAPH or refused else ()
    return (
        ("timing_asked", asked),
        *((("nccl_tests", command),) if command else ()),
        ("windows", "one window per cell, as nccl-tests" if windows == 1 else
         f"the median of {windows} windows per cell (nccl-tests times one)"),
        ("warmup", f"{warmup} untimed operation(s) before each cell's window (nccl-tests' synchronising call); "
                   "nccl-tests' -w pass over every size before the sweep is not run"),
        *texts,
    )
