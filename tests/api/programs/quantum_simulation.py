"""Quantum circuit simulation and variational quantum algorithms as they are written in PyTorch
(the idioms of TorchQuantum, PennyLane's torch device and the simulators of papers' companion
code): statevectors as complex tensors of shape ``(2,) * n`` (with a batch axis in front for
TorchQuantum-style devices), rotation gates stacked from ``cos``/``sin`` of trainable angles,
gates applied with ``tensordot`` + ``permute``, ``einsum`` or a batched ``bmm`` over permuted
wires, CNOT/CZ as slices, sign flips and basis-index permutations, ``kron`` for small unitaries,
Pauli-string expectation values, measurement probabilities ``|psi|^2`` and their marginals, VQE
for H2 with Adam, QAOA on a small MaxCut graph, parameter-shift gradients against autograd,
density matrices with channels, partial traces and fidelities, amplitude encoding, Trotterised
against exact time evolution, the QFT circuit against the DFT and Grover search. Shot sampling
uses NumPy uniforms, never the library's generator."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr

# ---------------------------------------------------------------------------------------------
# Gate matrices and appliers shared by the programs (each takes the library as ``torch``).


def _ry(torch, theta, cdtype):
    """RY(θ) for angles of any batch shape: (..., 2, 2), real entries cast to complex."""
    c, s = torch.cos(theta / 2), torch.sin(theta / 2)
    m = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
    return m.to(cdtype)


def _rz(torch, theta):
    """RZ(θ) = diag(e^{-iθ/2}, e^{iθ/2}) with ``diag_embed`` of complex exponentials."""
    return torch.diag_embed(torch.stack([torch.exp(-0.5j * theta), torch.exp(0.5j * theta)], -1))


def _rx(torch, theta):
    """RX(θ) as TorchQuantum writes it: a real cosine concatenated with an imaginary sine (the
    concatenation promotes to complex)."""
    co = torch.cos(theta / 2).unsqueeze(-1)
    jsi = 1j * torch.sin(-theta / 2).unsqueeze(-1)
    return torch.stack([torch.cat([co, jsi], dim=-1), torch.cat([jsi, co], dim=-1)], dim=-2)


def _u3(torch, params):
    """U3(θ, φ, λ) from a (..., 3) tensor of angles."""
    theta, phi, lam = params.unbind(-1)
    c = torch.cos(theta / 2) + 0j
    s = torch.sin(theta / 2) + 0j
    row0 = torch.stack([c, -torch.exp(1j * lam) * s], -1)
    row1 = torch.stack([torch.exp(1j * phi) * s, torch.exp(1j * (phi + lam)) * c], -1)
    return torch.stack([row0, row1], -2)


def _apply(torch, state, mat, wires):
    """PennyLane default.qubit's ``_apply_unitary``: contract the gate's input axes with the
    wires' axes of a ``(2,) * n`` state, then permute the new axes back into place."""
    k = len(wires)
    mat = mat.reshape((2,) * (2 * k))
    tdot = torch.tensordot(mat, state, dims=(list(range(k, 2 * k)), list(wires)))
    unused = [i for i in range(state.dim()) if i not in wires]
    inv_perm = np.argsort(list(wires) + unused).tolist()
    return tdot.permute(inv_perm)


def _apply_bmm(torch, states, mat, wires):
    """TorchQuantum's ``apply_unitary_bmm``: a batched ``(B, 2, ..., 2)`` state with the wires
    moved next to the batch axis, flattened to ``(B, 2**k, rest)`` and multiplied by the gate
    (one per sample when ``mat`` is ``(B, 2**k, 2**k)``)."""
    dims = [w + 1 for w in wires]
    permute_to = [0] + dims + [d for d in range(1, states.dim()) if d not in dims]
    permute_back = np.argsort(permute_to).tolist()
    permuted = states.permute(permute_to)
    shape = permuted.shape
    flat = permuted.reshape(shape[0], mat.shape[-1], -1)
    if mat.dim() == 2:
        mat = mat.expand(flat.shape[0], -1, -1)
    return mat.bmm(flat).view(shape).permute(permute_back)


def _cnot(torch, state, control, target, batch=0):
    """PennyLane's ``_apply_cnot``: the control=1 half of the state with X (a ``roll``) on the
    target, stacked back with the control=0 half."""
    c, t = control + batch, target + batch
    idx0 = [slice(None)] * state.dim()
    idx1 = [slice(None)] * state.dim()
    idx0[c], idx1[c] = 0, 1
    t_in_half = t - 1 if t > c else t
    flipped = torch.roll(state[tuple(idx1)], 1, dims=t_in_half)
    return torch.stack([state[tuple(idx0)], flipped], dim=c)


def _bits(torch, n):
    """The ``(2**n, n)`` table of basis bitstrings, wire 0 the most significant bit."""
    return (torch.arange(2**n)[:, None] >> torch.arange(n - 1, -1, -1)) & 1


def _probs_marginal(torch, state, wires):
    """Measurement probabilities of some wires: ``|psi|^2`` summed over the others."""
    probs = state.abs() ** 2
    others = [i for i in range(state.dim()) if i not in wires]
    return probs.sum(dim=others).reshape(-1) if others else probs.reshape(-1)


