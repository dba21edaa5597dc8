"""The formulas an LLM loop proposed in the user's seed material, kept verbatim.

They are here so the harness can show *why* they must not be trusted: the
permutation gate rejects each one wherever it is not a permutation of the grid.
``num_blocks`` in the seeds is the number of programs, ``num_pid_m * num_pid_n`` here.
"""
import triton
import triton.language as tl


@triton.jit
def seed_xcd(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """Formula 1 (seed 000, the one it kept): a permutation only when num_blocks % 8 == 0."""
    num_blocks = num_pid_m * num_pid_n
    xcd_id = pid % NUM_XCDS
    local_block_id = pid // NUM_XCDS
    return (local_block_id + xcd_id * (num_blocks // NUM_XCDS)) % num_blocks


@triton.jit
def seed_attempt1(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """Formula 2 (direct conv, attempt 1): a permutation only when num_blocks == NUM_XCDS**2."""
    num_blocks = num_pid_m * num_pid_n
    xcd_id = (pid // NUM_XCDS) % NUM_XCDS
    local_block_id = pid % NUM_XCDS
    return xcd_id * (num_blocks // NUM_XCDS) + local_block_id


@triton.jit
def seed_attempt2(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """Formula 3 (direct conv, attempts 2-6): not a permutation in general."""
    num_blocks = num_pid_m * num_pid_n
    blocks_per_xcd = num_blocks // NUM_XCDS
    a = (pid // blocks_per_xcd) % NUM_XCDS
    b = (pid % blocks_per_xcd) // NUM_XCDS
    return a * blocks_per_xcd + b


@triton.jit
def seed_patch(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """Formula 4 (patch conv, every attempt): ``(pid % num_blocks) * (pid // num_blocks)``.

    The seed's ``num_blocks = output_width * kernel_height`` was the extent of the
    inner grid axis; here that is ``num_pid_n``.  Every pid below num_pid_n maps to 0.
    """
    num_blocks = num_pid_n
    return (pid % num_blocks) * (pid // num_blocks)
