"""3-d geometry and pose as PyTorch3D, kornia.geometry, roma and SLAM / NeRF / splatting code
write it: rotation conversions with their small-angle branches, the 6-d representation, SO(3) and
SE(3) exp / log maps and their gradients, homogeneous rigid transforms, pinhole projection and
depth unprojection, epipolar geometry and triangulation, padded Chamfer distances, point-to-plane
ICP, look-at cameras, spherical coordinates and harmonics, ray intersections, bundle adjustment
and 3-d Gaussian projection."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr


def _uniform(seed, *shape, low=0.0, high=1.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def _rotvecs(seed, n, low=0.2, high=2.8, dtype=np.float32):
    g = np.random.default_rng(seed)
    axis = g.standard_normal((n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    return (axis * g.uniform(low, high, (n, 1))).astype(dtype)


def _skew(torch, v):
    # (..., 3) -> (..., 3, 3) cross-product matrices, built with stack as kornia / roma do
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack([o, -z, y, z, o, -x, -y, x, o], -1).reshape(v.shape[:-1] + (3, 3))


@program(rtol=5e-4, atol=5e-5)
def kornia_angle_axis_quaternion_conversions(torch):
    # kornia.geometry.conversions: angle_axis_to_rotation_matrix with the Taylor branch blended by
    # float masks, rotation_matrix_to_quaternion with nested torch.where over the four cases,
    # quaternion_to_angle_axis with atan2 branches; zero and tiny angles included
    def compute_rotation_matrix(angle_axis, theta2, eps=1e-6):
        theta = torch.sqrt(theta2)
        wxyz = angle_axis / (theta + eps)
        wx, wy, wz = torch.chunk(wxyz, 3, dim=1)
        c, s = torch.cos(theta), torch.sin(theta)
        r00 = c + wx * wx * (1.0 - c)
        r10 = wz * s + wx * wy * (1.0 - c)
        r20 = -wy * s + wx * wz * (1.0 - c)
        r01 = wx * wy * (1.0 - c) - wz * s
        r11 = c + wy * wy * (1.0 - c)
        r21 = wx * s + wy * wz * (1.0 - c)
        r02 = wy * s + wx * wz * (1.0 - c)
        r12 = -wx * s + wy * wz * (1.0 - c)
        r22 = c + wz * wz * (1.0 - c)
        m = torch.cat([r00, r01, r02, r10, r11, r12, r20, r21, r22], dim=1)
        return m.view(-1, 3, 3)

    def compute_rotation_matrix_taylor(angle_axis):
        rx, ry, rz = torch.chunk(angle_axis, 3, dim=1)
        k_one = torch.ones_like(rx)
        m = torch.cat([k_one, -rz, ry, rz, k_one, -rx, -ry, rx, k_one], dim=1)
        return m.view(-1, 3, 3)

    def angle_axis_to_rotation_matrix(angle_axis):
        _aa = torch.unsqueeze(angle_axis, dim=1)
        theta2 = torch.squeeze(torch.matmul(_aa, _aa.transpose(1, 2)), dim=1)
        normal = compute_rotation_matrix(angle_axis, theta2)
        taylor = compute_rotation_matrix_taylor(angle_axis)
        mask = (theta2 > 1e-6).view(-1, 1, 1).to(theta2.device)
        mask_pos = mask.type_as(theta2)
        mask_neg = (mask == torch.tensor(False)).type_as(theta2)
        out = torch.eye(3).to(angle_axis.device).type_as(angle_axis)
        out = out.view(1, 3, 3).repeat(angle_axis.shape[0], 1, 1)
        out[..., :3, :3] = mask_pos * normal + mask_neg * taylor
        return out

    def rotation_matrix_to_quaternion(m, eps=1e-8):
        def safe_div(num, den):
            return num / torch.clamp(den, min=torch.finfo(num.dtype).tiny)

        flat = m.reshape(*m.shape[:-2], 9)
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = torch.chunk(flat, chunks=9, dim=-1)
        trace = m00 + m11 + m22

        def trace_positive():
            sq = torch.sqrt(trace + 1.0 + eps) * 2.0
            return torch.cat((0.25 * sq, safe_div(m21 - m12, sq), safe_div(m02 - m20, sq),
                              safe_div(m10 - m01, sq)), dim=-1)  # fmt: skip

        def cond_1():
            sq = torch.sqrt(1.0 + m00 - m11 - m22 + eps) * 2.0
            return torch.cat((safe_div(m21 - m12, sq), 0.25 * sq, safe_div(m01 + m10, sq),
                              safe_div(m02 + m20, sq)), dim=-1)  # fmt: skip

        def cond_2():
            sq = torch.sqrt(1.0 + m11 - m00 - m22 + eps) * 2.0
            return torch.cat((safe_div(m02 - m20, sq), safe_div(m01 + m10, sq), 0.25 * sq,
                              safe_div(m12 + m21, sq)), dim=-1)  # fmt: skip

        def cond_3():
            sq = torch.sqrt(1.0 + m22 - m00 - m11 + eps) * 2.0
            return torch.cat((safe_div(m10 - m01, sq), safe_div(m02 + m20, sq),
                              safe_div(m12 + m21, sq), 0.25 * sq), dim=-1)  # fmt: skip

        where_2 = torch.where(m11 > m22, cond_2(), cond_3())
        where_1 = torch.where((m00 > m11) & (m00 > m22), cond_1(), where_2)
        return torch.where(trace > 0.0, trace_positive(), where_1)

    def quaternion_to_angle_axis(q):
        q1, q2, q3 = q[..., 1], q[..., 2], q[..., 3]
        sin_sq = q1 * q1 + q2 * q2 + q3 * q3
        sin_theta = torch.sqrt(sin_sq)
        cos_theta = q[..., 0]
        two_theta = 2.0 * torch.where(cos_theta < 0.0, torch.atan2(-sin_theta, -cos_theta),
                                      torch.atan2(sin_theta, cos_theta))  # fmt: skip
        k = torch.where(sin_sq > 0.0, two_theta / sin_theta, 2.0 * torch.ones_like(sin_theta))
        aa = torch.zeros_like(q)[..., :3]
        aa[..., 0] += q1 * k
        aa[..., 1] += q2 * k
        aa[..., 2] += q3 * k
        return aa

    aa_np = np.concatenate(
        [np.zeros((1, 3), np.float32), np.array([[1e-4, -2e-4, 5e-5]], np.float32),
         np.array([[0.0, 0.0, 3.0]], np.float32), _rotvecs(1, 7)]
    )  # fmt: skip
    aa = torch.tensor(aa_np[1:]).requires_grad_()  # the exact zero has a 0/0 gradient: forward only
    R = angle_axis_to_rotation_matrix(aa)
    pts = torch.tensor(arr(2, 9, 3))
    target = torch.tensor(arr(3, 9, 3))
    loss = ((torch.einsum("bij,bj->bi", R, pts) - target) ** 2).sum()
    loss.backward()
    with torch.no_grad():
        R_all = angle_axis_to_rotation_matrix(torch.tensor(aa_np))
        q = rotation_matrix_to_quaternion(R_all)
        aa_back = quaternion_to_angle_axis(q)
        q_neg = quaternion_to_angle_axis(-q)  # the cos < 0 branch gives the same rotation
        orth = R_all @ R_all.transpose(-1, -2) - torch.eye(3)
    return {"R": R_all, "q": q, "q_norm": q.norm(dim=-1), "aa_back": aa_back, "aa_neg": q_neg,
            "orth_err": orth.abs().amax((1, 2)), "loss": loss, "aa_grad": aa.grad,
            "det": torch.linalg.det(R_all)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def roma_unitquat_slerp_procrustes(torch):
    # roma conventions (xyzw quaternions): rotvec <-> unitquat with a safe small-angle branch,
    # the scipy-style rotmat_to_unitquat choosing among four cases with advanced-index writes,
    # quaternion products, slerp with shortest-arc flips, special_procrustes with the det fix,
    # a rotation regressed through procrustes with gradients
    F = torch.nn.functional

    def rotvec_to_unitquat(rotvec):
        theta = torch.norm(rotvec, dim=-1, keepdim=True)
        small = theta < 1e-3
        safe = torch.where(small, torch.ones_like(theta), theta)
        scale = torch.where(small, 0.5 - theta**2 / 48.0, torch.sin(0.5 * safe) / safe)
        return torch.cat([rotvec * scale, torch.cos(0.5 * theta)], dim=-1)

    def unitquat_to_rotvec(q):
        q = torch.where(q[..., 3:4] < 0, -q, q)  # w >= 0
        norm_v = torch.norm(q[..., :3], dim=-1, keepdim=True)
        angle = 2.0 * torch.atan2(norm_v, q[..., 3:4])
        small = angle < 1e-3
        safe = torch.where(small, torch.ones_like(norm_v), norm_v)
        return torch.where(small, 2.0 * q[..., :3], q[..., :3] * angle / safe)

    def unitquat_to_rotmat(q):
        x, y, z, w = q.unbind(-1)
        x2, y2, z2 = x * x, y * y, z * z
        xy, xz, yz, xw, yw, zw = x * y, x * z, y * z, x * w, y * w, z * w
        m = torch.stack([1 - 2 * (y2 + z2), 2 * (xy - zw), 2 * (xz + yw),
                         2 * (xy + zw), 1 - 2 * (x2 + z2), 2 * (yz - xw),
                         2 * (xz - yw), 2 * (yz + xw), 1 - 2 * (x2 + y2)], -1)  # fmt: skip
        return m.reshape(q.shape[:-1] + (3, 3))

    def rotmat_to_unitquat(R):
        n = R.shape[0]
        decision = torch.stack([R[:, 0, 0], R[:, 1, 1], R[:, 2, 2],
                                R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2]], -1)  # fmt: skip
        choice = decision.argmax(dim=-1)
        quat = torch.empty((n, 4), dtype=R.dtype)
        ind = torch.nonzero(choice != 3, as_tuple=True)[0]
        i = choice[ind]
        j = (i + 1) % 3
        k = (j + 1) % 3
        quat[ind, i] = 1 - decision[ind, -1] + 2 * R[ind, i, i]
        quat[ind, j] = R[ind, j, i] + R[ind, i, j]
        quat[ind, k] = R[ind, k, i] + R[ind, i, k]
        quat[ind, 3] = R[ind, k, j] - R[ind, j, k]
        ind = torch.nonzero(choice == 3, as_tuple=True)[0]
        quat[ind, 0] = R[ind, 2, 1] - R[ind, 1, 2]
        quat[ind, 1] = R[ind, 0, 2] - R[ind, 2, 0]
        quat[ind, 2] = R[ind, 1, 0] - R[ind, 0, 1]
        quat[ind, 3] = 1 + decision[ind, -1]
        return F.normalize(quat, dim=-1), choice

    def quat_product(p, q):
        vp, wp = p[..., :3], p[..., 3:]
        vq, wq = q[..., :3], q[..., 3:]
        v = wp * vq + wq * vp + torch.cross(vp, vq, dim=-1)
        w = wp * wq - (vp * vq).sum(-1, keepdim=True)
        return torch.cat([v, w], dim=-1)

    def quat_conjugation(q):
        return torch.cat([-q[..., :3], q[..., 3:]], dim=-1)

    def unitquat_slerp(q0, q1, steps):
        dot = (q0 * q1).sum(-1, keepdim=True)
        q1 = torch.where(dot < 0, -q1, q1)
        dot = dot.abs().clamp(max=1.0)
        omega = torch.acos(dot)[None]
        so = torch.sin(omega)
        t = steps[:, None, None]
        lerp = so < 1e-6
        safe = torch.where(lerp, torch.ones_like(so), so)
        s0 = torch.where(lerp, 1.0 - t, torch.sin((1.0 - t) * omega) / safe)
        s1 = torch.where(lerp, t, torch.sin(t * omega) / safe)
        return s0 * q0[None] + s1 * q1[None]

    def special_procrustes(M):
        U, S, Vh = torch.linalg.svd(M)
        det = torch.det(U @ Vh)
        D = torch.ones_like(S)
        D[..., -1] = torch.sign(det)
        return (U * D[..., None, :]) @ Vh

    rv_np = np.concatenate([_rotvecs(10, 6), np.array([[0.0, 0.0, 0.0], [3.1, 0.0, 0.1],
                                                       [2e-4, 1e-4, -3e-4]], np.float32)])  # fmt: skip
    rv = torch.tensor(rv_np)
    q = rotvec_to_unitquat(rv)
    R = unitquat_to_rotmat(q)
    q_back, choice = rotmat_to_unitquat(R)
    same_rot = (q_back * q).sum(-1).abs()
    rv_back = unitquat_to_rotvec(q_back)
    q2 = rotvec_to_unitquat(torch.tensor(_rotvecs(11, 9)))
    comp = quat_product(q, q2)
    R_comp = unitquat_to_rotmat(comp)
    comp_err = (R_comp - R @ unitquat_to_rotmat(q2)).abs().max()
    rel = quat_product(quat_conjugation(q), q2)
    steps = torch.linspace(0.0, 1.0, 5)
    sl = unitquat_slerp(q[:6], q2[:6], steps)
    sl_same = unitquat_slerp(q[:2], q[:2], steps)  # identical endpoints: the lerp branch
    # procrustes of noisy matrices, and a rotation regressed through it with SGD
    M = R + torch.tensor(arr(12, 9, 3, 3, scale=0.1))
    M[-1] = -M[-1]  # a reflection
    P = special_procrustes(M)
    W = torch.tensor(arr(13, 3, 3)).requires_grad_()
    target = R[:3]
    opt = torch.optim.SGD([W], lr=0.1, momentum=0.9)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        Rw = special_procrustes(W)
        loss = ((Rw - target[0]) ** 2).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"q": q, "R": R, "q_back_same": same_rot, "choice": choice, "rv_back": rv_back,
            "comp": comp, "comp_err": comp_err < 1e-5, "rel": rel, "slerp": sl,
            "slerp_norm": sl.norm(dim=-1), "slerp_same": sl_same, "procrustes": P,
            "proc_det": torch.det(P), "losses": losses, "W": W}  # fmt: skip


def _so3(torch):
    # pytorch3d.transforms.so3 / se3 as written there (hat, exp, log, rotation angle, V matrix)
    def hat(v):
        N = v.shape[0]
        h = torch.zeros((N, 3, 3), dtype=v.dtype)
        x, y, z = v.unbind(1)
        h[:, 0, 1], h[:, 0, 2], h[:, 1, 0] = -z, y, z
        h[:, 1, 2], h[:, 2, 0], h[:, 2, 1] = -x, -y, x
        return h

    def hat_inv(h):
        return torch.stack((h[:, 2, 1], h[:, 0, 2], h[:, 1, 0]), dim=1)

    def exp_map(log_rot, eps=1e-4):
        nrms = (log_rot * log_rot).sum(1)
        angles = torch.clamp(nrms, eps).sqrt()
        inv = 1.0 / angles
        fac1 = inv * angles.sin()
        fac2 = inv * inv * (1.0 - angles.cos())
        skews = hat(log_rot)
        skews2 = torch.bmm(skews, skews)
        eye = torch.eye(3, dtype=log_rot.dtype)[None]
        return fac1[:, None, None] * skews + fac2[:, None, None] * skews2 + eye

    def rotation_angle(R, cos_bound=1e-4):
        rot_trace = R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2]
        phi_cos = ((rot_trace - 1.0) * 0.5).clamp(-1.0 + cos_bound, 1.0 - cos_bound)
        return torch.acos(phi_cos)

    def log_map(R, eps=1e-4, cos_bound=1e-4):
        phi = rotation_angle(R, cos_bound)
        phi_sin = torch.sin(phi)
        phi_factor = torch.empty_like(phi)
        ok = phi_sin.abs() > (0.5 * eps)
        phi_factor[~ok] = 0.5 + (phi[~ok] ** 2) * (1.0 / 12)
        phi_factor[ok] = phi[ok] / (2.0 * phi_sin[ok])
        return hat_inv(phi_factor[:, None, None] * (R - R.permute(0, 2, 1)))

    def se3_V(log_rot, eps=1e-4):
        nrms = (log_rot * log_rot).sum(1)
        angles = torch.clamp(nrms, eps).sqrt()
        skews = hat(log_rot)
        skews2 = torch.bmm(skews, skews)
        V = (torch.eye(3, dtype=log_rot.dtype)[None]
             + ((1 - torch.cos(angles)) / angles**2)[:, None, None] * skews
             + ((angles - torch.sin(angles)) / angles**3)[:, None, None] * skews2)  # fmt: skip
        return V

    def se3_exp(log_transform):
        # pytorch3d row-vector convention: [[R, 0], [t, 1]]
        v, w = log_transform[:, :3], log_transform[:, 3:]
        R = exp_map(w)
        t = torch.bmm(se3_V(w), v[:, :, None])[:, :, 0]
        T = torch.zeros(log_transform.shape[0], 4, 4, dtype=log_transform.dtype)
        T[:, :3, :3] = R.permute(0, 2, 1)
        T[:, 3, :3] = t
        T[:, 3, 3] = 1.0
        return T

    def se3_log(T):
        R = T[:, :3, :3].permute(0, 2, 1)
        w = log_map(R)
        V = se3_V(w)
        v = torch.linalg.solve(V, T[:, 3, :3, None])[:, :, 0]
        return torch.cat((v, w), dim=1)

    return hat, hat_inv, exp_map, log_map, rotation_angle, se3_exp, se3_log


@program(rtol=5e-4, atol=5e-5)
def so3_se3_exp_log_maps_and_karcher_mean(torch):
    # SO(3) exp / log round trips, the Jacobian of the exp map by autograd.functional.jacobian,
    # geodesic-loss gradients through log(R1^T R2), SE(3) exp / log with the V matrix and
    # linalg.solve, and the Karcher (Frechet) mean of rotations by iterated log / exp
    hat, hat_inv, exp_map, log_map, angle, se3_exp, se3_log = _so3(torch)
    w_np = np.concatenate([_rotvecs(20, 6, 0.1, 2.5), np.array([[1e-3, 0.0, 0.0]], np.float32)])
    w = torch.tensor(w_np)
    R = exp_map(w)
    w_back = log_map(R)
    R_mexp = torch.linalg.matrix_exp(hat(w))
    jac = torch.autograd.functional.jacobian(lambda v: exp_map(v[None])[0], w[2])
    # geodesic regression: rotations from parameters toward targets
    params = torch.tensor(_rotvecs(21, 6, 0.1, 1.0)).requires_grad_()
    targets = exp_map(torch.tensor(_rotvecs(22, 6, 0.3, 1.5)))
    opt = torch.optim.Adam([params], lr=0.05)
    geo = []
    for _ in range(5):
        opt.zero_grad()
        rel = torch.bmm(exp_map(params).transpose(1, 2), targets)
        loss = (log_map(rel) ** 2).sum(-1).mean()
        loss.backward()
        opt.step()
        geo.append(loss.item())
    # SE(3)
    xi = torch.tensor(np.concatenate([arr(23, 4, 3, scale=0.5), _rotvecs(24, 4, 0.2, 2.0)], 1))
    T = se3_exp(xi)
    xi_back = se3_log(T)
    T_comp = T[:2] @ T[2:]
    # Karcher mean of a cluster of rotations
    base = exp_map(torch.tensor([[0.3, -0.5, 0.8]]))
    Rs = base @ exp_map(torch.tensor(arr(25, 8, 3, scale=0.2)))
    mu = Rs[0].clone()
    steps = []
    for _ in range(5):
        delta = log_map(mu.t()[None] @ Rs).mean(0)
        mu = mu @ exp_map(delta[None])[0]
        steps.append(delta.norm())
    spread = angle(mu.t()[None] @ Rs)
    return {"R": R, "w_back": w_back, "mexp_err": (R_mexp - R).abs().max() < 1e-5,
            "jac": jac, "geo_losses": geo, "params": params, "params_grad": params.grad,
            "T": T, "xi_back": xi_back, "T_comp": T_comp, "karcher": mu, "karcher_steps": steps,
            "spread": spread, "angles": angle(R)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def homogeneous_rigid_transform_chains(torch):
    # kornia-style homogeneous helpers (pad to 4x4, transform_points with the w-division guard,
    # inverse_transformation via R^T), SLAM odometry integration, all-pairs relative poses by
    # broadcasting, a projective 4x4 with points at infinity, absolute trajectory error, and a
    # pose refined by gradient descent on point residuals
    F = torch.nn.functional
    _, _, exp_map, log_map, _, _, _ = _so3(torch)

    def to_homogeneous(points):
        return F.pad(points, [0, 1], "constant", 1.0)

    def from_homogeneous(points, eps=1e-8):
        z = points[..., -1:]
        mask = torch.abs(z) > eps
        scale = torch.where(mask, 1.0 / (z + eps), torch.ones_like(z))
        return scale * points[..., :-1]

    def rt_to_matrix(R, t):
        Rt = torch.cat([R, t[..., None]], dim=-1)
        T = F.pad(Rt, [0, 0, 0, 1], "constant", 0.0)
        T[..., -1, -1] += 1.0
        return T

    def inverse_transformation(T):
        R_inv = T[..., :3, :3].transpose(-2, -1)
        t_inv = -R_inv @ T[..., :3, 3:]
        out = torch.zeros_like(T)
        out[..., :3, :3] = R_inv
        out[..., :3, 3:] = t_inv
        out[..., 3, 3] = 1.0
        return out

    def transform_points(T, points):
        ph = to_homogeneous(points)
        return from_homogeneous(torch.matmul(ph, T.transpose(-2, -1)))

    n = 6
    R_steps = exp_map(torch.tensor(_rotvecs(30, n, 0.05, 0.3)))
    t_steps = torch.tensor(arr(31, n, 3, scale=0.5))
    odo = rt_to_matrix(R_steps, t_steps)
    poses = [torch.eye(4)]
    for i in range(n):
        poses.append(poses[-1] @ odo[i])
    poses = torch.stack(poses)
    inv = inverse_transformation(poses)
    inv_err = (inv - torch.linalg.inv(poses)).abs().max()
    rel = inv[:, None] @ poses[None]  # T_ij = T_i^-1 T_j
    cyc = rel[0, 3] @ rel[3, 6] @ rel[6, 0]
    pts = torch.tensor(arr(32, 10, 3))
    world = transform_points(poses[:, None], pts[None].expand(n + 1, 10, 3))
    back = transform_points(inv[:, None], world)
    proj = torch.tensor(arr(33, 4, 4, scale=0.3)) + torch.eye(4)
    ph = torch.cat([to_homogeneous(pts[:4]), torch.tensor([[1.0, 2.0, 3.0, 0.0]])])
    projected = from_homogeneous(ph @ proj.t())
    at_inf = from_homogeneous(torch.tensor([[1.0, 2.0, 3.0, 0.0], [2.0, 4.0, 6.0, 2.0]]))
    # trajectory error after aligning the first frame
    est = poses @ rt_to_matrix(exp_map(torch.tensor(arr(34, n + 1, 3, scale=0.02))),
                               torch.tensor(arr(35, n + 1, 3, scale=0.03)))  # fmt: skip
    aligned = poses[0] @ inverse_transformation(est[0]) @ est
    ate = (aligned[:, :3, 3] - poses[:, :3, 3]).norm(dim=-1)
    rot_err = log_map(aligned[:, :3, :3].transpose(1, 2) @ poses[:, :3, :3]).norm(dim=-1)
    # refine one pose from point correspondences
    w = torch.zeros(1, 3, requires_grad=True)
    t = torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([w, t], lr=0.05)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        T = rt_to_matrix(exp_map(w)[0], t)
        loss = ((transform_points(T, pts) - world[2]) ** 2).sum(-1).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"poses": poses, "inv_err": inv_err < 1e-4, "rel": rel, "cycle": cyc, "world": world,
            "back_err": (back - pts).abs().max() < 1e-4, "projected": projected,
            "at_inf": at_inf, "ate": ate, "rot_err": rot_err, "losses": losses, "w": w, "t": t,
            "w_grad": w.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def monodepth_backproject_project_warp(torch):
    # monodepth2-style self-supervised depth: BackprojectDepth / Project3D modules built from a
    # NumPy meshgrid, a pose from axis-angle + translation, grid_sample warping of the source
    # frame, SSIM-free photometric L1 with an edge-aware smoothness term, and kornia-style
    # depth_to_3d / normals from a torch.meshgrid and cross products of finite differences
    nn, F = torch.nn, torch.nn.functional
    B, H, W = 2, 6, 8

    class BackprojectDepth(nn.Module):
        def __init__(self, batch_size, height, width):
            super().__init__()
            self.batch_size, self.height, self.width = batch_size, height, width
            grid = np.meshgrid(range(width), range(height), indexing="xy")
            coords = np.stack(grid, axis=0).astype(np.float32)
            self.id_coords = nn.Parameter(torch.from_numpy(coords), requires_grad=False)
            self.ones = nn.Parameter(torch.ones(batch_size, 1, height * width), requires_grad=False)
            pix = torch.unsqueeze(torch.stack([self.id_coords[0].view(-1),
                                               self.id_coords[1].view(-1)], 0), 0)  # fmt: skip
            pix = pix.repeat(batch_size, 1, 1)
            self.pix_coords = nn.Parameter(torch.cat([pix, self.ones], 1), requires_grad=False)

        def forward(self, depth, inv_K):
            cam_points = torch.matmul(inv_K[:, :3, :3], self.pix_coords)
            cam_points = depth.view(self.batch_size, 1, -1) * cam_points
            return torch.cat([cam_points, self.ones], 1)

    class Project3D(nn.Module):
        def __init__(self, batch_size, height, width, eps=1e-7):
            super().__init__()
            self.batch_size, self.height, self.width, self.eps = batch_size, height, width, eps

        def forward(self, points, K, T):
            P = torch.matmul(K, T)[:, :3, :]
            cam_points = torch.matmul(P, points)
            pix = cam_points[:, :2, :] / (cam_points[:, 2, :].unsqueeze(1) + self.eps)
            pix = pix.view(self.batch_size, 2, self.height, self.width).permute(0, 2, 3, 1)
            pix[..., 0] /= self.width - 1
            pix[..., 1] /= self.height - 1
            return (pix - 0.5) * 2

    def rot_from_axisangle(vec):
        angle = torch.norm(vec, 2, 2, True)
        axis = vec / (angle + 1e-7)
        ca, sa = torch.cos(angle), torch.sin(angle)
        C = 1 - ca
        x, y, z = axis[..., 0].unsqueeze(1), axis[..., 1].unsqueeze(1), axis[..., 2].unsqueeze(1)
        xs, ys, zs = x * sa, y * sa, z * sa
        xC, yC, zC = x * C, y * C, z * C
        xyC, yzC, zxC = x * yC, y * zC, z * xC
        rot = torch.zeros((vec.shape[0], 4, 4))
        rot[:, 0, 0] = torch.squeeze(x * xC + ca)
        rot[:, 0, 1] = torch.squeeze(xyC - zs)
        rot[:, 0, 2] = torch.squeeze(zxC + ys)
        rot[:, 1, 0] = torch.squeeze(xyC + zs)
        rot[:, 1, 1] = torch.squeeze(y * yC + ca)
        rot[:, 1, 2] = torch.squeeze(yzC - xs)
        rot[:, 2, 0] = torch.squeeze(zxC - ys)
        rot[:, 2, 1] = torch.squeeze(yzC + xs)
        rot[:, 2, 2] = torch.squeeze(z * zC + ca)
        rot[:, 3, 3] = 1
        return rot

    def transformation_from_parameters(axisangle, translation):
        R = rot_from_axisangle(axisangle)
        T = torch.zeros(translation.shape[0], 4, 4)
        T[:, 0, 0] = T[:, 1, 1] = T[:, 2, 2] = T[:, 3, 3] = 1
        T[:, :3, 3, None] = translation.contiguous().view(-1, 3, 1)
        return torch.matmul(R, T)

    def get_smooth_loss(disp, img):
        grad_disp_x = torch.abs(disp[:, :, :, :-1] - disp[:, :, :, 1:])
        grad_disp_y = torch.abs(disp[:, :, :-1, :] - disp[:, :, 1:, :])
        grad_img_x = torch.mean(torch.abs(img[:, :, :, :-1] - img[:, :, :, 1:]), 1, keepdim=True)
        grad_img_y = torch.mean(torch.abs(img[:, :, :-1, :] - img[:, :, 1:, :]), 1, keepdim=True)
        grad_disp_x *= torch.exp(-grad_img_x)
        grad_disp_y *= torch.exp(-grad_img_y)
        return grad_disp_x.mean() + grad_disp_y.mean()

    def disp_to_depth(disp, min_depth=0.1, max_depth=100.0):
        min_disp, max_disp = 1 / max_depth, 1 / min_depth
        scaled = min_disp + (max_disp - min_disp) * disp
        return scaled, 1 / scaled

    K = torch.tensor([[6.0, 0.0, 3.5, 0.0], [0.0, 6.0, 2.5, 0.0], [0.0, 0.0, 1.0, 0.0],
                      [0.0, 0.0, 0.0, 1.0]]).repeat(B, 1, 1)  # fmt: skip
    inv_K = torch.linalg.pinv(K)
    backproject, project = BackprojectDepth(B, H, W), Project3D(B, H, W)
    disp_logit = torch.tensor(arr(40, B, 1, H, W, scale=0.3) - 2.0).requires_grad_()
    axisangle = torch.tensor(arr(41, B, 1, 1, 3, scale=0.02)).requires_grad_()
    translation = torch.tensor(arr(42, B, 1, 1, 3, scale=0.05)).requires_grad_()
    target = torch.tensor(_uniform(43, B, 3, H, W))
    source = torch.tensor(_uniform(44, B, 3, H, W))
    opt = torch.optim.Adam([disp_logit, axisangle, translation], lr=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        _, depth = disp_to_depth(torch.sigmoid(disp_logit))
        T = transformation_from_parameters(axisangle[:, 0], translation[:, 0])
        cam_points = backproject(depth, inv_K)
        pix = project(cam_points, K, T)
        warped = F.grid_sample(source, pix, padding_mode="border", align_corners=True)
        l1 = (warped - target).abs().mean(1, keepdim=True)
        disp = torch.sigmoid(disp_logit)
        mean_disp = disp.mean(2, True).mean(3, True)
        loss = l1.mean() + 1e-3 * get_smooth_loss(disp / (mean_disp + 1e-7), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # kornia depth_to_3d and normals from a depth map
    depth_map = torch.tensor(2.0 + _uniform(45, 1, 1, H, W, high=0.5))
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32),
                            torch.arange(W, dtype=torch.float32), indexing="ij")  # fmt: skip
    pix_h = torch.stack([xs, ys, torch.ones_like(xs)], -1)
    rays = pix_h @ inv_K[0, :3, :3].t()
    xyz = (rays * depth_map[0, 0, ..., None]).permute(2, 0, 1)[None]
    dx = xyz[..., :, 1:] - xyz[..., :, :-1]
    dy = xyz[..., 1:, :] - xyz[..., :-1, :]
    normals = F.normalize(torch.cross(dx[..., :-1, :], dy[..., :, :-1], dim=1), dim=1, p=2)
    return {"losses": losses, "pix": pix, "warped": warped, "cam_points": cam_points,
            "T": T, "disp_grad": disp_logit.grad, "axisangle": axisangle,
            "translation_grad": translation.grad, "xyz": xyz, "normals": normals}  # fmt: skip


@program(rtol=1e-5, atol=1e-7)
def eight_point_essential_and_dlt_triangulation(torch):
    # kornia.geometry.epipolar in float64: Hartley-normalised eight-point fundamental matrix by
    # SVD with the rank-2 projection, essential matrix, the four (R, t) decompositions with the
    # cheirality test, DLT triangulation, Sampson and symmetric epipolar distances
    dt = torch.float64
    g = np.random.default_rng(50)
    n = 12
    X_np = np.concatenate([g.uniform(-1, 1, (n, 2)), g.uniform(4, 7, (n, 1))], 1)
    X = torch.tensor(X_np, dtype=dt)
    K = torch.tensor([[300.0, 0.0, 64.0], [0.0, 310.0, 48.0], [0.0, 0.0, 1.0]], dtype=dt)
    w = torch.tensor([0.05, -0.2, 0.03], dtype=dt)
    R_true = torch.linalg.matrix_exp(_skew(torch, w))
    t_true = torch.tensor([-1.0, 0.1, 0.05], dtype=dt)
    P1 = K @ torch.cat([torch.eye(3, dtype=dt), torch.zeros(3, 1, dtype=dt)], 1)
    P2 = K @ torch.cat([R_true, t_true[:, None]], 1)

    def project(P, X):
        x = torch.cat([X, torch.ones(X.shape[0], 1, dtype=dt)], 1) @ P.t()
        return x[:, :2] / x[:, 2:]

    x1 = project(P1, X) + torch.tensor(g.normal(0, 0.2, (n, 2)), dtype=dt)
    x2 = project(P2, X) + torch.tensor(g.normal(0, 0.2, (n, 2)), dtype=dt)

    def normalize_points(pts):
        mean = pts.mean(0)
        scale = math.sqrt(2.0) / (pts - mean).norm(dim=-1).mean()
        T = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=dt)
        T[0, 0] = T[1, 1] = scale
        T[:2, 2] = -scale * mean
        ph = torch.cat([pts, torch.ones(pts.shape[0], 1, dtype=dt)], 1)
        return (ph @ T.t())[:, :2], T

    n1, T1 = normalize_points(x1)
    n2, T2 = normalize_points(x2)
    u1, v1 = n1.unbind(-1)
    u2, v2 = n2.unbind(-1)
    ones = torch.ones_like(u1)
    A = torch.stack([u2 * u1, u2 * v1, u2, v2 * u1, v2 * v1, v2, u1, v1, ones], -1)
    _, _, Vh = torch.linalg.svd(A)
    F_n = Vh[-1].view(3, 3)
    U, S, Vh2 = torch.linalg.svd(F_n)
    S = S.clone()
    S[-1] = 0.0
    F_n = U @ torch.diag_embed(S) @ Vh2
    Fm = T2.t() @ F_n @ T1
    Fm = Fm / Fm[2, 2]
    x1h = torch.cat([x1, ones[:, None]], 1)
    x2h = torch.cat([x2, ones[:, None]], 1)
    Fx1 = x1h @ Fm.t()
    Ftx2 = x2h @ Fm
    x2tFx1 = (x2h * Fx1).sum(-1)
    sampson = x2tFx1**2 / (Fx1[:, 0] ** 2 + Fx1[:, 1] ** 2 + Ftx2[:, 0] ** 2 + Ftx2[:, 1] ** 2)
    sym = x2tFx1**2 * (1.0 / (Fx1[:, :2] ** 2).sum(-1) + 1.0 / (Ftx2[:, :2] ** 2).sum(-1))
    E = K.t() @ Fm @ K
    Ue, Se, Vhe = torch.linalg.svd(E)
    W_ = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=dt)
    Ra, Rb = Ue @ W_ @ Vhe, Ue @ W_.t() @ Vhe
    Ra = Ra * torch.sign(torch.det(Ra))
    Rb = Rb * torch.sign(torch.det(Rb))
    t = Ue[:, 2]

    def triangulate(P1, P2, x1, x2):
        rows = torch.stack([x1[:, 0:1] * P1[2] - P1[0], x1[:, 1:2] * P1[2] - P1[1],
                            x2[:, 0:1] * P2[2] - P2[0], x2[:, 1:2] * P2[2] - P2[1]], 1)  # fmt: skip
        _, _, Vh = torch.linalg.svd(rows)
        Xh = Vh[:, -1]
        return Xh[:, :3] / Xh[:, 3:]

    best, counts = None, []
    for R_c, t_c in ((Ra, t), (Ra, -t), (Rb, t), (Rb, -t)):
        P2c = K @ torch.cat([R_c, t_c[:, None]], 1)
        Xc = triangulate(P1, P2c, x1, x2)
        front = ((Xc[:, 2] > 0) & ((Xc @ R_c.t() + t_c)[:, 2] > 0)).sum()
        counts.append(int(front))
        if best is None or int(front) > best[0]:
            best = (int(front), R_c, t_c, Xc)
    _, R_est, t_est, X_est = best
    X_true_scale = triangulate(P1, P2, x1, x2)
    reproj = (project(P2, X_true_scale) - x2).norm(dim=-1)
    rot_err = torch.acos(((torch.trace(R_est.t() @ R_true) - 1) / 2).clamp(-1, 1))
    t_cos = (t_est * t_true).sum() / t_true.norm()
    return {"F": Fm, "rank2_S": S, "sampson": sampson, "sym": sym, "E_sv": Se / Se[0],
            "R": R_est, "t_cos": t_cos, "counts": sorted(counts), "X_rel": X_est / X_est[0, 2],
            "X": X_true_scale, "reproj": reproj, "rot_err": rot_err}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def padded_chamfer_with_normals_and_edges(torch):
    # pytorch3d chamfer_distance for heterogeneous batches (x_lengths / y_lengths masks with inf
    # padding), squared distances from cdist, point_reduction "mean", the normal term with
    # cosine_similarity of gathered nearest normals, a kNN Laplacian regulariser, Adam deformation
    F = torch.nn.functional
    B, P1, P2 = 2, 40, 36
    g = np.random.default_rng(60)
    src_dirs = g.standard_normal((B, P1, 3))
    src_dirs /= np.linalg.norm(src_dirs, axis=-1, keepdims=True)
    tgt_dirs = g.standard_normal((B, P2, 3))
    tgt_dirs /= np.linalg.norm(tgt_dirs, axis=-1, keepdims=True)
    stretch = np.array([1.3, 0.8, 1.0])
    src = torch.tensor((src_dirs * 0.9).astype(np.float32))
    tgt = torch.tensor((tgt_dirs * stretch).astype(np.float32))
    tgt_normals = F.normalize(tgt / torch.tensor(stretch**2, dtype=torch.float32), dim=-1)
    x_lengths = torch.tensor([40, 31])
    y_lengths = torch.tensor([36, 28])
    offsets = torch.zeros(B, P1, 3, requires_grad=True)
    opt = torch.optim.Adam([offsets], lr=0.02)

    def chamfer(x, y, x_len, y_len, x_n, y_n):
        x_mask = torch.arange(x.shape[1])[None] >= x_len[:, None]
        y_mask = torch.arange(y.shape[1])[None] >= y_len[:, None]
        d = torch.cdist(x, y) ** 2
        cham_x, idx_x = d.masked_fill(y_mask[:, None, :], float("inf")).min(2)
        cham_y, idx_y = d.masked_fill(x_mask[:, :, None], float("inf")).min(1)
        cham_x = cham_x.masked_fill(x_mask, 0.0).sum(1) / x_len
        cham_y = cham_y.masked_fill(y_mask, 0.0).sum(1) / y_len
        nx = torch.gather(y_n, 1, idx_x[..., None].expand(-1, -1, 3))
        ny = torch.gather(x_n, 1, idx_y[..., None].expand(-1, -1, 3))
        cos_x = 1 - F.cosine_similarity(x_n, nx, dim=2, eps=1e-6).abs()
        cos_y = 1 - F.cosine_similarity(y_n, ny, dim=2, eps=1e-6).abs()
        cos_x = cos_x.masked_fill(x_mask, 0.0).sum(1) / x_len
        cos_y = cos_y.masked_fill(y_mask, 0.0).sum(1) / y_len
        return (cham_x + cham_y).mean(), (cos_x + cos_y).mean(), idx_x

    d0 = torch.cdist(src, src)
    knn = d0.topk(5, dim=-1, largest=False).indices[..., 1:]  # neighbours on the template
    out = {"loss": [], "normal": [], "lap": []}
    for _ in range(4):
        opt.zero_grad()
        x = src + offsets
        x_normals = F.normalize(x, dim=-1)  # outward normals of the deformed sphere
        cham, cos, idx = chamfer(x, tgt, x_lengths, y_lengths, x_normals, tgt_normals)
        nbr = torch.stack([x[b][knn[b]] for b in range(B)])
        lap = (x - nbr.mean(2)).norm(dim=-1).mean()
        loss = cham + 0.1 * cos + 0.5 * lap
        loss.backward()
        opt.step()
        out["loss"].append(loss.item())
        out["normal"].append(cos)
        out["lap"].append(lap)
    out.update(idx=idx, knn=knn, offsets=offsets, grad=offsets.grad)
    return out


@program(rtol=5e-4, atol=5e-5)
def batched_robust_point_to_plane_icp(torch):
    # batched point-to-plane ICP with Gauss-Newton: nearest neighbours by cdist/argmin, Jacobians
    # [p x n, n], Huber IRLS weights via torch.where, damped normal equations solved with
    # linalg.solve, SE(3) increments by matrix_exp of a 4x4 twist, left-composed transforms
    B, N = 2, 80
    g = np.random.default_rng(70)
    d = g.standard_normal((B, N, 3))
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    axes = np.array([[1.0, 0.7, 0.5], [1.3, 0.9, 0.6]])[:, None, :]  # ellipsoids: no symmetry
    tgt = torch.tensor((d * axes).astype(np.float32))
    normals = torch.nn.functional.normalize(
        tgt / torch.tensor(axes**2, dtype=torch.float32), dim=-1
    )
    sel = torch.tensor(np.stack([g.permutation(N)[:50] for _ in range(B)]))
    xi_true = torch.tensor([[0.04, -0.06, 0.05, 0.05, -0.03, 0.02],
                            [-0.05, 0.03, 0.02, -0.02, 0.06, 0.04]])  # fmt: skip

    def twist_matrix(xi):
        w, v = xi[:, :3], xi[:, 3:]
        top = torch.cat([_skew(torch, w), v[:, :, None]], dim=2)
        return torch.cat([top, torch.zeros(xi.shape[0], 1, 4)], dim=1)

    T_true = torch.linalg.matrix_exp(twist_matrix(xi_true))
    picked = torch.gather(tgt, 1, sel[..., None].expand(-1, -1, 3))
    T_inv = torch.linalg.inv(T_true)
    src = picked @ T_inv[:, :3, :3].transpose(1, 2) + T_inv[:, None, :3, 3]
    src = src + torch.tensor(arr(71, B, 50, 3, scale=0.002))
    src[0, :3] += 0.2  # outliers for the robust kernel
    T = torch.eye(4).repeat(B, 1, 1)
    delta, lam = 0.05, 1e-4
    out = {"rmse": [], "n_inliers": [], "step": []}
    for _ in range(5):
        cur = src @ T[:, :3, :3].transpose(1, 2) + T[:, None, :3, 3]
        idx = torch.cdist(cur, tgt).argmin(dim=-1)
        q = torch.gather(tgt, 1, idx[..., None].expand(-1, -1, 3))
        n = torch.gather(normals, 1, idx[..., None].expand(-1, -1, 3))
        r = ((cur - q) * n).sum(-1)
        J = torch.cat([torch.cross(cur, n, dim=-1), n], dim=-1)
        absr = r.abs()
        wts = torch.where(absr <= delta, torch.ones_like(r), delta / absr)
        H = torch.einsum("bmi,bm,bmj->bij", J, wts, J) + lam * torch.eye(6)
        gvec = torch.einsum("bmi,bm,bm->bi", J, wts, r)
        x = torch.linalg.solve(H, -gvec)
        T = torch.linalg.matrix_exp(twist_matrix(x)) @ T
        out["rmse"].append((r**2).mean(-1).sqrt())
        out["n_inliers"].append((absr <= delta).sum(-1))
        out["step"].append(x.norm(dim=-1))
    out.update(T=T, err=(T @ T_inv - torch.eye(4)).abs().amax((1, 2)), idx=idx, wts=wts)
    return out


@program(rtol=5e-4, atol=5e-5)
def pytorch3d_look_at_fov_cameras(torch):
    # look_at_view_transform as PyTorch3D writes it (spherical camera positions in degrees, the
    # look-at rotation from normalize / cross with the degenerate-up guard, T = -R^T C), the
    # FoV perspective projection matrix, NDC / screen coordinates, and the camera-position
    # optimisation of the PyTorch3D tutorial on projected landmarks with Adam
    F = torch.nn.functional

    def camera_position_from_spherical_angles(distance, elevation, azimuth):
        dist, elev, azim = torch.broadcast_tensors(distance, elevation, azimuth)
        elev = math.pi / 180.0 * elev
        azim = math.pi / 180.0 * azim
        x = dist * torch.cos(elev) * torch.sin(azim)
        y = dist * torch.sin(elev)
        z = dist * torch.cos(elev) * torch.cos(azim)
        return torch.stack([x, y, z], dim=1)

    def look_at_rotation(camera_position, at=((0, 0, 0),), up=((0, 1, 0),)):
        at = torch.tensor(at, dtype=torch.float32)
        up = torch.tensor(up, dtype=torch.float32)
        at, up = at.expand(camera_position.shape), up.expand(camera_position.shape)
        z_axis = F.normalize(at - camera_position, eps=1e-5)
        x_axis = F.normalize(torch.cross(up, z_axis, dim=1), eps=1e-5)
        y_axis = F.normalize(torch.cross(z_axis, x_axis, dim=1), eps=1e-5)
        is_close = torch.isclose(x_axis, torch.tensor(0.0), atol=5e-3).all(dim=1, keepdim=True)
        if is_close.any():
            replacement = F.normalize(torch.cross(y_axis, z_axis, dim=1), eps=1e-5)
            x_axis = torch.where(is_close, replacement, x_axis)
        R = torch.cat((x_axis[:, None, :], y_axis[:, None, :], z_axis[:, None, :]), dim=1)
        return R.transpose(1, 2)

    def look_at_view_transform(dist, elev, azim, at=((0, 0, 0),)):
        C = camera_position_from_spherical_angles(dist, elev, azim) + torch.tensor(at)
        R = look_at_rotation(C, at)
        T = -torch.bmm(R.transpose(1, 2), C[:, :, None])[:, :, 0]
        return R, T

    def fov_projection(znear, zfar, fov, aspect=1.0):
        n = fov.shape[0]
        K = torch.zeros((n, 4, 4), dtype=torch.float32)
        tan_half = torch.tan(fov * math.pi / 360.0)
        max_y = tan_half * znear
        min_y = -max_y
        max_x, min_x = max_y * aspect, min_y * aspect
        K[:, 0, 0] = 2.0 * znear / (max_x - min_x)
        K[:, 1, 1] = 2.0 * znear / (max_y - min_y)
        K[:, 0, 2] = (max_x + min_x) / (max_x - min_x)
        K[:, 1, 2] = (max_y + min_y) / (max_y - min_y)
        K[:, 3, 2] = 1.0
        K[:, 2, 2] = zfar / (zfar - znear)
        K[:, 2, 3] = -(zfar * znear) / (zfar - znear)
        return K

    def project(points, R, T, K, image_size=(32, 48)):
        view = torch.bmm(points, R) + T[:, None, :]  # row-vector convention: X R + T
        ph = torch.cat([view, torch.ones_like(view[..., :1])], -1)
        clip = ph @ K.transpose(1, 2)
        ndc = clip[..., :3] / clip[..., 3:]
        Hs, Ws = image_size
        scale = min(Hs, Ws) / 2.0
        px = Ws / 2.0 - ndc[..., 0] * scale
        py = Hs / 2.0 - ndc[..., 1] * scale
        return torch.stack([px, py], -1), ndc, view

    dist = torch.tensor([2.7, 3.0, 4.0, 2.5])
    elev = torch.tensor([10.0, 30.0, -20.0, 60.0])
    azim = torch.tensor([0.0, 45.0, 150.0, -90.0])
    R, T = look_at_view_transform(dist, elev, azim)
    R_at, T_at = look_at_view_transform(dist, elev, azim, at=((0.1, 0.2, -0.1),))
    fov = torch.tensor([60.0, 45.0, 30.0, 75.0])
    K = fov_projection(0.1, 100.0, fov)
    pts = torch.tensor(_uniform(80, 12, 3, low=-0.5, high=0.5))[None].expand(4, 12, 3)
    pix, ndc, view = project(pts, R, T, K)
    center = -torch.bmm(T[:, None, :], R.transpose(1, 2))[:, 0]  # camera centre back from (R, T)
    # optimise a camera position to see the landmarks where a reference camera sees them
    target_pix, _, _ = project(pts[:1], R[:1], T[:1], K[:1])
    cam = torch.tensor([[3.0, 6.9, 2.5]], requires_grad=True)
    opt = torch.optim.Adam([cam], lr=0.05)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        Rc = look_at_rotation(cam)
        Tc = -torch.bmm(Rc.transpose(1, 2), cam[:, :, None])[:, :, 0]
        pc, _, _ = project(pts[:1], Rc, Tc, K[:1])
        loss = ((pc - target_pix) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"R": R, "T": T, "R_at": R_at, "T_at": T_at, "K": K, "pix": pix, "ndc_z": ndc[..., 2],
            "depth": view[..., 2], "center": center, "losses": losses, "cam": cam,
            "cam_grad": cam.grad, "dets": torch.det(R)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def spherical_coords_equirect_and_harmonics(torch):
    # cartesian <-> spherical with atan2 and a clamped acos, equirectangular lookups with
    # grid_sample, a Fibonacci lattice of directions, degree-2 real spherical harmonics as the
    # 3D Gaussian Splatting code evaluates them, a least-squares SH fit with linalg.lstsq, and
    # view-dependent colour gradients through the directions
    F = torch.nn.functional
    C0 = 0.28209479177387814
    C1 = 0.4886025119029199
    C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
          0.5462742152960396)  # fmt: skip

    def eval_sh(deg, sh, dirs):
        result = C0 * sh[..., 0]
        if deg > 0:
            x, y, z = dirs[..., 0:1], dirs[..., 1:2], dirs[..., 2:3]
            result = result - C1 * y * sh[..., 1] + C1 * z * sh[..., 2] - C1 * x * sh[..., 3]
            if deg > 1:
                xx, yy, zz = x * x, y * y, z * z
                xy, yz, xz = x * y, y * z, x * z
                result = (result + C2[0] * xy * sh[..., 4] + C2[1] * yz * sh[..., 5]
                          + C2[2] * (2.0 * zz - xx - yy) * sh[..., 6]
                          + C2[3] * xz * sh[..., 7] + C2[4] * (xx - yy) * sh[..., 8])  # fmt: skip
        return result

    def to_spherical(xyz, eps=1e-7):
        r = xyz.norm(dim=-1)
        theta = torch.acos((xyz[..., 2] / r).clamp(-1.0 + eps, 1.0 - eps))
        phi = torch.atan2(xyz[..., 1], xyz[..., 0])
        return r, theta, phi

    def to_cartesian(r, theta, phi):
        return torch.stack([r * torch.sin(theta) * torch.cos(phi),
                            r * torch.sin(theta) * torch.sin(phi), r * torch.cos(theta)], -1)  # fmt: skip

    pts_np = np.concatenate([arr(90, 10, 3), np.array([[0.0, 0.0, 2.0], [-1.0, 0.0, 0.0],
                                                       [0.0, -3.0, 0.0], [-1.0, -0.0, 0.5]],
                                                      np.float32)])  # fmt: skip
    pts = torch.tensor(pts_np)
    r, theta, phi = to_spherical(pts)
    back = to_cartesian(r, theta, phi)
    n = 64
    i = torch.arange(n, dtype=torch.float32) + 0.5
    polar = torch.acos(1 - 2 * i / n)
    azim = math.pi * (1 + 5**0.5) * i
    dirs = to_cartesian(torch.ones(n), polar, torch.remainder(azim, 2 * math.pi))
    # equirectangular environment map lookup
    Hh, Ww = 8, 16
    env = torch.tensor(_uniform(91, 1, 3, Hh, Ww))
    _, th, ph = to_spherical(dirs)
    u = ph / math.pi  # [-1, 1]
    v = th / math.pi * 2 - 1
    grid = torch.stack([u, v], -1).view(1, 1, n, 2)
    radiance = F.grid_sample(env, grid, mode="bilinear", padding_mode="border",
                             align_corners=False)[0, :, 0].t()  # fmt: skip
    # least-squares SH projection of the radiance
    basis = torch.stack([eval_sh(2, torch.eye(9)[k].expand(n, 1, 9), dirs)[:, 0]
                         for k in range(9)], -1)  # fmt: skip
    coeffs = torch.linalg.lstsq(basis, radiance).solution  # (9, 3)
    # gradient of view-dependent colour through the directions (as 3DGS computes colours)
    sh = torch.tensor(arr(92, 5, 3, 9, scale=0.3)).requires_grad_()
    means = torch.tensor(arr(93, 5, 3)).requires_grad_()
    cam_center = torch.tensor([0.5, -1.0, 4.0])
    d = means - cam_center
    d = d / d.norm(dim=1, keepdim=True)
    colors = torch.clamp_min(eval_sh(2, sh, d) + 0.5, 0.0)
    colors.sum().backward()
    return {"r": r, "theta": theta, "phi": phi, "back": back, "dirs": dirs, "radiance": radiance,
            "coeffs": coeffs, "fit_err": (basis @ coeffs - radiance).pow(2).mean(),
            "colors": colors, "sh_grad": sh.grad, "means_grad": means.grad,
            "deg_theta": torch.rad2deg(theta)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ray_triangle_box_plane_intersections(torch):
    # batched Moller-Trumbore against a triangulated cube (rays x triangles, masks, inf for
    # misses, min over triangles), barycentric interpolation of vertex colours with gradients to
    # vertices and colours, the slab test with axis-aligned rays (1/0 = inf), ray-plane hits
    verts_np = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)],
                        np.float32)  # fmt: skip
    faces = torch.tensor([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                          [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])  # fmt: skip
    rot = torch.linalg.matrix_exp(_skew(torch, torch.tensor([0.3, 0.5, -0.2])))
    verts = (torch.tensor(verts_np) @ rot.t()).requires_grad_()
    vcolors = torch.tensor(_uniform(100, 8, 3)).requires_grad_()
    g = np.random.default_rng(101)
    origins = torch.tensor(np.concatenate([g.uniform(-0.3, 0.3, (12, 2)), np.full((12, 1), 3.0)],
                                          1).astype(np.float32))  # fmt: skip
    targets = torch.tensor(g.uniform(-0.6, 0.6, (12, 3)).astype(np.float32))
    dirs = torch.nn.functional.normalize(targets - origins, dim=-1)

    def ray_triangle(o, d, v0, v1, v2, eps=1e-8):
        e1, e2 = v1 - v0, v2 - v0
        pvec = torch.cross(
            d[:, None].expand(-1, e2.shape[0], -1), e2[None].expand(d.shape[0], -1, -1), dim=-1
        )
        det = (e1[None] * pvec).sum(-1)
        inv_det = 1.0 / det
        tvec = o[:, None] - v0[None]
        u = (tvec * pvec).sum(-1) * inv_det
        qvec = torch.cross(tvec, e1[None].expand_as(tvec), dim=-1)
        v = (d[:, None] * qvec).sum(-1) * inv_det
        t = (e2[None] * qvec).sum(-1) * inv_det
        hit = (det.abs() > eps) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > eps)
        return torch.where(hit, t, torch.full_like(t, float("inf"))), u, v, hit

    v0, v1, v2 = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    t_all, u_all, v_all, hit = ray_triangle(origins, dirs, v0, v1, v2)
    t_min, tri = t_all.min(dim=1)
    any_hit = torch.isfinite(t_min)
    rows = torch.arange(origins.shape[0])
    u, v = u_all[rows, tri], v_all[rows, tri]
    f = faces[tri]
    color = ((1 - u - v)[:, None] * vcolors[f[:, 0]] + u[:, None] * vcolors[f[:, 1]]
             + v[:, None] * vcolors[f[:, 2]])  # fmt: skip
    color = torch.where(any_hit[:, None], color, torch.ones_like(color))
    depth = torch.where(any_hit, t_min, torch.zeros_like(t_min))
    loss = (color**2).sum() + depth.sum()
    loss.backward()
    # slab test with axis-aligned directions
    o2 = torch.tensor([[0.1, 0.2, 2.0], [0.7, 0.1, -2.0], [-2.0, 0.3, 0.2], [0.1, -0.2, 0.3]])
    d2 = torch.tensor([[0.0, 0.0, -1.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.6, 0.0, -0.8]])
    bmin, bmax = torch.tensor([-0.5, -0.5, -0.5]), torch.tensor([0.5, 0.5, 0.5])
    inv_d = 1.0 / d2
    t0, t1 = (bmin - o2) * inv_d, (bmax - o2) * inv_d
    t_near = torch.minimum(t0, t1).max(dim=-1).values
    t_far = torch.maximum(t0, t1).min(dim=-1).values
    box_hit = t_far >= t_near.clamp(min=0.0)
    # ray-plane
    plane_n = torch.nn.functional.normalize(torch.tensor([0.2, 1.0, 0.1]), dim=0)
    plane_d = -0.4
    denom = dirs @ plane_n
    t_plane = -(origins @ plane_n + plane_d) / denom
    t_plane = torch.where(denom.abs() > 1e-6, t_plane, torch.full_like(t_plane, float("nan")))
    return {"t_min": t_min, "tri": tri, "n_hits": hit.sum(1), "color": color, "depth": depth,
            "verts_grad": verts.grad, "colors_grad": vcolors.grad, "inv_d": inv_d,
            "t_near": t_near, "t_far": t_far, "box_hit": box_hit, "t_plane": t_plane}  # fmt: skip


@program(rtol=1e-4, atol=1e-6)
def bundle_adjustment_lbfgs_and_adam(torch):
    # a tiny bundle adjustment in float64: camera rotations as axis-angle rotated with the
    # Rodrigues formula as Ceres' BAL example writes it, shared focal length, the first camera
    # fixed for the gauge, Huber-robustified reprojection residuals; L-BFGS with strong-Wolfe
    # line search, then Adam from the same start
    F = torch.nn.functional
    dt = torch.float64
    g = np.random.default_rng(110)
    n_cam, n_pts = 3, 12
    pts_true = np.concatenate([g.uniform(-1, 1, (n_pts, 2)), g.uniform(-0.5, 0.5, (n_pts, 1))], 1)
    rv_true = np.array([[0.0, 0.0, 0.0], [0.05, 0.2, -0.02], [-0.04, -0.25, 0.03]])
    t_true = np.array([[0.0, 0.0, 5.0], [-1.0, 0.05, 5.2], [1.1, -0.1, 4.9]])
    f_true = 500.0

    def rotate(rv, p):
        theta = rv.norm(dim=-1, keepdim=True)
        k = rv / theta.clamp(min=1e-12)
        c, s = torch.cos(theta), torch.sin(theta)
        kxp = torch.cross(k.expand_as(p), p, dim=-1)
        kdp = (k * p).sum(-1, keepdim=True)
        return p * c + kxp * s + k * kdp * (1 - c)

    cam_idx = torch.arange(n_cam).repeat_interleave(n_pts)
    pt_idx = torch.arange(n_pts).repeat(n_cam)

    def reproject(rv, t, pts, f):
        p = rotate(rv[cam_idx], pts[pt_idx]) + t[cam_idx]
        return f * p[:, :2] / p[:, 2:]

    with torch.no_grad():
        obs = reproject(torch.tensor(rv_true), torch.tensor(t_true), torch.tensor(pts_true),
                        torch.tensor(f_true, dtype=dt))  # fmt: skip
        obs = obs + torch.tensor(g.normal(0, 0.5, obs.shape))
        obs[5] += 40.0  # an outlier
    rv0 = torch.tensor(rv_true[1:] + g.normal(0, 0.02, (2, 3)))
    t0 = torch.tensor(t_true[1:] + g.normal(0, 0.05, (2, 3)))
    p0 = torch.tensor(pts_true + g.normal(0, 0.05, (n_pts, 3)))
    fixed_rv = torch.zeros(1, 3, dtype=dt)
    fixed_t = torch.tensor(t_true[:1])

    def make():
        return (rv0.clone().requires_grad_(), t0.clone().requires_grad_(),
                p0.clone().requires_grad_(), torch.tensor(480.0, dtype=dt, requires_grad=True))  # fmt: skip

    def objective(rv, t, pts, f):
        pred = reproject(torch.cat([fixed_rv, rv]), torch.cat([fixed_t, t]), pts, f)
        return F.huber_loss(pred, obs, delta=2.0, reduction="sum") / obs.shape[0]

    rv, t, pts, f = make()
    opt = torch.optim.LBFGS([rv, t, pts, f], lr=1, max_iter=8, history_size=5,
                            line_search_fn="strong_wolfe")  # fmt: skip
    lbfgs_losses = []
    for _ in range(2):

        def closure():
            opt.zero_grad()
            loss = objective(rv, t, pts, f)
            loss.backward()
            return loss

        lbfgs_losses.append(opt.step(closure).item())
    final = objective(rv, t, pts, f)
    rv_a, t_a, pts_a, f_a = make()
    adam = torch.optim.Adam([rv_a, t_a, pts_a, f_a], lr=1e-3)
    adam_losses = []
    for _ in range(5):
        adam.zero_grad()
        loss = objective(rv_a, t_a, pts_a, f_a)
        loss.backward()
        adam.step()
        adam_losses.append(loss.item())
    with torch.no_grad():
        res = reproject(torch.cat([fixed_rv, rv]), torch.cat([fixed_t, t]), pts, f) - obs
        res = res.norm(dim=-1)
    return {"lbfgs_losses": lbfgs_losses, "final": final, "rv": rv, "t": t, "f": f,
            "n_evals": opt.state[rv]["func_evals"], "adam_losses": adam_losses,
            "adam_rv": rv_a, "adam_f_grad": f_a.grad, "residual_median": res.median(),
            "outlier": res.argmax()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def gaussian_splatting_covariance_projection(torch):
    # 3D Gaussian Splatting as its reference code and gsplat's PyTorch fallback write it:
    # build_rotation from normalised quaternions, scaling-rotation L with cov = L L^T,
    # strip_lowerdiag, the EWA Jacobian with the tan-FoV clamp, the 0.3 low-pass dilation, 2x2
    # conics, 3-sigma radii from eigenvalues, depth sorting and front-to-back alpha compositing
    # over a small pixel grid with cumprod transmittance; gradients to every Gaussian parameter
    n = 6
    means = torch.tensor(np.concatenate([arr(120, n, 2, scale=0.4), _uniform(121, n, 1, low=2.0,
                                                                            high=4.0)], 1)).requires_grad_()  # fmt: skip
    log_scales = torch.tensor(arr(122, n, 3, scale=0.3) - 2.0).requires_grad_()
    quats = torch.tensor(arr(123, n, 4)).requires_grad_()
    opac_logit = torch.tensor(arr(124, n, 1)).requires_grad_()
    colors = torch.tensor(_uniform(125, n, 3)).requires_grad_()

    def build_rotation(r):
        norm = torch.sqrt(
            r[:, 0] * r[:, 0] + r[:, 1] * r[:, 1] + r[:, 2] * r[:, 2] + r[:, 3] * r[:, 3]
        )
        q = r / norm[:, None]
        R = torch.zeros((q.size(0), 3, 3))
        r, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
        R[:, 0, 0] = 1 - 2 * (y * y + z * z)
        R[:, 0, 1] = 2 * (x * y - r * z)
        R[:, 0, 2] = 2 * (x * z + r * y)
        R[:, 1, 0] = 2 * (x * y + r * z)
        R[:, 1, 1] = 1 - 2 * (x * x + z * z)
        R[:, 1, 2] = 2 * (y * z - r * x)
        R[:, 2, 0] = 2 * (x * z - r * y)
        R[:, 2, 1] = 2 * (y * z + r * x)
        R[:, 2, 2] = 1 - 2 * (x * x + y * y)
        return R

    def build_scaling_rotation(s, r):
        L = torch.zeros((s.shape[0], 3, 3), dtype=torch.float)
        R = build_rotation(r)
        L[:, 0, 0] = s[:, 0]
        L[:, 1, 1] = s[:, 1]
        L[:, 2, 2] = s[:, 2]
        return R @ L

    def strip_lowerdiag(L):
        u = torch.zeros((L.shape[0], 6), dtype=torch.float)
        u[:, 0], u[:, 1], u[:, 2] = L[:, 0, 0], L[:, 0, 1], L[:, 0, 2]
        u[:, 3], u[:, 4], u[:, 5] = L[:, 1, 1], L[:, 1, 2], L[:, 2, 2]
        return u

    H, W = 10, 12
    fx = fy = 14.0
    cx, cy = W / 2.0, H / 2.0
    tan_fovx, tan_fovy = 0.5 * W / fx, 0.5 * H / fy
    viewmat = torch.eye(4)
    viewmat[:3, :3] = torch.linalg.matrix_exp(_skew(torch, torch.tensor([0.02, -0.03, 0.01])))
    viewmat[:3, 3] = torch.tensor([0.05, -0.02, 0.1])

    L = build_scaling_rotation(torch.exp(log_scales), quats)
    cov3d = L @ L.transpose(1, 2)
    packed = strip_lowerdiag(cov3d)
    Wr = viewmat[:3, :3]
    t = means @ Wr.t() + viewmat[:3, 3]
    tx, ty, tz = t.unbind(-1)
    lim_x, lim_y = 1.3 * tan_fovx, 1.3 * tan_fovy
    tx = tz * torch.clamp(tx / tz, -lim_x, lim_x)
    ty = tz * torch.clamp(ty / tz, -lim_y, lim_y)
    zero = torch.zeros_like(tz)
    J = torch.stack([fx / tz, zero, -fx * tx / tz**2, zero, fy / tz, -fy * ty / tz**2], -1).view(
        -1, 2, 3
    )
    T = J @ Wr
    cov2d = T @ cov3d @ T.transpose(1, 2)
    cov2d = cov2d + 0.3 * torch.eye(2)
    a, b, c = cov2d[:, 0, 0], cov2d[:, 0, 1], cov2d[:, 1, 1]
    det = a * c - b * b
    conic = torch.stack([c / det, -b / det, a / det], -1)
    mid = 0.5 * (a + c)
    lam1 = mid + torch.sqrt(torch.clamp(mid * mid - det, min=0.1))
    radii = torch.ceil(3.0 * torch.sqrt(lam1))
    xy = torch.stack([fx * t[:, 0] / t[:, 2] + cx, fy * t[:, 1] / t[:, 2] + cy], -1)
    order = torch.argsort(t[:, 2])
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32) + 0.5,
                            torch.arange(W, dtype=torch.float32) + 0.5, indexing="ij")  # fmt: skip
    pix = torch.stack([xs, ys], -1).view(-1, 1, 2)
    dxy = pix - xy[order][None]
    co = conic[order]
    power = (-0.5 * (co[:, 0] * dxy[..., 0] ** 2 + co[:, 2] * dxy[..., 1] ** 2)
             - co[:, 1] * dxy[..., 0] * dxy[..., 1])  # fmt: skip
    alpha = torch.clamp(torch.sigmoid(opac_logit[order, 0]) * torch.exp(power), max=0.99)
    alpha = torch.where(power > 0, torch.zeros_like(alpha), alpha)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], 1), 1)
    wgt = alpha * trans
    image = (wgt[..., None] * colors[order][None]).sum(1).view(H, W, 3)
    acc = wgt.sum(1).view(H, W)
    target = torch.tensor(_uniform(126, H, W, 3))
    loss = (image - target).abs().mean() + 0.1 * (1 - acc).mean()
    loss.backward()
    return {"cov3d": cov3d, "packed": packed, "cov2d": cov2d, "conic": conic, "radii": radii,
            "xy": xy, "order": order, "image": image, "acc": acc, "loss": loss,
            "means_grad": means.grad, "scales_grad": log_scales.grad, "quats_grad": quats.grad,
            "opac_grad": opac_logit.grad, "colors_grad": colors.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def rotation_6d_functorch_jacobians_and_averaging(torch):
    # the 6-d representation with Gram-Schmidt written with linalg.vecdot / vector_norm /
    # linalg.cross and compared with a sign-fixed QR, gradients through matrix_exp of skew
    # matrices, per-point projection Jacobians with torch.func.jacrev under vmap (as
    # functorch-based SLAM code computes them), and Markley quaternion averaging with eigh
    F = torch.nn.functional
    func = torch.func

    def rotation_6d_to_matrix(d6):
        a1, a2 = d6[..., :3], d6[..., 3:]
        b1 = a1 / torch.linalg.vector_norm(a1, dim=-1, keepdim=True)
        b2 = a2 - torch.linalg.vecdot(b1, a2, dim=-1)[..., None] * b1
        b2 = b2 / torch.linalg.vector_norm(b2, dim=-1, keepdim=True)
        b3 = torch.linalg.cross(b1, b2, dim=-1)
        return torch.stack((b1, b2, b3), dim=-1)  # columns, as the original paper stacks them

    d6 = torch.tensor(arr(130, 5, 6)).requires_grad_()
    R6 = rotation_6d_to_matrix(d6)
    Q, Rq = torch.linalg.qr(d6.detach().view(5, 2, 3).transpose(1, 2))
    Q = Q * torch.sign(torch.diagonal(Rq, dim1=-2, dim2=-1))[:, None, :]
    w = torch.tensor(_rotvecs(131, 5, 0.3, 1.2)).requires_grad_()
    R_exp = torch.linalg.matrix_exp(_skew(torch, w))
    loss = (R6 * R_exp).sum() + (R6[..., 2] ** 3).sum()
    loss.backward()

    K = torch.tensor([[80.0, 0.0, 32.0], [0.0, 80.0, 24.0], [0.0, 0.0, 1.0]])

    def project(pose, X):
        R = torch.linalg.matrix_exp(_skew(torch, pose[:3]))
        p = R @ X + pose[3:]
        uv = K @ p
        return uv[:2] / uv[2]

    pose = torch.tensor([0.02, -0.05, 0.01, 0.1, -0.05, 0.2])
    X = torch.tensor(np.concatenate([arr(132, 7, 2, scale=0.5), _uniform(133, 7, 1, low=2.0,
                                                                        high=3.0)], 1))  # fmt: skip
    J_pose = func.vmap(func.jacrev(project, argnums=0), in_dims=(None, 0))(pose, X)
    J_point = func.vmap(func.jacrev(project, argnums=1), in_dims=(None, 0))(pose, X)
    uv = func.vmap(project, in_dims=(None, 0))(pose, X)
    # one Gauss-Newton step on the pose from those Jacobians
    obs = uv + torch.tensor(arr(134, 7, 2, scale=0.5))
    r = (uv - obs).reshape(-1)
    Jp = J_pose.reshape(-1, 6)
    dx = torch.linalg.lstsq(Jp, -r[:, None]).solution[:, 0]
    # Markley averaging of noisy quaternions (wxyz), sign-ambiguous inputs
    base = F.normalize(torch.tensor([0.8, 0.3, -0.4, 0.2]), dim=0)
    qs = F.normalize(base + torch.tensor(arr(135, 10, 4, scale=0.05)), dim=-1)
    qs = qs * torch.tensor([1.0, -1.0] * 5)[:, None]
    weights = torch.tensor(_uniform(136, 10, low=0.5, high=1.5))
    M = torch.einsum("n,ni,nj->ij", weights, qs, qs)
    evals, evecs = torch.linalg.eigh(M)
    q_avg = evecs[:, -1]
    q_avg = torch.where(q_avg[0] < 0, -q_avg, q_avg)
    return {"R6": R6, "qr_Q": Q, "R6_vs_qr": (R6[..., :2] - Q).abs().max() < 1e-5, "loss": loss,
            "d6_grad": d6.grad, "w_grad": w.grad, "J_pose": J_pose, "J_point": J_point, "uv": uv,
            "dx": dx, "evals": evals, "q_avg": q_avg,
            "avg_err": 1 - (q_avg * base).sum().abs()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def older_geometry_helpers_and_degenerate_inputs(torch):
    # helpers as older 3-d vision repositories write them: torch.cross without dim, torch.svd
    # with some=True, Tensor.norm(p, dim), torch.inverse, cosine_similarity broadcast between
    # point sets, take_along_dim of nearest normals, cdist with p=1 and p=inf; degenerate
    # inputs they meet (zero vectors through F.normalize, acos at exactly +-1 after clamping,
    # signed zeros through atan2, coincident points) with the gradients they produce
    F = torch.nn.functional
    a = torch.tensor(arr(140, 3, 5))  # (3, N): the legacy default crosses along dim 0
    b = torch.tensor(arr(141, 3, 5))
    legacy_cross = torch.cross(a, b)
    tri = torch.tensor(arr(142, 4, 3, 3))
    face_n = torch.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    area = 0.5 * face_n.norm(2, -1)
    U, S, V = torch.svd(torch.tensor(arr(143, 2, 4, 3)), some=True)
    recon = U @ torch.diag_embed(S) @ V.transpose(-1, -2)
    Minv = torch.inverse(torch.tensor(arr(144, 3, 3, 3)) + 3 * torch.eye(3))
    pts = torch.tensor(arr(145, 6, 3))
    nrm = F.normalize(torch.tensor(arr(146, 6, 3)), dim=-1)
    cos_all = F.cosine_similarity(nrm[:, None, :], nrm[None, :, :], dim=-1)
    d1 = torch.cdist(pts, pts, p=1)
    dinf = torch.cdist(pts, pts, p=float("inf"))
    nn_idx = (torch.cdist(pts, pts) + 1e6 * torch.eye(6)).argmin(-1, keepdim=True)
    nn_n = torch.take_along_dim(nrm, nn_idx.expand(-1, 3), dim=0)
    # degenerate inputs
    v = torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0], [1e-14, 0.0, 0.0]], requires_grad=True)
    vn = F.normalize(v, dim=-1)
    (vn * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    c = torch.tensor([1.0, -1.0, 0.5, 1.0 + 1e-7, -0.999], requires_grad=True)
    ang = torch.acos(torch.clamp(c, -1.0, 1.0))
    ang.sum().backward()
    yx = torch.tensor([[0.0, 1.0], [-0.0, -1.0], [0.0, -1.0], [-0.0, 1.0], [-1.0, -0.0]])
    at = torch.atan2(yx[:, 0], yx[:, 1])
    p = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]], requires_grad=True)
    q = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    dist = torch.cdist(p, q)
    dist.sum().backward()
    return {"legacy_cross": legacy_cross, "face_n": face_n, "area": area, "S": S,
            "recon": recon, "V_shape": list(V.shape), "Minv": Minv, "cos_all": cos_all,
            "d1": d1, "dinf": dinf, "nn_idx": nn_idx, "nn_n": nn_n, "vn": vn, "v_grad": v.grad,
            "ang": ang, "c_grad": c.grad, "atan2": at, "dist": dist, "p_grad": p.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def zbuffer_splatting_hash_grid_and_voxel_fields(torch):
    # point-based rendering and neural fields: a z-buffer by scatter_reduce("amin") over linear
    # pixel ids with the winners picked by equality, softmax splatting with scatter_add_, an
    # Instant-NGP multiresolution hash encoding (int64 primes, xor hashing, modulo the table
    # size, trilinear corner weights) trained with Adam, and a DVGO-style dense grid queried
    # with 5-d grid_sample plus a total-variation term
    nn, F = torch.nn, torch.nn.functional
    H, W = 6, 8
    g = np.random.default_rng(150)
    n = 40
    pix_f = torch.tensor(np.stack([g.uniform(0, W, n), g.uniform(0, H, n)], 1).astype(np.float32))
    depth = torch.tensor(g.permutation(n).astype(np.float32) * 0.1 + 1.0)
    colors = torch.tensor(_uniform(151, n, 3))
    px = pix_f.floor().long()
    lin = px[:, 1] * W + px[:, 0]
    zbuf = torch.full((H * W,), float("inf")).scatter_reduce(
        0, lin, depth, reduce="amin", include_self=True
    )
    visible = depth == zbuf[lin]
    image = torch.zeros(H * W, 3)
    image.index_put_((lin[visible],), colors[visible])
    w = torch.exp(-(depth - depth.min()))
    num = torch.zeros(H * W, 3).scatter_add_(0, lin[:, None].expand(-1, 3), w[:, None] * colors)
    den = torch.zeros(H * W).scatter_add_(0, lin, w)
    soft = num / den.clamp(min=1e-8)[:, None]

    class HashEncoding(nn.Module):
        def __init__(self, levels=4, table_size=2**8, features=2, base_res=2, scale=2.0):
            super().__init__()
            self.levels, self.T, self.features = levels, table_size, features
            self.res = [int(base_res * scale**i) for i in range(levels)]
            table = np.random.default_rng(152).uniform(-1e-2, 1e-2, (levels, table_size, features))
            self.table = nn.Parameter(torch.tensor(table.astype(np.float32)))
            self.register_buffer("primes", torch.tensor([1, 2654435761, 805459861]))
            offs = [[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)]
            self.register_buffer("offsets", torch.tensor(offs))

        def forward(self, x):  # x in [0, 1]^3
            outs = []
            for lvl, res in enumerate(self.res):
                pos = x * res
                base = pos.floor().long()
                frac = pos - base
                corners = base[:, None, :] + self.offsets[None]
                h = corners * self.primes
                idx = (h[..., 0] ^ h[..., 1] ^ h[..., 2]) % self.T
                wts = torch.where(self.offsets[None].bool(), frac[:, None], 1 - frac[:, None]).prod(
                    -1
                )
                feats = self.table[lvl][idx]
                outs.append((wts[..., None] * feats).sum(1))
            return torch.cat(outs, -1)

    enc = HashEncoding()
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    with torch.no_grad():
        gw = np.random.default_rng(153)
        for p in mlp.parameters():
            p.copy_(torch.tensor(gw.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    xs = torch.tensor(_uniform(154, 32, 3))
    sdf_target = (xs - 0.5).norm(dim=-1, keepdim=True) - 0.3
    opt = torch.optim.Adam(list(enc.parameters()) + list(mlp.parameters()), lr=1e-2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.l1_loss(mlp(enc(xs)), sdf_target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # dense voxel grid sampled with grid_sample (x, y, z -> W, H, D), TV regulariser
    grid = torch.tensor(arr(155, 1, 2, 4, 5, 6, scale=0.5)).requires_grad_()
    q = torch.tensor(_uniform(156, 1, 1, 1, 20, 3, low=-1.0, high=1.0)).requires_grad_()
    vals = F.grid_sample(grid, q, mode="bilinear", align_corners=True)
    tv = ((grid[:, :, 1:] - grid[:, :, :-1]) ** 2).mean() + (
        (grid[..., 1:] - grid[..., :-1]) ** 2
    ).mean()
    (vals.square().sum() + tv).backward()
    return {"zbuf": torch.where(torch.isinf(zbuf), torch.zeros_like(zbuf), zbuf),
            "n_visible": visible.sum(), "image": image, "soft": soft, "losses": losses,
            "table_grad_nnz": (enc.table.grad.abs() > 0).sum(), "table_grad": enc.table.grad,
            "mlp0": mlp[0].weight, "vals": vals, "grid_grad": grid.grad, "q_grad": q.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def pose_graph_second_order_and_rotation_axes(torch):
    # a small SE(2) pose graph with odometry and one loop closure, its Jacobian by jacfwd and
    # Gauss-Newton steps, the Hessian of a point-alignment cost by autograd.functional.hessian,
    # batched per-landmark solves under vmap, the rotation axis as the eigenvector of
    # linalg.eig with eigenvalue 1, and Manhattan / Chebyshev cdist gradients
    func = torch.func
    dt = torch.float64

    def v2t(p):
        c, s = torch.cos(p[2]), torch.sin(p[2])
        return torch.stack([torch.stack([c, -s, p[0]]), torch.stack([s, c, p[1]]),
                            torch.tensor([0.0, 0.0, 1.0], dtype=dt)])  # fmt: skip

    def t2v(T):
        return torch.stack([T[0, 2], T[1, 2], torch.atan2(T[1, 0], T[0, 0])])

    edges = [(0, 1), (1, 2), (2, 3), (3, 0)]
    meas = torch.tensor([[1.0, 0.0, math.pi / 2], [1.0, 0.0, math.pi / 2],
                         [1.0, 0.0, math.pi / 2], [1.0, 0.05, math.pi / 2]], dtype=dt)  # fmt: skip
    x0 = torch.tensor([[0.0, 0.0, 0.0], [1.1, 0.1, 1.5], [0.9, 1.2, 3.0], [-0.1, 0.8, -1.6]],
                      dtype=dt)  # fmt: skip

    def residuals(flat):
        poses = torch.cat([torch.zeros(1, 3, dtype=dt), flat.view(-1, 3)])
        res = []
        for k, (i, j) in enumerate(edges):
            Z = v2t(meas[k])
            E = torch.linalg.inv(Z) @ torch.linalg.inv(v2t(poses[i])) @ v2t(poses[j])
            e = t2v(E)
            res.append(torch.cat([e[:2], torch.atan2(torch.sin(e[2:]), torch.cos(e[2:]))]))
        return torch.cat(res)

    x = x0[1:].reshape(-1).clone()
    errs = []
    for _ in range(3):
        r = residuals(x)
        J = func.jacfwd(residuals)(x)
        dx = torch.linalg.solve(J.t() @ J + 1e-6 * torch.eye(9, dtype=dt), -J.t() @ r)
        x = x + dx
        errs.append((r**2).sum())
    # Hessian of a 2-d alignment cost in (theta, tx, ty)
    P = torch.tensor(arr(160, 8, 2), dtype=dt)
    Q = torch.tensor(arr(161, 8, 2), dtype=dt)

    def cost(params):
        c, s = torch.cos(params[0]), torch.sin(params[0])
        R = torch.stack([torch.stack([c, -s]), torch.stack([s, c])])
        return ((P @ R.t() + params[1:] - Q) ** 2).sum()

    Hs = torch.autograd.functional.hessian(cost, torch.tensor([0.3, 0.1, -0.2], dtype=dt))
    A = torch.tensor(arr(162, 5, 3, 3)) + 3 * torch.eye(3)
    b = torch.tensor(arr(163, 5, 3))
    sols = torch.vmap(torch.linalg.solve)(A, b)
    # rotation axes from the eigenvector with eigenvalue closest to 1
    Rs = torch.linalg.matrix_exp(_skew(torch, torch.tensor(_rotvecs(164, 4, 0.5, 2.0), dtype=dt)))
    evals, evecs = torch.linalg.eig(Rs)
    k = (evals - 1).abs().argmin(-1)
    axis = torch.take_along_dim(evecs, k[:, None, None].expand(-1, 3, 1), dim=2)[..., 0].real
    axis = axis * torch.sign(axis[:, :1])
    angle = torch.atan2(evals.imag.abs().amax(-1), evals.real.gather(1, (k[:, None] + 1) % 3)[:, 0])
    pa = torch.tensor(arr(165, 5, 3)).requires_grad_()
    pb = torch.tensor(arr(166, 4, 3)).requires_grad_()
    (torch.cdist(pa, pb, p=1).sum() + torch.cdist(pa, pb, p=float("inf")).sum()).backward()
    return {"x": x.view(-1, 3), "errs": errs, "hessian": Hs, "sols": sols, "axis": axis,
            "n_real": (evals.imag.abs() < 1e-9).sum(-1), "angle": angle, "pa_grad": pa.grad,
            "pb_grad": pb.grad}  # fmt: skip