PAULI = {
    "I": [[1, 0], [0, 1]],
    "X": [[0, 1], [1, 0]],
    "Y": [[0, -1j], [1j, 0]],
    "Z": [[1, 0], [0, -1]],
}


def _pauli_matrix(torch, word, dtype):
    """A Pauli string such as ``"XZI"`` as a dense matrix (a chain of ``kron``)."""
    mats = [torch.tensor(PAULI[p], dtype=dtype) for p in word]
    out = mats[0]
    for m in mats[1:]:
        out = torch.kron(out, m)
    return out


def _expval_pauli(torch, state, word):
    """<psi| P |psi> by applying each Pauli factor to its wire and taking the inner product."""
    phi = state
    for w, p in enumerate(word):
        if p != "I":
            phi = _apply(torch, phi, torch.tensor(PAULI[p], dtype=state.dtype), [w])
    return torch.sum(state.conj() * phi).real


# ---------------------------------------------------------------------------------------------


@program(rtol=1e-9, atol=1e-11)
def qsim_ghz_state_tensordot_and_index_permutations(torch):
    """A 3-qubit GHZ state prepared the default.qubit way (Hadamard by ``tensordot``, CNOTs by
    slicing and ``roll``), the same CNOTs as permutations of the flat basis index, a layer of
    RY/RZ rotations, probabilities, marginals and Pauli-string expectation values."""
    n = 3
    cdt = torch.complex128
    state = torch.zeros((2,) * n, dtype=cdt)
    state[(0,) * n] = 1.0
    hadamard = torch.tensor([[1.0, 1.0], [1.0, -1.0]], dtype=cdt) / math.sqrt(2)
    state = _apply(torch, state, hadamard, [0])
    state = _cnot(torch, state, 0, 1)
    state = _cnot(torch, state, 1, 2)
    ghz = state.clone()

    # The same circuit on the flat state: a CNOT permutes basis indices.
    bits = _bits(torch, n)
    weights = 2 ** torch.arange(n - 1, -1, -1)

    def cnot_perm(control, target):
        flipped = bits.clone()
        flipped[:, target] ^= bits[:, control]
        return (flipped * weights).sum(1)

    flat = torch.zeros(2**n, dtype=cdt)
    flat[0] = 1.0
    flat = _apply(torch, flat.reshape((2,) * n), hadamard, [0]).reshape(-1)
    flat = flat[cnot_perm(0, 1)]
    flat = flat[cnot_perm(1, 2)]

    angles = torch.tensor([0.3, -1.1, 0.7], dtype=torch.float64)
    for w in range(n):
        state = _apply(torch, state, _ry(torch, angles[w], cdt), [w])
        state = _apply(torch, state, _rz(torch, 0.5 * angles[w]), [w])
    probs = state.abs() ** 2
    expvals = {word: _expval_pauli(torch, state, word) for word in ["ZII", "ZZI", "XXX", "YXY"]}
    return {"ghz": ghz, "ghz_flat_matches": torch.allclose(flat, ghz.reshape(-1)),
            "flat": flat, "state": state, "probs": probs.reshape(-1),
            "norm": torch.linalg.vector_norm(state), "marginal_0": _probs_marginal(torch, state, [0]),
            "marginal_02": _probs_marginal(torch, state, [0, 2]), "expvals": expvals,
            "cnot_perm": cnot_perm(0, 2)}  # fmt: skip


@program
def qsim_rotation_gate_matrices_batched_with_gradients(torch):
    """TorchQuantum-style gate matrices for a batch of trainable angles (RX from ``cat`` of a
    real cosine and an imaginary sine, RY cast to complex, RZ from ``diag_embed`` of complex
    exponentials, U3 from ``exp(1j * phi)``), checked for unitarity and against ``matrix_exp``
    of the Pauli generators; a real loss of the products is back-propagated to the angles."""
    theta = torch.tensor(arr(1, 5), requires_grad=True)
    u3p = torch.tensor(arr(2, 5, 3), requires_grad=True)
    cdt = torch.complex64
    rx, ry, rz = _rx(torch, theta), _ry(torch, theta, cdt), _rz(torch, theta)
    u3 = _u3(torch, u3p)
    eye = torch.eye(2, dtype=cdt)
    unitarity = {
        name: (m @ m.conj().transpose(-1, -2) - eye).abs().amax()
        for name, m in {"rx": rx, "ry": ry, "rz": rz, "u3": u3}.items()
    }
    X = torch.tensor(PAULI["X"], dtype=cdt)
    rx_exp = torch.linalg.matrix_exp(-0.5j * theta.detach()[:, None, None] * X)
    product = u3 @ rz @ ry @ rx
    zero = torch.tensor([1.0, 0.0], dtype=cdt)
    out_states = product @ zero
    p1 = out_states[:, 1].abs() ** 2
    loss = p1.sum() + torch.diagonal(product, dim1=-2, dim2=-1).sum(-1).real.pow(2).mean()
    loss.backward()
    return {"rx": rx, "ry": ry, "rz": rz, "u3": u3, "rx_dtype": str(rx.dtype),
            "unitarity": unitarity, "rx_exp_err": (rx_exp - rx.detach()).abs().amax(),
            "product": product, "p1": p1, "loss": loss, "theta_grad": theta.grad,
            "u3_grad": u3p.grad}  # fmt: skip


