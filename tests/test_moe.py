"""MoE block: sorted dispatch against a naive per-token loop, Sinkhorn properties, routing balance,
statistics and the load balancing loss. The references here are written independently of
common/blocks/moe.py (per-token Python loops, a numpy Sinkhorn) so that they can disagree with it."""

from __future__ import annotations

import math
import os
import socket

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from common.blocks.moe import MoE, grouped_mm_aligned, load_balance_stats, sinkhorn
from common.blocks.registry import build_block

D, F_HID, E = 8, 12, 4


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # The tensors here are tiny; intra-op threads only add wake-up latency on a busy machine.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- independent references ------------------------------------------------------------------


def np_sinkhorn(logits: np.ndarray, temperature=0.5, init="blackmamba", tol=1e-4, max_iter=100,
                criterion="absolute", eps=None):
    """The release's algorithm, written out in numpy float64: returns (plan, iterations).
    eps=None: a negligible guard (the library's default); the release uses 1e-8."""
    eps = np.finfo(np.float64).tiny if eps is None else eps
    cost = np.exp(logits.astype(np.float64) / temperature)
    n, e = cost.shape
    d0 = np.ones(n)
    d1 = 1.0 / (e * cost.sum(axis=0)) if init == "blackmamba" else np.ones(e)
    it = 0
    error = np.inf
    while error > tol and it < max_iter:
        prev = d1
        d0 = (1.0 / n) / ((cost * d1[None, :]).sum(axis=1) + eps)
        d1 = (1.0 / e) / ((cost * d0[:, None]).sum(axis=0) + eps)
        error = np.abs(d1 - prev).mean()
        if criterion == "relative":
            error /= np.abs(d1).mean()
        it += 1
    return cost * d0[:, None] * d1[None, :], it


def gelu_exact(v):
    return 0.5 * v * (1.0 + torch.erf(v / math.sqrt(2.0)))


def naive_expert(m: MoE, v: torch.Tensor, e: int) -> torch.Tensor:
    f = m.d_ff
    gate = v @ m.w_in[e, :f].T
    up = v @ m.w_in[e, f:].T
    if m.b_in is not None:
        gate, up = gate + m.b_in[e, :f], up + m.b_in[e, f:]
    act = gate * torch.sigmoid(gate) if m.activation == "silu" else gelu_exact(gate)
    y = (act * up) @ m.w_out[e].T
    return y + m.b_out[e] if m.b_out is not None else y


def naive_moe(m: MoE, x: torch.Tensor):
    """Per-token loop: route each token on its own and add up gate * expert(token).

    Returns (output, chosen experts per token, aux loss or None). Training-mode Sinkhorn needs the
    whole batch, so its choice comes from np_sinkhorn on all logits first."""
    xf = x.reshape(-1, m.d_model)
    n, k = xf.shape[0], m.top_k
    w = m.router.weight
    b = m.router.bias if m.router.bias is not None else torch.zeros(m.n_experts)
    logits = [xf[t] @ w.T + b for t in range(n)]

    if m.router_type == "sinkhorn" and m.training:
        all_logits = torch.stack(logits).detach()
        all_logits = (all_logits.sigmoid() if m.sinkhorn_input == "sigmoid" else all_logits).numpy()
        plan, _ = np_sinkhorn(all_logits, m.sinkhorn_temperature, m.sinkhorn_init, m.sinkhorn_tol,
                              m.sinkhorn_max_iter, m.sinkhorn_criterion, m.sinkhorn_eps)
        chosen = [list(np.argsort(-plan[t], kind="stable")[:k]) for t in range(n)]
    else:
        chosen = [sorted(range(m.n_experts), key=lambda j: -logits[t][j].item())[:k] for t in range(n)]

    rows, probs = [], []
    for t in range(n):
        lg, ch = logits[t], chosen[t]
        if m.router_type == "softmax_topk":
            p = torch.exp(lg - lg.max())
            p = p / p.sum()
            probs.append(p)
            g = torch.stack([p[j] for j in ch])
            if k > 1:
                g = g / g.sum()
        elif k == 1:
            g = torch.sigmoid(lg[ch[0]]).reshape(1)
        else:
            z = torch.stack([lg[j] for j in ch])
            g = torch.exp(z - z.max())
            g = g / g.sum()
        rows.append(sum(g[i] * naive_expert(m, xf[t], e) for i, e in enumerate(ch)))
    out = torch.stack(rows).reshape(x.shape)

    aux = None
    if m.router_type == "softmax_topk":
        load = [sum(e == j for ch in chosen for e in ch) for j in range(m.n_experts)]
        mean_p = torch.stack(probs).mean(dim=0)
        aux = m.aux_loss_coef * m.n_experts * sum(load[j] / (n * k) * mean_p[j] for j in range(m.n_experts))
    return out, chosen, aux


