"""Tensor decompositions and numerical linear algebra as tensorly and scientific code write them with
torch: mode-n unfolding and folding with ``movedim`` + ``reshape``, Khatri-Rao products through
``einsum``, CP by alternating least squares (``solve`` / ``lstsq`` / ``pinv`` on Hadamard products
of Gram matrices) and by gradient descent, non-negative CP and HALS NMF, Tucker by HOSVD and HOOI
with n-mode products, TT-SVD, randomized SVD with QR power iterations, truncated-SVD errors (the
Eckart-Young identities), matrix completion by masked ALS and soft-impute, robust PCA with singular
value and soft thresholding, Procrustes / Kabsch alignment with the determinant sign correction,
and gradients through ``svd``, ``eigh`` and ``qr``. Inputs are NumPy arrays from fixed seeds;
where a factor's sign is arbitrary only sign-invariant quantities are returned (or the signs are
fixed the way sklearn's ``svd_flip`` fixes them)."""

from __future__ import annotations

import math

import numpy as np

from programs import program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------- tensorly-style helpers


def unfold(tensor, mode):
    """tensorly's mode-n unfolding: the mode first, the rest in C order."""
    return tensor.movedim(mode, 0).reshape(tensor.shape[mode], -1)


def fold(unfolded, mode, shape):
    """The inverse of :func:`unfold`."""
    full_shape = list(shape)
    mode_dim = full_shape.pop(mode)
    full_shape.insert(0, mode_dim)
    return unfolded.reshape(full_shape).movedim(0, mode)


def khatri_rao(torch, matrices, skip_matrix=None):
    """Column-wise Kronecker product (rows in C order: the first matrix varies slowest)."""
    if skip_matrix is not None:
        matrices = [m for i, m in enumerate(matrices) if i != skip_matrix]
    rank = matrices[0].shape[1]
    out = matrices[0]
    for m in matrices[1:]:
        out = torch.einsum("ir,jr->ijr", out, m).reshape(-1, rank)
    return out


def mode_dot(torch, tensor, matrix, mode):
    """The n-mode product ``tensor x_n matrix`` (``matrix`` is ``(J, I_n)``)."""
    new_shape = list(tensor.shape)
    new_shape[mode] = matrix.shape[0]
    return fold(matrix @ unfold(tensor, mode), mode, new_shape)


def multi_mode_dot(torch, tensor, matrices, skip=None, transpose=False):
    out = tensor
    for mode, m in enumerate(matrices):
        if mode == skip:
            continue
        out = mode_dot(torch, out, m.T if transpose else m, mode)
    return out


def cp_to_tensor(torch, weights, factors):
    shape = [f.shape[0] for f in factors]
    full = (factors[0] * weights) @ khatri_rao(torch, factors, skip_matrix=0).T
    return fold(full, 0, shape)


def _low_rank_tensor(seed, shape, rank, noise):
    rng = _rng(seed)
    factors = [rng.standard_normal((n, rank)) for n in shape]
    full = np.einsum("ir,jr,kr->ijk", *factors)
    return full + noise * rng.standard_normal(shape)


# ---------------------------------------------------------------------------------------- programs