@program
def qsim_einsum_layered_circuit_hamiltonian_expectation(torch):
    """A 4-qubit hardware-efficient circuit simulated with ``einsum`` (TorchQuantum's
    ``apply_unitary_einsum`` builds the subscripts from letters), CZ entanglers as a precomputed
    ±1 diagonal, a transverse-field Ising Hamiltonian's expectation value from Pauli strings,
    checked against the dense ``kron``-built Hamiltonian, and its gradient."""
    n, layers = 4, 2
    letters = "abcdefghij"
    weights = torch.tensor(arr(3, layers, n, 2), requires_grad=True)
    cdt = torch.complex64

    def apply_einsum(state, mat, wire):
        src = letters[:n]
        out = src.replace(src[wire], "z")
        return torch.einsum(f"z{src[wire]},{src}->{out}", mat, state)

    bits = _bits(torch, n)
    cz_diag = torch.ones(2**n, dtype=cdt)
    for w in range(n - 1):
        cz_diag = cz_diag * (1 - 2 * (bits[:, w] & bits[:, w + 1]))
    cz_diag = cz_diag.reshape((2,) * n)

    state = torch.zeros(2**n, dtype=cdt)
    state[0] = 1
    state = state.reshape((2,) * n)
    for layer in range(layers):
        for w in range(n):
            state = apply_einsum(state, _ry(torch, weights[layer, w, 0], cdt), w)
            state = apply_einsum(state, _rz(torch, weights[layer, w, 1]), w)
        state = state * cz_diag
    terms = [("ZZII", -1.0), ("IZZI", -1.0), ("IIZZ", -1.0)]
    terms += [("".join("X" if i == w else "I" for i in range(n)), -0.7) for w in range(n)]
    energy = sum(c * _expval_pauli(torch, state, word) for word, c in terms)
    H = sum(c * _pauli_matrix(torch, word, cdt) for word, c in terms)
    psi = state.reshape(-1)
    dense = torch.vdot(psi, H @ psi).real
    energy.backward()
    return {"state": psi, "energy": energy, "dense_energy": dense, "cz_diag": cz_diag.real,
            "H_diag": H.diagonal().real, "ground": torch.linalg.eigvalsh(H)[:3],
            "grad": weights.grad}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)
def qsim_vqe_h2_minimal_basis_adam(torch):
    """VQE for the two-qubit H2 Hamiltonian (the coefficients of the minimal-basis, parity-mapped
    molecule near equilibrium): a Pauli sum built with ``kron``, an RY/CNOT ansatz with a Givens
    rotation flavour, the energy ``<psi|H|psi>`` minimised with Adam, against the exact ground
    state energy from ``eigvalsh``."""
    cdt = torch.complex64
    coeffs = {"II": -0.4804, "ZI": 0.3435, "IZ": -0.4347, "ZZ": 0.5716, "XX": 0.0910, "YY": 0.0910}
    H = sum(c * _pauli_matrix(torch, w, cdt) for w, c in coeffs.items())
    params = torch.nn.Parameter(torch.tensor([0.1, -0.2, 0.3, 0.05]))
    opt = torch.optim.Adam([params], lr=0.05)

    def ansatz(p):
        state = torch.zeros(2, 2, dtype=cdt)
        state[1, 0] = 1.0  # Hartree-Fock |10>
        state = _apply(torch, state, _ry(torch, p[0], cdt), [0])
        state = _apply(torch, state, _ry(torch, p[1], cdt), [1])
        state = _cnot(torch, state, 1, 0)
        state = _apply(torch, state, _ry(torch, p[2], cdt), [0])
        state = _apply(torch, state, _rz(torch, p[3]), [1])
        return state.reshape(-1)

    energies = []
    for _ in range(12):
        opt.zero_grad()
        psi = ansatz(params)
        energy = torch.real(psi.conj() @ H @ psi)
        energy.backward()
        opt.step()
        energies.append(energy.item())
    evals, evecs = torch.linalg.eigh(H)
    psi = ansatz(params).detach()
    overlap = (evecs[:, 0].conj() @ psi).abs() ** 2
    return {"energies": energies, "params": params, "grad": params.grad, "exact": evals[0],
            "spectrum": evals, "overlap": overlap, "H_real": H.real, "H_imag": H.imag,
            "error_mHa": 1000 * (energies[-1] - evals[0].item())}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)