def make(seed=0, **kw) -> MoE:
    torch.manual_seed(seed)
    m = MoE(D, n_experts=E, d_ff=F_HID, **kw)
    with torch.no_grad():  # a router bias and weights large enough that routing is not near-uniform
        m.router.weight.mul_(3.0)
        m.router.bias.normal_(0.0, 0.5)
    return m


def all_grads(m: MoE, x: torch.Tensor) -> list[torch.Tensor]:
    params = [x, m.w_in, m.w_out, m.router.weight, m.router.bias]
    if m.b_in is not None:
        params += [m.b_in, m.b_out]
    return params


# --- dispatch against the per-token loop ---------------------------------------------------------


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("top_k", [1, 2])
@pytest.mark.parametrize("router", ["sinkhorn", "sigmoid", "softmax_topk"])
def test_sorted_dispatch_matches_naive_loop_values_and_grads(router, top_k, training):
    m = make(router=router, top_k=top_k).train(training)
    x = torch.randn(2, 9, D, requires_grad=True)
    upstream = torch.randn(2, 9, D)

    out = m(x)
    loss = (out * upstream).sum() + (m.aux_loss() if m.aux_loss() is not None else 0.0)
    params = all_grads(m, x)
    grads = torch.autograd.grad(loss, params)

    ref, chosen, ref_aux = naive_moe(m, x)
    ref_loss = (ref * upstream).sum() + (ref_aux if ref_aux is not None else 0.0)
    ref_grads = torch.autograd.grad(ref_loss, params)

    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for name, g, rg in zip(["x", "w_in", "w_out", "router.weight", "router.bias"], grads, ref_grads):
        torch.testing.assert_close(g, rg, rtol=1e-4, atol=1e-5, msg=lambda s, name=name: f"grad {name}: {s}")
    if router == "softmax_topk":
        torch.testing.assert_close(m.aux_loss(), ref_aux, rtol=1e-6, atol=1e-8)
    else:
        assert m.aux_loss() is None
    # The experts that were used are the ones the per-token router chose.
    expected = torch.bincount(torch.tensor([e for ch in chosen for e in ch]), minlength=E)
    assert torch.equal(m.last_tokens_per_expert, expected)


def test_sinkhorn_training_routes_with_a_converged_plan_too():
    m = make(router="sinkhorn", sinkhorn_init="vanilla", sinkhorn_criterion="relative",
             sinkhorn_tol=1e-9, sinkhorn_max_iter=10_000).train()
    x = torch.randn(3, 16, D)
    ref, _, _ = naive_moe(m, x)
    torch.testing.assert_close(m(x), ref, rtol=1e-5, atol=1e-5)
    assert m.last_sinkhorn_iters > 1


def test_sinkhorn_on_sigmoid_inputs_routes_by_the_plan_of_the_sigmoids():
    # Appendix F's footnote: Sinkhorn runs on sigmoid(logits). Large logits make the two inputs
    # choose differently, so the check can fail if the option is ignored.
    m = make(router="sinkhorn", sinkhorn_input="sigmoid").train()
    with torch.no_grad():
        m.router.weight.mul_(20)
    x = torch.randn(3, 16, D)
    ref, chosen, _ = naive_moe(m, x)
    torch.testing.assert_close(m(x), ref, rtol=1e-5, atol=1e-5)
    m.sinkhorn_input = "logits"
    _, chosen_logits, _ = naive_moe(m, x)
    assert chosen != chosen_logits


