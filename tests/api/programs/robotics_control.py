"""Robotics and control as research code writes it: forward kinematics from Denavit-Hartenberg
tables (standard and Craig's modified convention) and from products of exponentials, manipulator
Jacobians by autograd checked against the geometric ones, damped-least-squares inverse kinematics,
LQR by iterating the discrete Riccati equation, iLQR and gradient-based MPC with box-clamped
controls, an extended Kalman filter with autograd Jacobians, quaternion integration of gyro
rates, a learned (ensemble) dynamics model trained with a multi-step shooting loss, a policy
trained by backpropagation through a differentiable simulator, computed-torque control with
Christoffel symbols from autograd, CHOMP trajectory optimisation and CEM planning."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# Franka Panda in Craig's (modified) DH convention: a_{i-1}, d_i, alpha_{i-1}; the flange adds d=0.107.
_PANDA_A = [0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088, 0.0]
_PANDA_D = [0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0, 0.107]
_PANDA_ALPHA = [0.0, -math.pi / 2, math.pi / 2, math.pi / 2, -math.pi / 2, math.pi / 2, math.pi / 2, 0.0]  # fmt: skip
_PANDA_Q0 = [0.0, -0.4, 0.0, -2.2, 0.0, 1.9, 0.8]


def _mdh(torch, theta, d, a, alpha):
    """Craig's link transform ``Rx(alpha) Tx(a) Rz(theta) Tz(d)`` for a batch of angles."""
    ct, st = torch.cos(theta), torch.sin(theta)
    ca, sa = torch.cos(alpha), torch.sin(alpha)
    zero, one = torch.zeros_like(theta), torch.ones_like(theta)
    return torch.stack(
        [
            torch.stack([ct, -st, zero, a * one], -1),
            torch.stack([st * ca, ct * ca, -sa * one, -d * sa * one], -1),
            torch.stack([st * sa, ct * sa, ca * one, d * ca * one], -1),
            torch.stack([zero, zero, zero, one], -1),
        ],
        -2,
    )


def _panda_fk(torch, q, dtype):
    """Every frame of the Panda (``(..., 8, 4, 4)``) for joint angles ``q`` (``(..., 7)``)."""
    a = torch.tensor(_PANDA_A, dtype=dtype)
    d = torch.tensor(_PANDA_D, dtype=dtype)
    alpha = torch.tensor(_PANDA_ALPHA, dtype=dtype)
    theta = torch.cat([q, torch.zeros_like(q[..., :1])], -1)
    links = _mdh(torch, theta, d, a, alpha)
    T = torch.eye(4, dtype=dtype).expand(*q.shape[:-1], 4, 4)
    frames = []
    for i in range(8):
        T = T @ links[..., i, :, :]
        frames.append(T)
    return torch.stack(frames, -3)


@program(rtol=5e-4, atol=5e-5)
def robo_dh_forward_kinematics_puma_and_panda(torch):
    """Forward kinematics from DH tables as robotics toolboxes compute them: the PUMA 560 in the
    standard convention (``Rz(theta) Tz(d) Tx(a) Rx(alpha)``) for a batch of configurations, link
    transforms chained with ``@`` into every frame, the end effector's ZYX Euler angles and the
    rotation's orthogonality; the same chain with ``linalg.multi_dot``; the Panda in Craig's
    modified convention, with joint positions and the reach of each configuration."""
    a = torch.tensor([0.0, 0.4318, 0.0203, 0.0, 0.0, 0.0])
    d = torch.tensor([0.0, 0.0, 0.15005, 0.4318, 0.0, 0.0])
    alpha = torch.tensor([math.pi / 2, 0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, 0.0])
    q = torch.tensor(arr(1, 8, 6))

    def dh(theta):
        ct, st = torch.cos(theta), torch.sin(theta)
        ca, sa = torch.cos(alpha).expand_as(theta), torch.sin(alpha).expand_as(theta)
        zero, one = torch.zeros_like(theta), torch.ones_like(theta)
        return torch.stack(
            [
                torch.stack([ct, -st * ca, st * sa, a * ct], -1),
                torch.stack([st, ct * ca, -ct * sa, a * st], -1),
                torch.stack([zero, sa, ca, d.expand_as(theta)], -1),
                torch.stack([zero, zero, zero, one], -1),
            ],
            -2,
        )

    links = dh(q)  # (8, 6, 4, 4)
    T = torch.eye(4).repeat(8, 1, 1)
    frames = []
    for i in range(links.shape[1]):
        T = torch.bmm(T, links[:, i])
        frames.append(T)
    frames = torch.stack(frames, 1)
    ee = frames[:, -1]
    R, p = ee[:, :3, :3], ee[:, :3, 3]
    yaw = torch.atan2(R[:, 1, 0], R[:, 0, 0])
    pitch = torch.atan2(-R[:, 2, 0], torch.sqrt(R[:, 2, 1] ** 2 + R[:, 2, 2] ** 2))
    roll = torch.atan2(R[:, 2, 1], R[:, 2, 2])
    orth = (R.transpose(-1, -2) @ R - torch.eye(3)).abs().amax(dim=(-2, -1))
    chained = torch.linalg.multi_dot(list(links[3].unbind(0)))
    qp = torch.tensor(_PANDA_Q0) + torch.tensor(arr(2, 5, 7, scale=0.3))
    pf = _panda_fk(torch, qp, torch.float32)
    joints = pf[..., :3, 3]
    reach = joints[:, -1].norm(dim=-1)
    link_lengths = (joints[:, 1:] - joints[:, :-1]).norm(dim=-1)
    return {"ee_pos": p, "rpy": torch.stack([roll, pitch, yaw], -1), "orth_err_small": orth < 1e-5,
            "det": torch.linalg.det(R), "frames_2": frames[2], "multi_dot": chained,
            "multi_dot_matches": torch.allclose(chained, ee[3], atol=1e-5),
            "panda_joints": joints, "panda_reach": reach, "panda_link_lengths": link_lengths,
            "panda_ee_z_axis": pf[:, -1, :3, 2]}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robo_autograd_jacobian_damped_least_squares_ik(torch):
    """The Panda's position Jacobian by ``autograd.functional.jacobian`` of forward kinematics,
    checked against the geometric Jacobian (``z_i x (p_e - p_i)``, ``z_i`` stacked as
    columns); manipulability and singular values; then damped-least-squares IK to a reachable
    target (``dq = J^T (J J^T + lambda^2 I)^{-1} e`` with ``linalg.solve``, joint limits by
    ``clamp``), and a secondary task projected into the null space with ``linalg.pinv``."""
    dt = torch.float64
    q0 = torch.tensor(_PANDA_Q0, dtype=dt)
    lower = torch.tensor([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973], dtype=dt)
    upper = torch.tensor([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973], dtype=dt)

    def ee_pos(q):
        return _panda_fk(torch, q, dt)[-1, :3, 3]

    J = torch.autograd.functional.jacobian(ee_pos, q0)
    frames = _panda_fk(torch, q0, dt)
    z = frames[:7, :3, 2]
    origins = frames[:7, :3, 3]
    J_geo = torch.linalg.cross(z, frames[-1, :3, 3] - origins).T
    sv = torch.linalg.svdvals(J)
    manip = torch.sqrt(torch.det(J @ J.T))

    target = ee_pos(q0 + torch.tensor(arr(3, 7, scale=0.25, dtype=np.float64)))
    q = q0.clone()
    lam = 0.05
    errors = []
    for _ in range(12):
        e = target - ee_pos(q)
        errors.append(e.norm().item())
        Jq = torch.autograd.functional.jacobian(ee_pos, q)
        dq = Jq.T @ torch.linalg.solve(Jq @ Jq.T + lam**2 * torch.eye(3, dtype=dt), e)
        q = torch.clamp(q + dq, lower, upper)
    # null-space motion: keep the end effector still, pull joints toward the middle of their range
    mid = (lower + upper) / 2
    qn = q.clone()
    for _ in range(5):
        Jn = torch.autograd.functional.jacobian(ee_pos, qn)
        pinv = torch.linalg.pinv(Jn)
        N = torch.eye(7, dtype=dt) - pinv @ Jn
        e = target - ee_pos(qn)
        qn = qn + pinv @ e + N @ (0.2 * (mid - qn))
    return {"J": J, "J_geo": J_geo, "J_matches": torch.allclose(J, J_geo, atol=1e-10), "sv": sv,
            "manipulability": manip, "ik_errors": errors, "q_ik": q, "ee_ik": ee_pos(q),
            "q_null": qn, "null_residual": (target - ee_pos(qn)).norm(),
            "dist_to_mid": [(q - mid).norm(), (qn - mid).norm()]}  # fmt: skip