def qsim_qaoa_maxcut_depth_two(torch):
    """QAOA at depth 2 for MaxCut on a 4-node graph: the cost diagonal from the bit table, the
    cost layer as a phase ``exp(-1j * gamma * C)``, the mixer as RX on every wire, the expected
    cut maximised with Adam; the probability of measuring an optimal cut and the approximation
    ratio."""
    n = 4
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]
    bits = _bits(torch, n)
    z = 1 - 2 * bits  # spins
    cost = torch.zeros(2**n)
    for i, j in edges:
        cost = cost + 0.5 * (1 - z[:, i] * z[:, j])
    gammas = torch.nn.Parameter(torch.tensor([0.2, 0.4]))
    betas = torch.nn.Parameter(torch.tensor([0.6, 0.3]))
    opt = torch.optim.Adam([gammas, betas], lr=0.05)

    def circuit():
        psi = torch.full((2**n,), 1 / math.sqrt(2**n), dtype=torch.complex64)
        for g, b in zip(gammas, betas):
            psi = psi * torch.exp(-1j * g * cost)
            psi = psi.reshape((2,) * n)
            mixer = _rx(torch, 2 * b)
            for w in range(n):
                psi = _apply(torch, psi, mixer, [w])
            psi = psi.reshape(-1)
        return psi

    expected = []
    for _ in range(10):
        opt.zero_grad()
        probs = circuit().abs() ** 2
        loss = -(probs * cost).sum()
        loss.backward()
        opt.step()
        expected.append(-loss.item())
    with torch.no_grad():
        probs = circuit().abs() ** 2
    best = cost.max()
    return {"cost": cost, "expected_cut": expected, "gammas": gammas, "betas": betas,
            "probs": probs, "p_optimal": probs[cost == best].sum(),
            "ratio": (probs * cost).sum() / best, "n_optimal": int((cost == best).sum()),
            "grads": [gammas.grad, betas.grad]}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def qsim_parameter_shift_gradients_match_autograd(torch):
    """The parameter-shift rule (the circuit evaluated at θ ± π/2 under ``no_grad``) against
    autograd through the complex simulation, for a 3-qubit RX/RY circuit with CNOTs measuring
    ``Z0 Z2 + 0.5 X1``; the second-order shift rule for the Hessian against
    ``torch.autograd.functional.hessian``."""
    n = 3
    cdt = torch.complex128

    def circuit(theta):
        state = torch.zeros((2,) * n, dtype=cdt)
        state[0, 0, 0] = 1
        for w in range(n):
            state = _apply(torch, state, _rx(torch, theta[w]), [w])
        state = _cnot(torch, state, 0, 1)
        state = _cnot(torch, state, 1, 2)
        for w in range(n):
            state = _apply(torch, state, _ry(torch, theta[n + w], cdt), [w])
        return _expval_pauli(torch, state, "ZIZ") + 0.5 * _expval_pauli(torch, state, "IXI")

    theta = torch.tensor(np.linspace(-1.2, 1.4, 2 * n), requires_grad=True)
    value = circuit(theta)
    (auto_grad,) = torch.autograd.grad(value, theta)
    shift = math.pi / 2
    ps_grad = torch.zeros_like(theta)
    with torch.no_grad():
        for i in range(theta.numel()):
            plus, minus = theta.clone(), theta.clone()
            plus[i] += shift
            minus[i] -= shift
            ps_grad[i] = 0.5 * (circuit(plus) - circuit(minus))
        ps_hess = torch.zeros(2 * n, 2 * n, dtype=torch.float64)
        for i in range(2 * n):
            for j in range(i, 2 * n):
                vals = []
                for si, sj in [(1, 1), (1, -1), (-1, 1), (-1, -1)]:
                    t = theta.clone()
                    t[i] += si * shift
                    t[j] += sj * shift
                    vals.append(circuit(t))
                ps_hess[i, j] = ps_hess[j, i] = 0.25 * (vals[0] - vals[1] - vals[2] + vals[3])
    auto_hess = torch.autograd.functional.hessian(circuit, theta.detach())
    return {"value": value, "auto_grad": auto_grad, "ps_grad": ps_grad,
            "grad_err": (auto_grad - ps_grad).abs().max(), "ps_hess": ps_hess,
            "auto_hess": auto_hess, "hess_err": (auto_hess - ps_hess).abs().max()}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def qsim_density_matrix_channels_partial_trace_fidelity(torch):
    """Density matrices of a two-qubit entangled state: Kraus channels (depolarising on qubit 0,
    amplitude damping on qubit 1, each lifted with ``kron``), the partial trace by reshaping to
    ``(2, 2, 2, 2)`` and ``einsum("ijkj->ik")``, purity, von Neumann entropy from ``eigvalsh``,
    Uhlmann fidelity with matrix square roots from ``eigh``, trace distance, and the reduced
    state's Bloch vector."""
    cdt = torch.complex128
    psi = torch.tensor([math.cos(0.4), 0.0, 0.0, math.sin(0.4)], dtype=cdt)
    psi = _apply(torch, psi.reshape(2, 2), _u3(torch, torch.tensor([0.3, 0.2, -0.5], dtype=torch.float64)), [1]).reshape(-1)  # fmt: skip
    rho = torch.outer(psi, psi.conj())
    I2 = torch.eye(2, dtype=cdt)
    X, Y, Z = (torch.tensor(PAULI[p], dtype=cdt) for p in "XYZ")

    p = 0.15
    dep = [math.sqrt(1 - 3 * p / 4) * I2] + [math.sqrt(p / 4) * P for P in (X, Y, Z)]
    gamma = 0.3
    damp = [torch.tensor([[1, 0], [0, math.sqrt(1 - gamma)]], dtype=cdt),
            torch.tensor([[0, math.sqrt(gamma)], [0, 0]], dtype=cdt)]  # fmt: skip

    def channel(rho, kraus, wire):
        ops = [torch.kron(K, I2) if wire == 0 else torch.kron(I2, K) for K in kraus]
        return sum(K @ rho @ K.conj().T for K in ops)

    sigma = channel(channel(rho, dep, 0), damp, 1)
    completeness = sum(K.conj().T @ K for K in damp)

    def ptrace_second(r):
        return torch.einsum("ijkj->ik", r.reshape(2, 2, 2, 2))

    def ptrace_first(r):
        return r.reshape(2, 2, 2, 2).diagonal(dim1=0, dim2=2).sum(-1)

    def entropy(r):
        ev = torch.linalg.eigvalsh(r).clamp(min=1e-12)
        return -(ev * torch.log2(ev)).sum()

    def sqrtm(r):
        ev, vecs = torch.linalg.eigh(r)
        return (vecs * ev.clamp(min=0).sqrt().to(cdt)) @ vecs.conj().T

    def fidelity(a, b):
        sa = sqrtm(a)
        return torch.linalg.eigvalsh(sa @ b @ sa).clamp(min=0).sqrt().sum() ** 2

    reduced = ptrace_second(sigma)
    bloch = torch.stack([torch.trace(reduced @ P).real for P in (X, Y, Z)])
    diff_ev = torch.linalg.eigvalsh(rho - sigma)
    return {"sigma": sigma, "trace": torch.trace(sigma), "completeness": completeness,
            "purity": torch.trace(sigma @ sigma).real, "rho_A": ptrace_second(rho),
            "rho_B": ptrace_first(rho), "entanglement_entropy": entropy(ptrace_second(rho)),
            "entropy_sigma": entropy(sigma), "fidelity": fidelity(rho, sigma),
            "pure_fidelity": torch.vdot(psi, sigma @ psi).real,
            "trace_distance": 0.5 * diff_ev.abs().sum(), "bloch": bloch,
            "bloch_norm": torch.linalg.norm(bloch)}  # fmt: skip


