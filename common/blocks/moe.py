"""Mixture-of-experts MLP block with BlackMamba's Sinkhorn router and a Switch/Mixtral softmax router.

The block maps `[batch, time, d_model]` to the same shape. Every token is sent to `top_k` of
`n_experts` gated-linear-unit MLPs (SwiGLU by default) and the expert outputs are summed, weighted
by per-token gates. It is stateless: `allocate_cache` stays None and `step` is a plain forward.
It is causal in the registry's sense (no gradient from later positions, and eval routing is
per token), but in training the Sinkhorn router chooses experts by balancing over the whole batch,
so a token's expert choice (not its gradient) depends on the other tokens, later ones included,
as in BlackMamba's and Megatron's training. Under DDP or FSDP the balancing runs over the tokens of
every process (a few sums over processes per layer and iteration), so N processes route a global
batch exactly as one process would route it; Megatron balances each rank's tokens alone. The
routing counts (`tokens_per_expert`) count the global batch in training too. The Switch auxiliary
loss of `"softmax_topk"` stays per process, as in Switch and Megatron: each rank's loss on its own
tokens, averaged with the gradients.

Routers (`router=`):

- `"sinkhorn"` (BlackMamba, inherited from Megatron-LM's SwitchMLP). Training: under no_grad, a
  Sinkhorn balancing of the detached fp32 logits chooses the expert(s); the gate is
  sigmoid(logit of the chosen expert), so the router learns only through the gate and no auxiliary
  loss is needed. Eval: plain top-k of the logits (sigmoid is monotone, so this is the release's
  argmax of sigmoid). With `top_k > 1` the gates are a softmax over the k chosen logits (our
  choice; Megatron takes an un-renormalised softmax over all experts). What Sinkhorn balances is
  `sinkhorn_input`: the raw logits (Megatron, the default) or sigmoid(logits), as the BlackMamba
  paper's Appendix F footnote states it; sigmoid inputs lie in (0, 1), so the cost exp(p / 0.5)
  varies by at most e^2 across experts and Sinkhorn converges in a couple of iterations.
- `"sigmoid"`: the released BlackMamba SwitchMLP as it actually executes: its `sinkhorn` function
  is defined but never called (Zyphra/BlackMamba issue #16), so training and eval both route by
  argmax of the logits with a sigmoid gate. Kept to ablate what Sinkhorn buys.
- `"softmax_topk"`: probs = softmax(logits), top-k, gates = the chosen probs renormalised over the
  k (Mixtral); for `top_k == 1` the gate is the raw prob (Switch), because renormalising one prob
  gives 1 and the router would then learn only from the auxiliary loss. Adds the Switch load
  balancing loss `aux_loss_coef * E * sum_i f_i * P_i`, returned by `aux_loss()`.

The Sinkhorn of the release has quirks that we keep as options (see `sinkhorn` below):
cost = exp(logits / temperature) with temperature 0.5 (the release's exp(2x)); an init
`d1 = 1 / (E * column sums)` (softmax along the token axis, divided by E); and an absolute stop
test mean|delta d1| < tol, which with that init is so loose (d1 is ~1/(E*N) in scale) that it stops
after one iteration. `sinkhorn_criterion="relative"` gives the scale-free test instead. The
release also adds 1e-8 to the denominators, which on skewed logits biases the fixed point and stalls
convergence; we default to a negligible guard (`sinkhorn_eps=1e-8` restores the release's).

Experts are held as stacked weights, `w_in [E, 2F, D]` (rows: gate then up) and `w_out [E, D, F]`,
the layout of BlackMamba's per-expert `linear_fc1.weight [2F, H]` / `linear_fc2.weight [H, F]`, so
a checkpoint maps by `torch.stack` over the experts. Dispatch sorts the (token, slot) assignments
by expert so that each expert runs one matmul on a contiguous slice; outputs are scattered back
with `index_add` weighted by the gates. No per-token loops, no one-hot matmuls. The experts run
(`expert_impl=`) as a Python loop over the E slices with a hand-written backward ("loop", the
default off CUDA), the same loop through autograd ("autograd", a reference), or one
`torch._grouped_mm` call per matrix ("grouped_mm", the default on CUDA in bf16 or bf16 autocast,
sm80 and later, where d_model and d_ff are multiples of 8).

Default `d_ff`: 8/3 * d_model rounded up to a multiple of 64, the usual SwiGLU width that keeps an
expert's parameter count equal to a 4*d_model two-matrix MLP (it gives BlackMamba-1.5B's F = 3072
for d_model = 1152 exactly; the 2.8B model's 3872 for 1472 was set by hand, so pass d_ff there).
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from common import distributed
from common.blocks.registry import Block, announce_kernel, register

Router = Literal["sinkhorn", "sigmoid", "softmax_topk"]
SinkhornInit = Literal["blackmamba", "vanilla"]
SinkhornCriterion = Literal["absolute", "relative"]
SinkhornInput = Literal["logits", "sigmoid"]
ExpertImpl = Literal["auto", "loop", "autograd", "grouped_mm"]
ROUTERS, SINKHORN_INITS = get_args(Router), get_args(SinkhornInit)
SINKHORN_CRITERIA, EXPERT_IMPLS = get_args(SinkhornCriterion), get_args(ExpertImpl)


def default_d_ff(d_model: int) -> int:
    return 64 * math.ceil(8 * d_model / 3 / 64)


# ---------------------------------------------------------------------------------------------
# Sinkhorn balancing


@torch.no_grad()
def sinkhorn(logits: torch.Tensor, temperature: float = 0.5, init: str = "blackmamba", tol: float = 1e-4,
             max_iter: int = 100, criterion: str = "absolute", eps: float | None = None,
             across_processes: bool = False) -> tuple[torch.Tensor, int]:
    """Balance a `[N tokens, E experts]` cost matrix towards uniform marginals.

    cost = exp(logits / temperature); returns `(P, iterations)` with P = d0[:, None] * cost * d1[None, :],
    normalised as a transport plan of total mass 1: at convergence every row sums to 1/N and every
    column to 1/E. After each iteration the column sums are exact (d1 is updated last) and the row
    sums are off by the relative change in d1 of that iteration. P's row-wise argmax depends only
    on d1 * cost, because d0 rescales whole rows.

    init: "blackmamba" starts from d1 = 1 / (E * column sums of cost), i.e. d1 * cost is a softmax
    along the token axis divided by E (the paper's "softmax normalised along the sample index");
    "vanilla" starts from d1 = 1 (Megatron-LM). Iterations stop when the change of d1 is below tol,
    measured as mean|delta d1| ("absolute", the release's test, which depends on d1's scale and so
    on N, the init and the temperature) or mean|delta d1| / mean|d1| ("relative", scale-free), or
    after max_iter iterations. max_iter = 0 returns the init itself (d0 = 1).

    Works in float64 (N x E is small): exp(2x) overflows float32 already at x ~ 44, and the
    absolute criterion compares numbers of order 1/(E*N) against tol. The result is float64.

    `eps` is added to the denominators. The release adds 1e-8, but d0 and d1 have arbitrary,
    init-dependent scales, so a fixed eps is not negligible everywhere: on skewed logits
    (N(0, 1.5) + a 0..3 expert ramp, N=512, E=8) it leaves rows ~2e-4 off with the blackmamba init
    and columns ~3e-6 off with ones, and the relative criterion then never reaches 1e-6. The
    default (None) uses the smallest normal float64, which only keeps underflowed rows finite;
    pass eps=1e-8 for the release's arithmetic.

    `across_processes`: `logits` is this process's share of the tokens of a distributed step, and
    the balancing is over all of them: N, the column sums and the overflow shift are summed (or
    maximised) over processes, so every process gets its rows of the plan of the whole batch and
    the same iteration count. Every process of the group must call it together.
    """
    if init not in SINKHORN_INITS:
        raise ValueError(f"sinkhorn init must be one of {SINKHORN_INITS}, got {init!r}")
    if criterion not in SINKHORN_CRITERIA:
        raise ValueError(f"sinkhorn criterion must be one of {SINKHORN_CRITERIA}, got {criterion!r}")
    if eps is None:
        eps = torch.finfo(torch.float64).tiny
    over_tokens = distributed.global_sum if across_processes else (lambda t: t)
    z = logits.detach().to(torch.float64) / temperature
    # Only shift when exp would overflow even in float64: a shift rescales d1 and therefore changes
    # what the absolute criterion sees, so ordinary logits go through untouched, as in the release.
    top = z.max() if z.numel() else z.new_tensor(-math.inf)
    if across_processes:
        top = distributed.global_max(top)
    if top > 700:
        z = z - top
    cost = z.exp()
    n_experts = cost.shape[1]
    n_tokens = int(over_tokens(cost.new_tensor(cost.shape[0])).item()) if across_processes else cost.shape[0]
    d0 = cost.new_ones(cost.shape[0])
    if init == "blackmamba":
        # No eps here, as in the release; the clamp only keeps an all-underflowed column finite.
        d1 = 1.0 / (n_experts * over_tokens(cost.sum(dim=0)).clamp_min(torch.finfo(torch.float64).tiny))
    else:
        d1 = cost.new_ones(n_experts)

    iterations = 0
    while iterations < max_iter:
        d1_old = d1
        d0 = (1.0 / n_tokens) / (cost @ d1 + eps)
        d1 = (1.0 / n_experts) / (over_tokens(d0 @ cost) + eps)
        iterations += 1
        change = (d1 - d1_old).abs().mean()
        if criterion == "relative":
            change = change / d1.abs().mean()
        if change.item() <= tol:
            break
    return d0[:, None] * cost * d1[None, :], iterations


def load_balance_stats(counts: torch.Tensor) -> dict[str, float]:
    """Balance of a per-expert load vector: max/mean and min/mean load, coefficient of variation,
    and the load's entropy divided by log(E) (1 = perfectly uniform, 0 = one expert takes all)."""
    counts = counts.detach().to(torch.float64).cpu()
    n_experts, total = counts.numel(), counts.sum().item()
    if total == 0:
        nan = float("nan")
        return {"tokens": 0, "max_over_mean": nan, "min_over_mean": nan, "cv": nan, "entropy": nan}
    mean = total / n_experts
    p = counts / total
    nz = p[p > 0]
    entropy = -(nz * nz.log()).sum().item() / math.log(n_experts) if n_experts > 1 else 1.0
    return {
        "tokens": int(total),
        "max_over_mean": counts.max().item() / mean,
        "min_over_mean": counts.min().item() / mean,
        "cv": counts.std(unbiased=False).item() / mean,
        "entropy": entropy,
    }


# ---------------------------------------------------------------------------------------------
# The block


def glu(h: torch.Tensor, activation: str) -> torch.Tensor:
    """[.., 2F] rows laid out [gate | up] -> act(gate) * up."""
    gate, up = h.chunk(2, dim=-1)
    return (F.silu(gate) if activation == "silu" else F.gelu(gate)) * up


class _ExpertMLPs(torch.autograd.Function):
    """Every expert's GLU MLP over its contiguous slice of expert-sorted rows.

    The backward is written by hand so that each expert's weight gradient lands directly in its
    slice of the stacked [E, ...] gradient. Through autograd, a per-expert loop over stacked weights
    allocates one gradient per expert and then stacks them (or, with w[e] indexing, zero-fills a
    full stacked gradient per expert): at 64 experts, d_model 256, the hand-written backward made
    the step 10-20% faster on CPU (equal at 8 experts). It saves only the input rows and the
    pre-activations, recomputing act(gate) in the backward.
    """

    @staticmethod
    def forward(ctx, xs, w_in, w_out, b_in, b_out, counts: list[int], activation: str):
        n_ff = w_out.shape[-1]
        h = xs.new_empty(xs.shape[0], 2 * n_ff)
        y = xs.new_empty(xs.shape[0], w_out.shape[1])
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            rows = slice(start, start + n)
            start += n
            if b_in is None:
                torch.mm(xs[rows], w_in[e].t(), out=h[rows])
            else:
                torch.addmm(b_in[e], xs[rows], w_in[e].t(), out=h[rows])
            a = glu(h[rows], activation)
            if b_out is None:
                torch.mm(a, w_out[e].t(), out=y[rows])
            else:
                torch.addmm(b_out[e], a, w_out[e].t(), out=y[rows])
        ctx.save_for_backward(xs, w_in, w_out, h)
        ctx.counts, ctx.activation, ctx.has_bias = counts, activation, b_in is not None
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy):
        xs, w_in, w_out, h = ctx.saved_tensors
        # The fused kernels autograd itself uses for F.silu / F.gelu (one pass instead of five).
        act_backward = torch.ops.aten.silu_backward if ctx.activation == "silu" else torch.ops.aten.gelu_backward
        gy = gy.contiguous()
        gx = torch.empty_like(xs)  # every row belongs to exactly one expert
        gw_in, gw_out = torch.zeros_like(w_in), torch.zeros_like(w_out)
        gb_in = xs.new_zeros(w_in.shape[:2]) if ctx.has_bias else None
        gb_out = xs.new_zeros(w_out.shape[:2]) if ctx.has_bias else None
        start = 0
        for e, n in enumerate(ctx.counts):
            if n == 0:
                continue
            rows = slice(start, start + n)
            start += n
            gate, up = h[rows].chunk(2, dim=-1)
            act = F.silu(gate) if ctx.activation == "silu" else F.gelu(gate)
            torch.mm(gy[rows].t(), act * up, out=gw_out[e])
            ga = gy[rows] @ w_out[e]
            gh = torch.cat([act_backward(ga * up, gate), ga * act], dim=-1)
            torch.mm(gh.t(), xs[rows], out=gw_in[e])
            torch.mm(gh, w_in[e], out=gx[rows])
            if ctx.has_bias:
                gb_in[e] = gh.sum(dim=0)
                gb_out[e] = gy[rows].sum(dim=0)
        return gx, gw_in, gw_out, gb_in, gb_out, None, None