@program
def unfold_fold_khatri_rao_and_mode_products(torch):
    """The identities tensorly's code rests on: ``fold(unfold(X, n)) == X``, the unfolding of a
    CP tensor is ``A_n @ khatri_rao(others).T``, the MTTKRP computed from the unfolding and by one
    ``einsum``, n-mode products against ``tensordot``, the Kronecker-vec identity and the
    ``torch.kron`` / Khatri-Rao relation, on float32 tensors."""
    rng = _rng(1)
    X = torch.tensor(rng.standard_normal((4, 3, 5)).astype(np.float32))
    unf = [unfold(X, n) for n in range(3)]
    refold = [fold(u, n, X.shape) for n, u in enumerate(unf)]
    A, B, C = (torch.tensor(rng.standard_normal((n, 2)).astype(np.float32)) for n in (4, 3, 5))
    weights = torch.tensor([2.0, -0.5])
    T = cp_to_tensor(torch, weights, [A, B, C])
    T_einsum = torch.einsum("r,ir,jr,kr->ijk", weights, A, B, C)
    kr_bc = khatri_rao(torch, [B, C])
    kron_cols = torch.stack([torch.kron(B[:, r], C[:, r]) for r in range(2)], dim=1)
    unf1_identity = unfold(T, 1) - (B * weights) @ khatri_rao(torch, [A, C]).T
    mttkrp = unfold(X, 1) @ khatri_rao(torch, [A, C])
    mttkrp_einsum = torch.einsum("ijk,ir,kr->jr", X, A, C)
    M = torch.tensor(rng.standard_normal((6, 3)).astype(np.float32))
    Y = mode_dot(torch, X, M, 1)
    Y_td = torch.tensordot(X, M, dims=([1], [1])).movedim(-1, 1)
    # vec(A X B^T) = (B kron A) vec(X) with column-major vec, as the textbooks write it
    P = torch.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    Q = torch.tensor(rng.standard_normal((2, 5)).astype(np.float32))
    Z = X[:, 0, :]
    lhs = (P @ Z @ Q.T).T.reshape(-1)
    rhs = torch.kron(Q, P) @ Z.T.reshape(-1)
    return {"unf0": unf[0], "unf1": unf[1], "unf2": unf[2],
            "refold_ok": [bool(torch.equal(r, X)) for r in refold],
            "unf_shapes": [tuple(u.shape) for u in unf], "T": T, "T_err": (T - T_einsum).abs().max(),
            "kr_bc": kr_bc, "kr_vs_kron": (kr_bc - kron_cols).abs().max(),
            "unf1_identity": unf1_identity.abs().max(), "mttkrp": mttkrp,
            "mttkrp_err": (mttkrp - mttkrp_einsum).abs().max(), "Y": Y,
            "Y_err": (Y - Y_td).abs().max(), "vec_lhs": lhs, "vec_err": (lhs - rhs).abs().max(),
            "frob": torch.linalg.norm(X), "frob_unf": [torch.linalg.norm(u, "fro") for u in unf]}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def cp_als_solve_lstsq_pinv_with_normalization(torch):
    """tensorly's ``parafac``: ALS sweeps where each factor solves ``V^T F^T = MTTKRP^T`` with
    ``V`` the Hadamard product of the other factors' Gram matrices, the columns normalised into
    ``weights`` after each update; the relative error per sweep; then the same sweeps with
    ``lstsq`` on the Khatri-Rao product and with ``pinv(V)``, in float64."""
    shape, rank = (6, 5, 4), 3
    X = torch.tensor(_low_rank_tensor(2, shape, rank, 0.05))
    norm_x = torch.linalg.norm(X)
    init = [torch.tensor(_rng(20 + n).standard_normal((s, rank))) for n, s in enumerate(shape)]

    def sweep(factors, weights, how):
        for mode in range(3):
            kr = khatri_rao(torch, factors, skip_matrix=mode)
            mttkrp = unfold(X, mode) @ kr
            if how == "lstsq":
                f = torch.linalg.lstsq(kr, unfold(X, mode).T).solution.T
            else:
                V = torch.ones(rank, rank, dtype=X.dtype)
                for i, other in enumerate(factors):
                    if i != mode:
                        V = V * (other.T @ other)
                if how == "solve":
                    f = torch.linalg.solve(V.T, mttkrp.T).T
                else:
                    f = mttkrp @ torch.linalg.pinv(V)
            weights = torch.linalg.norm(f, ord=2, dim=0)
            factors[mode] = f / weights
        rec = cp_to_tensor(torch, weights, factors)
        return factors, weights, torch.linalg.norm(X - rec) / norm_x

    out = {}
    for how in ("solve", "lstsq", "pinv"):
        factors, weights = [f.clone() for f in init], torch.ones(rank, dtype=X.dtype)
        errors = []
        for _ in range(8 if how == "solve" else 3):
            factors, weights, err = sweep(factors, weights, how)
            errors.append(err)
        out[how] = {"errors": errors, "weights": weights, "factors": factors}
    # the fit, as tensorly reports it, and the congruence between the solve and pinv factors
    congruence = [
        (a * b).sum(0).abs() for a, b in zip(out["solve"]["factors"], out["pinv"]["factors"])
    ]
    out["fit"] = 1 - out["solve"]["errors"][-1]
    out["congruence"] = congruence
    return out