@program(rtol=1e-4, atol=2e-5)
def qsim_amplitude_encoding_variational_classifier(torch):
    """A variational quantum classifier on amplitude-encoded data: 6 features padded to 8 with a
    constant, normalised to unit vectors that are the 3-qubit states of a batch, a trainable
    layer of batched RZ/RY gates with a CNOT ring applied TorchQuantum-style (``bmm`` over the
    permuted wires), ``<Z>`` of the last wire as the logit, BCE with logits, Adam."""
    F = torch.nn.functional
    n, batch = 3, 12
    x = torch.tensor(arr(4, batch, 6))
    y = torch.tensor((arr(5, batch) > 0).astype(np.float32))
    padded = F.pad(x, (0, 2), value=0.3)
    amplitudes = F.normalize(padded, dim=1)
    states0 = amplitudes.to(torch.complex64).reshape(batch, *(2,) * n)
    weights = torch.nn.Parameter(torch.tensor(arr(6, 2, n, 2, scale=0.5)))
    scale = torch.nn.Parameter(torch.tensor(2.0))
    bias = torch.nn.Parameter(torch.tensor(0.0))
    opt = torch.optim.Adam([weights, scale, bias], lr=0.05)

    def forward(states):
        for layer in range(weights.shape[0]):
            for w in range(n):
                states = _apply_bmm(torch, states, _rz(torch, weights[layer, w, 1]), [w])
                states = _apply_bmm(torch, states, _ry(torch, weights[layer, w, 0], torch.complex64), [w])  # fmt: skip
            for w in range(n):
                states = _cnot(torch, states, w, (w + 1) % n, batch=1)
        probs = states.abs() ** 2
        # <Z> of the last wire: after the ring it reads every wire (<Z0> would not see the last
        # layer's gates on wire 0, nor any RZ, whose exact-zero gradients Adam would amplify).
        z = probs[..., 0].sum(dim=(1, 2)) - probs[..., 1].sum(dim=(1, 2))
        return scale * z + bias, states

    losses, accs = [], []
    for _ in range(6):
        opt.zero_grad()
        logits, _ = forward(states0)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        accs.append(((logits > 0).float() == y).float().mean().item())
    with torch.no_grad():
        logits, final = forward(states0)
    return {"amplitudes": amplitudes, "norms": states0.abs().pow(2).sum(dim=(1, 2, 3)),
            "losses": losses, "accs": accs, "weights": weights, "scale": scale, "bias": bias,
            "logits": logits, "final_norms": final.abs().pow(2).flatten(1).sum(1),
            "weights_grad": weights.grad}  # fmt: skip