def test_geglu_and_expert_biases_match_hand_computation():
    m = make(router="softmax_topk", top_k=2, activation="gelu", bias=True).eval()
    with torch.no_grad():
        m.b_in.normal_()
        m.b_out.normal_()
    x = torch.randn(2, 10, D, requires_grad=True)
    out = m(x)
    ref, _, _ = naive_moe(m, x)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    # GeGLU is not SwiGLU: the same weights with SiLU give something else.
    m.activation = "silu"
    assert (m(x) - out).abs().max() > 1e-3
    g = torch.autograd.grad((out ** 2).sum(), [x, m.b_in, m.b_out])
    m.activation = "gelu"
    rg = torch.autograd.grad((ref ** 2).sum(), [x, m.b_in, m.b_out])
    for a, b in zip(g, rg):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("activation", ["silu", "gelu"])
@pytest.mark.parametrize("impl", ["autograd", "grouped_mm"])
def test_expert_impls_agree_with_the_default_loop(impl, activation):
    if impl == "grouped_mm" and not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch._grouped_mm not available")
    a = make(router="softmax_topk", top_k=2, bias=True, activation=activation, expert_impl="loop").train()
    b = make(router="softmax_topk", top_k=2, bias=True, activation=activation, expert_impl=impl).train()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 20, D, requires_grad=True)
    try:
        out_b = b(x)
    except (RuntimeError, NotImplementedError) as err:
        pytest.skip(f"{impl} unsupported here: {err}")
    out_a = a(x)
    torch.testing.assert_close(out_b, out_a, rtol=1e-5, atol=1e-5)
    # .sum() hands a stride-0 gradient to the backward, which _grouped_mm alone rejects.
    ga = torch.autograd.grad(out_a.sum(), all_grads(a, x))
    gb = torch.autograd.grad(out_b.sum(), all_grads(b, x))
    for u, v in zip(ga, gb):
        torch.testing.assert_close(u, v, rtol=1e-4, atol=1e-5)


def test_grouped_mm_follows_autocast_as_the_autograd_loop_does():
    """Autocast does not cast `torch._grouped_mm`'s inputs; the block must, so that under bf16
    autocast (the `paper` profile's `bf16-mixed`) the fused path computes what the loop does."""
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch._grouped_mm not available")
    a = make(router="sigmoid", bias=True, expert_impl="autograd").eval()
    b = make(router="sigmoid", bias=True, expert_impl="grouped_mm").eval()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 20, D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        try:
            out_b = b(x)
        except (RuntimeError, NotImplementedError) as err:
            pytest.skip(f"grouped_mm unsupported here: {err}")
        out_a = a(x)
    assert out_a.dtype == out_b.dtype == torch.bfloat16
    # Different kernels (the loop's addmm rounds the bias in once, grouped_mm's output then the bias
    # add twice): equal to bf16's resolution, 8 mantissa bits, not bit for bit.
    torch.testing.assert_close(out_b, out_a, rtol=1.6e-2, atol=1e-3)
    ga = torch.autograd.grad(out_a.float().pow(2).sum(), [a.w_in, a.w_out])
    gb = torch.autograd.grad(out_b.float().pow(2).sum(), [b.w_in, b.w_out])
    for u, v in zip(ga, gb):
        assert v.dtype == torch.float32
        torch.testing.assert_close(v, u, rtol=1e-2, atol=1e-3)


def test_grouped_mm_alignment_rule_matches_the_kernel():
    """`grouped_mm_aligned` against the kernel itself (its CPU build enforces the same strides): the
    default path must never pick shapes it rejects, as d_ff = 683 or BlackMamba's routing model's 172."""
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch._grouped_mm not available")
    for d_model, d_ff in [(16, 683), (16, 172), (16, 344), (20, 16), (24, 40), (12, 24)]:
        m = MoE(d_model, n_experts=2, d_ff=d_ff, expert_impl="grouped_mm").bfloat16()
        try:
            m(torch.randn(6, d_model, dtype=torch.bfloat16)).float().sum().backward()
            runs = True
        except RuntimeError as err:
            assert "16 bytes" in str(err)
            runs = False
        assert grouped_mm_aligned(d_model, d_ff) == runs, (d_model, d_ff)