@program(rtol=2e-4, atol=2e-5)
def cp_decomposition_by_adam_on_einsum_reconstruction(torch):
    """CP fitted the deep-learning way: factors are ``nn.Parameter``s, the reconstruction one
    ``einsum``, the loss the squared error plus an L2 penalty, Adam for a few steps; a masked
    variant (tensor completion) with the loss on observed entries only; float32."""
    shape, rank = (5, 4, 6), 3
    X = torch.tensor(_low_rank_tensor(3, shape, rank, 0.01).astype(np.float32))
    mask = torch.tensor(_rng(33).uniform(size=shape) < 0.7)
    out = {}
    for name, m in (("full", None), ("masked", mask)):
        factors = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.tensor(0.5 * _rng(30 + n).standard_normal((s, rank)).astype(np.float32)))
             for n, s in enumerate(shape)])  # fmt: skip
        opt = torch.optim.Adam(factors.parameters(), lr=0.05)
        losses = []
        for _ in range(12):
            opt.zero_grad()
            rec = torch.einsum("ir,jr,kr->ijk", *factors)
            diff = rec - X if m is None else (rec - X)[m]
            loss = diff.pow(2).mean() + 1e-3 * sum(f.pow(2).sum() for f in factors)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.no_grad():
            rec = torch.einsum("ir,jr,kr->ijk", *factors)
            rel = torch.linalg.norm(rec - X) / torch.linalg.norm(X)
        out[name] = {"losses": losses, "rel": rel, "A": factors[0].detach(),
                     "grad_C": factors[2].grad}  # fmt: skip
    out["n_observed"] = int(mask.sum())
    return out


