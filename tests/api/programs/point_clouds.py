"""Point clouds, 3-d geometry and rendering as libraries write them: PointNet, Chamfer distance, kNN graphs, rotations, Kabsch, volume rendering."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _uniform(seed, *shape, low=0.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _hat(torch, v):
    # pytorch3d.transforms.so3.hat: (N, 3) -> (N, 3, 3) skew-symmetric matrices
    N = v.shape[0]
    h = torch.zeros((N, 3, 3), dtype=v.dtype)
    x, y, z = v.unbind(1)
    h[:, 0, 1] = -z
    h[:, 0, 2] = y
    h[:, 1, 0] = z
    h[:, 1, 2] = -x
    h[:, 2, 0] = -y
    h[:, 2, 1] = x
    return h


def _axis_angles(seed, n, low=0.3, high=2.5):
    g = np.random.default_rng(seed)
    axis = g.standard_normal((n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    return (axis * g.uniform(low, high, (n, 1))).astype(np.float32)


@program(rtol=5e-4, atol=5e-5)
def pointnet_tnet_feature_transform_regularizer(torch):
    # fxia22/pointnet.pytorch: STN3d / STNkd T-Nets, shared MLPs as Conv1d(k=1), global max pool,
    # feature_transform_regularizer = mean ||I - A A^T||_F
    nn, F = torch.nn, torch.nn.functional

    class STNkd(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k
            self.conv1 = nn.Conv1d(k, 16, 1)
            self.conv2 = nn.Conv1d(16, 32, 1)
            self.fc1 = nn.Linear(32, 16)
            self.fc2 = nn.Linear(16, k * k)
            self.bn1, self.bn2, self.bn3 = (
                nn.BatchNorm1d(16),
                nn.BatchNorm1d(32),
                nn.BatchNorm1d(16),
            )

        def forward(self, x):
            batchsize = x.size()[0]
            x = F.relu(self.bn1(self.conv1(x)))
            x = F.relu(self.bn2(self.conv2(x)))
            x = torch.max(x, 2, keepdim=True)[0]
            x = x.view(-1, 32)
            x = F.relu(self.bn3(self.fc1(x)))
            x = self.fc2(x)
            iden = torch.eye(self.k).flatten().view(1, self.k * self.k).repeat(batchsize, 1)
            x = x + iden
            return x.view(-1, self.k, self.k)

    class PointNetCls(nn.Module):
        def __init__(self, k=4):
            super().__init__()
            self.stn = STNkd(3)
            self.conv1 = nn.Conv1d(3, 16, 1)
            self.fstn = STNkd(16)
            self.conv2 = nn.Conv1d(16, 32, 1)
            self.bn1, self.bn2 = nn.BatchNorm1d(16), nn.BatchNorm1d(32)
            self.fc1 = nn.Linear(32, 16)
            self.bn3 = nn.BatchNorm1d(16)
            self.fc2 = nn.Linear(16, k)

        def forward(self, x):
            trans = self.stn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans)
            x = x.transpose(2, 1)
            x = F.relu(self.bn1(self.conv1(x)))
            trans_feat = self.fstn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans_feat)
            x = x.transpose(2, 1)
            x = self.bn2(self.conv2(x))
            x = torch.max(x, 2, keepdim=True)[0].view(-1, 32)
            x = F.relu(self.bn3(self.fc1(x)))
            return F.log_softmax(self.fc2(x), dim=1), trans, trans_feat

    def feature_transform_regularizer(trans):
        d = trans.size()[1]
        eye = torch.eye(d)[None, :, :]
        return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))

    model = set_weights(torch, PointNetCls(), seed=1)
    # SGD, not Adam: the conv biases in front of BatchNorm get rounding-noise gradients
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    points = torch.tensor(arr(2, 6, 40, 3)).transpose(2, 1)  # (B, 3, N) as the loader gives
    target = torch.tensor(ints(3, 4, 6))
    out = {"losses": [], "reg": [], "acc": []}
    for _ in range(3):
        opt.zero_grad()
        pred, trans, trans_feat = model(points)
        reg = feature_transform_regularizer(trans_feat)
        loss = F.nll_loss(pred, target) + reg * 0.001
        loss.backward()
        opt.step()
        pred_choice = pred.data.max(1)[1]
        out["losses"].append(loss.item())
        out["reg"].append(reg)
        out["acc"].append(pred_choice.eq(target.data).cpu().sum().item() / 6.0)
    out["grads"] = {k: v for k, v in grads(model).items() if k.startswith(("fstn.fc2", "fc2"))}
    model.eval()
    with torch.no_grad():
        pred, trans, _ = model(points)
    out.update(eval_logp=pred, trans=trans, running_var=model.bn2.running_var,
               stn_reg=feature_transform_regularizer(trans))  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def pointnet2_fps_ball_query_set_abstraction(torch):
    # yanx27/Pointnet_Pointnet2_pytorch pointnet2_utils: square_distance, index_points,
    # farthest_point_sample, query_ball_point, sample_and_group, PointNetSetAbstraction
    nn, F = torch.nn, torch.nn.functional

    def square_distance(src, dst):
        B, N, _ = src.shape
        _, M, _ = dst.shape
        dist = -2 * torch.matmul(src, dst.permute(0, 2, 1))
        dist += torch.sum(src**2, -1).view(B, N, 1)
        dist += torch.sum(dst**2, -1).view(B, 1, M)
        return dist

    def index_points(points, idx):
        B = points.shape[0]
        view_shape = list(idx.shape)
        view_shape[1:] = [1] * (len(view_shape) - 1)
        repeat_shape = list(idx.shape)
        repeat_shape[0] = 1
        batch_indices = torch.arange(B, dtype=torch.long).view(view_shape).repeat(repeat_shape)
        return points[batch_indices, idx, :]

    def farthest_point_sample(xyz, npoint, first):
        B, N, C = xyz.shape
        centroids = torch.zeros(B, npoint, dtype=torch.long)
        distance = torch.ones(B, N) * 1e10
        farthest = first  # the original draws torch.randint(0, N, (B,))
        batch_indices = torch.arange(B, dtype=torch.long)
        for i in range(npoint):
            centroids[:, i] = farthest
            centroid = xyz[batch_indices, farthest, :].view(B, 1, 3)
            dist = torch.sum((xyz - centroid) ** 2, -1)
            mask = dist < distance
            distance[mask] = dist[mask]
            farthest = torch.max(distance, -1)[1]
        return centroids

    def query_ball_point(radius, nsample, xyz, new_xyz):
        B, N, C = xyz.shape
        _, S, _ = new_xyz.shape
        group_idx = torch.arange(N, dtype=torch.long).view(1, 1, N).repeat([B, S, 1])
        sqrdists = square_distance(new_xyz, xyz)
        group_idx[sqrdists > radius**2] = N
        group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
        group_first = group_idx[:, :, 0].view(B, S, 1).repeat([1, 1, nsample])
        mask = group_idx == N
        group_idx[mask] = group_first[mask]
        return group_idx

    class SetAbstraction(nn.Module):
        def __init__(self, npoint, radius, nsample, in_channel, mlp, group_all):
            super().__init__()
            self.npoint, self.radius, self.nsample, self.group_all = (
                npoint,
                radius,
                nsample,
                group_all,
            )
            self.mlp_convs, self.mlp_bns = nn.ModuleList(), nn.ModuleList()
            last = in_channel
            for out_channel in mlp:
                self.mlp_convs.append(nn.Conv2d(last, out_channel, 1))
                self.mlp_bns.append(nn.BatchNorm2d(out_channel))
                last = out_channel

        def forward(self, xyz, points, first=None):
            xyz = xyz.permute(0, 2, 1)
            points = points.permute(0, 2, 1) if points is not None else None
            B, N, C = xyz.shape
            if self.group_all:
                new_xyz = torch.zeros(B, 1, C)
                grouped = xyz.view(B, 1, N, C)
                if points is not None:
                    grouped = torch.cat([grouped, points.view(B, 1, N, -1)], dim=-1)
                self.idx = None
            else:
                fps_idx = farthest_point_sample(xyz, self.npoint, first)
                new_xyz = index_points(xyz, fps_idx)
                idx = query_ball_point(self.radius, self.nsample, xyz, new_xyz)
                grouped_xyz = index_points(xyz, idx)
                grouped_xyz_norm = grouped_xyz - new_xyz.view(B, self.npoint, 1, C)
                grouped = torch.cat([grouped_xyz_norm, index_points(points, idx)], dim=-1)
                self.idx, self.fps_idx = idx, fps_idx
            new_points = grouped.permute(0, 3, 2, 1)  # [B, C+D, nsample, npoint]
            for conv, bn in zip(self.mlp_convs, self.mlp_bns):
                new_points = F.relu(bn(conv(new_points)))
            new_points = torch.max(new_points, 2)[0]
            return new_xyz.permute(0, 2, 1), new_points

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.sa1 = SetAbstraction(12, 0.9, 8, 3 + 3, [16, 16], False)
            self.sa2 = SetAbstraction(None, None, None, 16 + 3, [32], True)
            self.fc = nn.Linear(32, 3)

        def forward(self, xyz, norm, first):
            l1_xyz, l1_points = self.sa1(xyz, norm, first)
            _, l2_points = self.sa2(l1_xyz, l1_points)
            return F.log_softmax(self.fc(l2_points.view(-1, 32)), -1)

    model = set_weights(torch, Net(), seed=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xyz = torch.tensor(_uniform(11, 3, 3, 48, low=-1.0, high=1.0))
    norm = F.normalize(torch.tensor(arr(12, 3, 3, 48)), dim=1)
    first = torch.tensor(ints(13, 48, 3))
    label = torch.tensor([0, 2, 1])
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.nll_loss(model(xyz, norm, first), label)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    sd = square_distance(xyz.permute(0, 2, 1), xyz.permute(0, 2, 1))
    return {"losses": losses, "fps_idx": model.sa1.fps_idx, "group_idx": model.sa1.idx,
            "in_ball": (model.sa1.idx != model.sa1.idx[:, :, :1]).sum(-1),
            "grads": grads(model), "sqdist_diag": sd.diagonal(dim1=1, dim2=2).abs().max() < 1e-4,
            "params": params(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def dgcnn_edgeconv_dynamic_knn(torch):
    # WangYueFT/dgcnn model.py: knn by -||xi - xj||^2 with topk, get_graph_feature, EdgeConv layers
    # with a graph rebuilt in feature space (here with torch.cdist), max + avg global pooling
    nn, F = torch.nn, torch.nn.functional
    K = 5

    def knn(x, k):
        inner = -2 * torch.matmul(x.transpose(2, 1), x)
        xx = torch.sum(x**2, dim=1, keepdim=True)
        pairwise_distance = -xx - inner - xx.transpose(2, 1)
        return pairwise_distance.topk(k=k, dim=-1)[1]

    def get_graph_feature(x, k, idx=None):
        batch_size, num_points = x.size(0), x.size(2)
        x = x.view(batch_size, -1, num_points)
        if idx is None:
            idx = knn(x, k=k)
        idx_base = torch.arange(0, batch_size).view(-1, 1, 1) * num_points
        idx = idx + idx_base
        idx = idx.view(-1)
        _, num_dims, _ = x.size()
        x = x.transpose(2, 1).contiguous()
        feature = x.view(batch_size * num_points, -1)[idx, :]
        feature = feature.view(batch_size, num_points, k, num_dims)
        x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)
        return torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()

    class DGCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Sequential(nn.Conv2d(6, 16, kernel_size=1, bias=False),
                                       nn.BatchNorm2d(16), nn.LeakyReLU(negative_slope=0.2))  # fmt: skip
            self.conv2 = nn.Sequential(nn.Conv2d(32, 16, kernel_size=1, bias=False),
                                       nn.BatchNorm2d(16), nn.LeakyReLU(negative_slope=0.2))  # fmt: skip
            self.conv5 = nn.Sequential(nn.Conv1d(32, 24, kernel_size=1, bias=False),
                                       nn.BatchNorm1d(24), nn.LeakyReLU(negative_slope=0.2))  # fmt: skip
            self.linear = nn.Linear(48, 4)

        def forward(self, x):
            x = get_graph_feature(x, k=K)
            x1 = self.conv1(x).max(dim=-1, keepdim=False)[0]
            f = x1.transpose(1, 2)
            self.idx2 = torch.cdist(f, f).topk(K, dim=-1, largest=False).indices
            x = get_graph_feature(x1, k=K, idx=self.idx2)
            x2 = self.conv2(x).max(dim=-1, keepdim=False)[0]
            x = self.conv5(torch.cat((x1, x2), dim=1))
            a = F.adaptive_max_pool1d(x, 1).view(x.size(0), -1)
            b = F.adaptive_avg_pool1d(x, 1).view(x.size(0), -1)
            return self.linear(torch.cat((a, b), 1))

    def cal_loss(pred, gold, smoothing=True):
        eps = 0.2
        n_class = pred.size(1)
        one_hot = torch.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
        log_prb = F.log_softmax(pred, dim=1)
        return -(one_hot * log_prb).sum(dim=1).mean()

    model = set_weights(torch, DGCNN(), seed=20)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    data = torch.tensor(_uniform(21, 4, 32, 3, low=-1.0, high=1.0)).permute(0, 2, 1)
    label = torch.tensor(ints(22, 4, 4))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        logits = model(data)
        loss = cal_loss(logits, label)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    idx1 = knn(data, K)
    return {"losses": losses, "logits": logits, "knn_idx": idx1, "knn_sorted": idx1.sort(-1)[0],
            "feat_knn": model.idx2.sort(-1)[0], "self_first": (idx1[..., 0] == torch.arange(32)).all(),
            "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def chamfer_sinkhorn_emd_point_fitting(torch):
    # pytorch3d-style Chamfer (squared NN distances both ways, with normals cosine term), a
    # log-domain Sinkhorn approximation of the earth mover's distance, F-score at a threshold
    F = torch.nn.functional

    def chamfer(x, y, xn=None, yn=None):
        d = torch.cdist(x, y) ** 2
        dx, ix = d.min(2)
        dy, iy = d.min(1)
        loss = dx.mean(1) + dy.mean(1)
        if xn is None:
            return loss.mean(), None, ix, iy
        yn_x = torch.gather(yn, 1, ix[..., None].expand(-1, -1, 3))
        xn_y = torch.gather(xn, 1, iy[..., None].expand(-1, -1, 3))
        cos_x = 1 - F.cosine_similarity(xn, yn_x, dim=2, eps=1e-6).abs()
        cos_y = 1 - F.cosine_similarity(yn, xn_y, dim=2, eps=1e-6).abs()
        return loss.mean(), (cos_x.mean(1) + cos_y.mean(1)).mean(), ix, iy

    def sinkhorn(x, y, eps=0.2, iters=20):
        C = ((x[:, :, None, :] - y[:, None, :, :]) ** 2).sum(-1)
        B, N, M = C.shape
        log_a = torch.full((B, N), -math.log(N))
        log_b = torch.full((B, M), -math.log(M))
        f, g = torch.zeros(B, N), torch.zeros(B, M)
        for _ in range(iters):
            f = eps * log_a - eps * torch.logsumexp((g[:, None, :] - C) / eps, dim=2)
            g = eps * log_b - eps * torch.logsumexp((f[:, :, None] - C) / eps, dim=1)
        P = torch.exp((f[:, :, None] + g[:, None, :] - C) / eps)
        return (P * C).sum((1, 2)).mean(), P

    target = torch.tensor(arr(30, 2, 24, 3))
    tn = F.normalize(torch.tensor(arr(31, 2, 24, 3)), dim=-1)
    pts = torch.tensor(arr(32, 2, 20, 3)).requires_grad_()
    pn = torch.tensor(arr(33, 2, 20, 3)).requires_grad_()
    opt = torch.optim.Adam([pts, pn], lr=0.05)
    out = {"cd": [], "normal": [], "emd": []}
    for _ in range(4):
        opt.zero_grad()
        cd, nl, ix, iy = chamfer(pts, target, F.normalize(pn, dim=-1), tn)
        emd, P = sinkhorn(pts, target)
        loss = cd + 0.1 * nl + 0.5 * emd
        loss.backward()
        opt.step()
        out["cd"].append(cd.item())
        out["normal"].append(nl.item())
        out["emd"].append(emd)
    with torch.no_grad():
        d = torch.cdist(pts, target)
        tau = 0.5
        precision = (d.min(2).values < tau).float().mean(1)
        recall = (d.min(1).values < tau).float().mean(1)
        fscore = 2 * precision * recall / (precision + recall + 1e-8)
    return {**out, "pts": pts, "pn_grad": pn.grad, "nn_x": ix, "nn_y": iy, "plan_rows": P.sum(2),
            "plan_cols": P.sum(1), "fscore": fscore}  # fmt: skip


def _p3d_rotations(torch):
    # pytorch3d.transforms.rotation_conversions, as written there
    F = torch.nn.functional

    def quaternion_to_matrix(quaternions):
        r, i, j, k = torch.unbind(quaternions, -1)
        two_s = 2.0 / (quaternions * quaternions).sum(-1)
        o = torch.stack(
            (1 - two_s * (j * j + k * k), two_s * (i * j - k * r), two_s * (i * k + j * r),
             two_s * (i * j + k * r), 1 - two_s * (i * i + k * k), two_s * (j * k - i * r),
             two_s * (i * k - j * r), two_s * (j * k + i * r), 1 - two_s * (i * i + j * j)), -1,
        )  # fmt: skip
        return o.reshape(quaternions.shape[:-1] + (3, 3))

    def _sqrt_positive_part(x):
        ret = torch.zeros_like(x)
        positive_mask = x > 0
        if torch.is_grad_enabled():
            ret[positive_mask] = torch.sqrt(x[positive_mask])
        else:
            ret = torch.where(positive_mask, torch.sqrt(x), ret)
        return ret

    def standardize_quaternion(quaternions):
        return torch.where(quaternions[..., 0:1] < 0, -quaternions, quaternions)

    def matrix_to_quaternion(matrix):
        batch_dim = matrix.shape[:-2]
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = torch.unbind(
            matrix.reshape(batch_dim + (9,)), dim=-1
        )
        q_abs = _sqrt_positive_part(
            torch.stack(
                [
                    1.0 + m00 + m11 + m22,
                    1.0 + m00 - m11 - m22,
                    1.0 - m00 + m11 - m22,
                    1.0 - m00 - m11 + m22,
                ],
                dim=-1,
            )  # fmt: skip
        )
        quat_by_rijk = torch.stack(
            [torch.stack([q_abs[..., 0] ** 2, m21 - m12, m02 - m20, m10 - m01], dim=-1),
             torch.stack([m21 - m12, q_abs[..., 1] ** 2, m10 + m01, m02 + m20], dim=-1),
             torch.stack([m02 - m20, m10 + m01, q_abs[..., 2] ** 2, m12 + m21], dim=-1),
             torch.stack([m10 - m01, m20 + m02, m21 + m12, q_abs[..., 3] ** 2], dim=-1)], dim=-2,
        )  # fmt: skip
        flr = torch.tensor(0.1).to(dtype=q_abs.dtype, device=q_abs.device)
        quat_candidates = quat_by_rijk / (2.0 * q_abs[..., None].max(flr))
        out = quat_candidates[F.one_hot(q_abs.argmax(dim=-1), num_classes=4) > 0.5, :]
        return standardize_quaternion(out.reshape(batch_dim + (4,)))

    def axis_angle_to_quaternion(axis_angle):
        angles = torch.norm(axis_angle, p=2, dim=-1, keepdim=True)
        half_angles = angles * 0.5
        eps = 1e-6
        small_angles = angles.abs() < eps
        sin_half_angles_over_angles = torch.empty_like(angles)
        sin_half_angles_over_angles[~small_angles] = (
            torch.sin(half_angles[~small_angles]) / angles[~small_angles]
        )
        sin_half_angles_over_angles[small_angles] = (
            0.5 - (angles[small_angles] * angles[small_angles]) / 48
        )
        return torch.cat([torch.cos(half_angles), axis_angle * sin_half_angles_over_angles], dim=-1)

    def quaternion_to_axis_angle(quaternions):
        norms = torch.norm(quaternions[..., 1:], p=2, dim=-1, keepdim=True)
        half_angles = torch.atan2(norms, quaternions[..., :1])
        angles = 2 * half_angles
        eps = 1e-6
        small_angles = angles.abs() < eps
        sin_half_angles_over_angles = torch.empty_like(angles)
        sin_half_angles_over_angles[~small_angles] = (
            torch.sin(half_angles[~small_angles]) / angles[~small_angles]
        )
        sin_half_angles_over_angles[small_angles] = (
            0.5 - (angles[small_angles] * angles[small_angles]) / 48
        )
        return quaternions[..., 1:] / sin_half_angles_over_angles

    def quaternion_raw_multiply(a, b):
        aw, ax, ay, az = torch.unbind(a, -1)
        bw, bx, by, bz = torch.unbind(b, -1)
        ow = aw * bw - ax * bx - ay * by - az * bz
        ox = aw * bx + ax * bw + ay * bz - az * by
        oy = aw * by - ax * bz + ay * bw + az * bx
        oz = aw * bz + ax * by - ay * bx + az * bw
        return torch.stack((ow, ox, oy, oz), -1)

    def quaternion_invert(quaternion):
        scaling = torch.tensor([1, -1, -1, -1], device=quaternion.device)
        return quaternion * scaling

    def quaternion_apply(quaternion, point):
        real_parts = point.new_zeros(point.shape[:-1] + (1,))
        point_as_quaternion = torch.cat((real_parts, point), -1)
        out = quaternion_raw_multiply(
            quaternion_raw_multiply(quaternion, point_as_quaternion), quaternion_invert(quaternion)
        )
        return out[..., 1:]

    def _axis_angle_rotation(axis, angle):
        cos, sin = torch.cos(angle), torch.sin(angle)
        one, zero = torch.ones_like(angle), torch.zeros_like(angle)
        if axis == "X":
            R_flat = (one, zero, zero, zero, cos, -sin, zero, sin, cos)
        elif axis == "Y":
            R_flat = (cos, zero, sin, zero, one, zero, -sin, zero, cos)
        else:
            R_flat = (cos, -sin, zero, sin, cos, zero, zero, zero, one)
        return torch.stack(R_flat, -1).reshape(angle.shape + (3, 3))

    def euler_angles_to_matrix(euler_angles, convention):
        matrices = [
            _axis_angle_rotation(c, e) for c, e in zip(convention, torch.unbind(euler_angles, -1))
        ]
        return torch.matmul(torch.matmul(matrices[0], matrices[1]), matrices[2])

    def so3_exp_map(log_rot, eps=0.0001):
        nrms = (log_rot * log_rot).sum(1)
        rot_angles = torch.clamp(nrms, eps).sqrt()
        rot_angles_inv = 1.0 / rot_angles
        fac1 = rot_angles_inv * rot_angles.sin()
        fac2 = rot_angles_inv * rot_angles_inv * (1.0 - rot_angles.cos())
        skews = _hat(torch, log_rot)
        skews_square = torch.bmm(skews, skews)
        return (fac1[:, None, None] * skews + fac2[:, None, None] * skews_square
                + torch.eye(3, dtype=log_rot.dtype, device=log_rot.device)[None])  # fmt: skip

    def so3_relative_angle(R1, R2, cos_bound=1e-4):
        R12 = torch.bmm(R1, R2.permute(0, 2, 1))
        rot_trace = R12[:, 0, 0] + R12[:, 1, 1] + R12[:, 2, 2]
        phi_cos = ((rot_trace - 1.0) * 0.5).clamp(-1 + cos_bound, 1 - cos_bound)
        return torch.acos(phi_cos)

    return dict(q2m=quaternion_to_matrix, m2q=matrix_to_quaternion, aa2q=axis_angle_to_quaternion,
                q2aa=quaternion_to_axis_angle, qmul=quaternion_raw_multiply, qapply=quaternion_apply,
                euler=euler_angles_to_matrix, exp=so3_exp_map, rel=so3_relative_angle,
                std=standardize_quaternion, qinv=quaternion_invert)  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def pytorch3d_rotation_conversions_roundtrip(torch):
    # axis-angle -> quaternion -> matrix -> quaternion -> axis-angle, Rodrigues so3_exp_map,
    # quaternion_apply, Euler XYZ composition, relative angles; gradients through the masked paths
    T = _p3d_rotations(torch)
    aa_np = np.concatenate([np.zeros((1, 3), np.float32), _axis_angles(40, 7)])
    aa = torch.tensor(aa_np).requires_grad_()
    pts = torch.tensor(arr(41, 8, 5, 3))
    target = torch.tensor(arr(42, 8, 5, 3))
    q = T["aa2q"](aa)
    R = T["q2m"](q)
    R_exp = T["exp"](aa)
    q_back = T["m2q"](R)
    aa_back = T["q2aa"](q_back)
    rotated = T["qapply"](q[:, None, :], pts)
    rotated_m = pts @ R.transpose(-1, -2)
    loss = ((rotated - target) ** 2).sum() + (aa_back**2).sum() + (R_exp * R).sum()
    loss.backward()
    euler = torch.tensor(_uniform(43, 8, 3, low=-1.2, high=1.2))
    R_eul = T["euler"](euler, "XYZ")
    q_comp = T["qmul"](T["m2q"](R_eul), q.detach())
    R_comp = T["q2m"](q_comp)
    with torch.no_grad():
        ang = T["rel"](R_comp, R_eul @ R.detach())  # 0 up to the bound: composition agrees
        rel = T["rel"](R_eul, R.detach())
    return {"q": q, "R": R, "R_exp": R_exp, "q_back": q_back, "aa_back": aa_back, "rotated": rotated,
            "rotated_m": rotated_m, "loss": loss, "aa_grad": aa.grad, "R_eul": R_eul,
            "q_comp": T["std"](q_comp), "ang_comp": ang, "rel": rel,
            "orth": (R @ R.mT - torch.eye(3)).abs().max() < 1e-5,
            "det": torch.linalg.det(R_eul)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def rotation_6d_gram_schmidt_regression(torch):
    # Zhou et al. 6-d representation (pytorch3d rotation_6d_to_matrix): an MLP regresses 6 numbers,
    # Gram-Schmidt makes a rotation; targets from matrix_exp of skew matrices; geodesic metric
    nn, F = torch.nn, torch.nn.functional

    def rotation_6d_to_matrix(d6):
        a1, a2 = d6[..., :3], d6[..., 3:]
        b1 = F.normalize(a1, dim=-1)
        b2 = a2 - (b1 * a2).sum(-1, keepdim=True) * b1
        b2 = F.normalize(b2, dim=-1)
        b3 = torch.cross(b1, b2, dim=-1)
        return torch.stack((b1, b2, b3), dim=-2)

    def matrix_to_rotation_6d(matrix):
        batch_dim = matrix.size()[:-2]
        return matrix[..., :2, :].clone().reshape(batch_dim + (6,))

    def geodesic(R1, R2, eps=1e-6):
        m = torch.bmm(R1, R2.transpose(1, 2))
        cos = (m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2] - 1) / 2
        return torch.acos(torch.clamp(cos, -1 + eps, 1 - eps))

    model = set_weights(
        torch, nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 6)), seed=50
    )
    with torch.no_grad():
        model[2].bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))  # start near identity
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    x = torch.tensor(arr(51, 16, 8))
    R_gt = torch.linalg.matrix_exp(_hat(torch, torch.tensor(_axis_angles(52, 16, 0.2, 1.2))))
    losses, geo = [], []
    for _ in range(4):
        opt.zero_grad()
        R = rotation_6d_to_matrix(model(x))
        loss = F.mse_loss(R, R_gt, reduction="none").sum((1, 2)).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        geo.append(geodesic(R.detach(), R_gt).mean())
    R = rotation_6d_to_matrix(model(x))
    rt = rotation_6d_to_matrix(matrix_to_rotation_6d(R_gt))
    return {"losses": losses, "geodesic": geo, "R": R, "roundtrip": rt, "det": torch.det(R),
            "grads": grads(model), "deg": torch.rad2deg(geodesic(R, R_gt))}  # fmt: skip


def _kabsch(torch, P, Q, with_scale=False):
    # batched Kabsch / Umeyama: R, t (and s) minimising ||s R P + t - Q||, det fixed to +1
    p_mean, q_mean = P.mean(1, keepdim=True), Q.mean(1, keepdim=True)
    Pc, Qc = P - p_mean, Q - q_mean
    H = Pc.transpose(1, 2) @ Qc
    U, S, Vh = torch.linalg.svd(H)
    d = torch.sign(torch.linalg.det(Vh.transpose(1, 2) @ U.transpose(1, 2)))
    ones = torch.ones_like(d)
    D = torch.diag_embed(torch.stack([ones, ones, d], -1))
    R = Vh.transpose(1, 2) @ D @ U.transpose(1, 2)
    s = torch.ones_like(d)
    if with_scale:
        var_p = (Pc**2).sum((1, 2))
        s = (S * torch.stack([ones, ones, d], -1)).sum(-1) / var_p
    t = q_mean - s[:, None, None] * p_mean @ R.transpose(1, 2)
    return R, t, s, d


@program(rtol=1e-3, atol=1e-4)
def kabsch_umeyama_svd_alignment(torch):
    # Kabsch with torch.linalg.svd and the reflection fix, Umeyama scale, pytorch3d-style torch.svd
    # variant; RMSD after alignment is differentiated back to both point sets
    B, N = 3, 20
    P_np = arr(60, B, N, 3)
    R_true = np.stack([np.asarray(_rodrigues_np(a)) for a in _axis_angles(61, B)])
    R_true[2] = R_true[2] @ np.diag([1.0, 1.0, -1.0]).astype(np.float32)  # a reflection
    Q_np = 1.3 * P_np @ R_true.transpose(0, 2, 1) + arr(62, B, 1, 3) + arr(63, B, N, 3, scale=0.05)
    P = torch.tensor(P_np).requires_grad_()
    Q = torch.tensor(Q_np.astype(np.float32)).requires_grad_()
    R, t, s, d = _kabsch(torch, P, Q, with_scale=True)
    aligned = s[:, None, None] * P @ R.transpose(1, 2) + t
    rmsd = ((aligned - Q) ** 2).sum(-1).mean(-1).sqrt()
    rmsd.sum().backward()
    # pytorch3d corresponding_points_alignment uses torch.svd (V, not Vh)
    with torch.no_grad():
        Pc, Qc = P - P.mean(1, keepdim=True), Q - Q.mean(1, keepdim=True)
        XYcov = torch.bmm(Pc.transpose(2, 1), Qc) / N
        U, S, V = torch.svd(XYcov)
        E = torch.eye(3).repeat(B, 1, 1)
        E[:, 2, 2] = torch.det(torch.bmm(U, V.transpose(2, 1)))
        R_p3d = torch.bmm(torch.bmm(U, E), V.transpose(2, 1))  # row-vector convention: X @ R
        R2, _, _, _ = _kabsch(torch, P, Q)
    return {"R": R, "t": t, "s": s, "det_sign": d, "aligned": aligned, "rmsd": rmsd,
            "P_grad": P.grad, "Q_grad": Q.grad, "R_p3d": R_p3d.transpose(1, 2), "R_noscale": R2,
            "singular": S, "det_R": torch.linalg.det(R)}  # fmt: skip


def _rodrigues_np(aa):
    theta = float(np.linalg.norm(aa))
    k = aa / theta
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return (np.eye(3) + math.sin(theta) * K + (1 - math.cos(theta)) * K @ K).astype(np.float32)


@program(rtol=5e-4, atol=5e-5)
def icp_point_to_point_svd_steps(torch):
    # vanilla ICP: nearest neighbours with cdist/min, pytorch3d-style weighted Procrustes with
    # torch.svd, transform accumulation, convergence by relative RMSE change
    N = 60
    target = torch.tensor(_uniform(70, N, 3, low=-1.0, high=1.0))
    R0 = torch.tensor(_rodrigues_np(_axis_angles(71, 1, 0.15, 0.2)[0]))
    t0 = torch.tensor([0.05, -0.08, 0.03])
    perm = torch.from_numpy(np.random.default_rng(72).permutation(N)[:45])
    source = (target[perm] - t0) @ R0 + torch.tensor(arr(73, 45, 3, scale=0.005))
    weights = torch.tensor(_uniform(74, 45, low=0.5, high=1.0))

    def best_fit(X, Y, w):
        wsum = w.sum()
        Xm = (w[:, None] * X).sum(0) / wsum
        Ym = (w[:, None] * Y).sum(0) / wsum
        cov = ((X - Xm) * w[:, None]).t() @ (Y - Ym) / wsum
        U, S, V = torch.svd(cov)
        E = torch.eye(3)
        E[2, 2] = torch.det(U @ V.t()).sign()
        R = U @ E @ V.t()  # X @ R ~ Y
        return R, Ym - Xm @ R

    cur = source.clone()
    R_tot, t_tot = torch.eye(3), torch.zeros(3)
    rmse, idxs, prev = [], [], None
    for _ in range(6):
        dist, idx = torch.cdist(cur, target).min(dim=1)
        R, t = best_fit(cur, target[idx], weights)
        cur = cur @ R + t
        R_tot, t_tot = R_tot @ R, t_tot @ R + t
        err = ((cur - target[idx]) ** 2).sum(-1).mean().sqrt()
        rmse.append(err)
        idxs.append(idx)
        if prev is not None and abs(prev - err.item()) / prev < 1e-4:
            break
        prev = err.item()
    return {"rmse": rmse, "idx": idxs, "R_tot": R_tot, "t_tot": t_tot, "iters": len(rmse),
            "recovered": (idx == perm).float().mean(), "cur": cur,
            "R_err": torch.linalg.matrix_norm(R_tot.t() - R0)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def normals_covariance_point_to_plane_icp(torch):
    # Open3D-style normal estimation (kNN covariance, smallest eigenvector of eigh, oriented toward
    # a viewpoint), surface variation, then point-to-plane ICP with a 6x6 linearised solve
    g = np.random.default_rng(80)
    xy = g.uniform(-1, 1, (120, 2)).astype(np.float32)
    z = 0.3 * np.sin(1.5 * xy[:, :1]) + 0.2 * xy[:, 1:] ** 2
    target = torch.tensor(np.concatenate([xy, z], 1).astype(np.float32))
    k = 10
    d = torch.cdist(target, target)
    knn_idx = d.topk(k, dim=1, largest=False).indices
    nbrs = target[knn_idx]  # (N, k, 3)
    centered = nbrs - nbrs.mean(1, keepdim=True)
    cov = centered.transpose(1, 2) @ centered / k
    evals, evecs = torch.linalg.eigh(cov)
    normals = evecs[..., 0]
    viewpoint = torch.tensor([0.0, 0.0, 5.0])
    flip = ((viewpoint - target) * normals).sum(-1) < 0
    normals = torch.where(flip[:, None], -normals, normals)
    curvature = evals[:, 0] / evals.sum(-1)
    analytic = torch.nn.functional.normalize(
        torch.stack(
            [-0.45 * torch.cos(1.5 * target[:, 0]), -0.4 * target[:, 1], torch.ones(120)], -1
        ),
        dim=-1,
    )
    normal_err = torch.rad2deg(torch.acos((normals * analytic).sum(-1).clamp(-1, 1))).mean()

    aa = torch.tensor([0.03, -0.05, 0.04])
    R0 = torch.linalg.matrix_exp(_hat(torch, aa[None]))[0]
    sel = torch.arange(0, 120, 2)
    source = target[sel] @ R0.t() + torch.tensor([0.04, 0.02, -0.03])
    cur, errs, T_tot = source.clone(), [], torch.eye(4)
    for _ in range(4):
        idx = torch.cdist(cur, target).argmin(dim=1)
        q, n = target[idx], normals[idx]
        r = ((cur - q) * n).sum(-1)
        A = torch.cat([torch.linalg.cross(cur, n), n], dim=1)  # (M, 6)
        x = torch.linalg.solve(A.t() @ A, -(A.t() @ r))
        R = torch.linalg.matrix_exp(_hat(torch, x[None, :3]))[0]
        T = torch.eye(4)
        T[:3, :3], T[:3, 3] = R, x[3:]
        T_tot = T @ T_tot
        cur = cur @ R.t() + x[3:]
        errs.append((((cur - q) * n).sum(-1) ** 2).mean().sqrt())
    return {"normals": normals, "curvature": curvature, "evals": evals, "all_up": (normals[:, 2] > 0).all(),
            "normal_err_deg": normal_err, "errs": errs, "T_tot": T_tot, "last_idx": idx,
            "residual": (T_tot[:3, :3] @ R0 - torch.eye(3)).abs().max()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def voxelise_scatter_bincount_devoxelise(torch):
    # PVCNN / MinkowskiEngine-style voxelisation: integer coordinates, linear keys, bincount,
    # index_add_ / scatter_add_ means, scatter_reduce max pooling, unique(dim=0) quantisation,
    # a Conv3d on the dense grid and trilinear devoxelisation with grid_sample
    nn, F = torch.nn, torch.nn.functional
    R, C = 4, 3
    pts = torch.tensor(_uniform(90, 150, 3, low=0.0, high=0.999))
    feats = torch.tensor(arr(91, 150, C)).requires_grad_()
    vs = 0.25
    coords = torch.floor(pts / vs).long().clamp(0, R - 1)
    key = coords[:, 0] * R * R + coords[:, 1] * R + coords[:, 2]
    counts = torch.bincount(key, minlength=R**3)
    sums = torch.zeros(R**3, C).index_add_(0, key, feats)
    sums2 = torch.zeros(R**3, C).scatter_add_(0, key[:, None].expand(-1, C), feats)
    mean = sums / counts.clamp(min=1)[:, None].float()
    vmax = torch.zeros(R**3, C).scatter_reduce(0, key[:, None].expand(-1, C), feats, reduce="amax",
                                                include_self=False)  # fmt: skip
    centroid = torch.zeros(R**3, 3).index_add_(0, key, pts) / counts.clamp(min=1)[:, None]
    uniq, inverse, ucounts = torch.unique(coords, dim=0, return_inverse=True, return_counts=True)
    ukey, uinv = torch.unique(key, sorted=True, return_inverse=True)
    grid = mean.t().reshape(1, C, R, R, R)  # (N, C, D, H, W) with D=x, H=y, W=z
    conv = set_weights(torch, nn.Conv3d(C, 4, 3, padding=1), seed=92)
    out_grid = F.relu(conv(grid))
    # grid_sample wants (x, y, z) -> (W, H, D): reverse the coordinate order, map to [-1, 1]
    norm = (pts / vs - 0.5) / (R - 1) * 2 - 1
    sample = norm.flip(-1).view(1, 1, 1, -1, 3)
    devox = F.grid_sample(out_grid, sample, mode="bilinear", align_corners=True)
    point_out = devox.view(4, -1).t()
    loss = (point_out**2).mean() + vmax.pow(2).sum() * 0.01
    loss.backward()
    return {"counts": counts, "sums": sums, "same": torch.allclose(sums, sums2, atol=1e-6),
            "mean": mean, "vmax": vmax, "centroid": centroid, "uniq": uniq, "inverse": inverse,
            "ucounts": ucounts, "ukey": ukey, "uinv": uinv, "occupied": (counts > 0).sum(),
            "point_out": point_out, "loss": loss, "feats_grad": feats.grad,
            "conv_grad": grads(conv)}  # fmt: skip


def _nerf_helpers(torch):
    # yenchenlin/nerf-pytorch run_nerf_helpers / run_nerf
    nn, F = torch.nn, torch.nn.functional

    def embedder(multires):
        freq_bands = 2.0 ** torch.linspace(0.0, multires - 1, steps=multires)

        def embed(x):
            out = [x]
            for freq in freq_bands:
                for p_fn in (torch.sin, torch.cos):
                    out.append(p_fn(x * freq))
            return torch.cat(out, -1)

        return embed, 3 + 3 * 2 * multires

    class NeRF(nn.Module):
        def __init__(self, D=4, W=32, input_ch=27, input_ch_views=15, skips=(2,)):
            super().__init__()
            self.input_ch, self.input_ch_views, self.skips = input_ch, input_ch_views, skips
            self.pts_linears = nn.ModuleList(
                [nn.Linear(input_ch, W)]
                + [
                    nn.Linear(W, W) if i not in skips else nn.Linear(W + input_ch, W)
                    for i in range(D - 1)
                ]
            )
            self.views_linears = nn.ModuleList([nn.Linear(input_ch_views + W, W // 2)])
            self.feature_linear = nn.Linear(W, W)
            self.alpha_linear = nn.Linear(W, 1)
            self.rgb_linear = nn.Linear(W // 2, 3)

        def forward(self, x):
            input_pts, input_views = torch.split(x, [self.input_ch, self.input_ch_views], dim=-1)
            h = input_pts
            for i, _layer in enumerate(self.pts_linears):
                h = F.relu(self.pts_linears[i](h))
                if i in self.skips:
                    h = torch.cat([input_pts, h], -1)
            alpha = self.alpha_linear(h)
            feature = self.feature_linear(h)
            h = torch.cat([feature, input_views], -1)
            for layer in self.views_linears:
                h = F.relu(layer(h))
            rgb = self.rgb_linear(h)
            return torch.cat([rgb, alpha], -1)

    def raw2outputs(raw, z_vals, rays_d, white_bkgd=True):
        raw2alpha = lambda raw, dists, act_fn=F.relu: 1.0 - torch.exp(-act_fn(raw) * dists)  # noqa: E731
        dists = z_vals[..., 1:] - z_vals[..., :-1]
        dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
        dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
        rgb = torch.sigmoid(raw[..., :3])
        alpha = raw2alpha(raw[..., 3], dists)
        weights = (
            alpha
            * torch.cumprod(
                torch.cat([torch.ones((alpha.shape[0], 1)), 1.0 - alpha + 1e-10], -1), -1
            )[:, :-1]
        )
        rgb_map = torch.sum(weights[..., None] * rgb, -2)
        depth_map = torch.sum(weights * z_vals, -1)
        disp_map = 1.0 / torch.max(
            1e-10 * torch.ones_like(depth_map), depth_map / torch.sum(weights, -1)
        )
        acc_map = torch.sum(weights, -1)
        if white_bkgd:
            rgb_map = rgb_map + (1.0 - acc_map[..., None])
        return rgb_map, disp_map, acc_map, weights, depth_map

    def sample_pdf(bins, weights, N_samples, u):
        weights = weights + 1e-5
        pdf = weights / torch.sum(weights, -1, keepdim=True)
        cdf = torch.cumsum(pdf, -1)
        cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
        u = u.contiguous()
        inds = torch.searchsorted(cdf, u, right=True)
        below = torch.max(torch.zeros_like(inds - 1), inds - 1)
        above = torch.min((cdf.shape[-1] - 1) * torch.ones_like(inds), inds)
        inds_g = torch.stack([below, above], -1)
        matched_shape = [inds_g.shape[0], inds_g.shape[1], cdf.shape[-1]]
        cdf_g = torch.gather(cdf.unsqueeze(1).expand(matched_shape), 2, inds_g)
        bins_g = torch.gather(bins.unsqueeze(1).expand(matched_shape), 2, inds_g)
        denom = cdf_g[..., 1] - cdf_g[..., 0]
        denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
        t = (u - cdf_g[..., 0]) / denom
        return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0]), inds

    return embedder, NeRF, raw2outputs, sample_pdf


@program(rtol=5e-4, atol=5e-5)
def nerf_hierarchical_volume_rendering(torch):
    # NeRF: positional encoding, stratified samples (NumPy uniforms in place of torch.rand), coarse
    # network, alpha compositing with cumprod, searchsorted importance sampling, fine network,
    # img2mse / mse2psnr, two Adam steps
    embedder, NeRF, raw2outputs, sample_pdf = _nerf_helpers(torch)
    embed_fn, in_ch = embedder(4)
    embeddirs_fn, in_ch_views = embedder(2)
    coarse = set_weights(torch, NeRF(input_ch=in_ch, input_ch_views=in_ch_views), seed=100)
    fine = set_weights(torch, NeRF(input_ch=in_ch, input_ch_views=in_ch_views), seed=101)
    with torch.no_grad():
        coarse.alpha_linear.bias.fill_(0.3)
        fine.alpha_linear.bias.fill_(0.5)
    grad_vars = list(coarse.parameters()) + list(fine.parameters())
    opt = torch.optim.Adam(params=grad_vars, lr=5e-3, betas=(0.9, 0.999))
    n_rays, n_samples, n_importance, near, far = 6, 8, 8, 2.0, 6.0
    rays_o = torch.tensor(arr(102, n_rays, 3, scale=0.3)) + torch.tensor([0.0, 0.0, 4.0])
    rays_d = torch.tensor(arr(103, n_rays, 3, scale=0.2)) + torch.tensor([0.0, 0.0, -1.0])
    viewdirs = rays_d / torch.norm(rays_d, dim=-1, keepdim=True)
    target = torch.tensor(_uniform(104, n_rays, 3))
    img2mse = lambda x, y: torch.mean((x - y) ** 2)  # noqa: E731
    mse2psnr = lambda x: -10.0 * torch.log(x) / torch.log(torch.Tensor([10.0]))  # noqa: E731

    def run(model, pts, z_vals):
        dirs = viewdirs[:, None].expand(pts.shape)
        h = torch.cat([embed_fn(pts.reshape(-1, 3)), embeddirs_fn(dirs.reshape(-1, 3))], -1)
        raw = model(h).reshape(pts.shape[0], pts.shape[1], 4)
        return raw2outputs(raw, z_vals, rays_d)

    out = {"loss": [], "psnr": [], "z_fine": [], "inds": []}
    for step in range(2):
        t_vals = torch.linspace(0.0, 1.0, steps=n_samples)
        z_vals = near * (1.0 - t_vals) + far * t_vals
        z_vals = z_vals.expand([n_rays, n_samples])
        mids = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        upper = torch.cat([mids, z_vals[..., -1:]], -1)
        lower = torch.cat([z_vals[..., :1], mids], -1)
        t_rand = torch.tensor(_uniform(105 + step, n_rays, n_samples))
        z_vals = lower + (upper - lower) * t_rand
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        rgb0, disp0, acc0, weights, depth0 = run(coarse, pts, z_vals)
        z_vals_mid = 0.5 * (z_vals[..., 1:] + z_vals[..., :-1])
        u = torch.tensor(np.sort(_uniform(110 + step, n_rays, n_importance), -1))
        z_samples, inds = sample_pdf(z_vals_mid, weights[..., 1:-1], n_importance, u)
        z_samples = z_samples.detach()
        z_vals_f, _ = torch.sort(torch.cat([z_vals, z_samples], -1), -1)
        pts_f = rays_o[..., None, :] + rays_d[..., None, :] * z_vals_f[..., :, None]
        rgb, disp, acc, weights_f, depth = run(fine, pts_f, z_vals_f)
        opt.zero_grad()
        img_loss = img2mse(rgb, target)
        loss = img_loss + img2mse(rgb0, target)
        loss.backward()
        opt.step()
        out["loss"].append(loss.item())
        out["psnr"].append(mse2psnr(img_loss))
        out["z_fine"].append(z_vals_f)
        out["inds"].append(inds)
        if step == 0:
            out["first"] = {"rgb0": rgb0, "disp0": disp0, "acc0": acc0, "weights": weights,
                            "depth": depth, "rgb": rgb, "acc": acc, "weights_f": weights_f}  # fmt: skip
    out["grads"] = {k: v for k, v in grads(fine).items() if "linear" in k and "weight" in k}
    out["enc"] = embed_fn(rays_o[:2])
    return out


@program(rtol=5e-4, atol=5e-5)
def camera_rays_box_sphere_projection(torch):
    # get_rays from intrinsics and a look-at camera-to-world matrix (OpenGL convention), ray-AABB
    # slab test for near/far, analytic ray-sphere hits with Lambert shading differentiated to the
    # sphere, projection of hit points back to pixels with K and inv(c2w)
    F = torch.nn.functional
    H, W, focal = 8, 10, 14.0
    K = torch.tensor([[focal, 0, 0.5 * W], [0, focal, 0.5 * H], [0, 0, 1]])
    eye, at, up = (
        torch.tensor([2.5, 1.5, 3.5]),
        torch.tensor([0.1, -0.05, 0.0]),
        torch.tensor([0.0, 1.0, 0.0]),
    )
    forward = F.normalize(eye - at, dim=0)  # camera looks along -z
    right = F.normalize(torch.linalg.cross(up, forward), dim=0)
    true_up = torch.linalg.cross(forward, right)
    c2w = torch.eye(4)
    c2w[:3, :3] = torch.stack([right, true_up, forward], 1)
    c2w[:3, 3] = eye
    i, j = torch.meshgrid(torch.linspace(0, W - 1, W), torch.linspace(0, H - 1, H), indexing="ij")
    i, j = i.t(), j.t()
    dirs = torch.stack([(i - K[0][2]) / K[0][0], -(j - K[1][2]) / K[1][1], -torch.ones_like(i)], -1)
    rays_d = torch.sum(dirs[..., np.newaxis, :] * c2w[:3, :3], -1)
    rays_o = c2w[:3, -1].expand(rays_d.shape)
    rays_d_n = rays_d / rays_d.norm(dim=-1, keepdim=True)

    box_min, box_max = torch.tensor([-0.6, -0.5, -0.7]), torch.tensor([0.7, 0.6, 0.5])
    inv_d = 1.0 / rays_d_n
    t0, t1 = (box_min - rays_o) * inv_d, (box_max - rays_o) * inv_d
    t_near = torch.minimum(t0, t1).amax(-1).clamp(min=0.0)
    t_far = torch.maximum(t0, t1).amin(-1)
    box_hit = t_far > t_near
    near = torch.where(box_hit, t_near, torch.full_like(t_near, 2.0))
    far = torch.where(box_hit, t_far, torch.full_like(t_far, 6.0))

    center = torch.tensor([0.1, 0.0, -0.1], requires_grad=True)
    radius = torch.tensor(0.55, requires_grad=True)
    focal_t = torch.tensor(focal, requires_grad=True)
    oc = rays_o - center
    b = (oc * rays_d_n).sum(-1)
    c = (oc * oc).sum(-1) - radius**2
    disc = b * b - c
    sphere_hit = disc > 0
    t_hit = -b - torch.sqrt(disc.clamp(min=1e-12))
    p = rays_o + t_hit[..., None] * rays_d_n
    n = F.normalize(p - center, dim=-1)
    light = F.normalize(torch.tensor([1.0, 1.0, 1.0]), dim=0)
    shade = torch.where(sphere_hit, (n * light).sum(-1).clamp(min=0.0), torch.zeros_like(t_hit))
    depth = torch.where(sphere_hit, t_hit, torch.zeros_like(t_hit))
    w2c = torch.linalg.inv(c2w)
    p_cam = p @ w2c[:3, :3].t() + w2c[:3, 3]
    Kt = torch.stack([torch.stack([focal_t, torch.tensor(0.0), torch.tensor(0.5 * W)]),
                      torch.stack([torch.tensor(0.0), focal_t, torch.tensor(0.5 * H)]),
                      torch.tensor([0.0, 0.0, 1.0])])  # fmt: skip
    uvw = torch.stack([p_cam[..., 0], -p_cam[..., 1], -p_cam[..., 2]], -1) @ Kt.t()
    uv = uvw[..., :2] / uvw[..., 2:]
    pix = torch.stack([i, j], -1)
    reproj = torch.where(sphere_hit[..., None], uv - pix, torch.zeros_like(uv))
    loss = shade.sum() + 0.1 * depth.sum() + (uv[sphere_hit] ** 2).mean() * 1e-3
    loss.backward()
    margin = (t_far - t_near).abs().min()
    return {"rays_d": rays_d, "near": near, "far": far, "box_hit": box_hit, "sphere_hit": sphere_hit,
            "shade": shade, "depth": depth, "reproj_ok": reproj.abs().max() < 1e-3,
            "uv": torch.where(sphere_hit[..., None], uv, torch.zeros_like(uv)),
            "center_grad": center.grad, "radius_grad": radius.grad, "focal_grad": focal_t.grad,
            "w2c": w2c, "margin_ok": margin > 1e-3, "disc_min": disc.abs().min() > 1e-3}  # fmt: skip
