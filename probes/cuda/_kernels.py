"""The kernels the cuda backend compiles with NVRTC, and the chain the pointer chase follows, built and
checked without a GPU: the latch that holds every stream until the host releases it (nvbandwidth's spin
kernel, with its timeout) and the chase where every load depends on the one before.
"""

from __future__ import annotations

from typing import Any

from ..core import ProbeError

WORD = 8  # one pointer


def chain_next(index: int, words: int, stride_words: int) -> int:
    """Word ``index`` of the chain points at word ``index + stride`` (wrapping), as nvbandwidth builds it."""
    return (index + stride_words) % words


def chain_end(hops: int, words: int, stride_words: int) -> int:
    """The word a chase of ``hops`` loads from word 0 ends on."""
    return (hops * stride_words) % words


def chain_words(base: int, size: int, stride: int) -> list[int]:
    """The chain's content: word i holds the address of word i+stride (``base`` is where it will live)."""
    words, step = size // WORD, stride // WORD
    if words < 1 or step < 1:
        raise ProbeError(f"a {size}-byte chain with a {stride}-byte stride has no hops")
    return [base + chain_next(i, words, step) * WORD for i in range(words)]


def per_launch(accesses: int, launches: int) -> int:
    """nvbandwidth runs one launch per SM, each chasing accesses / SMs hops; latency = sum(t) / accesses."""
    return max(1, accesses // max(1, launches))


KERNELS = r"""
extern "C" __global__ void topolink_latch(unsigned long long flag_addr, unsigned long long timeout_clocks)
{
    // Holds the stream until the host writes a non-zero flag, or the timeout passes (never forever).
    const volatile int* flag = (const volatile int*)flag_addr;
    const long long end = clock64() + (long long)timeout_clocks;
    while (*flag == 0) {
        if (clock64() > end) {
            break;
        }
    }
}

extern "C" __global__ void topolink_chase(unsigned long long start, unsigned long long hops,
                                          unsigned int target_block, unsigned long long sink_addr)
{
    // One thread of one block follows the chain: every load depends on the one before.
    if (blockIdx.x != target_block || threadIdx.x != 0) {
        return;
    }
    const unsigned long long* p = (const unsigned long long*)start;
    for (unsigned long long i = 0; i < hops; ++i) {
        p = (const unsigned long long*)(*p);
    }
    *(unsigned long long*)sink_addr = (unsigned long long)p;
}
"""
KERNEL_NAMES = ("topolink_latch", "topolink_chase")
LATCH_TIMEOUT_MS = 10_000  # nvbandwidth's DEFAULT_SPIN_KERNEL_TIMEOUT_MS


def compile_kernels(cp: Any) -> Any:
    module = cp.RawModule(code=KERNELS)
    for name in KERNEL_NAMES:
        module.get_function(name)  # compiles now: an NVRTC failure shows here, not in a timed sample
    return module
