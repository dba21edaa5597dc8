"""The user's seed 000 kernel, verbatim in its arithmetic (only reformatted), kept as a
known-wrong kernel: it reads only the first BLOCK_SIZE_C input channels and indexes its
weights with filter and channel offsets on the same axis.  The correctness gate must
catch it.  Never used outside tests."""
import triton
import triton.language as tl

from kernels.direct import DirectConv


@triton.jit
def seed000_conv2d_kernel(
    x_ptr, w_ptr, y_ptr, N, C, H, W, F, R, S,
    stride_xn, stride_xc, stride_xh, stride_xw, stride_wn, stride_wc, stride_wh, stride_ww,
    stride_yn, stride_yc, stride_yh, stride_yw, P_H, P_W,
    BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_F: tl.constexpr, BLOCK_SIZE_H: tl.constexpr,
    BLOCK_SIZE_W: tl.constexpr, BLOCK_SIZE_C: tl.constexpr,
):
    num_XCD = 8
    num_blocks = tl.cdiv(N, BLOCK_SIZE_N) * tl.cdiv(F, BLOCK_SIZE_F) * tl.cdiv(P_H, BLOCK_SIZE_H) * tl.cdiv(P_W, BLOCK_SIZE_W)
    pid = tl.program_id(axis=0)
    xcd_id = pid % num_XCD
    local_block_id = pid // num_XCD
    new_pid = (local_block_id + xcd_id * (num_blocks // num_XCD)) % num_blocks
    num_pid_w = tl.cdiv(P_W, BLOCK_SIZE_W)
    num_pid_h = tl.cdiv(P_H, BLOCK_SIZE_H)
    num_pid_f = tl.cdiv(F, BLOCK_SIZE_F)
    pid_w = new_pid % num_pid_w
    pid_h = (new_pid // num_pid_w) % num_pid_h
    pid_f = (new_pid // (num_pid_w * num_pid_h)) % num_pid_f
    pid_n = new_pid // (num_pid_w * num_pid_h * num_pid_f)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_f = pid_f * BLOCK_SIZE_F + tl.arange(0, BLOCK_SIZE_F)
    offs_h = pid_h * BLOCK_SIZE_H + tl.arange(0, BLOCK_SIZE_H)
    offs_w = pid_w * BLOCK_SIZE_W + tl.arange(0, BLOCK_SIZE_W)
    offs_y_n = offs_n[:, None, None, None]
    offs_y_f = offs_f[None, :, None, None]
    offs_y_h = offs_h[None, None, :, None]
    offs_y_w = offs_w[None, None, None, :]
    y_ptrs = y_ptr + offs_y_n * stride_yn + offs_y_f * stride_yc + offs_y_h * stride_yh + offs_y_w * stride_yw
    accumulator = tl.zeros((BLOCK_SIZE_N, BLOCK_SIZE_F, BLOCK_SIZE_H, BLOCK_SIZE_W), dtype=tl.float32)
    offs_c = tl.arange(0, BLOCK_SIZE_C)
    for r in range(R):
        for s in range(S):
            offs_x_n = offs_n[:, None, None, None]
            offs_x_c = offs_c[None, :, None, None]
            offs_x_h = offs_h[None, None, :, None] + r
            offs_x_w = offs_w[None, None, None, :] + s
            x_ptrs = x_ptr + offs_x_n * stride_xn + offs_x_c * stride_xc + offs_x_h * stride_xh + offs_x_w * stride_xw
            mask_x = (offs_x_n < N) & (offs_x_c < C) & (offs_x_h < H) & (offs_x_w < W)
            x = tl.load(x_ptrs, mask=mask_x, other=0.0)
            offs_w_f = offs_f[None, :, None, None]
            offs_w_c = offs_c[None, :, None, None]
            w_ptrs = w_ptr + offs_w_f * stride_wn + offs_w_c * stride_wc + r * stride_wh + s * stride_ww
            mask_w = (offs_w_f < F) & (offs_w_c < C)
            w = tl.load(w_ptrs, mask=mask_w, other=0.0)
            accumulator += tl.sum(x * w, axis=1)
    y = accumulator.to(tl.float16)
    mask_y = (offs_y_n < N) & (offs_y_f < F) & (offs_y_h < P_H) & (offs_y_w < P_W)
    tl.store(y_ptrs, y, mask=mask_y)


class Seed000Conv(DirectConv):
    """The seed kernel behind the ConvKernel interface (stride 1, no padding, its own swizzle)."""

    name = "seed000"
    jit_kernel = seed000_conv2d_kernel
    tile_names = ("BLOCK_SIZE_N", "BLOCK_SIZE_F", "BLOCK_SIZE_H", "BLOCK_SIZE_W", "BLOCK_SIZE_C")

    def tile_grid(self, shape, tiles):
        from kernels.base import TileGrid
        return TileGrid(triton.cdiv(shape.N, tiles["BLOCK_SIZE_N"]) * triton.cdiv(shape.F, tiles["BLOCK_SIZE_F"])
                        * triton.cdiv(shape.P, tiles["BLOCK_SIZE_H"]) * triton.cdiv(shape.Q, tiles["BLOCK_SIZE_W"]), 1)

    def launch(self, operands, out, shape, tiles, swizzle, launch):
        x, w = operands
        seed000_conv2d_kernel[(self.tile_grid(shape, tiles).num_pids,)](
            x, w, out, shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S,
            *x.stride(), *w.stride(), *out.stride(), shape.P, shape.Q, **tiles)
