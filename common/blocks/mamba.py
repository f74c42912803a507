"""Mamba-1: the selective state-space sequence mixer, with a fast pure-PyTorch scan and O(1)
decoding. Whole Mamba language models and their checkpoint loaders are in `common.models.mamba`.

    x -> in_proj -> (u, z)
    u -> causal depthwise conv -> SiLU -> x_proj -> (dt_low, B, C);  dt = softplus(dt_proj(dt_low))
    h_t = exp(dt_t A) * h_{t-1} + dt_t B_t u_t        per channel i and state s: h is [I, S]
    y_t = C_t . h_t + D u_t;   out = out_proj(y * SiLU(z))

Parameter names and shapes are those of `transformers`' `MambaMixer` (and of mamba-ssm's and
BlackMamba's Mamba layers), so their state dicts load without renaming inside the mixer.

Scan backends (`scan=`):
- "reference": a plain loop over time in fp32, differentiated by autograd. Slow; the ground truth.
- "chunked": our own scan (`ChunkedSelectiveScan`), time split into chunks; see its docstring.
- "cuda": mamba-ssm's fused kernels, when `mamba_ssm` imports and the tensors are on CUDA.
- "auto": "cuda" when possible, otherwise "chunked".
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from common.blocks.registry import Block, announce_kernel, register

Scan = Literal["auto", "reference", "chunked", "cuda"]
SCANS = get_args(Scan)
@functools.cache
def _mamba_ssm_ops():
    """mamba-ssm's fused CUDA ops, or None where the package (or its compiled extension) is missing.

    `mamba_inner_fn` also needs causal-conv1d's kernel: mamba-ssm imports without it and then fails
    an assertion at the first training step, so a missing causal-conv1d counts as missing kernels.
    """
    try:
        from mamba_ssm.ops import selective_scan_interface as ops
    except Exception:  # ImportError, or a broken CUDA build raising something else at import
        return None
    if getattr(ops, "causal_conv1d_fwd_function", None) is None:
        return None
    return ops.selective_scan_fn, ops.mamba_inner_fn


def _scan_dtype(dtype: torch.dtype) -> torch.dtype:
    # The recurrence multiplies hundreds of decays together: half precision would drift, so it
    # runs in fp32, or in fp64 when the model itself is fp64 (gradient checks).
    return torch.float64 if dtype == torch.float64 else torch.float32


# ----------------------------------------------------------------------------------------------
# Scans. Time-major throughout, so that one time step is one contiguous slice:
#   u, dt: [T, B, I];  A: [I, S];  Bm, Cm: [T, B, S];  h0: [B, I, S] or None (zeros)
# -> y: [T, B, I] (C_t . h_t, without the D skip and the gate) and the last state h: [B, I, S].


def reference_scan(u, dt, A, Bm, Cm, h0=None):
    """The recurrence exactly as written, one time step after another (autograd differentiates it)."""
    T, batch, I = u.shape
    h = u.new_zeros(batch, I, A.shape[1]) if h0 is None else h0
    ys = []
    for t in range(T):
        h = torch.exp(dt[t, :, :, None] * A) * h + (dt[t] * u[t])[:, :, None] * Bm[t, :, None, :]
        ys.append(torch.einsum("bis,bs->bi", h, Cm[t]))
    return torch.stack(ys), h


def _chunk_states(u, dt, At, Bm, h, decay, states):
    """States of one chunk, written into the given buffers.

    u, dt [L, B, I]; At = A.T [S, I]; Bm [L, B, S]; start state h [B, S, I];
    decay, states: [L, B, S, I] buffers for exp(dt A) and the states h_1..h_L.

    States are laid out [S, I] (channels innermost) so every elementwise op runs along a long
    contiguous axis; with [I, S] the innermost axis would be 16 wide and broadcasting crawls.
    The loop is one in-place fused multiply-add per step on a contiguous [B, S, I] slice; the chunk
    is small enough that its tensors stay in cache from one step to the next, and the buffers are
    reused from chunk to chunk, because fresh multi-megabyte tensors cost page faults on CPU.
    """
    torch.mul(dt[:, :, None, :], At, out=decay).exp_()
    torch.mul(Bm[..., None], (dt * u)[:, :, None, :], out=states)  # inputs B dt u, made states in place
    states[0].addcmul_(decay[0], h)
    for j in range(1, states.shape[0]):
        states[j].addcmul_(decay[j], states[j - 1])


def _auto_chunk(batch: int, I: int, S: int) -> int:
    # About 2^19 state elements (2 MiB in fp32) per chunk tensor, so that the three live
    # [L, B, S, I] tensors stay in cache, while a chunk is long enough to amortise its few
    # whole-chunk ops. At the benchmarks/mamba_speed.py size (8 x 256 tokens, d_inner 512) chunks
    # of 4 to 16 steps ran within noise of each other on CPU, and 32 or more were slower.
    return max(1, min(64, (1 << 19) // max(1, batch * I * S)))


class ChunkedSelectiveScan(torch.autograd.Function):
    """The selective scan in chunks of time, with a hand-written backward.

    Forward: chunk by chunk, build the decays exp(dt A) and inputs dt B u for that chunk only,
    run the recurrence through it, contract with C, and carry the last state into the next chunk.
    Only the chunk-start states ([n_chunks, B, S, I]) are kept for backward, never the states of
    the whole sequence.

    Backward: chunks in reverse. Recompute the chunk's states from its saved start state, run the
    adjoint recurrence  lam_t = C_t g_t + exp(dt_{t+1} A) lam_{t+1}  backwards through it (what
    flows out of the chunk's first step is carried into the previous chunk), and then every
    gradient is a local product of states, adjoints and inputs:
        dC_t = g_t . h_t,   dB_t = (dt u)_t . lam_t,   d(dt u)_t = lam_t . B_t,
        q_t = lam_t * exp(dt_t A) * h_{t-1}   (the gradient of the log-decay dt_t A),
        d dt_t += q_t . A,   dA = sum_t q_t dt_t.

    Why not the closed form of Mamba-2's SSD (cumulative log-decays, an [L, L] "segsum" matrix per
    chunk, then matmuls): there the decay is one scalar per head, so one [L, L] matrix serves all
    channels. Mamba-1's decay exp(dt_t[i] A[i, s]) differs per channel and state, so the same closed
    form needs an [L, L, S, I] tensor per chunk, L times the work of the recurrence itself; and
    factoring exp(Lambda_t - Lambda_k) = exp(Lambda_t) exp(-Lambda_k) to avoid it overflows fp32
    as soon as a chunk decays by more than e^-88. The multiply-add loop is exact and safe for any
    decay, and on CPU it is bound by memory traffic, which the chunking keeps in cache.
    """

    @staticmethod
    def forward(ctx, u, dt, A, Bm, Cm, h0, chunk):
        T, batch, I = u.shape
        S = A.shape[1]
        u, dt, Bm, Cm = (t.contiguous() for t in (u, dt, Bm, Cm))
        At = A.t().contiguous()
        n_chunks = -(-T // chunk)
        starts = u.new_empty(n_chunks, batch, S, I)
        starts[0] = 0 if h0 is None else h0.transpose(1, 2)
        decay, states = (u.new_empty(min(chunk, T), batch, S, I) for _ in range(2))
        y = u.new_empty(T, batch, I)
        for c in range(n_chunks):
            t0, t1 = c * chunk, min((c + 1) * chunk, T)
            L = t1 - t0
            _chunk_states(u[t0:t1], dt[t0:t1], At, Bm[t0:t1], starts[c], decay[:L], states[:L])
            torch.matmul(Cm[t0:t1, :, None, :], states[:L], out=y[t0:t1, :, None, :])
            if c + 1 < n_chunks:
                starts[c + 1] = states[L - 1]
        ctx.chunk = chunk
        ctx.has_h0 = h0 is not None
        ctx.save_for_backward(u, dt, At, Bm, Cm, starts)
        return y, states[L - 1].transpose(1, 2).contiguous()

    @staticmethod
    @once_differentiable
    def backward(ctx, gy, g_last):
        u, dt, At, Bm, Cm, starts = ctx.saved_tensors
        T = u.shape[0]
        chunk = ctx.chunk
        gy = gy.contiguous()
        gu, gdt, gB, gC = (torch.empty_like(t) for t in (u, dt, Bm, Cm))
        gAt = torch.zeros_like(At)
        decay, states, lam = (starts.new_empty(min(chunk, T), *starts.shape[1:]) for _ in range(3))
        # the adjoint flowing into the current chunk's last state from everything after it
        carry = torch.zeros_like(starts[0]) if g_last is None else g_last.transpose(1, 2)
        for c in reversed(range(starts.shape[0])):
            t0, t1 = c * chunk, min((c + 1) * chunk, T)
            L = t1 - t0
            u_c, dt_c, B_c, C_c, g_c = u[t0:t1], dt[t0:t1], Bm[t0:t1], Cm[t0:t1], gy[t0:t1]
            dec, st, lm = decay[:L], states[:L], lam[:L]
            _chunk_states(u_c, dt_c, At, B_c, starts[c], dec, st)
            # [1, I] @ [I, S] per position: a row vector against the transposed states is a
            # fast GEMM, where [S, I] @ [I, 1] is a slow batched GEMV.
            torch.matmul(g_c[:, :, None, :], st.transpose(-1, -2), out=gC[t0:t1, :, None, :])

            torch.mul(C_c[..., None], g_c[:, :, None, :], out=lm)
            lm[L - 1] += carry
            for j in range(L - 2, -1, -1):
                lm[j].addcmul_(dec[j + 1], lm[j + 1])
            carry = dec[0] * lm[0]

            torch.matmul((dt_c * u_c)[:, :, None, :], lm.transpose(-1, -2), out=gB[t0:t1, :, None, :])
            g_dtu = torch.matmul(B_c[:, :, None, :], lm)[:, :, 0]
            # q = lam * decay * h_prev, built in the decay buffer, which is not needed any more
            q = dec
            q[1:].mul_(st[:-1])
            q[0].mul_(starts[c])
            q.mul_(lm)
            torch.sum(torch.mul(q, At, out=lm), dim=-2, out=gdt[t0:t1]).addcmul_(g_dtu, u_c)
            torch.mul(g_dtu, dt_c, out=gu[t0:t1])
            gAt += torch.mul(q, dt_c[:, :, None, :], out=lm).sum((0, 1))
        g_h0 = carry.transpose(1, 2) if ctx.has_h0 else None
        return gu, gdt, gAt.t(), gB, gC, g_h0, None


def chunked_scan(u, dt, A, Bm, Cm, h0=None, chunk: int | None = None):
    if chunk is None:
        chunk = _auto_chunk(u.shape[1], u.shape[2], A.shape[1])
    return ChunkedSelectiveScan.apply(u, dt, A, Bm, Cm, h0, int(chunk))


# ----------------------------------------------------------------------------------------------
# The block


@dataclass
class MambaCache:
    """Decoding state of one Mamba layer; its size does not depend on the sequence length.

    conv_state: the last d_conv inputs of the causal conv, oldest first (zeros before the start).
    ssm_state: h after the last processed position (fp32, or fp64 for an fp64 model).
    seqlen: positions processed so far.
    """

    conv_state: torch.Tensor  # [B, I, d_conv]
    ssm_state: torch.Tensor  # [B, I, S]
    seqlen: int = 0

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.conv_state, self.ssm_state))


@register("mamba")
class Mamba(Block):
    """The Mamba-1 mixer (no norm, no residual: the model adds those)."""

    # Decay would pull A towards -1 and the skip towards 0; mamba-ssm exempts both too.
    # A class attribute, not a mark on the tensors: copy.deepcopy drops attributes set on a Parameter.
    no_weight_decay = ("A_log", "D")

    option_bounds = {"d_state": {"ge": 1}, "d_conv": {"ge": 1}, "expand": {"ge": 1}, "dt_rank": {"ge": 1},
                     "dt_min": {"gt": 0}, "dt_max": {"gt": 0}, "dt_init_floor": {"gt": 0}, "chunk_size": {"ge": 1}}

    def __init__(self, d_model: int, layer_idx: int = 0, d_state: int = 16, d_conv: int = 4, expand: int = 2,
                 dt_rank: int | Literal["auto"] = "auto", conv_bias: bool = True, bias: bool = False,
                 dt_min: float = 0.001, dt_max: float = 0.1, dt_init_floor: float = 1e-4,
                 scan: Scan = "auto", chunk_size: int | None = None):
        super().__init__()
        if scan not in SCANS:
            raise ValueError(f"scan: must be one of {', '.join(SCANS)}, got {scan!r}")
        self.d_model, self.layer_idx = d_model, layer_idx
        self.d_inner = int(expand * d_model)
        self.d_state, self.d_conv = d_state, d_conv
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else int(dt_rank)
        self.scan, self.chunk_size = scan, chunk_size
        I, S, R = self.d_inner, d_state, self.dt_rank

        self.in_proj = nn.Linear(d_model, 2 * I, bias=bias)
        self.conv1d = nn.Conv1d(I, I, kernel_size=d_conv, groups=I, padding=d_conv - 1, bias=conv_bias)
        self.x_proj = nn.Linear(I, R + 2 * S, bias=False)
        self.dt_proj = nn.Linear(R, I, bias=True)
        self.A_log = nn.Parameter(torch.empty(I, S))
        self.D = nn.Parameter(torch.empty(I))
        self.out_proj = nn.Linear(I, d_model, bias=bias)
        self.reset_mamba_parameters(dt_min, dt_max, dt_init_floor)

    @torch.no_grad()
    def reset_mamba_parameters(self, dt_min=0.001, dt_max=0.1, dt_init_floor=1e-4):
        """Mamba's own init: S4D-real A = -(1..S), D = 1, and a dt bias that puts softplus(bias)
        log-uniformly in [dt_min, dt_max], so channels start with time scales from fast to slow."""
        I, S, R = self.d_inner, self.d_state, self.dt_rank
        self.A_log.copy_(torch.log(torch.arange(1, S + 1, dtype=torch.float32)).expand(I, S))
        self.D.fill_(1.0)
        nn.init.uniform_(self.dt_proj.weight, -R**-0.5, R**-0.5)
        dt = torch.exp(torch.rand(I) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        dt = dt.clamp(min=dt_init_floor)
        self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)

    def init_weights(self, std: float) -> None:
        """Keep the block's construction-time initialisation: PyTorch's default for the projections,
        and A, D and the dt bias from `reset_mamba_parameters`. mamba-ssm's language model re-draws
        `out_proj` at init (kaiming-uniform divided by sqrt(number of layers)); ours does not, a
        difference the BlackMamba README lists."""

    # -- generation protocol -------------------------------------------------------------------

    def allocate_cache(self, batch_size: int, max_len: int = 0, device=None, dtype=None) -> MambaCache:
        """O(1) in max_len: only the conv window and the SSM state are carried."""
        dtype = dtype or self.in_proj.weight.dtype
        device = device or self.in_proj.weight.device
        return MambaCache(
            conv_state=torch.zeros(batch_size, self.d_inner, self.d_conv, device=device, dtype=dtype),
            ssm_state=torch.zeros(batch_size, self.d_inner, self.d_state, device=device, dtype=_scan_dtype(dtype)),
        )

    # -- forward -------------------------------------------------------------------------------

    def _backend(self, x: torch.Tensor, cache: MambaCache | None) -> str:
        scan = self.scan
        if scan in ("auto", "cuda"):
            usable = x.is_cuda and x.dtype != torch.float64 and _mamba_ssm_ops() is not None
            if scan == "cuda" and not usable:
                raise RuntimeError("scan='cuda' needs the mamba_ssm and causal_conv1d packages with their CUDA "
                                   "extensions, CUDA tensors and a dtype other than float64; use scan='chunked' "
                                   "(pure PyTorch) otherwise")
            # mamba-ssm's scan cannot start from a given state: continuing a cache is done by ours.
            scan = "cuda" if usable and (cache is None or cache.seqlen == 0) else "chunked"
        return scan

    def _conv(self, u: torch.Tensor, cache: MambaCache | None) -> torch.Tensor:
        """Causal depthwise conv over time, time-major: u [T, B, I] -> [T, B, I].

        Written as d_conv shifted multiply-adds rather than nn.Conv1d so it needs no [B, I, T]
        transposes. The window before the first position is zeros, or the cached last inputs, so
        a prompt shorter than d_conv gives the same result with and without a cache.
        """
        T, K = u.shape[0], self.d_conv
        if cache is None:
            history = u.new_zeros(K - 1, *u.shape[1:])
        else:
            history = cache.conv_state[..., 1:].permute(2, 0, 1).to(u.dtype)
        window = torch.cat([history, u])  # [T + K - 1, B, I]
        if cache is not None:
            cache.conv_state.copy_(window[-K:].permute(1, 2, 0).detach())
        w = self.conv1d.weight[:, 0, :]  # [I, K]
        out = window[:T] * w[:, 0]
        for k in range(1, K):
            out = out.addcmul(window[k:k + T], w[:, k])
        return out if self.conv1d.bias is None else out + self.conv1d.bias

    def forward(self, x: torch.Tensor, cache: MambaCache | None = None) -> torch.Tensor:
        backend = self._backend(x, cache)
        announce_kernel("mamba scan", backend)
        A = -torch.exp(self.A_log.to(_scan_dtype(x.dtype)))
        if backend == "cuda":
            return self._forward_cuda(x, A, cache)

        # Time-major from here on: the scan walks over time, one contiguous [B, ...] slice per step.
        u, z = self.in_proj(x.transpose(0, 1)).chunk(2, dim=-1)  # [T, B, I] each
        u = F.silu(self._conv(u, cache))
        dt_low, Bm, Cm = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        # The dt bias is added in the scan's precision before the softplus, as the CUDA kernel does.
        sdt = _scan_dtype(x.dtype)
        dt = F.softplus(F.linear(dt_low, self.dt_proj.weight).to(sdt) + self.dt_proj.bias.to(sdt))
        u_s, Bm, Cm = u.to(sdt), Bm.to(sdt), Cm.to(sdt)
        h0 = cache.ssm_state if cache is not None and cache.seqlen > 0 else None
        scan = reference_scan if backend == "reference" else functools.partial(chunked_scan, chunk=self.chunk_size)
        y, last = scan(u_s, dt, A, Bm, Cm, h0)
        if cache is not None:
            cache.ssm_state.copy_(last.detach())
            cache.seqlen += x.shape[1]
        y = (y + u_s * self.D.to(sdt)) * F.silu(z.to(sdt))
        return self.out_proj(y.to(x.dtype)).transpose(0, 1).contiguous()

    def _forward_cuda(self, x: torch.Tensor, A: torch.Tensor, cache: MambaCache | None) -> torch.Tensor:
        """mamba-ssm's kernels, batch-major [B, channels, T] as they expect."""
        selective_scan_fn, mamba_inner_fn = _mamba_ssm_ops()
        xz = self.in_proj(x).transpose(1, 2)  # [B, 2I, T]
        if cache is None:
            return mamba_inner_fn(
                xz, self.conv1d.weight, self.conv1d.bias, self.x_proj.weight, self.dt_proj.weight,
                self.out_proj.weight, self.out_proj.bias, A, None, None, self.D.float(),
                delta_bias=self.dt_proj.bias.float(), delta_softplus=True,
            )
        u, z = xz.chunk(2, dim=1)
        u = F.silu(self._conv(u.permute(2, 0, 1), cache)).permute(1, 2, 0)  # [B, I, T]
        dt_low, Bm, Cm = self.x_proj(u.transpose(1, 2)).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt_low, self.dt_proj.weight).transpose(1, 2)
        y, last = selective_scan_fn(
            u.contiguous(), dt.contiguous(), A, Bm.transpose(1, 2).contiguous(), Cm.transpose(1, 2).contiguous(),
            self.D.float(), z=z.contiguous(), delta_bias=self.dt_proj.bias.float(), delta_softplus=True,
            return_last_state=True,
        )
        cache.ssm_state.copy_(last.detach())
        cache.seqlen += x.shape[1]
        return self.out_proj(y.transpose(1, 2).to(x.dtype))

    @torch.no_grad()
    def step(self, x: torch.Tensor, cache: MambaCache) -> torch.Tensor:
        """One position, x: [B, 1, d_model] -> [B, 1, d_model], updating the cache in place."""
        if x.shape[1] != 1:
            raise ValueError(f"step() takes one position, got x of shape {tuple(x.shape)}")
        sdt = cache.ssm_state.dtype
        u, z = self.in_proj(x[:, 0]).chunk(2, dim=-1)  # [B, I]
        window = cache.conv_state
        window.copy_(torch.roll(window, shifts=-1, dims=-1))
        window[:, :, -1] = u
        u = (window * self.conv1d.weight[:, 0]).sum(-1)
        if self.conv1d.bias is not None:
            u = u + self.conv1d.bias
        u = F.silu(u)
        dt_low, Bm, Cm = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(F.linear(dt_low, self.dt_proj.weight).to(sdt) + self.dt_proj.bias.to(sdt))
        u_s = u.to(sdt)
        A = -torch.exp(self.A_log.to(sdt))
        h = cache.ssm_state
        h.mul_(torch.exp(dt[..., None] * A)).add_((dt * u_s)[..., None] * Bm.to(sdt)[:, None, :])
        cache.seqlen += 1
        y = torch.matmul(h, Cm.to(sdt)[:, :, None])[..., 0] + u_s * self.D.to(sdt)
        y = y * F.silu(z.to(sdt))
        return self.out_proj(y.to(x.dtype))[:, None]