def _skew(torch, w):
    zero = torch.zeros_like(w[..., 0])
    return torch.stack(
        [
            torch.stack([zero, -w[..., 2], w[..., 1]], -1),
            torch.stack([w[..., 2], zero, -w[..., 0]], -1),
            torch.stack([-w[..., 1], w[..., 0], zero], -1),
        ],
        -2,
    )


@program(rtol=1e-7, atol=1e-9)
def robo_product_of_exponentials_ur5_space_jacobian(torch):
    """Modern Robotics' product-of-exponentials kinematics for a UR5: screw axes ``S_i = (w,
    -w x q)`` as columns, ``T = e^[S1]th1 ... e^[S6]th6 M`` with ``matrix_exp`` of 4x4 twists, the
    space Jacobian from adjoints of the partial products, the body Jacobian as ``Ad_{T^-1} J_s``,
    the twist of a joint velocity, and a Newton-Raphson IK (``linalg.pinv`` of the body Jacobian,
    ``se3`` log from the rotation angle)."""
    dt = torch.float64
    W1, W2, L1, L2, H1, H2 = 0.109, 0.082, 0.425, 0.392, 0.089, 0.095
    M = torch.tensor([[-1.0, 0, 0, L1 + L2], [0, 0, 1, W1 + W2], [0, 1, 0, H1 - H2], [0, 0, 0, 1]], dtype=dt)  # fmt: skip
    w = torch.tensor([[0, 0, 1], [0, 1, 0], [0, 1, 0], [0, 1, 0], [0, 0, -1], [0, 1, 0]], dtype=dt)
    qpts = torch.tensor([[0, 0, 0], [0, 0, H1], [L1, 0, H1], [L1 + L2, 0, H1], [L1 + L2, W1, 0], [L1 + L2, 0, H1 - H2]], dtype=dt)  # fmt: skip
    S = torch.cat([w, torch.linalg.cross(-w, qpts)], dim=1).T  # (6, 6): columns are screws

    def se3(V):
        top = torch.cat([_skew(torch, V[:3]), V[3:, None]], 1)
        return torch.cat([top, torch.zeros(1, 4, dtype=dt)], 0)

    def adjoint(T):
        R, p = T[:3, :3], T[:3, 3]
        return torch.cat([torch.cat([R, torch.zeros(3, 3, dtype=dt)], 1),
                          torch.cat([_skew(torch, p) @ R, R], 1)], 0)  # fmt: skip

    def fk_space(theta):
        T = torch.eye(4, dtype=dt)
        for i in range(6):
            T = T @ torch.linalg.matrix_exp(se3(S[:, i]) * theta[i])
        return T @ M

    def jacobian_space(theta):
        cols, T = [S[:, 0]], torch.eye(4, dtype=dt)
        for i in range(1, 6):
            T = T @ torch.linalg.matrix_exp(se3(S[:, i - 1]) * theta[i - 1])
            cols.append(adjoint(T) @ S[:, i])
        return torch.stack(cols, 1)

    def log_se3(T):
        R, p = T[:3, :3], T[:3, 3]
        cos = ((torch.trace(R) - 1) / 2).clamp(-1.0, 1.0)
        th = torch.acos(cos)
        if th.item() < 1e-9:
            return torch.cat([torch.zeros(3, dtype=dt), p])
        wh = (R - R.T) / (2 * torch.sin(th))
        omg = torch.stack([wh[2, 1], wh[0, 2], wh[1, 0]])
        G_inv = (torch.eye(3, dtype=dt) / th - wh / 2
                 + (1 / th - 0.5 / torch.tan(th / 2)) * (wh @ wh))  # fmt: skip
        return torch.cat([omg, G_inv @ p]) * th

    theta = torch.tensor([0.2, -0.8, 1.1, -0.6, 0.4, 0.9], dtype=dt)
    T = fk_space(theta)
    Js = jacobian_space(theta)
    Jb = adjoint(torch.linalg.inv(T)) @ Js
    thetadot = torch.tensor([0.1, -0.2, 0.3, 0.05, -0.1, 0.2], dtype=dt)
    V_s = Js @ thetadot
    # finite difference of the pose, as a check users write: [V_s] ~ (T(th+eps dth) - T) T^-1 / eps
    eps = 1e-6
    dT = (fk_space(theta + eps * thetadot) - T) / eps @ torch.linalg.inv(T)
    V_fd = torch.cat([torch.stack([dT[2, 1], dT[0, 2], dT[1, 0]]), dT[:3, 3]])
    T_goal = fk_space(theta + torch.tensor([0.1, 0.1, -0.1, 0.2, -0.1, 0.1], dtype=dt))
    th = theta.clone()
    errs = []
    for _ in range(5):
        Vb = log_se3(torch.linalg.inv(fk_space(th)) @ T_goal)
        errs.append([Vb[:3].norm().item(), Vb[3:].norm().item()])
        Jb_th = adjoint(torch.linalg.inv(fk_space(th))) @ jacobian_space(th)
        th = th + torch.linalg.pinv(Jb_th) @ Vb
    return {"T": T, "Js": Js, "Jb": Jb, "V_s": V_s, "V_fd_close": torch.allclose(V_s, V_fd, atol=1e-5),
            "rank": torch.linalg.matrix_rank(Js), "ik_errs": errs, "ik_theta": th,
            "ik_final": fk_space(th)}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robo_lqr_riccati_iteration_cartpole_zoh(torch):
    """LQR for a cart-pole linearised about upright: zero-order-hold discretisation with
    ``matrix_exp`` of the block matrix ``[[A, B], [0, 0]] dt``, the discrete algebraic Riccati
    equation iterated to convergence with the gain from ``linalg.solve(R + B'PB, B'PA)``, a
    finite-horizon time-varying backward pass, closed-loop rollouts of a batch of initial states
    (``x @ (A - BK).T``) with quadratic costs by ``einsum``, and the closed-loop spectrum."""
    dt = torch.float64
    mc, mp, lp, g, h = 1.0, 0.1, 0.5, 9.81, 0.05
    Ac = torch.tensor([[0, 1, 0, 0], [0, 0, -mp * g / mc, 0], [0, 0, 0, 1],
                       [0, 0, (mc + mp) * g / (mc * lp), 0]], dtype=dt)  # fmt: skip
    Bc = torch.tensor([[0.0], [1 / mc], [0.0], [-1 / (mc * lp)]], dtype=dt)
    n, m = 4, 1
    blk = torch.zeros(n + m, n + m, dtype=dt)
    blk[:n, :n], blk[:n, n:] = Ac, Bc
    Md = torch.linalg.matrix_exp(blk * h)
    A, B = Md[:n, :n], Md[:n, n:]
    Q = torch.diag(torch.tensor([10.0, 1.0, 10.0, 1.0], dtype=dt))
    R = torch.tensor([[0.01]], dtype=dt)
    P = Q.clone()
    deltas = []
    for it in range(200):
        K = torch.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
        P_next = Q + A.T @ P @ (A - B @ K)
        if it % 40 == 0:
            deltas.append((P_next - P).abs().max().item())
        P = 0.5 * (P_next + P_next.T)
    K = torch.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
    dare_residual = A.T @ P @ A - P - A.T @ P @ B @ K + Q
    Acl = A - B @ K
    eig_abs = torch.linalg.eigvals(Acl).abs().sort().values
    # finite horizon: time-varying gains from the terminal cost backwards
    N = 50
    Pt, gains = 10 * Q, []
    for _ in range(N):
        Kt = torch.linalg.solve(R + B.T @ Pt @ B, B.T @ Pt @ A)
        Pt = Q + Kt.T @ R @ Kt + (A - B @ Kt).T @ Pt @ (A - B @ Kt)
        gains.append(Kt)
    gains = torch.stack(gains[::-1])  # (N, 1, 4), gains[0] applies first
    x0 = torch.tensor(arr(4, 6, 4, scale=0.2, dtype=np.float64))
    x, xt = x0, x0
    cost = torch.zeros(6, dtype=dt)
    cost_tv = torch.zeros(6, dtype=dt)
    for k in range(N):
        u = -x @ K.T
        cost = cost + torch.einsum("bi,ij,bj->b", x, Q, x) + torch.einsum("bi,ij,bj->b", u, R, u)
        x = x @ Acl.T
        ut = -torch.einsum("ij,bj->bi", gains[k], xt)
        cost_tv = cost_tv + torch.einsum("bi,ij,bj->b", xt, Q, xt) + (ut**2).sum(-1) * R[0, 0]
        xt = xt @ A.T + ut @ B.T
    predicted = torch.einsum("bi,ij,bj->b", x0, P, x0)
    return {"A": A, "B": B, "P": P, "K": K, "deltas": deltas, "dare_residual_small":
            dare_residual.abs().max() < 1e-8, "eig_abs": eig_abs, "stable": bool((eig_abs < 1).all()),
            "gains_first_last": gains[[0, -1]], "x_final": x, "xt_final": xt, "cost": cost,
            "cost_tv": cost_tv, "predicted_cost": predicted,
            "K_repr": repr(torch.round(K, decimals=3))}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def robo_ilqr_pendulum_swing_up_box_clamped(torch):
    """iLQR swinging a torque-limited pendulum up, as differentiable-MPC code writes it: dynamics
    linearised along the whole trajectory at once (one ``autograd.grad`` per state dimension of
    the batched step), the Riccati-like backward pass with a regularised ``Quu`` and gains from
    ``linalg.solve``, the forward pass with controls clamped to the torque box and a backtracking
    line search over step sizes."""
    dt = torch.float64
    g, lp, m, b, h, umax, T = 9.81, 1.0, 1.0, 0.1, 0.08, 3.0, 25
    goal = torch.tensor([math.pi, 0.0], dtype=dt)
    Q = torch.diag(torch.tensor([0.1, 0.01], dtype=dt))
    Qf = torch.diag(torch.tensor([100.0, 10.0], dtype=dt))
    Rw = torch.tensor([[0.01]], dtype=dt)

    def step(x, u):
        th, thd = x[..., 0], x[..., 1]
        thdd = -g / lp * torch.sin(th) - b * thd + u[..., 0] / (m * lp**2)
        thd_new = thd + h * thdd
        return torch.stack([th + h * thd_new, thd_new], -1)

    def rollout(x0, us):
        xs = [x0]
        for t in range(T):
            xs.append(step(xs[-1], us[t]))
        return torch.stack(xs)

    def total_cost(xs, us):
        dx = xs - goal
        run = 0.5 * torch.einsum("ti,ij,tj->", dx[:-1], Q, dx[:-1]) + 0.5 * Rw[0, 0] * (us**2).sum()
        return run + 0.5 * dx[-1] @ Qf @ dx[-1]

    def linearize(xs, us):
        x = xs[:-1].detach().requires_grad_(True)
        u = us.detach().requires_grad_(True)
        f = step(x, u)
        rows_x, rows_u = [], []
        for i in range(2):
            gx, gu = torch.autograd.grad(f[:, i].sum(), (x, u), retain_graph=True)
            rows_x.append(gx)
            rows_u.append(gu)
        return torch.stack(rows_x, 1), torch.stack(rows_u, 1)  # (T, 2, 2), (T, 2, 1)

    x0 = torch.tensor([0.1, 0.0], dtype=dt)
    us = torch.tensor(arr(5, T, 1, scale=0.5, dtype=np.float64))
    xs = rollout(x0, us)
    cost = total_cost(xs, us)
    costs, accepted, mu = [cost.item()], [], 1e-6
    for _ in range(5):
        A, B = linearize(xs, us)
        Vx, Vxx = Qf @ (xs[-1] - goal), Qf
        ks, Ks = [], []
        for t in reversed(range(T)):
            At, Bt = A[t], B[t]
            Qx = Q @ (xs[t] - goal) + At.T @ Vx
            Qu = Rw @ us[t] + Bt.T @ Vx
            Qxx = Q + At.T @ Vxx @ At
            Quu = Rw + Bt.T @ Vxx @ Bt + mu * torch.eye(1, dtype=dt)
            Qux = Bt.T @ Vxx @ At
            k = -torch.linalg.solve(Quu, Qu)
            K = -torch.linalg.solve(Quu, Qux)
            Vx = Qx + K.T @ Quu @ k + K.T @ Qu + Qux.T @ k
            Vxx = Qxx + K.T @ Quu @ K + K.T @ Qux + Qux.T @ K
            Vxx = 0.5 * (Vxx + Vxx.T)
            ks.append(k)
            Ks.append(K)
        ks, Ks = ks[::-1], Ks[::-1]
        for alpha in (1.0, 0.5, 0.25, 0.125, 0.0625):
            x, new_us, new_xs = x0, [], [x0]
            for t in range(T):
                u = torch.clamp(us[t] + alpha * ks[t] + Ks[t] @ (x - xs[t]), -umax, umax)
                x = step(x, u)
                new_us.append(u)
                new_xs.append(x)
            new_us, new_xs = torch.stack(new_us), torch.stack(new_xs)
            new_cost = total_cost(new_xs, new_us)
            if new_cost < cost:
                xs, us, cost = new_xs, new_us, new_cost
                accepted.append(alpha)
                mu = max(mu / 2, 1e-8)
                break
        else:
            accepted.append(0.0)
            mu *= 10
        costs.append(cost.item())
    saturated = (us.abs() >= umax - 1e-12).sum()
    return {"costs": costs, "accepted": accepted, "us": us, "xs": xs, "final_state": xs[-1],
            "saturated": saturated, "K0": Ks[0], "k0": ks[0], "A_last": A[-1], "B_last": B[-1]}  # fmt: skip