def test_unused_experts_get_zero_gradients():
    m = make(router="sigmoid")
    with torch.no_grad():
        m.router.bias.copy_(torch.tensor([9.0, 0.0, 0.0, 0.0]))  # everything goes to expert 0
    m(torch.randn(10, D)).sum().backward()
    assert m.last_tokens_per_expert.tolist() == [10, 0, 0, 0]
    assert m.w_in.grad[0].abs().sum() > 0 and m.w_in.grad[1:].abs().sum() == 0
    assert m.w_out.grad[1:].abs().sum() == 0


# --- Sinkhorn ---------------------------------------------------------------------------------


def test_sinkhorn_blackmamba_init_is_token_axis_softmax_over_E():
    torch.manual_seed(1)
    logits = torch.randn(64, 8, dtype=torch.float64) * 2
    plan, iters = sinkhorn(logits, temperature=0.5, init="blackmamba", max_iter=0)
    assert iters == 0
    c = np.exp(2.0 * logits.numpy())
    expected = c / c.sum(axis=0, keepdims=True) / 8
    np.testing.assert_allclose(plan.numpy(), expected, rtol=1e-12)
    # And the iterates from there are the reference's, for the release's eps as well as ours.
    for eps in (None, 1e-8):
        plan1, iters1 = sinkhorn(logits, temperature=0.5, init="blackmamba", max_iter=1, eps=eps)
        ref1, _ = np_sinkhorn(logits.numpy(), max_iter=1, eps=eps)
        assert iters1 == 1
        np.testing.assert_allclose(plan1.numpy(), ref1, rtol=1e-12)


@pytest.mark.parametrize("init", ["blackmamba", "vanilla"])
def test_sinkhorn_converges_to_uniform_marginals(init):
    torch.manual_seed(2)
    n, e, tol = 512, 8, 1e-7
    logits = torch.randn(n, e) * 1.5 + torch.linspace(0, 3, e)  # skewed towards the last experts
    plan, iters = sinkhorn(logits, init=init, tol=tol, max_iter=10_000, criterion="relative")
    assert iters < 10_000
    assert plan.sum().item() == pytest.approx(1.0, rel=1e-6)
    # Columns are exact after each d1 update, up to the eps guard in the denominators.
    np.testing.assert_allclose(plan.sum(dim=0).numpy(), np.full(e, 1 / e), rtol=1e-6)
    # A row is off by at most max_j |delta d1_j| / d1_j <= E * tol * mean(d1) / min(d1) under the
    # relative stop test; mean/min of d1 stays below ~10 for these logits, hence E * tol * 10.
    np.testing.assert_allclose(plan.sum(dim=1).numpy(), np.full(n, 1 / n), rtol=e * tol * 10)
    # The same plan as the independent reference, and the same fixed point for either init.
    ref, ref_iters = np_sinkhorn(logits.numpy(), init=init, tol=tol, max_iter=10_000, criterion="relative")
    assert ref_iters == iters
    np.testing.assert_allclose(plan.numpy(), ref, rtol=1e-9)
    other, _ = sinkhorn(logits, init="vanilla" if init == "blackmamba" else "blackmamba", tol=tol,
                        max_iter=10_000, criterion="relative")
    np.testing.assert_allclose(plan.numpy(), other.numpy(), rtol=1e-4)


def test_sinkhorn_absolute_criterion_with_blackmamba_init_stops_after_one_iteration():
    # The release's quirk: d1 ~ 1/(E*N*mean cost), so mean|delta d1| < 1e-4 holds at once.
    torch.manual_seed(3)
    logits = torch.randn(1024, 8)
    _, iters_abs = sinkhorn(logits, init="blackmamba", tol=1e-4, criterion="absolute")
    _, iters_rel = sinkhorn(logits, init="blackmamba", tol=1e-4, criterion="relative")
    _, iters_vanilla = sinkhorn(logits, init="vanilla", tol=1e-4, criterion="absolute")
    assert iters_abs == 1
    assert iters_rel > 1
    assert iters_vanilla > 1