def _autocast_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The dtype autocast runs matmuls in on `x`'s device, or None where autocast is off."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


def grouped_mm_aligned(d_model: int, d_ff: int) -> bool:
    """Whether `torch._grouped_mm` takes these expert shapes in bf16, the only dtype the default path
    gives it: every row of its operands must span a multiple of 16 bytes, so d_model and d_ff must be
    multiples of 8. On an H100, d_ff = 683 failed with "strides should be multiple of 16 bytes"."""
    return d_model % 8 == 0 and d_ff % 8 == 0


class _ContiguousGrad(torch.autograd.Function):
    """Identity whose backward makes the incoming gradient contiguous: `torch._grouped_mm`'s
    backward rejects broadcast (stride 0) gradients such as the one `.sum()` produces."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous()


@register("moe")
class MoE(Block):
    option_bounds = {"n_experts": {"ge": 1}, "d_ff": {"ge": 1}, "top_k": {"ge": 1}, "sinkhorn_temperature": {"gt": 0},
                     "sinkhorn_tol": {"gt": 0}, "sinkhorn_max_iter": {"ge": 1}, "sinkhorn_eps": {"gt": 0},
                     "aux_loss_coef": {"ge": 0}}

    def __init__(self, d_model: int, layer_idx: int = 0, n_experts: int = 8, d_ff: int | None = None,
                 top_k: int = 1, router: Router = "sinkhorn", activation: Literal["silu", "gelu"] = "silu",
                 sinkhorn_init: SinkhornInit = "blackmamba", sinkhorn_temperature: float = 0.5,
                 sinkhorn_tol: float = 1e-4, sinkhorn_max_iter: int = 100,
                 sinkhorn_criterion: SinkhornCriterion = "absolute", sinkhorn_eps: float | None = None,
                 sinkhorn_input: SinkhornInput = "logits", router_bias: bool = True,
                 aux_loss_coef: float = 0.01, bias: bool = False,
                 normalize_gates: bool | None = None, expert_impl: ExpertImpl = "auto"):
        super().__init__()
        if router not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, got {router!r}")
        if activation not in ("silu", "gelu"):
            raise ValueError(f"activation must be 'silu' (SwiGLU) or 'gelu' (GeGLU), got {activation!r}")
        if sinkhorn_init not in SINKHORN_INITS:
            raise ValueError(f"sinkhorn_init must be one of {SINKHORN_INITS}, got {sinkhorn_init!r}")
        if sinkhorn_criterion not in SINKHORN_CRITERIA:
            raise ValueError(f"sinkhorn_criterion must be one of {SINKHORN_CRITERIA}, got {sinkhorn_criterion!r}")
        if sinkhorn_input not in ("logits", "sigmoid"):
            raise ValueError(f"sinkhorn_input must be 'logits' or 'sigmoid', got {sinkhorn_input!r}")
        if expert_impl not in EXPERT_IMPLS:
            raise ValueError(f"expert_impl must be one of {EXPERT_IMPLS}, got {expert_impl!r}")
        if not 1 <= top_k <= n_experts:
            raise ValueError(f"top_k must be in [1, n_experts={n_experts}], got {top_k}")
        self.d_model, self.layer_idx = d_model, layer_idx
        self.n_experts, self.top_k = n_experts, top_k
        self.d_ff = d_ff if d_ff is not None else default_d_ff(d_model)
        self.router_type, self.activation = router, activation
        self.sinkhorn_init, self.sinkhorn_temperature = sinkhorn_init, sinkhorn_temperature
        self.sinkhorn_tol, self.sinkhorn_max_iter = sinkhorn_tol, sinkhorn_max_iter
        self.sinkhorn_criterion, self.sinkhorn_eps = sinkhorn_criterion, sinkhorn_eps
        self.sinkhorn_input = sinkhorn_input
        self.aux_loss_coef = aux_loss_coef
        # Renormalising the gates over the chosen experts only makes sense for k > 1 (see module doc).
        self.normalize_gates = top_k > 1 if normalize_gates is None else normalize_gates
        self.expert_impl = expert_impl

        self.router = nn.Linear(d_model, n_experts, bias=router_bias)
        self.w_in = nn.Parameter(torch.empty(n_experts, 2 * self.d_ff, d_model))
        self.w_out = nn.Parameter(torch.empty(n_experts, d_model, self.d_ff))
        self.b_in = nn.Parameter(torch.empty(n_experts, 2 * self.d_ff)) if bias else None
        self.b_out = nn.Parameter(torch.empty(n_experts, d_model)) if bias else None
        self.reset_parameters()

        # Routing statistics: cumulative since reset_stats(), and from the last forward.
        self.register_buffer("tokens_per_expert", torch.zeros(n_experts, dtype=torch.long), persistent=False)
        self.register_buffer("last_tokens_per_expert", torch.zeros(n_experts, dtype=torch.long), persistent=False)
        self.last_sinkhorn_iters: int | None = None
        self._aux_loss: torch.Tensor | None = None

    def reset_parameters(self) -> None:
        # Each expert initialised like the nn.Linear it replaces: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        bound_in, bound_out = 1 / math.sqrt(self.d_model), 1 / math.sqrt(self.d_ff)
        nn.init.uniform_(self.w_in, -bound_in, bound_in)
        nn.init.uniform_(self.w_out, -bound_out, bound_out)
        if self.b_in is not None:
            nn.init.uniform_(self.b_in, -bound_in, bound_in)
            nn.init.uniform_(self.b_out, -bound_out, bound_out)
        self.router.reset_parameters()

    @torch.no_grad()
    def init_weights(self, std: float) -> None:
        """The standard initialisation on the stacked experts and the router (Megatron: N(0, 0.02))."""
        for weight in (self.w_in, self.w_out, self.router.weight):
            nn.init.normal_(weight, std=std)
        for bias in (self.b_in, self.b_out, self.router.bias):
            if bias is not None:
                nn.init.zeros_(bias)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_experts={self.n_experts}, d_ff={self.d_ff}, top_k={self.top_k}, "
                f"router={self.router_type}, activation={self.activation}")

    # --- routing -------------------------------------------------------------------------------

    def route(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """fp32 logits [N, E] -> expert indices [N, k], gates [N, k], router probs (softmax router only)."""
        k = self.top_k
        if self.router_type == "softmax_topk":
            probs = logits.softmax(dim=-1)
            gates, idx = probs.topk(k, dim=-1)
            if self.normalize_gates:
                gates = gates / gates.sum(dim=-1, keepdim=True)
            return idx, gates, probs

        if self.router_type == "sinkhorn" and self.training:
            balanced, self.last_sinkhorn_iters = sinkhorn(
                logits.sigmoid() if self.sinkhorn_input == "sigmoid" else logits,
                temperature=self.sinkhorn_temperature, init=self.sinkhorn_init, tol=self.sinkhorn_tol,
                max_iter=self.sinkhorn_max_iter, criterion=self.sinkhorn_criterion, eps=self.sinkhorn_eps,
                across_processes=distributed.initialized())
            idx = balanced.topk(k, dim=-1).indices
        else:
            idx = logits.topk(k, dim=-1).indices
        chosen = logits.gather(1, idx)
        gates = chosen.sigmoid() if k == 1 else chosen.softmax(dim=-1)
        return idx, gates, None

    # --- experts -------------------------------------------------------------------------------

    def _experts_autograd(self, xs: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """The same computation as _ExpertMLPs, left to autograd (kept as a readable reference)."""
        # unbind, not w_in[e]: each w_in[e]'s backward would zero-fill a full [E, 2F, D] gradient.
        w_in, w_out = self.w_in.unbind(0), self.w_out.unbind(0)
        b_in = self.b_in.unbind(0) if self.b_in is not None else [None] * self.n_experts
        b_out = self.b_out.unbind(0) if self.b_out is not None else [None] * self.n_experts
        outs = []
        for e, x_e in enumerate(xs.split(counts)):
            if counts[e] == 0:
                continue
            h = F.linear(x_e, w_in[e], b_in[e])
            outs.append(F.linear(glu(h, self.activation), w_out[e], b_out[e]))
        return torch.cat(outs) if outs else xs.new_zeros(0, self.d_model)

    def _experts_grouped(self, xs: torch.Tensor, counts: torch.Tensor, expert_of_row: torch.Tensor) -> torch.Tensor:
        # Autocast does not cover `_grouped_mm`: under it, cast to its dtype here, as it casts a matmul.
        dtype = _autocast_dtype(xs) or xs.dtype
        w_in, w_out = self.w_in.to(dtype), self.w_out.to(dtype)
        offs = counts.cumsum(0).to(torch.int32)
        h = torch._grouped_mm(xs.to(dtype), w_in.transpose(1, 2), offs=offs)
        if self.b_in is not None:
            h = h + self.b_in[expert_of_row].to(dtype)
        y = torch._grouped_mm(_ContiguousGrad.apply(glu(h, self.activation)), w_out.transpose(1, 2), offs=offs)
        if self.b_out is not None:
            y = y + self.b_out[expert_of_row].to(dtype)
        return _ContiguousGrad.apply(y)

    def _impl(self, x: torch.Tensor) -> str:
        if self.expert_impl != "auto":
            return self.expert_impl
        # The fused kernel where it is known to be fast (CUDA, bf16 tensors or bf16 autocast, sm80+)
        # and the shapes allow it.
        autocast = _autocast_dtype(x)
        if (hasattr(torch, "_grouped_mm") and x.is_cuda and (autocast or x.dtype) == torch.bfloat16
                and grouped_mm_aligned(self.d_model, self.d_ff)
                and torch.cuda.get_device_capability(x.device)[0] >= 8):
            return "grouped_mm"
        if autocast is not None:
            return "autograd"  # the hand-written loop's out= matmuls would bypass autocast
        return "loop"

    # --- forward -------------------------------------------------------------------------------

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, self.d_model)
        n_tokens, k = x.shape[0], self.top_k

        # Router in at least fp32 whatever the block's dtype or autocast: Sinkhorn and top-k are
        # sensitive to rounding.
        rdtype = torch.promote_types(x.dtype, torch.float32)
        bias = None if self.router.bias is None else self.router.bias.to(rdtype)
        with torch.autocast(x.device.type, enabled=False):
            logits = F.linear(x.to(rdtype), self.router.weight.to(rdtype), bias)
        idx, gates, probs = self.route(logits)

        # Sort the (token, slot) assignments by expert so each expert reads a contiguous slice.
        flat_idx = idx.reshape(-1)
        counts = torch.bincount(flat_idx, minlength=self.n_experts)
        order = torch.argsort(flat_idx, stable=True)
        token_of_row = order // k
        xs = x.index_select(0, token_of_row)
        impl = self._impl(x)
        announce_kernel("moe experts", impl)
        if impl == "grouped_mm":
            ys = self._experts_grouped(xs, counts, flat_idx[order])
        elif impl == "autograd":
            ys = self._experts_autograd(xs, counts.tolist())
        else:
            ys = _ExpertMLPs.apply(xs, self.w_in, self.w_out, self.b_in, self.b_out, counts.tolist(), self.activation)
        ys = ys * gates.reshape(-1)[order, None].to(ys.dtype)
        out = ys.new_zeros(n_tokens, self.d_model).index_add(0, token_of_row, ys)  # ys is bf16 under autocast

        with torch.no_grad():
            # In distributed training, the global batch's counts on every process (DDP also copies
            # rank zero's buffers to the others before each forward, so all ranks keep one count).
            seen = distributed.global_sum(counts) if self.training else counts
            self.last_tokens_per_expert.copy_(seen)
            self.tokens_per_expert += seen
        if probs is not None:
            # Switch load balancing: f_i = share of the N*k assignments, P_i = mean router prob.
            f = counts.to(probs.dtype) / (n_tokens * k)
            self._aux_loss = self.aux_loss_coef * self.n_experts * (f * probs.mean(dim=0)).sum()
        return out.reshape(shape)

    # --- auxiliary loss and statistics ---------------------------------------------------------

    def aux_loss(self) -> torch.Tensor | None:
        return self._aux_loss

    def reset_stats(self) -> None:
        self.tokens_per_expert.zero_()
        self.last_tokens_per_expert.zero_()
        self.last_sinkhorn_iters = None

    def balance(self, last: bool = False) -> dict[str, float]:
        """Load balance of the cumulative counts since reset_stats() (or of the last forward)."""
        return load_balance_stats(self.last_tokens_per_expert if last else self.tokens_per_expert)