def _cartpole_step(torch, s, u, h=0.02):
    """gym's cart-pole equations of motion, semi-implicit Euler."""
    g, mc, mp, lp = 9.8, 1.0, 0.1, 0.5
    total = mc + mp
    x, xd, th, thd = s.unbind(-1)
    cos, sin = torch.cos(th), torch.sin(th)
    temp = (u + mp * lp * thd**2 * sin) / total
    thacc = (g * sin - cos * temp) / (lp * (4.0 / 3.0 - mp * cos**2 / total))
    xacc = temp - mp * lp * thacc * cos / total
    xd = xd + h * xacc
    thd = thd + h * thacc
    return torch.stack([x + h * xd, xd, th + h * thd, thd], -1)


@program(rtol=2e-3, atol=2e-5)  # float32 Adam through 10-step rollouts, 16 updates: reduction order
def robo_gradient_mpc_cartpole_receding_horizon(torch):
    """Gradient-based MPC on gym's cart-pole for a batch of environments: a control sequence
    optimised by Adam through the differentiable dynamics, projected onto the force box in place
    (``U.clamp_`` under ``no_grad``) after every step, the first control applied, and the plan
    warm-started by shifting it (``torch.cat([U[:, 1:], U[:, -1:]], 1)``)."""
    H, umax = 10, 10.0
    weights = torch.tensor([0.5, 0.05, 5.0, 0.05])
    state = torch.tensor(arr(6, 4, 4, scale=0.15))
    U = torch.zeros(4, H)
    plan_costs, applied, states = [], [], [state]
    for _ in range(4):
        U = U.detach().requires_grad_(True)
        opt = torch.optim.Adam([U], lr=1.0)
        for _ in range(4):
            s, cost = state, 0.0
            for t in range(H):
                s = _cartpole_step(torch, s, U[:, t])
                cost = cost + (s**2 * weights).sum(-1) + 1e-3 * U[:, t] ** 2
            loss = cost.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                U.clamp_(-umax, umax)
            plan_costs.append(loss.item())
        u0 = U[:, 0].detach()
        applied.append(u0)
        state = _cartpole_step(torch, state, u0)
        states.append(state)
        U = torch.cat([U[:, 1:], U[:, -1:]], 1)
    return {"plan_costs": plan_costs, "applied": torch.stack(applied, 1), "states": torch.stack(states, 1),
            "last_plan": U.detach(),
            "upright": (states[-1][:, 2].abs() < states[0][:, 2].abs()).tolist()}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robo_ekf_unicycle_range_bearing_autograd_jacobians(torch):
    """An extended Kalman filter localising a unicycle robot among known landmarks: motion and
    measurement Jacobians by ``autograd.functional.jacobian`` (of the motion model w.r.t. state
    and control, control noise mapped through ``G M G'``), bearing innovations wrapped with
    ``atan2(sin, cos)``, the Joseph-form covariance update, and the normalised innovation
    squared per step."""
    dt = torch.float64
    rng = _rng(7)
    h, steps = 0.1, 15
    landmarks = torch.tensor([[2.0, 1.0], [0.0, 3.0], [-1.5, -1.0]], dtype=dt)
    Mu = torch.diag(torch.tensor([0.05**2, 0.02**2], dtype=dt))
    Rm = torch.diag(torch.tensor([0.1**2, 0.05**2] * 3, dtype=dt))

    def motion(x, u):
        v, w = u[0], u[1]
        return x + h * torch.stack([v * torch.cos(x[2]), v * torch.sin(x[2]), w])

    def measure(x):
        d = landmarks - x[:2]
        r = d.norm(dim=1)
        bearing = torch.atan2(d[:, 1], d[:, 0]) - x[2]
        return torch.stack([r, bearing], 1).reshape(-1)

    controls = torch.tensor(np.stack([1.0 + 0.1 * np.sin(np.arange(steps)), 0.3 * np.cos(0.5 * np.arange(steps))], 1))  # fmt: skip
    # ground truth and measurements with fixed noise, simulated with the same models
    xt = torch.tensor([0.0, 0.0, 0.1], dtype=dt)
    truth, zs = [], []
    for k in range(steps):
        noisy_u = controls[k] + torch.tensor(rng.standard_normal(2) * [0.05, 0.02])
        xt = motion(xt, noisy_u)
        truth.append(xt)
        zs.append(measure(xt) + torch.tensor(rng.standard_normal(6) * np.tile([0.1, 0.05], 3)))
    x = torch.tensor([0.1, -0.1, 0.0], dtype=dt)
    P = torch.diag(torch.tensor([0.1, 0.1, 0.05], dtype=dt))
    eye = torch.eye(3, dtype=dt)
    est, traces, nis = [], [], []
    for k in range(steps):
        F, G = torch.autograd.functional.jacobian(motion, (x, controls[k]))
        x = motion(x, controls[k])
        P = F @ P @ F.T + G @ Mu @ G.T
        Hj = torch.autograd.functional.jacobian(measure, x)
        y = zs[k] - measure(x)
        y[1::2] = torch.atan2(torch.sin(y[1::2]), torch.cos(y[1::2]))
        S = Hj @ P @ Hj.T + Rm
        K = torch.linalg.solve(S, Hj @ P).T
        x = x + K @ y
        IKH = eye - K @ Hj
        P = IKH @ P @ IKH.T + K @ Rm @ K.T
        nis.append((y @ torch.linalg.solve(S, y)).item())
        est.append(x)
        traces.append(torch.trace(P).item())
    est, truth = torch.stack(est), torch.stack(truth)
    err = est - truth
    err[:, 2] = torch.atan2(torch.sin(err[:, 2]), torch.cos(err[:, 2]))
    return {"est": est, "truth": truth, "rmse_xy": err[:, :2].pow(2).sum(1).mean().sqrt(),
            "traces": traces, "nis": nis, "P": P, "F_last": F, "G_last": G, "H_last": Hj,
            "P_sym": torch.allclose(P, P.T)}  # fmt: skip