@program(rtol=1e-8, atol=1e-10)
def nonnegative_cp_multiplicative_and_hals_nmf(torch):
    """tensorly's ``non_negative_parafac`` multiplicative updates (``F *= MTTKRP / (F V)`` with an
    epsilon floor), then NMF by HALS (column-by-column closed-form updates clamped at a small
    floor, as scikit-learn's coordinate-descent solver does), with the errors per iteration; the
    factors are compared after scaling each component to unit norm, in float64."""
    shape, rank = (5, 4, 3), 2
    rng = _rng(4)
    true = [rng.uniform(0.1, 1.0, (s, rank)) for s in shape]
    X = torch.tensor(np.einsum("ir,jr,kr->ijk", *true) + 0.01 * rng.uniform(size=shape))
    factors = [torch.tensor(_rng(40 + n).uniform(0.1, 1.0, (s, rank))) for n, s in enumerate(shape)]
    eps = 1e-12
    errors = []
    for _ in range(10):
        for mode in range(3):
            V = torch.ones(rank, rank, dtype=X.dtype)
            for i, f in enumerate(factors):
                if i != mode:
                    V = V * (f.T @ f)
            num = unfold(X, mode) @ khatri_rao(torch, factors, skip_matrix=mode)
            denom = torch.clamp(factors[mode] @ V, min=eps)
            factors[mode] = factors[mode] * num / denom
        rec = cp_to_tensor(torch, torch.ones(rank, dtype=X.dtype), factors)
        errors.append(torch.linalg.norm(X - rec) / torch.linalg.norm(X))
    scales = torch.stack([f.norm(dim=0) for f in factors]).prod(0)
    order = torch.argsort(scales, descending=True)
    normalized = [(f / f.norm(dim=0))[:, order] for f in factors]
    # HALS NMF of a nonnegative matrix
    Vm = torch.tensor(_rng(41).uniform(0, 1, (12, 3)) @ _rng(42).uniform(0, 1, (3, 9)))
    W = torch.tensor(_rng(43).uniform(0.1, 1, (12, 3)))
    H = torch.tensor(_rng(44).uniform(0.1, 1, (3, 9)))
    hals = []
    for _ in range(15):
        WtV, WtW = W.T @ Vm, W.T @ W
        for k in range(3):
            H[k] = torch.clamp(H[k] + (WtV[k] - WtW[k] @ H) / WtW[k, k], min=1e-16)
        VHt, HHt = Vm @ H.T, H @ H.T
        for k in range(3):
            W[:, k] = torch.clamp(W[:, k] + (VHt[:, k] - W @ HHt[:, k]) / HHt[k, k], min=1e-16)
        hals.append(torch.linalg.matrix_norm(Vm - W @ H) / torch.linalg.matrix_norm(Vm))
    return {"errors": errors, "scales": scales[order], "factors": normalized,
            "nonneg": all(bool((f >= 0).all()) for f in factors), "hals": hals, "WH": W @ H,
            "W_colsum": W.sum(0)}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def tucker_hosvd_and_hooi_with_n_mode_products(torch):
    """Tucker by HOSVD (leading left singular vectors of each unfolding, taken from the default
    ``torch.linalg.svd`` call and sliced), the core by n-mode products with the transposed
    factors, then HOOI sweeps; signs fixed by ``svd_flip`` so the core is comparable; the
    all-orthogonality of the core, errors and the compression ratio, in float64."""
    shape, ranks = (6, 5, 4), (3, 3, 2)
    rng = _rng(5)
    core0 = rng.standard_normal(ranks)
    mats = [np.linalg.qr(rng.standard_normal((s, r)))[0] for s, r in zip(shape, ranks)]
    full = np.einsum("abc,ia,jb,kc->ijk", core0, *mats) + 0.02 * rng.standard_normal(shape)
    X = torch.tensor(full)

    def leading(M, r):
        U, S, Vh = torch.linalg.svd(M)
        U = U[:, :r]
        signs = torch.sign(U[torch.abs(U).argmax(0), torch.arange(r)])
        return U * signs, S

    factors, spectra = [], []
    for mode in range(3):
        U, S = leading(unfold(X, mode), ranks[mode])
        factors.append(U)
        spectra.append(S)
    core = multi_mode_dot(torch, X, factors, transpose=True)
    rec = multi_mode_dot(torch, core, factors)
    hosvd_err = torch.linalg.norm(X - rec) / torch.linalg.norm(X)
    # all-orthogonality: the unfoldings of the HOSVD core have orthogonal rows
    gram = [unfold(core, n) @ unfold(core, n).T for n in range(3)]
    hooi = []
    for _ in range(3):
        for mode in range(3):
            Y = multi_mode_dot(torch, X, factors, skip=mode, transpose=True)
            factors[mode], _ = leading(unfold(Y, mode), ranks[mode])
        core = multi_mode_dot(torch, X, factors, transpose=True)
        hooi.append(torch.sqrt(torch.linalg.norm(X) ** 2 - torch.linalg.norm(core) ** 2))
    n_params = sum(s * r for s, r in zip(shape, ranks)) + math.prod(ranks)
    return {"spectra": spectra, "hosvd_err": hosvd_err, "core_hosvd_rec": rec, "gram": gram,
            "hooi": hooi, "core": core, "factors": factors,
            "compression": math.prod(shape) / n_params}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def tensor_train_svd_and_contraction(torch):
    """TT-SVD (Oseledets): sweep left to right, reshaping the remainder to ``(r * n_k, -1)`` and
    keeping the singular values above a relative threshold ``delta`` (capped at a maximum rank);
    the TT ranks, the reconstruction by contracting the cores with ``tensordot``, its error
    against the bound ``eps * ||X||``, the left-orthogonality of the cores and the TT inner
    product of the tensor with itself, in float64."""
    rng = _rng(6)
    shape = (4, 3, 5, 3)
    # a tensor with decaying TT structure: sum of a few separable terms
    X_np = sum(
        (0.6**t) * np.einsum("i,j,k,l->ijkl", *[rng.standard_normal(s) for s in shape])
        for t in range(4)
    )
    X = torch.tensor(X_np)
    eps = 0.05
    delta = eps / math.sqrt(len(shape) - 1) * torch.linalg.norm(X)
    cores, ranks, C, r = [], [1], X, 1
    for n in shape[:-1]:
        C = C.reshape(r * n, -1)
        U, S, Vh = torch.linalg.svd(C, full_matrices=False)
        tail = torch.flip(torch.cumsum(torch.flip(S**2, [0]), 0), [0])  # tail[i] = sum S[i:]^2
        keep = int((tail > delta**2).sum())
        r_new = max(1, min(keep, 3))
        cores.append(U[:, :r_new].reshape(r, n, r_new))
        C = S[:r_new, None] * Vh[:r_new]
        r = r_new
        ranks.append(r)
    cores.append(C.reshape(r, shape[-1], 1))
    ranks.append(1)
    full = cores[0]
    for core in cores[1:]:
        full = torch.tensordot(full, core, dims=([-1], [0]))
    full = full.reshape(shape)
    err = torch.linalg.norm(X - full)
    left_orth = [c.reshape(-1, c.shape[-1]).T @ c.reshape(-1, c.shape[-1]) for c in cores[:-1]]
    # <X, X> in TT format: contract the cores pairwise
    v = torch.ones(1, 1, dtype=X.dtype)
    for c in cores:
        v = torch.einsum("ab,anc,bnd->cd", v, c, c)
    n_params = sum(c.numel() for c in cores)
    return {"ranks": ranks, "rec": full, "err": err, "bound": eps * torch.linalg.norm(X),
            "within": bool(err <= eps * torch.linalg.norm(X)), "left_orth": left_orth,
            "tt_norm2": v.squeeze(), "norm2": (X * X).sum(), "n_params": n_params,
            "core_shapes": [tuple(c.shape) for c in cores]}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def randomized_svd_with_qr_power_iterations(torch):
    """Halko-Martinsson-Tropp randomized SVD: a NumPy Gaussian test matrix with oversampling,
    subspace (power) iterations re-orthonormalised by QR each half step, the small SVD of ``Q^T
    A``; singular values against ``svdvals`` for 0, 1 and 3 power iterations, the projection
    error ``||A - Q Q^T A||`` and the sign-invariant rank-k approximation, in float64."""
    rng = _rng(7)
    m, n, k, p = 40, 25, 4, 4
    decay = 0.5 ** np.arange(n)
    U0 = np.linalg.qr(rng.standard_normal((m, n)))[0]
    V0 = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = torch.tensor((U0 * decay) @ V0.T)
    omega = torch.tensor(rng.standard_normal((n, k + p)))
    exact = torch.linalg.svdvals(A)
    out = {"exact": exact[:k]}
    for q in (0, 1, 3):
        Y = A @ omega
        Q, _ = torch.linalg.qr(Y)
        for _ in range(q):
            Z, _ = torch.linalg.qr(A.T @ Q)
            Q, _ = torch.linalg.qr(A @ Z)
        B = Q.T @ A
        Ub, S, Vh = torch.linalg.svd(B, full_matrices=False)
        U = Q @ Ub
        approx = U[:, :k] @ torch.diag(S[:k]) @ Vh[:k]
        out[f"q{q}"] = {"S": S[:k], "proj_err": torch.linalg.norm(A - Q @ (Q.T @ A), ord=2),
                        "approx_err": torch.linalg.matrix_norm(A - approx, ord=2),
                        "approx": approx[:5], "orth": torch.dist(Q.T @ Q, torch.eye(k + p, dtype=A.dtype))}  # fmt: skip
    out["optimal"] = exact[k]
    return out