@program(rtol=1e-4, atol=2e-5)
def qsim_torchquantum_style_qnn_module_training(torch):
    """A hybrid quantum-classical classifier written as TorchQuantum users write one: an
    ``nn.Module`` holding U3 parameters per layer and wire, an angle encoder (per-sample RY
    gates), batched state evolution, ``<Z>`` on every wire as features for an ``nn.Linear``
    head, cross entropy, SGD with momentum; the ``state_dict`` keys and a printed summary."""
    nn = torch.nn
    n_wires = 3

    class QLayer(nn.Module):
        def __init__(self, n_layers):
            super().__init__()
            self.u3_params = nn.Parameter(torch.tensor(arr(7, n_layers, n_wires, 3, scale=0.4)))

        def forward(self, states):
            for layer in range(self.u3_params.shape[0]):
                for w in range(n_wires):
                    states = _apply_bmm(torch, states, _u3(torch, self.u3_params[layer, w]), [w])
                for w in range(n_wires - 1):
                    states = _cnot(torch, states, w, w + 1, batch=1)
            return states

    class HybridModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_layer = QLayer(2)
            self.head = nn.Linear(n_wires, 3)

        def encode(self, x):
            bsz = x.shape[0]
            states = torch.zeros(bsz, 2**n_wires, dtype=torch.complex64)
            states[:, 0] = 1
            states = states.reshape(bsz, *(2,) * n_wires)
            for w in range(n_wires):
                states = _apply_bmm(torch, states, _ry(torch, x[:, w], torch.complex64), [w])
            return states

        def forward(self, x):
            states = self.q_layer(self.encode(x))
            probs = states.abs() ** 2
            expz = torch.stack(
                [probs.select(w + 1, 0).flatten(1).sum(1) - probs.select(w + 1, 1).flatten(1).sum(1)
                 for w in range(n_wires)], dim=1)  # fmt: skip
            return self.head(expz), expz

    model = HybridModel()
    with torch.no_grad():
        model.head.weight.copy_(torch.tensor(arr(8, 3, n_wires)))
        model.head.bias.zero_()
    x = torch.tensor(np.pi * np.tanh(arr(9, 10, n_wires)).astype(np.float32))
    y = torch.tensor(np.arange(10) % 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        logits, expz = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        logits, expz = model(x)
    summary = f"loss {losses[-1]:.4f} | acc {(logits.argmax(1) == y).float().mean():.2f}"
    return {"losses": losses, "expz": expz, "logits": logits, "u3": model.q_layer.u3_params,
            "u3_grad": model.q_layer.u3_params.grad, "head_grad": model.head.weight.grad,
            "keys": str(list(model.state_dict().keys())), "summary": summary}  # fmt: skip


@program(rtol=1e-9, atol=1e-11)
def qsim_measurement_shots_counts_and_estimators(torch):
    """Sampling measurement outcomes as simulators do with a fixed stream of uniforms: the CDF
    of ``|psi|^2``, ``searchsorted``, ``bincount`` into counts, bitstring labels with
    ``format(i, "03b")``, sample estimates of ``<Z_i>`` and ``<Z0 Z1>`` with their standard
    errors against the exact values, and the counts dictionary printed as users print it."""
    n, shots = 3, 400
    cdt = torch.complex128
    state = torch.zeros((2,) * n, dtype=cdt)
    state[0, 0, 0] = 1
    thetas = torch.tensor([0.9, -0.4, 2.1], dtype=torch.float64)
    for w in range(n):
        state = _apply(torch, state, _ry(torch, thetas[w], cdt), [w])
    state = _cnot(torch, state, 0, 2)
    probs = (state.abs() ** 2).reshape(-1)
    cdf = torch.cumsum(probs, 0)
    u = torch.tensor(np.random.default_rng(11).random(shots))
    samples = torch.searchsorted(cdf, u * cdf[-1]).clamp(max=2**n - 1)
    counts = torch.bincount(samples, minlength=2**n)
    labels = [format(i, f"0{n}b") for i in range(2**n)]
    count_dict = {labels[i]: int(c) for i, c in enumerate(counts) if c > 0}
    bits = _bits(torch, n)
    spins = (1 - 2 * bits[samples]).to(torch.float64)
    est_z = spins.mean(0)
    stderr = spins.std(0) / math.sqrt(shots)
    est_zz = (spins[:, 0] * spins[:, 1]).mean()
    exact_spins = (1 - 2 * bits).to(torch.float64)
    exact_z = probs @ exact_spins
    exact_zz = (probs * exact_spins[:, 0] * exact_spins[:, 1]).sum()
    return {"probs": probs, "samples": samples[:20], "counts": counts,
            "count_str": str(count_dict), "est_z": est_z, "stderr": stderr, "est_zz": est_zz,
            "exact_z": exact_z, "exact_zz": exact_zz,
            "z_scores": (est_z - exact_z) / stderr}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def qsim_transverse_ising_trotter_vs_exact_evolution(torch):
    """Quench dynamics of a 4-site transverse-field Ising chain: exact evolution with
    ``matrix_exp(-1j * H * t)`` against first-order Trotter steps (the ZZ couplings as a diagonal
    phase from the bit table, the field as RX on every wire), the magnetisation over time,
    the state fidelity, the Loschmidt echo and energy conservation."""
    n, J, h, dt, steps = 4, 1.0, 0.8, 0.1, 6
    cdt = torch.complex128
    terms = [("".join("Z" if i in (w, w + 1) else "I" for i in range(n)), -J) for w in range(n - 1)]
    terms += [("".join("X" if i == w else "I" for i in range(n)), -h) for w in range(n)]
    H = sum(c * _pauli_matrix(torch, word, cdt) for word, c in terms)
    bits = _bits(torch, n)
    z = (1 - 2 * bits).to(torch.float64)
    zz_energy = -J * (z[:, :-1] * z[:, 1:]).sum(1)
    zz_phase = torch.exp(-1j * dt * zz_energy)
    field = _rx(torch, torch.tensor(-2 * h * dt, dtype=torch.float64))

    psi0 = torch.zeros(2**n, dtype=cdt)
    psi0[0] = 1  # all spins up
    U_dt = torch.linalg.matrix_exp(-1j * dt * H)
    exact, trotter = psi0.clone(), psi0.clone()
    mags_exact, mags_trotter, fidelities, echoes, energies = [], [], [], [], []
    for _ in range(steps):
        exact = U_dt @ exact
        t = (trotter * zz_phase).reshape((2,) * n)
        for w in range(n):
            t = _apply(torch, t, field, [w])
        trotter = t.reshape(-1)
        mags_exact.append(((exact.abs() ** 2) @ z).mean())
        mags_trotter.append(((trotter.abs() ** 2) @ z).mean())
        fidelities.append(torch.vdot(exact, trotter).abs() ** 2)
        echoes.append(torch.vdot(psi0, exact).abs() ** 2)
        energies.append(torch.vdot(exact, H @ exact).real)
    U_total = torch.linalg.matrix_exp(-1j * steps * dt * H)
    return {"mags_exact": torch.stack(mags_exact), "mags_trotter": torch.stack(mags_trotter),
            "fidelity": torch.stack(fidelities), "echo": torch.stack(echoes),
            "energy": torch.stack(energies), "exact": exact, "trotter": trotter,
            "one_shot_err": (U_total @ psi0 - exact).abs().max(),
            "unitarity": (U_dt @ U_dt.conj().T - torch.eye(2**n, dtype=cdt)).abs().max()}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def qsim_quantum_fourier_transform_circuit_vs_dft(torch):
    """The QFT circuit on 3 qubits (Hadamards, controlled phases written in place on the
    ``|11>`` slice of a cloned state, the final wire reversal as a ``permute``) applied to the
    whole computational basis at once, against the DFT matrix from ``torch.fft.ifft`` of the
    identity; the QFT of a periodic state concentrates on multiples of N / period."""
    n = 3
    N = 2**n
    cdt = torch.complex64
    hadamard = torch.tensor([[1, 1], [1, -1]], dtype=cdt) / math.sqrt(2)

    def qft(states):  # (B, 2, 2, 2)
        for j in range(n):
            states = _apply_bmm(torch, states, hadamard, [j])
            for k in range(j + 1, n):
                states = states.clone()
                idx = [slice(None)] * (n + 1)
                idx[j + 1], idx[k + 1] = 1, 1
                states[tuple(idx)] *= torch.exp(torch.tensor(2j * math.pi / 2 ** (k - j + 1)))
        return states.permute(0, *range(n, 0, -1))

    basis = torch.eye(N, dtype=cdt).reshape(N, *(2,) * n)
    columns = qft(basis).reshape(N, N)
    qft_matrix = columns.T
    dft = torch.fft.ifft(torch.eye(N, dtype=cdt), dim=0) * math.sqrt(N)
    period = 4
    periodic = torch.zeros(N, dtype=cdt)
    periodic[1::period] = 1
    periodic = periodic / periodic.norm()
    spectrum = qft(periodic.reshape(1, *(2,) * n)).reshape(-1)
    return {"qft": qft_matrix, "dft": dft, "err": (qft_matrix - dft).abs().max(),
            "unitarity": (qft_matrix.conj().T @ qft_matrix).real,
            "spectrum_probs": spectrum.abs() ** 2,
            "peaks": spectrum[spectrum.abs() > 0.1]}  # fmt: skip


@program(rtol=1e-5, atol=1e-6)
def qsim_grover_search_amplitude_amplification(torch):
    """Grover search for two marked items among 16: the oracle as a sign flip (``torch.where``
    on a mask and in place on indexed amplitudes), the diffusion as inversion about the mean and
    as the matrix ``2|s><s| - I``, the success probability over iterations and the optimal
    iteration count ``floor(pi/4 * sqrt(N/M))``."""
    n = 4
    N = 2**n
    marked = torch.tensor([5, 10])
    mask = torch.zeros(N, dtype=torch.bool)
    mask[marked] = True
    s = torch.full((N,), 1 / math.sqrt(N), dtype=torch.complex64)
    diffusion = 2 * torch.outer(s, s.conj()) - torch.eye(N, dtype=torch.complex64)
    psi = s.clone()
    psi_matrix = s.clone()
    success = []
    best = math.floor(math.pi / 4 * math.sqrt(N / len(marked)))
    for _ in range(4):
        psi = torch.where(mask, -psi, psi)
        psi = 2 * psi.mean() - psi
        psi_matrix = psi_matrix.clone()
        psi_matrix[marked] *= -1
        psi_matrix = diffusion @ psi_matrix
        success.append((psi.abs() ** 2)[mask].sum().item())
    return {"psi": psi, "psi_matrix": psi_matrix, "success": success, "best_iterations": best,
            "best_success": success[best - 1], "diffusion_eigs": torch.linalg.eigvalsh(diffusion),
            "agree": torch.allclose(psi, psi_matrix, atol=1e-5)}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def qsim_quantum_phase_estimation_controlled_powers(torch):
    """Quantum phase estimation with 3 counting qubits: ``U = matrix_exp(-1j * t * H)`` of a
    one-qubit Hamiltonian, its eigenstate from ``eigh`` as the target, controlled-``U^(2^k)``
    built as ``block_diag(I, matrix_power(U, 2**k))`` on (counting wire, target), the inverse
    QFT as a DFT matrix on the counting register, and the phase read off the most likely
    outcomes; an exactly representable phase (a phase gate) gives a single peak."""
    m = 3
    cdt = torch.complex128
    X, Z = (torch.tensor(PAULI[p], dtype=cdt) for p in "XZ")
    H = 0.6 * Z + 0.35 * X
    evals, evecs = torch.linalg.eigh(H)
    t = 1.3

    def qpe(U, eigvec):
        state = torch.zeros((2,) * m, dtype=cdt)
        state[(0,) * m] = 1
        state = torch.einsum("abc,d->abcd", state, eigvec)  # counting register (x) target
        hadamard = torch.tensor([[1, 1], [1, -1]], dtype=cdt) / math.sqrt(2)
        eye2 = torch.eye(2, dtype=cdt)
        for k in range(m):
            state = _apply(torch, state, hadamard, [k])
        for k in range(m):  # wire k (most significant first) controls U^(2^(m-1-k))
            power = torch.linalg.matrix_power(U, 2 ** (m - 1 - k))
            state = _apply(torch, state, torch.block_diag(eye2, power), [k, m])
        n_count = 2**m
        iqft = torch.fft.fft(torch.eye(n_count, dtype=cdt), dim=0) / math.sqrt(n_count)
        register = state.reshape(n_count, 2)
        register = iqft @ register
        return (register.abs() ** 2).sum(1)

    U = torch.linalg.matrix_exp(-1j * t * H)
    probs = qpe(U, evecs[:, 1])
    true_phase = (-(evals[1] * t) / (2 * math.pi)) % 1.0
    readout = torch.arange(2**m, dtype=torch.float64) / 2**m
    top2 = probs.topk(2)
    phase_gate = torch.diag(torch.tensor([1, complex(math.cos(2 * math.pi * 0.375), math.sin(2 * math.pi * 0.375))], dtype=cdt))  # fmt: skip
    exact_probs = qpe(phase_gate, torch.tensor([0, 1], dtype=cdt))
    U_squared_err = (torch.linalg.matrix_power(U, 2) - U @ U).abs().max()
    U_inverse = torch.linalg.matrix_power(U, -1)
    return {"probs": probs, "true_phase": true_phase, "top_outcomes": top2.indices,
            "top_probs": top2.values, "estimate": (probs * readout).sum(),
            "exact_probs": exact_probs, "U": U, "U_inverse": U_inverse,
            "inverse_is_adjoint": (U_inverse - U.mH).abs().max(),
            "U_squared_err": U_squared_err, "evals": evals}  # fmt: skip


@program(rtol=1e-8, atol=1e-10)
def qsim_haar_unitaries_schmidt_decomposition_entanglement(torch):
    """Entanglement of random states as quantum-information code computes it: Pauli matrices
    and a Heisenberg-type Hamiltonian assembled by writing into ``.real`` and ``.imag`` views,
    Haar-random unitaries from the QR decomposition of a complex Gaussian matrix with R's
    diagonal phases divided out, the Schmidt coefficients of a 1|2 bipartition from ``svdvals``
    against the reduced density matrix's spectrum, entanglement entropies, and the
    concurrence of two-qubit states via the spin flip ``Y (x) Y``."""
    cdt = torch.complex128
    Y = torch.zeros(2, 2, dtype=cdt)
    Y.imag[0, 1] = -1
    Y.imag[1, 0] = 1
    Xm = torch.zeros(2, 2, dtype=cdt)
    Xm.real.fill_diagonal_(0)
    Xm.real[0, 1] = Xm.real[1, 0] = 1
    Zm = torch.eye(2, dtype=cdt)
    Zm.real[1, 1] = -1
    H = torch.zeros(4, 4, dtype=cdt)
    for P, J in ((Xm, 1.0), (Y, 0.8), (Zm, 0.5)):
        term = torch.kron(P, P)
        H.real += J * term.real
        H.imag += J * term.imag

    rng = np.random.default_rng(21)

    def haar(dim):
        g = (rng.standard_normal((dim, dim)) + 1j * rng.standard_normal((dim, dim))) / math.sqrt(2)
        q, r = torch.linalg.qr(torch.tensor(g))
        d = torch.diagonal(r)
        return q * (d / d.abs())

    U8 = haar(8)
    psi3 = U8[:, 0]  # a Haar-random 3-qubit state
    schmidt = torch.linalg.svdvals(psi3.reshape(2, 4))
    rho_a = torch.einsum("ij,kj->ik", psi3.reshape(2, 4), psi3.reshape(2, 4).conj())
    spectrum = torch.linalg.eigvalsh(rho_a)
    p = schmidt**2
    entropy = -(p * torch.log(p)).sum()

    U4 = haar(4)
    yy = torch.kron(Y, Y)
    states = torch.stack([U4[:, 0], torch.tensor([1, 0, 0, 1], dtype=cdt) / math.sqrt(2),
                          torch.tensor([1, 0, 0, 0], dtype=cdt)])  # fmt: skip
    concurrence = (states.conj() * (states.conj() @ yy.T)).sum(1).abs()
    evolved = torch.linalg.matrix_exp(-0.7j * H) @ states.T
    concurrence_t = (evolved.T.conj() * (evolved.T.conj() @ yy.T)).sum(1).abs()
    return {"Y": Y, "X": Xm, "Z": Zm, "H": H, "H_spectrum": torch.linalg.eigvalsh(H),
            "unitarity": (U8.mH @ U8 - torch.eye(8, dtype=cdt)).abs().max(), "U4": U4,
            "schmidt": schmidt, "schmidt_sq": p, "rho_a_spectrum": spectrum,
            "entropy": entropy, "concurrence": concurrence,
            "concurrence_t": concurrence_t}  # fmt: skip