# ----------------------------------------------------------------------------------------------
# A minimal Mamba language model (the Hugging Face / mamba-ssm architecture), for loading and
# checking weights. The project's general model is common.models.lm.LanguageModel.


# Weights of one mixer from any checkpoint layout


def _mixer_names(bias: bool, conv_bias: bool) -> list[str]:
    names = ["in_proj.weight", "conv1d.weight", "x_proj.weight", "dt_proj.weight", "dt_proj.bias",
             "A_log", "D", "out_proj.weight"]
    if conv_bias:
        names.append("conv1d.bias")
    if bias:
        names += ["in_proj.bias", "out_proj.bias"]
    return names


def mamba_mixer_state_dict(sd: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """One Mamba mixer's parameters, named as in `Mamba`, taken from any state dict by prefix.

    Works for Hugging Face (`backbone.layers.{i}.mixer.`), mamba-ssm (same prefix) and BlackMamba
    (`decoder.layers.{i}.mixer.`) layouts. Raises ValueError on a missing, unexpected or
    mis-shaped tensor, naming it.
    """
    if prefix and not prefix.endswith("."):
        prefix += "."
    found = {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    if not found:
        raise ValueError(f"no tensors under prefix {prefix!r}")
    if "in_proj.weight" not in found or "A_log" not in found:
        raise ValueError(f"{prefix!r} is not a Mamba mixer: it holds {', '.join(sorted(found))}")
    bias, conv_bias = "in_proj.bias" in found, "conv1d.bias" in found
    expected = _mixer_names(bias, conv_bias)
    missing = [n for n in expected if n not in found]
    unexpected = [n for n in found if n not in expected]
    if missing or unexpected:
        raise ValueError(f"Mamba mixer at {prefix!r}: missing {missing or 'nothing'}, "
                         f"unexpected {unexpected or 'nothing'}")

    I, S = found["A_log"].shape
    K = found["conv1d.weight"].shape[-1]
    d_model = found["in_proj.weight"].shape[1]
    R = found["dt_proj.weight"].shape[1] if found["dt_proj.weight"].dim() == 2 else -1
    shapes = {"in_proj.weight": (2 * I, d_model), "in_proj.bias": (2 * I,), "conv1d.weight": (I, 1, K),
              "conv1d.bias": (I,), "x_proj.weight": (R + 2 * S, I), "dt_proj.weight": (I, R), "dt_proj.bias": (I,),
              "A_log": (I, S), "D": (I,), "out_proj.weight": (d_model, I), "out_proj.bias": (d_model,)}
    for name, tensor in found.items():
        if tuple(tensor.shape) != shapes[name]:
            raise ValueError(f"{prefix}{name}: expected shape {shapes[name]} (d_model={d_model}, d_inner={I}, "
                             f"d_state={S}, d_conv={K}, dt_rank={R}), got {tuple(tensor.shape)}")
    return found


def mamba_kwargs_from_mixer(mixer_sd: dict[str, torch.Tensor]) -> dict:
    """The `Mamba(...)` constructor arguments implied by a (validated) mixer state dict."""
    I, S = mixer_sd["A_log"].shape
    d_model = mixer_sd["in_proj.weight"].shape[1]
    if I % d_model:
        raise ValueError(f"d_inner={I} is not a multiple of d_model={d_model}")
    return dict(d_model=d_model, d_state=S, d_conv=mixer_sd["conv1d.weight"].shape[-1], expand=I // d_model,
                dt_rank=mixer_sd["dt_proj.weight"].shape[1], conv_bias="conv1d.bias" in mixer_sd,
                bias="in_proj.bias" in mixer_sd)