def _quat_mul(torch, q, r):
    """Hamilton product of ``(..., 4)`` quaternions stored ``(w, x, y, z)``."""
    w1, x1, y1, z1 = q.unbind(-1)
    w2, x2, y2, z2 = r.unbind(-1)
    return torch.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        -1,
    )


def _quat_to_matrix(torch, q):
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        -1,
    ).reshape(*q.shape[:-1], 3, 3)  # fmt: skip


@program(rtol=1e-3, atol=2e-5)  # float32, 30 chained products: rounding accumulates per step
def robo_quaternion_gyro_integration_and_mahony_filter(torch):
    """Attitude propagation from gyro rates for a batch of IMUs: the exact quaternion exponential
    ``q <- q (x) [cos(|w|dt/2), sin(|w|dt/2) w/|w|]`` against the first-order update ``q + dt/2
    Omega(w) q`` renormalised, and the rotation-matrix update ``R <- R expm([w]x dt)``; angle
    between estimates from the relative quaternion; then a Mahony complementary filter correcting
    a biased gyro with the accelerometer's gravity direction (proportional + integral terms)."""
    rng = _rng(8)
    n, steps, h = 3, 30, 0.02
    t = np.arange(steps)[:, None, None] * h
    omega_np = (np.array([[0.5, -0.3, 1.0], [2.0, 0.5, -0.2], [0.1, 0.1, 3.0]])[None]
                * (1 + 0.5 * np.sin(3 * t + np.arange(3)))).astype(np.float32)  # fmt: skip
    omega = torch.tensor(omega_np)  # (steps, n, 3)
    q_exp = torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(n, 1)
    q_lin = q_exp.clone()
    R = torch.eye(3).expand(n, 3, 3).clone()
    for k in range(steps):
        w = omega[k]
        angle = w.norm(dim=-1, keepdim=True) * h
        axis = w / w.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        dq = torch.cat([torch.cos(angle / 2), torch.sin(angle / 2) * axis], -1)
        q_exp = _quat_mul(torch, q_exp, dq)
        w_quat = torch.cat([torch.zeros(n, 1), w], -1)
        q_lin = q_lin + 0.5 * h * _quat_mul(torch, q_lin, w_quat)
        q_lin = q_lin / q_lin.norm(dim=-1, keepdim=True)
        R = R @ torch.linalg.matrix_exp(_skew(torch, w * h))
    q_conj = q_exp * torch.tensor([1.0, -1.0, -1.0, -1.0])
    rel = _quat_mul(torch, q_conj, q_lin)
    angle_err = 2 * torch.atan2(rel[:, 1:].norm(dim=-1), rel[:, 0].abs())
    R_from_q = _quat_to_matrix(torch, q_exp)
    # Mahony filter on the first IMU: true attitude from q_exp history, gyro with a bias
    bias = torch.tensor([0.05, -0.04, 0.03])
    q_true = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    q_est = torch.tensor([[0.9848, 0.1736, 0.0, 0.0]])
    integral = torch.zeros(1, 3)
    kp, ki = 2.0, 0.5
    g_world = torch.tensor([0.0, 0.0, 1.0])
    tilt = []
    for k in range(steps):
        w = omega[k, :1]
        ang = w.norm(dim=-1, keepdim=True) * h
        q_true = _quat_mul(torch, q_true, torch.cat([torch.cos(ang / 2), torch.sin(ang / 2) * w / w.norm(dim=-1, keepdim=True)], -1))  # fmt: skip
        acc = _quat_to_matrix(torch, q_true).transpose(-1, -2) @ g_world  # gravity in body frame
        acc = acc + torch.tensor(rng.standard_normal((1, 3)).astype(np.float32) * 0.01)
        v_hat = _quat_to_matrix(torch, q_est).transpose(-1, -2) @ g_world
        e = torch.linalg.cross(acc / acc.norm(dim=-1, keepdim=True), v_hat)
        integral = integral + ki * e * h
        w_corr = w + bias + kp * e + integral
        q_est = q_est + 0.5 * h * _quat_mul(
            torch, q_est, torch.cat([torch.zeros(1, 1), w_corr], -1)
        )
        q_est = torch.nn.functional.normalize(q_est, dim=-1)
        z_est = _quat_to_matrix(torch, q_est)[..., 2, :]
        z_true = _quat_to_matrix(torch, q_true)[..., 2, :]
        tilt.append(
            torch.atan2(torch.linalg.cross(z_est, z_true).norm(), (z_est * z_true).sum()).item()
        )
    return {"q_exp": q_exp, "q_lin": q_lin, "angle_err": angle_err, "R": R, "R_from_q": R_from_q,
            "R_agree": torch.allclose(R, R_from_q, atol=1e-4), "norms": q_exp.norm(dim=-1),
            "tilt": tilt[::3], "integral": integral, "q_est": q_est}  # fmt: skip