def test_sinkhorn_release_eps_stalls_where_the_default_converges():
    torch.manual_seed(2)
    logits = torch.randn(512, 8) * 1.5 + torch.linspace(0, 3, 8)
    _, iters = sinkhorn(logits, tol=1e-6, max_iter=2000, criterion="relative")
    _, iters_release = sinkhorn(logits, tol=1e-6, max_iter=2000, criterion="relative", eps=1e-8)
    assert iters < 100
    assert iters_release == 2000


def test_sinkhorn_handles_logits_that_overflow_float64():
    torch.manual_seed(5)
    logits = torch.randn(64, 4, dtype=torch.float64)  # float32 would round 400 + x to ~3e-5
    plan, _ = sinkhorn(logits + 400.0, tol=1e-10, criterion="relative")  # exp(800) overflows
    ref, _ = sinkhorn(logits, tol=1e-10, criterion="relative")
    assert torch.isfinite(plan).all()
    np.testing.assert_allclose(plan.numpy(), ref.numpy(), rtol=1e-6)


# --- routing behaviour --------------------------------------------------------------------------


def skewed_moe(router: str, **kw) -> MoE:
    torch.manual_seed(4)
    m = MoE(32, n_experts=8, d_ff=16, router=router, **kw)
    with torch.no_grad():
        m.router.bias.zero_()
        m.router.bias[0] = 6.0  # every token's logit for expert 0 towers over the others
    return m


def test_eval_routes_by_argmax_of_logits():
    m = skewed_moe("sinkhorn").eval()
    x = torch.randn(4, 64, 32)
    m(x)
    logits = x.reshape(-1, 32) @ m.router.weight.T + m.router.bias
    expected = torch.bincount(logits.argmax(dim=1), minlength=8)
    assert torch.equal(m.last_tokens_per_expert, expected)
    assert expected[0] > 0.95 * 256


def _sinkhorn_on_a_share(rank: int, port: int, logits: torch.Tensor, out: dict) -> None:
    # Here, in a module that imports no Lightning: each spawned process imports the module again.
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    try:
        share = logits[:30] if rank == 0 else logits[30:]  # unequal shares
        plan, iterations = sinkhorn(share, tol=1e-9, criterion="relative", across_processes=True)
        out[rank] = (plan, iterations)
    finally:
        torch.distributed.destroy_process_group()


def test_sinkhorn_across_two_processes_is_sinkhorn_over_all_their_tokens():
    """The oracle: one Sinkhorn over the 70 tokens of both processes, in one process."""
    logits = torch.randn(70, 4, generator=torch.Generator().manual_seed(0)) * 2 + torch.arange(4.0)
    whole, iterations = sinkhorn(logits, tol=1e-9, criterion="relative")
    with mp.Manager() as manager:
        out = manager.dict()
        with socket.socket() as probe:  # a port no other test's group is using
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        mp.spawn(_sinkhorn_on_a_share, args=(port, logits, out), nprocs=2)
        (plan0, it0), (plan1, it1) = out[0], out[1]
    assert it0 == it1 == iterations > 1
    torch.testing.assert_close(torch.cat([plan0, plan1]), whole, rtol=1e-10, atol=0)
    assert torch.equal(torch.cat([plan0, plan1]).argmax(-1), whole.argmax(-1))


def test_sinkhorn_training_spreads_skewed_load_where_argmax_does_not():
    x = torch.randn(8, 256, 32)
    m = skewed_moe("sinkhorn").train()
    m(x)
    sink = m.balance(last=True)
    m.eval()
    m(x)
    argmax = m.balance(last=True)
    plain = skewed_moe("sigmoid").train()  # the release as executed: no Sinkhorn even in training
    plain(x)
    assert argmax["max_over_mean"] > 7.5 and argmax["entropy"] < 0.2
    assert plain.balance(last=True)["max_over_mean"] > 7.5
    assert sink["max_over_mean"] < 1.5 and sink["min_over_mean"] > 0.5 and sink["entropy"] > 0.95
    assert m.last_sinkhorn_iters == 1  # release criterion and init


# --- statistics, loss, registry -------------------------------------------------------------------


