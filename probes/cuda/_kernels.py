"""The kernels the cuda backend compiles with NVRTC, and the arithmetic around them, built and checked
without a GPU: the latch that holds every stream until the host releases it (nvbandwidth's spin kernel,
with its timeout), the chase where every load depends on the one before, the SM copies as nvbandwidth's
``copyKernel`` picks them (from 64 MiB up its striding kernel: a block of 512 threads per SM, 16-byte
words, each thread striding over the whole grid with twelve loads in flight; below 64 MiB its simple
kernel: one thread per 16-byte word, blocks of up to 1024, each thread copying its word through L2 once per
loop), nvbandwidth's split-warp copy (one thread per 16-byte word, warps alternating
direction between two buffers, with the clear that readies both buffers for it) and the check that counts
the words of a buffer that differ from the pattern.
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


SM_THREADS_PER_BLOCK = 512  # nvbandwidth's numThreadPerBlock
SM_WORD = 16  # uint4
SM_SMALL_BUFFER = 64 * 1024 * 1024  # nvbandwidth's smallBufferThreshold


def sm_small(size: int) -> bool:
    """Whether nvbandwidth copies ``size`` bytes with its simple kernel (one thread per word) rather than
    its striding one."""
    return size < SM_SMALL_BUFFER


def sm_copy_bytes(size: int, sms: int) -> int:
    """Bytes one SM copy moves: from 64 MiB up, truncated to a whole number of words per thread (every
    thread of the grid the same), as nvbandwidth counts them; below, the words of the simple kernel's grid
    (one thread per word in whole blocks of up to 1024: every whole word when the size is a multiple of
    16 KiB; nvbandwidth counts every whole word even where its grid leaves the last partial block out)."""
    if sm_small(size):
        blocks, block = split_geometry(size)
        return blocks * block * SM_WORD
    threads = sms * SM_THREADS_PER_BLOCK
    return (size // SM_WORD // threads) * threads * SM_WORD


WARP = 32
SPLIT_BLOCK = 1024  # nvbandwidth's split-warp block: at most 1024 threads, one 16-byte word each


def split_geometry(size: int) -> tuple[int, int]:
    """(blocks, threads per block) of the split-warp copy of ``size`` bytes: one thread per whole word."""
    words = size // SM_WORD
    block = min(words, SPLIT_BLOCK)
    return (words // block if block else 0), block


def split_copy_bytes(size: int) -> int:
    """Bytes the split-warp copy moves, both directions together (the grid's words; for sizes that are a
    multiple of 16 KiB, nvbandwidth's count of every whole word). Half go each way."""
    blocks, block = split_geometry(size)
    return blocks * block * SM_WORD


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

extern "C" __global__ void topolink_copy_sm(unsigned long long dst_addr, unsigned long long src_addr,
                                            unsigned long long words, unsigned long long loops)
{
    // Copies `words` 16-byte words `loops` times. Thread t takes words t, t+T, t+2T, ... (T: the grid's
    // threads), twelve loads issued before their stores, so that each thread keeps twelve in flight.
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4* src = (const uint4*)src_addr;
    uint4* dst = (uint4*)dst_addr;
    for (unsigned long long loop = 0; loop < loops; ++loop) {
        unsigned long long i = first;
        for (; i + 11 * threads < words; i += 12 * threads) {
            uint4 w[12];
#pragma unroll
            for (int k = 0; k < 12; ++k) {
                w[k] = src[i + k * threads];
            }
#pragma unroll
            for (int k = 0; k < 12; ++k) {
                dst[i + k * threads] = w[k];
            }
        }
        for (; i < words; i += threads) {
            dst[i] = src[i];
        }
    }
}

extern "C" __global__ void topolink_copy_simple(unsigned long long dst_addr, unsigned long long src_addr,
                                                unsigned long long loops)
{
    // nvbandwidth's simpleCopyKernel, below 64 MiB: one 16-byte word per thread, through L2, once per loop.
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4* from = (const uint4*)src_addr + i;
    uint4* to = (uint4*)dst_addr + i;
    for (unsigned long long loop = 0; loop < loops; ++loop) {
        __stcg(to, __ldcg(from));
    }
}

extern "C" __global__ void topolink_copy_split(unsigned long long a_addr, unsigned long long b_addr,
                                               unsigned long long loops)
{
    // One 16-byte word per thread, in both directions at once: the threads of odd warps copy their word
    // from a to b, those of even warps from b to a.
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool odd = ((i / 32) & 1) != 0;
    const uint4* from = (const uint4*)(odd ? a_addr : b_addr) + i;
    uint4* to = (uint4*)(odd ? b_addr : a_addr) + i;
    for (unsigned long long loop = 0; loop < loops; ++loop) {
        __stcg(to, __ldcg(from));
    }
}

extern "C" __global__ void topolink_clear_warps(unsigned long long buf_addr, unsigned long long words,
                                                unsigned int odd)
{
    // Zeroes the 16-byte words that the split-warp copy's warps of one parity will write.
    uint4* buf = (uint4*)buf_addr;
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += threads) {
        if (((i / 32) & 1) == odd) {
            buf[i] = make_uint4(0, 0, 0, 0);
        }
    }
}

extern "C" __global__ void topolink_check(unsigned long long buf_addr, unsigned long long pattern_addr,
                                          unsigned long long words, unsigned long long pattern_words,
                                          unsigned long long wrong_addr)
{
    // Counts the 4-byte words of the buffer that differ from the pattern repeated over it.
    const unsigned int* buf = (const unsigned int*)buf_addr;
    const unsigned int* pattern = (const unsigned int*)pattern_addr;
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long wrong = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += threads) {
        wrong += buf[i] != pattern[i % pattern_words];
    }
    if (wrong) {
        atomicAdd((unsigned long long*)wrong_addr, wrong);
    }
}
"""
KERNEL_NAMES = ("topolink_latch", "topolink_chase", "topolink_copy_sm", "topolink_copy_simple", "topolink_copy_split",
                "topolink_clear_warps", "topolink_check")
LATCH_TIMEOUT_MS = 10_000  # nvbandwidth's DEFAULT_SPIN_KERNEL_TIMEOUT_MS


def compile_kernels(cp: Any) -> Any:
    module = cp.RawModule(code=KERNELS)
    for name in KERNEL_NAMES:
        module.get_function(name)  # compiles now: an NVRTC failure shows here, not in a timed sample
    return module