def _pendulum_data(seed, n):
    """Transitions of a torque-driven pendulum (``[cos, sin, thetadot]``, action, next state)."""
    rng = _rng(seed)
    th = rng.uniform(-np.pi, np.pi, n)
    thd = rng.uniform(-2, 2, n)
    u = rng.uniform(-2, 2, n)
    thd2 = thd + 0.05 * (-9.81 * np.sin(th) + u)
    th2 = th + 0.05 * thd2
    obs = np.stack([np.cos(th), np.sin(th), thd], 1)
    nxt = np.stack([np.cos(th2), np.sin(th2), thd2], 1)
    return obs.astype(np.float32), u[:, None].astype(np.float32), nxt.astype(np.float32)


@program(rtol=1e-3, atol=5e-5)  # float32 Adam on an ensemble: bmm reduction order
def robo_pets_ensemble_dynamics_shooting_loss(torch):
    """A PETS-style probabilistic ensemble learning pendulum dynamics: ensemble linear layers as
    ``torch.baddbmm`` over stacked member weights, inputs normalised by data statistics, the
    network predicting a state delta with mean and log-variance soft-bounded by learned
    ``max_logvar``/``min_logvar`` through ``softplus``, trained by Gaussian NLL with Adam; then
    fine-tuned with a multi-step shooting loss through 6-step open-loop rollouts of the mean
    model, and a trajectory-sampling rollout picking a member per particle."""
    nn, F = torch.nn, torch.nn.functional
    E, hidden = 3, 24

    class EnsembleLinear(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(E, i, o))
            self.bias = nn.Parameter(torch.zeros(E, 1, o))

        def forward(self, x):
            return torch.baddbmm(self.bias, x, self.weight)

    class Ensemble(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = EnsembleLinear(4, hidden), EnsembleLinear(hidden, hidden), EnsembleLinear(hidden, 6)  # fmt: skip
            self.max_logvar = nn.Parameter(torch.full((1, 1, 3), 0.5))
            self.min_logvar = nn.Parameter(torch.full((1, 1, 3), -10.0))
            self.register_buffer("mu", torch.zeros(4))
            self.register_buffer("sigma", torch.ones(4))

        def forward(self, x):
            x = (x - self.mu) / self.sigma
            h = F.silu(self.l1(x))
            h = F.silu(self.l2(h))
            mean, logvar = self.l3(h).chunk(2, dim=-1)
            logvar = self.max_logvar - F.softplus(self.max_logvar - logvar)
            logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
            return mean, logvar

    model = Ensemble()
    with torch.no_grad():
        for i, lin in enumerate([model.l1, model.l2, model.l3]):
            fan_in = lin.weight.shape[1]
            lin.weight.copy_(torch.tensor(_rng(20 + i).uniform(-1, 1, lin.weight.shape).astype(np.float32) / math.sqrt(fan_in)))  # fmt: skip
    obs, act, nxt = _pendulum_data(9, 96)
    inputs = torch.tensor(np.concatenate([obs, act], 1))
    targets = torch.tensor(nxt - obs)
    model.mu.copy_(inputs.mean(0))
    model.sigma.copy_(inputs.std(0).clamp_min(1e-6))
    # each member trains on its own bootstrap of the data (fixed indices)
    boot = torch.tensor(_rng(10).integers(0, 96, (E, 96)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-5)
    nll_hist = []
    for _ in range(12):
        mean, logvar = model(inputs[boot])
        inv_var = torch.exp(-logvar)
        nll = (((mean - targets[boot]) ** 2) * inv_var + logvar).mean(dim=(1, 2)).sum()
        loss = nll + 0.01 * (model.max_logvar.sum() - model.min_logvar.sum())
        opt.zero_grad()
        loss.backward()
        opt.step()
        nll_hist.append(nll.item())
    # multi-step shooting loss on true trajectories
    rng = _rng(11)
    start_th, start_thd = rng.uniform(-1, 1, 8), rng.uniform(-1, 1, 8)
    acts = rng.uniform(-2, 2, (6, 8)).astype(np.float32)
    th, thd, traj = start_th, start_thd, []
    for k in range(6):
        thd = thd + 0.05 * (-9.81 * np.sin(th) + acts[k])
        th = th + 0.05 * thd
        traj.append(np.stack([np.cos(th), np.sin(th), thd], 1))
    s0 = torch.tensor(
        np.stack([np.cos(start_th), np.sin(start_th), start_thd], 1).astype(np.float32)
    )
    true_traj = torch.tensor(np.stack(traj).astype(np.float32))
    a_seq = torch.tensor(acts)
    shoot_hist = []
    for _ in range(5):
        s = s0.expand(E, 8, 3)
        preds = []
        for k in range(6):
            mean, _ = model(torch.cat([s, a_seq[k].expand(E, 8)[..., None]], -1))
            s = s + mean
            preds.append(s)
        preds = torch.stack(preds, 1)  # (E, 6, 8, 3)
        discount = 0.9 ** torch.arange(6.0)
        shoot = ((preds - true_traj) ** 2).mean(dim=(0, 2, 3)) @ discount
        opt.zero_grad()
        shoot.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        shoot_hist.append(shoot.item())
    # TS-1 style propagation: each particle uses one (fixed) member per step
    with torch.no_grad():
        members = torch.tensor(_rng(12).integers(0, E, (6, 8)))
        s = s0
        for k in range(6):
            mean, logvar = model(torch.cat([s, a_seq[k][:, None]], -1).expand(E, 8, 4))
            s = s + mean[members[k], torch.arange(8)]
        ts_err = (s - true_traj[-1]).norm(dim=-1)
    return {"nll": nll_hist, "shoot": shoot_hist, "ts_err": ts_err, "max_logvar": model.max_logvar,
            "min_logvar": model.min_logvar, "l3_bias": model.l3.bias, "mu": model.mu,
            "sigma": model.sigma, "logvar_last": logvar[:, :2]}  # fmt: skip


@program(rtol=1e-3, atol=2e-5)  # float32 BPTT through 20 steps: accumulated rounding
def robo_policy_bptt_through_differentiable_pendulum(torch):
    """A policy trained by backpropagation through a differentiable simulator (analytic policy
    gradients): an MLP on ``[cos, sin, thetadot]`` with a ``tanh``-squashed torque, a batch of
    pendulums simulated for 20 steps with the loss summed over the trajectory, Adam with
    ``clip_grad_norm_`` (its returned norm logged), and a ``torch.no_grad`` evaluation rollout
    from held-out starts."""
    nn = torch.nn
    policy = nn.Sequential(
        nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)
    )
    set_weights(torch, policy, seed=13)
    opt = torch.optim.Adam(policy.parameters(), lr=5e-3)
    umax, h = 2.0, 0.05

    def simulate(th, thd, steps=20):
        cost = 0.0
        for _ in range(steps):
            obs = torch.stack([torch.cos(th), torch.sin(th), thd], -1)
            u = umax * torch.tanh(policy(obs)).squeeze(-1)
            thd = thd + h * (-9.81 * torch.sin(th) - 0.1 * thd + u)
            thd = thd.clamp(-8.0, 8.0)
            th = th + h * thd
            cost = cost + (1 - torch.cos(th)) + 0.1 * thd**2 + 0.001 * u**2
        return cost, th, thd

    starts = torch.tensor(_rng(14).uniform(-0.8, 0.8, (2, 16)).astype(np.float32))
    losses, norms = [], []
    for _ in range(6):
        cost, _, _ = simulate(starts[0], starts[1])
        loss = cost.mean()
        opt.zero_grad()
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(policy.parameters(), max_norm=10.0).item())
        opt.step()
        losses.append(loss.item())
    eval_starts = torch.tensor(_rng(15).uniform(-0.8, 0.8, (2, 8)).astype(np.float32))
    with torch.no_grad():
        eval_cost, th_end, thd_end = simulate(eval_starts[0], eval_starts[1], steps=25)
    return {"losses": losses, "grad_norms": norms, "eval_cost": eval_cost, "th_end": th_end,
            "thd_end": thd_end, "params": params(policy), "grads": grads(policy)}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robo_computed_torque_two_link_christoffel_autograd(torch):
    """Computed-torque tracking control of a two-link arm: the mass matrix from the link
    parameters, Coriolis terms from Christoffel symbols of ``autograd.functional.jacobian`` of
    ``M(q)`` (``einsum`` over the symbols and joint rates), gravity as the gradient of the
    potential energy, forward dynamics by ``linalg.solve``, a PD outer loop on a sinusoidal
    reference, the skew-symmetry of ``Mdot - 2C``, and the energy drift of an unforced run."""
    dt = torch.float64
    m1, m2, l1, l2, lc1, lc2, I1, I2, g = 1.0, 0.8, 0.5, 0.4, 0.25, 0.2, 0.02, 0.015, 9.81
    h, steps = 0.015, 40
    Kp = torch.diag(torch.tensor([100.0, 80.0], dtype=dt))
    Kd = torch.diag(torch.tensor([20.0, 18.0], dtype=dt))

    def mass_matrix(q):
        c2 = torch.cos(q[1])
        m11 = I1 + I2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2)
        m12 = I2 + m2 * (lc2**2 + l1 * lc2 * c2)
        m22 = (I2 + m2 * lc2**2) * torch.ones_like(c2)
        return torch.stack([torch.stack([m11, m12]), torch.stack([m12, m22])])

    def potential(q):
        y1 = lc1 * torch.sin(q[0])
        y2 = l1 * torch.sin(q[0]) + lc2 * torch.sin(q[0] + q[1])
        return g * (m1 * y1 + m2 * y2)

    def coriolis(q, qd):
        dM = torch.autograd.functional.jacobian(mass_matrix, q)  # dM[i, j, k] = dM_ij / dq_k
        c = 0.5 * (dM + dM.permute(0, 2, 1) - dM.permute(2, 0, 1))  # c[i, j, k]: first kind
        return torch.einsum("ijk,k->ij", c, qd), dM

    def gravity(q):
        q = q.detach().requires_grad_(True)
        (gq,) = torch.autograd.grad(potential(q), q)
        return gq

    def forward_dynamics(q, qd, tau):
        C, _ = coriolis(q, qd)
        return torch.linalg.solve(mass_matrix(q), tau - C @ qd - gravity(q))

    def reference(t):
        qd_ = torch.tensor([0.5 * math.sin(2 * t), 0.3 * math.cos(3 * t)], dtype=dt)
        qdd_ = torch.tensor([math.cos(2 * t), -0.9 * math.sin(3 * t)], dtype=dt)
        qdd2 = torch.tensor([-2 * math.sin(2 * t), -2.7 * math.cos(3 * t)], dtype=dt)
        return qd_, qdd_, qdd2

    q = torch.tensor([0.2, 0.1], dtype=dt)
    qd = torch.zeros(2, dtype=dt)
    errs, taus = [], []
    for k in range(steps):
        q_ref, qd_ref, qdd_ref = reference(k * h)
        e, ed = q_ref - q, qd_ref - qd
        M, (C, _), gq = mass_matrix(q), coriolis(q, qd), gravity(q)
        tau = M @ (qdd_ref + Kd @ ed + Kp @ e) + C @ qd + gq
        qdd = torch.linalg.solve(M, tau - C @ qd - gq)
        qd = qd + h * qdd
        q = q + h * qd
        if k % 8 == 0:
            errs.append(e.norm().item())
            taus.append(tau)
    C, dM = coriolis(q, qd)
    Mdot = torch.einsum("ijk,k->ij", dM, qd)
    N = Mdot - 2 * C
    # unforced swing: total energy drift under semi-implicit Euler
    qf, qdf = torch.tensor([1.0, -0.5], dtype=dt), torch.zeros(2, dtype=dt)

    def energy(q, qd):
        return 0.5 * qd @ mass_matrix(q) @ qd + potential(q)

    e0 = energy(qf, qdf)
    for _ in range(30):
        qdf = qdf + h * forward_dynamics(qf, qdf, torch.zeros(2, dtype=dt))
        qf = qf + h * qdf
    return {"errs": errs, "taus": torch.stack(taus), "q": q, "qd": qd, "C": C, "M": mass_matrix(q),
            "gravity": gravity(q), "skew_sym": torch.allclose(N, -N.T, atol=1e-12),
            "energy_drift": energy(qf, qdf) - e0, "q_free": qf,
            "tip": torch.stack([l1 * torch.cos(q[0]) + l2 * torch.cos(q.sum()),
                                l1 * torch.sin(q[0]) + l2 * torch.sin(q.sum())])}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robo_chomp_two_link_arm_around_obstacles(torch):
    """CHOMP for a planar two-link arm: a waypoint trajectory between fixed endpoints, the
    finite-difference matrix ``K`` and metric ``A = K'K`` with the boundary vector, body points
    along both links by forward kinematics, the obstacle cost of signed distances to circles
    with CHOMP's piecewise smooth hinge (``torch.where``) weighted by workspace speed, the
    gradient by autograd, and the covariant update ``xi -= A^{-1} g / eta`` through
    ``cholesky_solve``."""
    dt = torch.float64
    N, eps, eta, lam = 16, 0.2, 40.0, 2.0
    q_start = torch.tensor([0.2, 0.4], dtype=dt)
    q_goal = torch.tensor([2.2, -0.3], dtype=dt)
    centers = torch.tensor([[0.2, 1.3], [-0.6, 1.1]], dtype=dt)
    radii = torch.tensor([0.25, 0.2], dtype=dt)
    K = torch.eye(N, dtype=dt) - torch.diag(torch.ones(N - 1, dtype=dt), -1)
    K = torch.cat([K, torch.zeros(1, N, dtype=dt)], 0)
    K[N, N - 1] = -1.0
    e = torch.zeros(N + 1, 2, dtype=dt)
    e[0], e[N] = -q_start, q_goal
    A = K.T @ K
    L = torch.linalg.cholesky(A)
    s = torch.linspace(0, 1, N + 2, dtype=dt)[1:-1, None]
    xi = (q_start + s * (q_goal - q_start)).clone()
    u = torch.linspace(0.2, 1.0, 5, dtype=dt)

    def body_points(q):
        j1 = torch.stack([torch.cos(q[:, 0]), torch.sin(q[:, 0])], -1)
        j2 = j1 + torch.stack([torch.cos(q[:, 0] + q[:, 1]), torch.sin(q[:, 0] + q[:, 1])], -1)
        link1 = u[None, :, None] * j1[:, None]
        link2 = j1[:, None] + u[None, :, None] * (j2 - j1)[:, None]
        return torch.cat([link1, link2], 1)  # (T, 10, 2)

    def obstacle_cost(d):
        return torch.where(d < 0, -d + eps / 2, torch.where(d < eps, (d - eps) ** 2 / (2 * eps), torch.zeros_like(d)))  # fmt: skip

    costs, clearances = [], []
    for _ in range(15):
        xi = xi.detach().requires_grad_(True)
        full = torch.cat([q_start[None], xi, q_goal[None]])
        pts = body_points(full)
        d = (pts[:, :, None] - centers).norm(dim=-1) - radii  # (T, 10, 2)
        speed = (pts[2:] - pts[:-2]).norm(dim=-1) / 2
        obs = (obstacle_cost(d[1:-1]).sum(-1) * speed).sum()
        smooth = 0.5 * ((K @ xi + e) ** 2).sum()
        total = smooth + lam * obs
        (gr,) = torch.autograd.grad(total, xi)
        costs.append([smooth.item(), obs.item()])
        clearances.append(d.min().item())
        with torch.no_grad():
            xi = xi - torch.cholesky_solve(gr, L) / eta
    return {"costs": costs, "clearances": clearances, "xi": xi.detach(), "A_diag": A.diagonal(),
            "L": L, "last_grad": gr}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robo_cem_and_mppi_point_robot_planning(torch):
    """Sampling-based MPC for a double-integrator point robot avoiding a disc: CEM with fixed
    Gaussian noise, candidates clamped to the action box, batched rollouts, elites by ``topk``
    and a smoothed mean/std refit; MPPI with importance weights ``softmax(-(S - min S) /
    lambda)``, the control update as a weighted sum of perturbations, and the shifted warm
    start."""
    dt = torch.float64
    rng = _rng(16)
    H, n_samples, n_elite, h = 15, 64, 8, 0.1
    goal = torch.tensor([2.0, 1.0], dtype=dt)
    obstacle, radius = torch.tensor([1.0, 0.6], dtype=dt), 0.35

    def rollout_cost(x0, U):  # U: (S, H, 2)
        pos = x0[:2].expand(U.shape[0], 2)
        vel = x0[2:].expand(U.shape[0], 2)
        cost = torch.zeros(U.shape[0], dtype=dt)
        for t in range(H):
            vel = 0.95 * vel + h * U[:, t]
            pos = pos + h * vel
            dist = (pos - obstacle).norm(dim=-1)
            cost = cost + (pos - goal).pow(2).sum(-1) + 0.01 * U[:, t].pow(2).sum(-1)
            cost = cost + 50.0 * torch.relu(radius + 0.1 - dist) ** 2
        return cost + 10 * (pos - goal).pow(2).sum(-1)

    x0 = torch.tensor([0.0, 0.0, 0.0, 0.0], dtype=dt)
    mean = torch.zeros(H, 2, dtype=dt)
    std = torch.ones(H, 2, dtype=dt)
    cem_best = []
    for _ in range(6):
        noise = torch.tensor(rng.standard_normal((n_samples, H, 2)))
        cand = (mean + std * noise).clamp(-2.0, 2.0)
        cost = rollout_cost(x0, cand)
        elite_cost, idx = torch.topk(cost, n_elite, largest=False)
        elites = cand[idx]
        mean = 0.2 * mean + 0.8 * elites.mean(0)
        std = 0.2 * std + 0.8 * elites.std(0, unbiased=False)
        cem_best.append(elite_cost[0].item())
    cem_cost = rollout_cost(x0, mean[None])
    # MPPI, receding horizon for a few steps
    lam, sigma = 1.0, 0.5
    U = torch.zeros(H, 2, dtype=dt)
    x = x0.clone()
    traj, weights_ess = [x], []
    for _ in range(4):
        eps = torch.tensor(rng.standard_normal((n_samples, H, 2))) * sigma
        S = rollout_cost(x, (U + eps).clamp(-2.0, 2.0))
        w = torch.softmax(-(S - S.min()) / lam, dim=0)
        weights_ess.append((1.0 / (w**2).sum()).item())
        U = U + torch.einsum("s,sti->ti", w, eps)
        u0 = U[0].clamp(-2.0, 2.0)
        vel = 0.95 * x[2:] + h * u0
        x = torch.cat([x[:2] + h * vel, vel])
        traj.append(x)
        U = torch.roll(U, -1, dims=0)
        U[-1] = 0.0
    return {"cem_best": cem_best, "cem_mean": mean, "cem_std": std, "cem_cost": cem_cost,
            "mppi_traj": torch.stack(traj), "ess": weights_ess, "mppi_U": U}  # fmt: skip