def test_tokens_per_expert_accumulates_and_resets():
    m = make(router="softmax_topk", top_k=2).train()
    total = torch.zeros(E, dtype=torch.long)
    for _ in range(3):
        x = torch.randn(3, 7, D)
        m(x)
        logits = x.reshape(-1, D) @ m.router.weight.T + m.router.bias
        counts = torch.bincount(logits.topk(2, dim=1).indices.reshape(-1), minlength=E)
        total += counts
        assert torch.equal(m.last_tokens_per_expert, counts)
    assert torch.equal(m.tokens_per_expert, total)
    assert m.tokens_per_expert.sum().item() == 3 * 21 * 2
    assert "tokens_per_expert" not in m.state_dict()
    m.reset_stats()
    assert m.tokens_per_expert.sum().item() == 0


def test_load_balancing_loss_by_hand():
    m = make(router="softmax_topk", top_k=1, aux_loss_coef=0.1).train()
    x = torch.randn(40, D)
    m(x)
    logits = (x @ m.router.weight.T + m.router.bias).double()
    probs = logits.exp() / logits.exp().sum(dim=1, keepdim=True)
    choice = probs.argmax(dim=1)
    f = [(choice == j).double().mean() for j in range(E)]
    expected = 0.1 * E * sum(f[j] * probs[:, j].mean() for j in range(E))
    assert m.aux_loss().item() == pytest.approx(expected.item(), rel=1e-5)
    # A router with uniform probabilities gives exactly coef, whatever the choices (the loss's
    # minimum); one that sends every token to expert 0 with probability p gives coef * E * p.
    with torch.no_grad():
        m.router.weight.zero_()
        m.router.bias.zero_()
    m(x)
    assert m.aux_loss().item() == pytest.approx(0.1, rel=1e-5)
    with torch.no_grad():
        m.router.bias[0] = 10.0
    m(x)
    p = math.exp(10.0) / (math.exp(10.0) + E - 1)
    assert m.aux_loss().item() == pytest.approx(0.1 * E * p, rel=1e-5)


def test_load_balance_stats():
    s = load_balance_stats(torch.tensor([4, 0, 0, 0]))
    assert s["max_over_mean"] == 4 and s["min_over_mean"] == 0 and s["entropy"] == 0
    u = load_balance_stats(torch.tensor([5, 5, 5, 5]))
    assert u["max_over_mean"] == 1 and u["cv"] == 0 and u["entropy"] == pytest.approx(1.0)


def test_registry_contract_and_dtypes():
    m = build_block("moe", 16, layer_idx=3, shared={"n_ctx": 128}, n_experts=4)
    assert isinstance(m, MoE) and m.layer_idx == 3
    assert m.d_ff == 64  # 8/3 * 16 rounded up to 64
    assert MoE(1152).d_ff == 3072  # BlackMamba-1.5B's expert width
    assert m.allocate_cache(2, 10) is None
    x = torch.randn(2, 5, 16)
    m.eval()
    torch.testing.assert_close(m.step(x[:, :1], None), m(x)[:, :1])
    mb = build_block("moe", 16, n_experts=4).to(torch.bfloat16).train()
    y = mb(x.to(torch.bfloat16))
    assert y.dtype == torch.bfloat16 and y.shape == x.shape and torch.isfinite(y.float()).all()


def test_autocast_bf16_runs_and_stays_close():
    m = make(router="sinkhorn").train()
    x = torch.randn(4, 512, D, requires_grad=True)  # enough tokens that bf16 logits would flip some
    ref = m(x)
    ref_counts = m.last_tokens_per_expert.clone()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m(x)
    assert y.dtype == torch.bfloat16
    assert torch.equal(m.last_tokens_per_expert, ref_counts)  # the router stays fp32
    y.float().sum().backward()
    assert x.grad is not None and torch.isfinite(m.w_in.grad).all()
    # Relative to the output's size (most entries are below 0.1): the bf16 error here is about 0.6%,
    # and dropping an expert's gate factor (outputs off by a factor) moves it far past the bound.
    assert (y.float() - ref).norm() / ref.norm() < 0.02