@program
def truncated_svd_eckart_young_and_torch_svd_api(torch):
    """Truncated-SVD reconstruction errors in the Frobenius and spectral norms against the tails of
    the singular values (Eckart-Young), the energy kept per rank, low-rank image compression of
    a smooth float32 "image", the nuclear norm, ``matrix_rank`` with tolerances and the old
    ``torch.svd`` API (``V``, not ``Vh``) with ``some=True``."""
    ys, xs = np.mgrid[0:16, 0:12] / 8.0
    img = np.sin(xs * 1.3) * np.cos(ys) + 0.5 * np.exp(-((xs - 0.7) ** 2 + (ys - 1.0) ** 2))
    img = img + 0.01 * _rng(8).standard_normal(img.shape)
    M = torch.tensor(img.astype(np.float32))
    U, S, Vh = torch.linalg.svd(M, full_matrices=False)
    fro, spec, bound_fro, keep = [], [], [], []
    for k in (1, 2, 3, 5):
        Mk = U[:, :k] @ torch.diag(S[:k]) @ Vh[:k, :]
        fro.append(torch.linalg.norm(M - Mk, "fro"))
        spec.append(torch.linalg.matrix_norm(M - Mk, ord=2))
        bound_fro.append(torch.sqrt((S[k:] ** 2).sum()))
        keep.append(((S[:k] ** 2).sum() / (S**2).sum()).item())
    U2, S2, V2 = torch.svd(M)
    M3 = (U2[:, :3] * S2[:3]) @ V2[:, :3].T
    return {"S": S, "fro": fro, "spec": spec, "bound_fro": bound_fro, "tail_spec": S[[1, 2, 3, 5]],
            "keep": keep, "M3": M3, "nuc": torch.linalg.matrix_norm(M, ord="nuc"),
            "rank": torch.linalg.matrix_rank(M), "rank_tol": torch.linalg.matrix_rank(M, atol=0.1),
            "rank_rtol": torch.linalg.matrix_rank(M, rtol=1e-2), "V_shape": tuple(V2.shape),
            "S_same": torch.allclose(S, S2), "cond": torch.linalg.cond(M[:, :4])}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def matrix_completion_masked_als_and_soft_impute(torch):
    """Low-rank matrix completion: ALS where each row's factor solves its own regularised normal
    equations over the observed entries (a batch of ``(r, r)`` systems built with ``einsum`` from
    the mask, one ``torch.linalg.solve``), train/test RMSE per sweep; then soft-impute (Mazumder,
    Hastie & Tibshirani): fill the missing entries with the current estimate and shrink the
    singular values, in float64."""
    rng = _rng(9)
    m, n, r = 14, 10, 2
    R = torch.tensor(rng.standard_normal((m, r)) @ rng.standard_normal((r, n)))
    mask_np = rng.uniform(size=(m, n)) < 0.6
    M = torch.tensor(mask_np.astype(np.float64))
    test = 1 - M
    lam = 0.1
    U = torch.tensor(0.3 * _rng(90).standard_normal((m, r)))
    V = torch.tensor(0.3 * _rng(91).standard_normal((n, r)))
    eye = torch.eye(r, dtype=R.dtype)
    train_rmse, test_rmse = [], []
    for _ in range(6):
        G = torch.einsum("ij,jr,js->irs", M, V, V) + lam * eye
        U = torch.linalg.solve(G, ((M * R) @ V).unsqueeze(-1)).squeeze(-1)
        G = torch.einsum("ij,ir,is->jrs", M, U, U) + lam * eye
        V = torch.linalg.solve(G, ((M * R).T @ U).unsqueeze(-1)).squeeze(-1)
        P = U @ V.T
        train_rmse.append(torch.sqrt(((P - R) ** 2 * M).sum() / M.sum()))
        test_rmse.append(torch.sqrt(((P - R) ** 2 * test).sum() / test.sum()))
    Z = torch.zeros_like(R)
    shrink = 1.0
    si_err, si_rank = [], []
    for _ in range(8):
        filled = torch.where(M.bool(), R, Z)
        Uz, Sz, Vhz = torch.linalg.svd(filled, full_matrices=False)
        Sz = torch.clamp(Sz - shrink, min=0)
        Z = Uz @ torch.diag_embed(Sz) @ Vhz
        si_err.append(torch.linalg.norm((Z - R) * test) / torch.linalg.norm(R * test))
        si_rank.append(int((Sz > 0).sum()))
    return {"train_rmse": train_rmse, "test_rmse": test_rmse, "P": P, "si_err": si_err,
            "si_rank": si_rank, "Z": Z, "n_obs": int(M.sum())}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robust_pca_inexact_alm_svt_and_shrinkage(torch):
    """Robust PCA by principal component pursuit with the inexact augmented Lagrangian method
    (Lin, Chen & Ma): ``L`` by singular value thresholding, ``S`` by elementwise soft
    thresholding (``sign(x) * relu(|x| - tau)``), the dual update and a growing ``mu``; the
    residual, rank of ``L`` and number of nonzeros of ``S`` per iteration, in float64."""
    rng = _rng(10)
    m, n, r = 20, 15, 2
    L0 = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
    S0 = np.zeros((m, n))
    idx = rng.choice(m * n, size=20, replace=False)
    S0.flat[idx] = rng.uniform(-5, 5, size=20)
    X = torch.tensor(L0 + S0)
    F = torch.nn.functional

    def shrink(x, tau):
        return torch.sign(x) * F.relu(torch.abs(x) - tau)

    def svt(x, tau):
        U, s, Vh = torch.linalg.svd(x, full_matrices=False)
        s = shrink(s, tau)
        return (U * s) @ Vh, int((s > 0).sum())

    lam = 1.0 / math.sqrt(max(m, n))
    norm_two = torch.linalg.matrix_norm(X, ord=2)
    norm_inf = X.abs().max() / lam
    Y = X / torch.maximum(norm_two, norm_inf)
    mu, rho = 1.25 / norm_two, 1.5
    L, S = torch.zeros_like(X), torch.zeros_like(X)
    residuals, ranks, nnz = [], [], []
    for _ in range(15):
        L, rk = svt(X - S + Y / mu, 1 / mu)
        S = shrink(X - L + Y / mu, lam / mu)
        Z = X - L - S
        Y = Y + mu * Z
        mu = mu * rho
        residuals.append(torch.linalg.norm(Z) / torch.linalg.norm(X))
        ranks.append(rk)
        nnz.append(int((S != 0).sum()))
    return {"residuals": residuals, "ranks": ranks, "nnz": nnz, "L": L, "S": S,
            "L_err": torch.linalg.norm(L - torch.tensor(L0)) / np.linalg.norm(L0),
            "support_hits": int(((S.abs() > 0.5) & torch.tensor(S0 != 0)).sum()),
            "mu": float(mu)}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def procrustes_kabsch_with_reflection_correction(torch):
    """Orthogonal Procrustes and Kabsch alignment: the SVD of the cross-covariance, the
    ``d = sign(det(V U^T))`` correction so the result is a rotation (one point set is a mirror
    image, so the correction matters), batched Kabsch over several point clouds with ``torch.det``
    and ``diag_embed``, the RMSD after alignment; the embedding-alignment form ``W = U V^T``
    (MUSE / Smith et al.) and the scaled similarity (Umeyama) transform, in float64."""
    rng = _rng(11)
    B, N = 3, 12
    P = rng.standard_normal((B, N, 3))
    angles = rng.uniform(-np.pi, np.pi, (B, 3))

    def rot(a, b, c):
        Rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        Ry = np.array([[np.cos(b), 0, np.sin(b)], [0, 1, 0], [-np.sin(b), 0, np.cos(b)]])
        Rx = np.array([[1, 0, 0], [0, np.cos(c), -np.sin(c)], [0, np.sin(c), np.cos(c)]])
        return Rz @ Ry @ Rx

    Rs = np.stack([rot(*a) for a in angles])
    Q = (
        np.einsum("bij,bnj->bni", Rs, P)
        + rng.uniform(-1, 1, (B, 1, 3))
        + 0.01 * rng.standard_normal((B, N, 3))
    )
    Q[2] = Q[2] * np.array([1.0, 1.0, -1.0])  # a mirror image: the best orthogonal map reflects
    P, Q = torch.tensor(P), torch.tensor(Q)
    p_mean, q_mean = P.mean(1, keepdim=True), Q.mean(1, keepdim=True)
    Pc, Qc = P - p_mean, Q - q_mean
    H = Pc.transpose(1, 2) @ Qc
    U, S, Vh = torch.linalg.svd(H)
    V = Vh.transpose(1, 2)
    d = torch.sign(torch.det(V @ U.transpose(1, 2)))
    D = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], dim=-1))
    R = V @ D @ U.transpose(1, 2)
    R_orth = V @ U.transpose(1, 2)  # without the correction
    t = q_mean - p_mean @ R.transpose(1, 2)
    aligned = P @ R.transpose(1, 2) + t
    rmsd = torch.sqrt(((aligned - Q) ** 2).sum(-1).mean(-1))
    rmsd_orth = torch.sqrt(((Pc @ R_orth.transpose(1, 2) - Qc) ** 2).sum(-1).mean(-1))
    # Umeyama scale
    var_p = (Pc**2).sum((1, 2)) / N
    scale = (S * torch.stack([torch.ones_like(d), torch.ones_like(d), d], -1)).sum(-1) / N / var_p
    # orthogonal Procrustes between "embeddings": W = argmin ||X W - Y||, W orthogonal
    Xe = torch.tensor(rng.standard_normal((30, 6)))
    W_true = torch.linalg.qr(torch.tensor(rng.standard_normal((6, 6))))[0]
    Ye = Xe @ W_true + 0.01 * torch.tensor(rng.standard_normal((30, 6)))
    u, _, vh = torch.linalg.svd(Xe.T @ Ye)
    W = u @ vh
    return {"R": R, "det_R": torch.det(R), "d": d, "t": t, "rmsd": rmsd, "rmsd_orth": rmsd_orth,
            "det_orth": torch.det(R_orth), "S": S, "scale": scale, "rot_err": (R - torch.tensor(Rs)).abs().amax((1, 2)),
            "W_err": torch.linalg.norm(W - W_true), "W_orth": W.T @ W,
            "fit": torch.linalg.norm(Xe @ W - Ye)}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def gradients_through_svd_eigh_and_qr(torch):
    """Backpropagation through the spectral decompositions on small well-conditioned float64
    inputs, returning only sign-invariant quantities: the nuclear norm (gradient ``U V^T``), a
    loss on the rank-2 projector ``U_k U_k^T``, the spectral norm, the top-k eigenvalue sum and a
    loss on eigenvector projections of a symmetric matrix, ``log|det R|`` and a projector loss
    from ``qr``; each against its closed form where one exists, plus a few steps of gradient
    descent on a Ky Fan objective."""
    rng = _rng(12)
    A0 = rng.standard_normal((6, 4)) + np.eye(6, 4) * np.array([4.0, 3.0, 2.0, 1.0])
    A = torch.tensor(A0, requires_grad=True)
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    S.sum().backward()
    g_nuc = A.grad.clone()
    closed_nuc = (U @ Vh).detach()
    A.grad = None
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    W = torch.tensor(rng.standard_normal((6, 6)))
    proj = U[:, :2] @ U[:, :2].T
    loss_proj = (W * proj).sum() + S[0] ** 2
    loss_proj.backward()
    g_proj = A.grad.clone()
    A.grad = None
    torch.linalg.matrix_norm(A, ord=2).backward()
    g_spec = A.grad.clone()
    closed_spec = torch.outer(U[:, 0], Vh[0]).detach()
    # eigh of a symmetric matrix with well-separated eigenvalues
    M0 = rng.standard_normal((5, 5))
    C0 = M0 @ M0.T / 5 + np.diag([1.0, 2.0, 3.5, 5.0, 7.0])
    C = torch.tensor(C0, requires_grad=True)
    evals, evecs = torch.linalg.eigh(C)
    top = evals[-2:].sum()
    top.backward()
    g_top = C.grad.clone()
    closed_top = (evecs[:, -2:] @ evecs[:, -2:].T).detach()
    C.grad = None
    evals, evecs = torch.linalg.eigh(C)
    b = torch.tensor(rng.standard_normal(5))
    loss_vec = ((evecs.T @ b) ** 2 * torch.arange(1.0, 6.0, dtype=C.dtype)).sum()
    loss_vec.backward()
    g_vec = C.grad.clone()
    # qr: log|det R| = log|det A| for square A, gradient A^{-T}; and a projector loss
    Bq = torch.tensor(rng.standard_normal((4, 4)) + 3 * np.eye(4), requires_grad=True)
    Qq, Rq = torch.linalg.qr(Bq)
    Rq.diagonal().abs().log().sum().backward()
    g_logdet = Bq.grad.clone()
    closed_logdet = torch.linalg.inv(Bq.detach()).T
    T = torch.tensor(rng.standard_normal((7, 3)) + np.eye(7, 3) * 2, requires_grad=True)
    Qt, Rt = torch.linalg.qr(T)
    z = torch.tensor(rng.standard_normal(7))
    loss_qr = (Qt @ (Qt.T @ z)).pow(2).sum() + (Rt.diagonal() ** 2).sum()
    loss_qr.backward()
    # Ky Fan: maximise tr(X^T C X) over X with orthonormal columns, by gradient steps + QR retraction
    Cc = torch.tensor(C0)
    X = torch.linalg.qr(torch.tensor(rng.standard_normal((5, 2))))[0]
    kyfan = []
    for _ in range(10):
        X.requires_grad_(True)
        obj = torch.trace(X.T @ Cc @ X)
        (g,) = torch.autograd.grad(obj, X)
        with torch.no_grad():
            X = X + 0.1 * g
            Qr, Rr = torch.linalg.qr(X)
            X = Qr * torch.sign(torch.diagonal(Rr))
        kyfan.append(obj.item())
    return {"g_nuc": g_nuc, "nuc_err": (g_nuc - closed_nuc).abs().max(), "g_proj": g_proj,
            "g_spec": g_spec, "spec_err": (g_spec - closed_spec).abs().max(), "g_top": g_top,
            "top_err": (g_top - closed_top).abs().max(), "g_vec": g_vec, "g_logdet": g_logdet,
            "logdet_err": (g_logdet - closed_logdet).abs().max(), "g_qr": T.grad,
            "kyfan": kyfan, "kyfan_opt": torch.linalg.eigvalsh(Cc)[-2:].sum(),
            "X_proj": X @ X.T}  # fmt: skip