@program(rtol=1e-7, atol=1e-9)
def robo_func_vmap_jacrev_batched_ik_gauss_newton(torch):
    """Batched kinematics with ``torch.func``: per-configuration Jacobians of the Panda's forward
    kinematics by ``vmap(jacrev(fk))`` (checked against ``jacfwd``), damped-least-squares IK for a
    batch of targets with batched ``linalg.solve`` and a convergence mask through ``torch.where``,
    and the Gauss-Newton approximation ``2 J'J`` compared with the full ``torch.func.hessian`` of
    the squared position error."""
    dt = torch.float64
    func = torch.func

    def fk_pos(q):
        return _panda_fk(torch, q, dt)[-1, :3, 3]

    q0 = torch.tensor(_PANDA_Q0, dtype=dt) + torch.tensor(
        arr(17, 6, 7, scale=0.2, dtype=np.float64)
    )
    targets = func.vmap(fk_pos)(q0 + torch.tensor(arr(18, 6, 7, scale=0.3, dtype=np.float64)))
    J_rev = func.vmap(func.jacrev(fk_pos))(q0)
    J_fwd = func.vmap(func.jacfwd(fk_pos))(q0)
    q, lam = q0.clone(), 0.03
    err_hist, done_hist = [], []
    for _ in range(8):
        e = targets - func.vmap(fk_pos)(q)
        J = func.vmap(func.jacrev(fk_pos))(q)
        JJt = J @ J.mT + lam**2 * torch.eye(3, dtype=dt)
        dq = (J.mT @ torch.linalg.solve(JJt, e.unsqueeze(-1))).squeeze(-1)
        done = e.norm(dim=-1) < 1e-6
        q = torch.where(done[:, None], q, q + dq)
        err_hist.append(e.norm(dim=-1))
        done_hist.append(int(done.sum()))

    def sq_err(qi, ti):
        return (fk_pos(qi) - ti).pow(2).sum()

    H = func.vmap(func.hessian(sq_err))(q0, targets)
    J0 = J_rev
    r0 = func.vmap(fk_pos)(q0) - targets
    H_gn = 2 * J0.mT @ J0
    residual_term = H - H_gn
    g = func.vmap(func.grad(sq_err))(q0, targets)
    return {"J_rev": J_rev, "jac_agree": torch.allclose(J_rev, J_fwd), "err_hist": torch.stack(err_hist),
            "done": done_hist, "q": q, "H": H, "H_gn": H_gn, "residual_term_norm": residual_term.norm(dim=(-2, -1)),
            "grad": g, "grad_is_2Jr": torch.allclose(g, 2 * (J0.mT @ r0[..., None]).squeeze(-1))}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def robo_differentiable_kalman_filter_learned_noise_rts(torch):
    """A differentiable Kalman filter learning its noise model (as in backprop-KF work): a
    constant-velocity tracker over a batch of planar trajectories with batched covariances,
    process and measurement noise as ``exp`` of learned log-diagonals, the innovation
    log-likelihood from ``MultivariateNormal(scale_tril=linalg.cholesky(S))`` maximised with
    Adam; then a Rauch-Tung-Striebel smoother on the learned model under ``no_grad``."""
    dt = torch.float64
    rng = _rng(19)
    Bsz, steps, h = 4, 14, 0.1
    F = torch.eye(4, dtype=dt)
    F[0, 2] = F[1, 3] = h
    Hm = torch.eye(2, 4, dtype=dt)
    # simulate trajectories with process std 0.3 (velocity) and measurement std 0.2
    xs_true = np.zeros((Bsz, steps, 4))
    x = np.concatenate([rng.standard_normal((Bsz, 2)), rng.standard_normal((Bsz, 2))], 1)
    for k in range(steps):
        x = x @ F.numpy().T + np.concatenate([np.zeros((Bsz, 2)), 0.3 * np.sqrt(h) * rng.standard_normal((Bsz, 2))], 1)  # fmt: skip
        xs_true[:, k] = x
    zs = torch.tensor(xs_true[..., :2] + 0.2 * rng.standard_normal((Bsz, steps, 2)))
    log_q = torch.tensor([-6.0, -6.0, -2.0, -2.0], dtype=dt, requires_grad=True)
    log_r = torch.tensor([0.0, 0.0], dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([log_q, log_r], lr=0.2)

    def kalman(log_q, log_r, keep=False):
        Q, R = torch.diag(log_q.exp()), torch.diag(log_r.exp())
        x = torch.zeros(Bsz, 4, dtype=dt)
        x[:, :2] = zs[:, 0]
        P = torch.eye(4, dtype=dt).repeat(Bsz, 1, 1)
        ll = torch.zeros(Bsz, dtype=dt)
        store = []
        for k in range(1, steps):
            x_pred = x @ F.T
            P_pred = F @ P @ F.T + Q
            S = Hm @ P_pred @ Hm.T + R
            innov = zs[:, k] - x_pred @ Hm.T
            dist = torch.distributions.MultivariateNormal(
                torch.zeros(2, dtype=dt), scale_tril=torch.linalg.cholesky(S)
            )
            ll = ll + dist.log_prob(innov)
            K = torch.linalg.solve(S, Hm @ P_pred).mT
            x = x_pred + (K @ innov.unsqueeze(-1)).squeeze(-1)
            P = (torch.eye(4, dtype=dt) - K @ Hm) @ P_pred
            if keep:
                store.append((x_pred, P_pred, x, P))
        return ll, store

    losses = []
    for _ in range(6):
        ll, _ = kalman(log_q, log_r)
        loss = -ll.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        ll, store = kalman(log_q, log_r, keep=True)
        xs_s, Ps_s = store[-1][2], store[-1][3]
        smoothed = [xs_s]
        for k in range(len(store) - 2, -1, -1):
            _, _, xf, Pf = store[k]
            xp, Pp, _, _ = store[k + 1]
            G = torch.linalg.solve(Pp, F @ Pf).mT  # Pf F' Pp^{-1} (covariances are symmetric)
            xs_s = xf + (G @ (xs_s - xp).unsqueeze(-1)).squeeze(-1)
            Ps_s = Pf + G @ (Ps_s - Pp) @ G.mT
            smoothed.append(xs_s)
        smoothed = torch.stack(smoothed[::-1], 1)
    truth = torch.tensor(xs_true[:, 1:])
    filtered = torch.stack([s[2] for s in store], 1)
    return {"losses": losses, "q": log_q.exp(), "r_std": log_r.exp().sqrt(), "ll": ll,
            "smoothed": smoothed[:, ::4], "rmse_filtered": (filtered - truth)[..., :2].pow(2).mean().sqrt(),
            "rmse_smoothed": (smoothed - truth)[..., :2].pow(2).mean().sqrt(), "P0_smoothed": Ps_s[0],
            "grad_q": log_q.grad, "grad_r": log_r.grad}  # fmt: skip


@program(rtol=1e-6, atol=1e-9)
def robo_differentiable_lqr_inverse_optimal_control(torch):
    """Inverse optimal control through a differentiable LQR, as differentiable-MPC papers do it:
    the cost's diagonal weights parametrised by their logs (``torch.diag(log_q.exp())``), the
    Riccati recursion unrolled for a fixed number of steps with gains from ``linalg.solve``, and
    Adam fitting the weights so the learner's feedback matches an expert's actions on sampled
    states; the training log printed as users print it (f-strings of the gain and cost
    matrices while they still require grad)."""
    dt = torch.float64
    F = torch.nn.functional
    h = 0.1
    A = torch.eye(4, dtype=dt)
    A[0, 2] = A[1, 3] = h
    B = torch.tensor([[0.5 * h * h, 0.0], [0.0, 0.5 * h * h], [h, 0.0], [0.0, h]], dtype=dt)

    def lqr_gain(Q, R, iters=40):
        P = Q
        for _ in range(iters):
            K = torch.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
            P = Q + A.T @ P @ (A - B @ K)
        return K, P

    Q_exp = torch.diag(torch.tensor([3.0, 0.5, 1.0, 0.2], dtype=dt))
    R_exp = torch.diag(torch.tensor([0.1, 0.3], dtype=dt))
    K_exp, P_exp = lqr_gain(Q_exp, R_exp)
    X = torch.tensor(arr(21, 32, 4, dtype=np.float64))
    U_exp = -X @ K_exp.T
    log_q = torch.zeros(4, dtype=dt, requires_grad=True)
    log_r = torch.zeros(2, dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([log_q, log_r], lr=0.1)
    lines, losses = [], []
    for it in range(10):
        Q, R = torch.diag(log_q.exp()), torch.diag(log_r.exp())
        K, P = lqr_gain(Q, R)
        loss = F.mse_loss(-X @ K.T, U_exp)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if it % 4 == 0:
            lines.append(f"iter {it}: loss={loss.item():.6f}\nQ={Q}\nK={K}")
    L = torch.linalg.cholesky(P)
    return {"log": "\n".join(lines), "losses": losses, "K": K, "K_expert": K_exp,
            "q": log_q.exp(), "r": log_r.exp(), "grad_log_q": log_q.grad, "P_chol_diag": L.diagonal(),
            "ratio_q_over_r": log_q.exp()[:2] / log_r.exp()}  # fmt: skip
