"""Video understanding models as PyTorchVideo, mmaction2 and timm write them: a C3D stem of
``Conv3d`` / ``BatchNorm3d`` / ``MaxPool3d`` trained a few steps, I3D's inflation of 2-D kernels
into 3-D ones, R(2+1)D's factorised spatial-then-temporal convolutions with the parameter-matching
mid-channel count, the temporal shift module (zero-padded shifts by slicing and ``cat``, the
in-place form and the cyclic ``roll``), SlowFast pathways fused by time-strided lateral
convolutions, TimeSformer's divided space-time attention through einops-style reshapes, ViViT
tubelet embeddings with temporally interpolated position embeddings, X3D's channel-wise convs with
squeeze-excitation, a non-local block, TSN/TSM frame-sampling index arithmetic and segment
consensus, video mixup/cutmix with fixed lambdas, and clip-level losses with top-k and mean-class
accuracy. Every name starts with ``vidm_``."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


def _video(torch, seed, n=2, c=3, t=4, h=8, w=8, scale=1.0):
    """A batch of clips in the ``(N, C, T, H, W)`` layout of 3-D CNNs."""
    return torch.tensor(arr(seed, n, c, t, h, w, scale=scale))


def _top_k_accuracy(torch, output, target, topk=(1,)):
    """The ImageNet-example / timm ``accuracy`` helper, as video repos copy it."""
    maxk = min(max(topk), output.size(1))
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[: min(k, maxk)].reshape(-1).float().sum(0) * 100.0 / batch_size for k in topk]


@program(rtol=1e-3, atol=1e-4)  # batch-norm statistics over 3-D volumes: float32 summation order
def vidm_c3d_stem_sgd_training(torch):
    """A C3D-style network (``Conv3d(3x3x3)`` / ``BatchNorm3d`` / ``ReLU``, ``MaxPool3d((1, 2,
    2))`` keeping time in the first pool then ``(2, 2, 2)``, ``AdaptiveAvgPool3d(1)``, dropout with
    p=0 and a linear head) trained three steps with SGD + momentum + weight decay and gradient-norm
    clipping; losses, clipped norms, running BN statistics and the eval-mode logits."""
    nn = torch.nn

    class C3D(nn.Module):
        def __init__(self, num_classes=5):
            super().__init__()
            self.conv1 = nn.Conv3d(3, 4, kernel_size=3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm3d(4)
            self.pool1 = nn.MaxPool3d(kernel_size=(1, 2, 2), stride=(1, 2, 2))
            self.conv2 = nn.Conv3d(4, 6, kernel_size=(3, 3, 3), padding=(1, 1, 1), bias=False)
            self.bn2 = nn.BatchNorm3d(6)
            self.pool2 = nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2))
            self.avgpool = nn.AdaptiveAvgPool3d((1, 1, 1))
            self.dropout = nn.Dropout(p=0.0)
            self.fc = nn.Linear(6, num_classes)

        def forward(self, x):
            x = self.pool1(torch.relu(self.bn1(self.conv1(x))))
            x = self.pool2(torch.relu(self.bn2(self.conv2(x))))
            x = self.avgpool(x).flatten(1)
            return self.fc(self.dropout(x))

    model = set_weights(torch, C3D(), seed=11)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    clips = _video(torch, 12, n=4, t=4, h=8, w=8)
    labels = torch.tensor(np.array([0, 3, 1, 4]))
    losses, norms = [], []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(clips), labels)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
        opt.step()
        losses.append(loss.detach())
    model.eval()
    with torch.no_grad():
        logits = model(clips)
    return {"losses": losses, "norms": norms, "bn1_mean": model.bn1.running_mean,
            "bn2_var": model.bn2.running_var, "tracked": model.bn1.num_batches_tracked,
            "eval_logits": logits, "fc_weight": model.fc.weight}  # fmt: skip


@program
def vidm_i3d_inflated_kernels_and_inception_branches(torch):
    """I3D's inflation: a 2-D ImageNet kernel repeated ``T`` times along time and divided by ``T``
    so that a "boring" video (one frame repeated) gives the 2-D network's response at every time
    step; centre inflation (the kernel only at the middle time slice); and an Inception-style
    block of 1x1x1 / 3x3x3 / pooled branches concatenated on channels, with gradients."""
    F = torch.nn.functional
    w2d = torch.tensor(arr(21, 4, 3, 3, 3, scale=0.3))
    b = torch.tensor(arr(22, 4, scale=0.1))
    frame = torch.tensor(arr(23, 2, 3, 6, 6))
    t_k = 3
    w_mean = w2d.unsqueeze(2).repeat(1, 1, t_k, 1, 1) / t_k
    w_centre = torch.zeros(4, 3, t_k, 3, 3)
    w_centre[:, :, t_k // 2] = w2d
    boring = frame.unsqueeze(2).expand(-1, -1, 5, -1, -1).contiguous()
    y2d = F.conv2d(frame, w2d, b, padding=1)
    y_mean = F.conv3d(boring, w_mean, b, padding=(0, 1, 1))
    y_centre = F.conv3d(boring, w_centre, b, padding=(1, 1, 1))
    boring_err = (y_mean - y2d.unsqueeze(2)).abs().max()

    nn = torch.nn

    class Unit3D(nn.Module):
        def __init__(self, cin, cout, k):
            super().__init__()
            self.conv3d = nn.Conv3d(cin, cout, k, padding=k // 2, bias=False)
            self.bn = nn.BatchNorm3d(cout, eps=1e-3, momentum=0.01)

        def forward(self, x):
            return F.relu(self.bn(self.conv3d(x)))

    class InceptionModule(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.b0 = Unit3D(cin, 2, 1)
            self.b1a, self.b1b = Unit3D(cin, 2, 1), Unit3D(2, 3, 3)
            self.b3 = Unit3D(cin, 2, 1)

        def forward(self, x):
            pooled = F.max_pool3d(x, kernel_size=3, stride=1, padding=1)
            return torch.cat([self.b0(x), self.b1b(self.b1a(x)), self.b3(pooled)], dim=1)

    block = set_weights(torch, InceptionModule(3), seed=24)
    x = _video(torch, 25, n=2, t=4, h=5, w=5).requires_grad_()
    out = block(x)
    (out.pow(2).mean() + out[:, 2:5].mean()).backward()
    return {"y2d": y2d[0, :, 2], "y_mean": y_mean[1, :, 2, 1], "y_centre": y_centre[:, 1, 2],
            "boring_err_small": bool(boring_err < 1e-4), "inception": out[0, :, 1, 2],
            "inception_shape": list(out.shape), "x_grad": x.grad[1, :, 2],
            "grads": grads(block)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # batch norm over (N, T, H, W) in the block: summation order
def vidm_r2plus1d_factorised_residual_block(torch):
    """R(2+1)D: a ``t x d x d`` convolution factorised into a ``1 x d x d`` spatial conv, BN, ReLU
    and a ``t x 1 x 1`` temporal conv, with the mid-channel count ``floor(t d^2 N_in N_out / (d^2
    N_in + t N_out))`` that matches the full 3-D conv's parameters; a residual basic block with a
    strided (2+1)D downsample and 1x1x1 projection shortcut; Adam steps on an MSE target."""
    nn = torch.nn

    def mid_channels(cin, cout, t=3, d=3):
        return math.floor((t * d * d * cin * cout) / (d * d * cin + t * cout))

    class Conv2Plus1D(nn.Sequential):
        def __init__(self, cin, cout, mid, stride=1):
            super().__init__(
                nn.Conv3d(cin, mid, kernel_size=(1, 3, 3), stride=(1, stride, stride),
                          padding=(0, 1, 1), bias=False),
                nn.BatchNorm3d(mid),
                nn.ReLU(inplace=True),
                nn.Conv3d(mid, cout, kernel_size=(3, 1, 1), stride=(stride, 1, 1),
                          padding=(1, 0, 0), bias=False),
            )  # fmt: skip

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            m = mid_channels(cin, cout)
            self.conv1 = nn.Sequential(Conv2Plus1D(cin, cout, m, stride), nn.BatchNorm3d(cout),
                                       nn.ReLU(inplace=True))  # fmt: skip
            self.conv2 = nn.Sequential(Conv2Plus1D(cout, cout, mid_channels(cout, cout)),
                                       nn.BatchNorm3d(cout))  # fmt: skip
            self.downsample = nn.Sequential(nn.Conv3d(cin, cout, 1, stride=stride, bias=False),
                                            nn.BatchNorm3d(cout))  # fmt: skip
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            residual = self.downsample(x)
            out = self.conv2(self.conv1(x))
            out += residual
            return self.relu(out)

    mids = [mid_channels(3, 4), mid_channels(4, 4), mid_channels(64, 64), mid_channels(3, 64)]
    block = set_weights(torch, BasicBlock(3, 4, stride=2), seed=31)
    opt = torch.optim.Adam(block.parameters(), lr=1e-2)
    x = _video(torch, 32, n=2, t=4, h=6, w=6)
    target = torch.tensor(arr(33, 2, 4, 2, 3, 3, scale=0.5)).relu()
    losses = []
    for _ in range(3):
        opt.zero_grad()
        out = block(x)
        loss = torch.nn.functional.mse_loss(out, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    n_params = sum(p.numel() for p in block.conv1[0].parameters())
    return {"mids": mids, "out_shape": list(out.shape), "losses": losses, "out": out[1, :, 1],
            "n_params": n_params, "temporal_w": block.conv1[0][3].weight[:, :, :, 0, 0]}  # fmt: skip


@program
def vidm_tsm_temporal_shift_variants(torch):
    """The temporal shift module on ``(N*T, C, H, W)`` frame features: the zero-padded shift of
    1/8 of the channels back and 1/8 forward written with slicing and ``cat``, the in-place form
    into ``zeros_like`` (as the TSM repository writes it), the cyclic shift with ``torch.roll``, the
    residual shift inside a 2-D bottleneck, and the gradient through the shift (which is itself a
    shift)."""
    nn = torch.nn
    n_segment, fold_div = 4, 4
    x = torch.tensor(arr(41, 2 * n_segment, 8, 3, 3)).requires_grad_()

    def shift_cat(x):
        nt, c, h, w = x.size()
        v = x.view(nt // n_segment, n_segment, c, h, w)
        fold = c // fold_div
        left = torch.cat([v[:, 1:, :fold], torch.zeros_like(v[:, :1, :fold])], dim=1)
        right = torch.cat([torch.zeros_like(v[:, :1, fold:2 * fold]), v[:, :-1, fold:2 * fold]],
                          dim=1)  # fmt: skip
        return torch.cat([left, right, v[:, :, 2 * fold :]], dim=2).view(nt, c, h, w)

    def shift_inplace(x):
        nt, c, h, w = x.size()
        v = x.view(nt // n_segment, n_segment, c, h, w)
        fold = c // fold_div
        out = torch.zeros_like(v)
        out[:, :-1, :fold] = v[:, 1:, :fold]  # shift left
        out[:, 1:, fold : 2 * fold] = v[:, :-1, fold : 2 * fold]  # shift right
        out[:, :, 2 * fold :] = v[:, :, 2 * fold :]  # not shift
        return out.view(nt, c, h, w)

    def shift_roll(x):
        nt, c, h, w = x.size()
        v = x.view(-1, n_segment, c, h, w)
        fold = c // fold_div
        a, b, rest = v.split([fold, fold, c - 2 * fold], dim=2)
        return torch.cat([a.roll(-1, 1), b.roll(1, 1), rest], dim=2).flatten(0, 1)

    class TemporalShift(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(shift_inplace(x))

    class ShiftBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = TemporalShift(nn.Conv2d(c, c // 2, 1, bias=False))
            self.conv2 = nn.Conv2d(c // 2, c, 3, padding=1, bias=False)

        def forward(self, x):
            return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))

    a, b, r = shift_cat(x), shift_inplace(x), shift_roll(x)
    g = torch.tensor(arr(42, 2 * n_segment, 8, 3, 3))
    (gx,) = torch.autograd.grad(b, x, g)
    block = set_weights(torch, ShiftBlock(8), seed=43)
    y = block(x)
    y.sum().backward()
    return {"same": bool(torch.equal(a, b)), "shifted": a[:n_segment, :, 1, 1],
            "rolled": r[n_segment:, :, 0, 2], "grad_shift": gx[:n_segment, :4, 0, 0],
            "grad_is_reverse_shift": bool(torch.allclose(gx[1:n_segment, :2], g[:n_segment - 1, :2])),
            "block_out": y[3, :, 1], "x_grad": x.grad[5, :, 2],
            "conv1_grad": block.conv1.net.weight.grad.flatten()}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # batch norm over volumes in both pathways: summation order
def vidm_slowfast_lateral_connections(torch):
    """SlowFast: the fast pathway sees every frame with ``beta`` of the channels, the slow pathway
    every ``alpha``-th frame (``index_select`` on ``linspace`` indices as PyTorchVideo's
    ``PackPathway`` does); the fast features reach the slow ones through a ``(5, 1, 1)`` conv with
    time stride ``alpha`` and are concatenated; both pathways are pooled over their own
    ``(T, H, W)`` and their features concatenated for the head; two SGD steps."""
    nn = torch.nn
    F = nn.functional
    alpha, beta_inv, fusion_ratio = 4, 4, 2
    frames = _video(torch, 51, n=2, c=3, t=8, h=6, w=6)

    def pack_pathway(frames):
        fast = frames
        idx = torch.linspace(0, frames.shape[2] - 1, frames.shape[2] // alpha).long()
        slow = torch.index_select(frames, 2, idx)
        return [slow, fast], idx

    class SlowFast(nn.Module):
        def __init__(self, slow_c=8, num_classes=3):
            super().__init__()
            fast_c = slow_c // beta_inv
            self.slow_stem = nn.Conv3d(3, slow_c, (1, 3, 3), padding=(0, 1, 1), bias=False)
            self.fast_stem = nn.Conv3d(3, fast_c, (5, 3, 3), padding=(2, 1, 1), bias=False)
            self.slow_bn, self.fast_bn = nn.BatchNorm3d(slow_c), nn.BatchNorm3d(fast_c)
            self.fuse = nn.Conv3d(fast_c, fast_c * fusion_ratio, kernel_size=(5, 1, 1),
                                  stride=(alpha, 1, 1), padding=(2, 0, 0), bias=False)  # fmt: skip
            self.fuse_bn = nn.BatchNorm3d(fast_c * fusion_ratio)
            self.slow_res = nn.Conv3d(slow_c + fast_c * fusion_ratio, slow_c, (1, 3, 3),
                                      padding=(0, 1, 1))  # fmt: skip
            self.fast_res = nn.Conv3d(fast_c, fast_c, (3, 3, 3), padding=1)
            self.head = nn.Linear(slow_c + fast_c, num_classes)

        def forward(self, xs):
            slow = F.relu(self.slow_bn(self.slow_stem(xs[0])))
            fast = F.relu(self.fast_bn(self.fast_stem(xs[1])))
            lateral = F.relu(self.fuse_bn(self.fuse(fast)))
            slow = torch.cat([slow, lateral], 1)
            slow, fast = F.relu(self.slow_res(slow)), F.relu(self.fast_res(fast))
            pooled = [F.adaptive_avg_pool3d(p, 1).flatten(1) for p in (slow, fast)]
            return self.head(torch.cat(pooled, dim=1)), lateral

    (slow_in, fast_in), idx = pack_pathway(frames)
    model = set_weights(torch, SlowFast(), seed=52)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    labels = torch.tensor(np.array([2, 0]))
    losses = []
    for _ in range(2):
        opt.zero_grad()
        logits, lateral = model([slow_in, fast_in])
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"idx": idx, "slow_shape": list(slow_in.shape), "lateral_shape": list(lateral.shape),
            "losses": losses, "logits": logits, "lateral": lateral[0, :, :, 2, 3],
            "fuse_grad": model.fuse.weight.grad[:, :, :, 0, 0]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # attention softmax/matmul chains: float32 summation order
def vidm_timesformer_divided_space_time_attention(torch):
    """TimeSformer's divided attention block: patch tokens ``(B, 1 + T*N, D)`` with a class token;
    temporal attention over ``T`` per patch after the einops rearrange ``b (n t) d -> (b n) t d``
    written with ``reshape``/``permute``, a temporal FC, then spatial attention over ``N`` per
    frame with the class token repeated to every frame and averaged back, then the MLP; patch
    embedding by ``Conv2d`` on ``(B*T, C, H, W)`` plus space and time embeddings."""
    nn = torch.nn
    B, T, C, H, W, P, D, heads = 2, 3, 3, 8, 8, 4, 8, 2
    N = (H // P) * (W // P)

    class Attention(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads, self.scale = num_heads, (dim // num_heads) ** -0.5
            self.qkv = nn.Linear(dim, dim * 3)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            b, n, c = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.temporal_norm1 = nn.LayerNorm(D)
            self.temporal_attn = Attention(D, heads)
            self.temporal_fc = nn.Linear(D, D)
            self.norm1 = nn.LayerNorm(D)
            self.attn = Attention(D, heads)
            self.norm2 = nn.LayerNorm(D)
            self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

        def forward(self, x, b, t, w):
            num_spatial = (x.size(1) - 1) // t
            h = num_spatial // w
            # temporal: 'b (h w t) m -> (b h w) t m'
            xt = x[:, 1:]
            xt = xt.reshape(b, h, w, t, -1).reshape(b * h * w, t, -1)
            res_t = self.temporal_attn(self.temporal_norm1(xt))
            res_t = res_t.reshape(b, h * w * t, -1)
            res_t = self.temporal_fc(res_t)
            xt = x[:, 1:] + res_t
            # spatial: 'b (h w t) m -> (b t) (h w) m' with the class token per frame
            init_cls = x[:, 0:1]
            cls = init_cls.repeat(1, t, 1).reshape(b * t, -1).unsqueeze(1)
            xs = xt.reshape(b, h, w, t, -1).permute(0, 3, 1, 2, 4).reshape(b * t, h * w, -1)
            xs = torch.cat((cls, xs), 1)
            res_s = self.attn(self.norm1(xs))
            cls = res_s[:, 0].reshape(b, t, -1).mean(1, True)
            res_s = res_s[:, 1:].reshape(b, t, h, w, -1).permute(0, 2, 3, 1, 4)
            res_s = res_s.reshape(b, h * w * t, -1)
            x = torch.cat((init_cls, xt), 1) + torch.cat((cls, res_s), 1)
            return x + self.mlp(self.norm2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(C, D, kernel_size=P, stride=P)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.zeros(1, N + 1, D))
            self.time_embed = nn.Parameter(torch.zeros(1, T, D))
            self.block = Block()
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, 4)

        def forward(self, x):  # x: (B, C, T, H, W)
            b, _, t, _, _ = x.shape
            x = x.permute(0, 2, 1, 3, 4).reshape(b * t, C, H, W)
            x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (b t) n d
            w = W // P
            cls = self.cls_token.expand(x.size(0), -1, -1)
            x = torch.cat((cls, x), dim=1) + self.pos_embed
            cls_tokens = x[:b, 0, :].unsqueeze(1)
            x = x[:, 1:]
            # '(b t) n m -> (b n) t m', add time embedding, '(b n) t m -> b (n t) m'
            x = x.reshape(b, t, N, D).permute(0, 2, 1, 3).reshape(b * N, t, D)
            x = x + self.time_embed
            x = x.reshape(b, N * t, D)
            x = torch.cat((cls_tokens, x), dim=1)
            x = self.block(x, b, t, w)
            return self.head(self.norm(x)[:, 0]), x

    model = set_weights(torch, Model(), seed=61, scale=0.3)
    clips = _video(torch, 62, n=B, c=C, t=T, h=H, w=W)
    logits, tokens = model(clips)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(np.array([1, 3])))
    loss.backward()
    return {"logits": logits, "tokens_shape": list(tokens.shape), "tokens": tokens[1, :5, :4],
            "loss": loss, "grad_time_embed": model.time_embed.grad,
            "grad_cls": model.cls_token.grad,
            "grad_temporal_fc": model.block.temporal_fc.weight.grad[:3]}  # fmt: skip


@program
def vidm_frame_sampling_index_math(torch):
    """Frame-sampling index arithmetic of mmaction2 / PyTorchVideo on tensors: TSN's segment-based
    sampling (train offsets from fixed random numbers, test at segment centres), dense sampling with
    a stride and clip starts on ``linspace``, ``UniformTemporalSubsample``'s
    ``linspace(...).clamp(...).long()``, multi-clip test views, then gathering frames with
    ``index_select``, uint8 ``THWC`` to ``CTHW`` float with mean/std normalisation and a short-side
    resize by ``interpolate``."""
    F = torch.nn.functional
    total, num_segments = 23, 4
    seg_len = total / num_segments
    rand = torch.tensor(np.random.default_rng(71).random(num_segments).astype(np.float32))
    base = torch.arange(num_segments, dtype=torch.float32) * seg_len
    train_idx = (base + rand * seg_len).floor().long()
    test_idx = (base + seg_len / 2.0).long()
    clip_len, interval, num_clips = 4, 2, 3
    ori_clip_len = clip_len * interval
    starts = torch.linspace(0, total - ori_clip_len, num_clips).round().long()
    dense = starts[:, None] + torch.arange(clip_len)[None] * interval
    dense = torch.remainder(dense, total)
    uniform = torch.linspace(0, total - 1, 6).clamp(0, total - 1).long()
    tiny_total = 3  # fewer frames than wanted: indices repeat
    uniform_short = torch.linspace(0, tiny_total - 1, 8).clamp(0, tiny_total - 1).long()
    wrapped = torch.arange(10) % tiny_total

    raw = np.random.default_rng(72).integers(0, 256, (total, 6, 8, 3)).astype(np.uint8)
    video = torch.from_numpy(raw)  # T H W C uint8
    clip = video.index_select(0, test_idx)
    clip = clip.permute(3, 0, 1, 2).float() / 255.0  # C T H W
    mean = torch.tensor([0.45, 0.45, 0.45])
    std = torch.tensor([0.225, 0.225, 0.225])
    clip = (clip - mean[:, None, None, None]) / std[:, None, None, None]
    short = min(clip.shape[-2:])
    size = (round(clip.shape[-2] * 4 / short), round(clip.shape[-1] * 4 / short))
    resized = F.interpolate(clip, size=size, mode="bilinear", align_corners=False)
    views = video[dense.flatten()].reshape(num_clips, clip_len, 6, 8, 3)
    return {"train_idx": train_idx, "test_idx": test_idx, "starts": starts, "dense": dense,
            "uniform": uniform, "uniform_short": uniform_short, "wrapped": wrapped,
            "clip": clip[:, 1, 2], "resized_shape": list(resized.shape),
            "resized": resized[2, 3], "views_sum": views.sum(dtype=torch.int64),
            "views_dtype": str(views.dtype)}  # fmt: skip


@program
def vidm_tsn_segment_consensus_training(torch):
    """TSN: a 2-D backbone over ``(N * num_segments, C, H, W)`` frames, logits reshaped to ``(N,
    num_segments, classes)`` and fused by average consensus (``mean(1, keepdim=True)`` then
    ``squeeze(1)``), max consensus and softmax-then-average at test time; partial BN (only the
    first BN layer trains, the others frozen in eval mode), and SGD steps with gradients."""
    nn = torch.nn
    num_segments, n, num_classes = 3, 2, 4

    class TSN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(4)
            self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1)
            self.bn2 = nn.BatchNorm2d(6)
            self.fc = nn.Linear(6, num_classes)

        def train(self, mode=True):
            super().train(mode)
            if mode:  # partial BN: freeze every BN but the first
                for m in [self.bn2]:
                    m.eval()
                    m.weight.requires_grad_(False)
                    m.bias.requires_grad_(False)
            return self

        def forward(self, x, consensus="avg"):
            x = x.view((-1, 3) + x.size()[-2:])
            x = torch.relu(self.bn1(self.conv1(x)))
            x = torch.relu(self.bn2(self.conv2(x)))
            x = self.fc(x.mean(dim=(2, 3)))
            x = x.view((-1, num_segments) + x.size()[1:])
            if consensus == "avg":
                return x.mean(dim=1, keepdim=True).squeeze(1)
            if consensus == "max":
                return x.max(dim=1, keepdim=True)[0].squeeze(1)
            return x.softmax(dim=2).mean(dim=1)

    model = set_weights(torch, TSN(), seed=81)
    with torch.no_grad():
        model.bn2.running_mean.copy_(torch.tensor(arr(82, 6, scale=0.1)))
        model.bn2.running_var.fill_(1.5)
    model.train()
    frames = torch.tensor(arr(83, n, num_segments * 3, 6, 6))
    labels = torch.tensor(np.array([1, 3]))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1,
                          momentum=0.9)  # fmt: skip
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(frames), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        out = {c: model(frames, c) for c in ("avg", "max", "prob")}
    return {"losses": losses, "consensus": out, "bn1_mean": model.bn1.running_mean,
            "bn2_mean": model.bn2.running_mean, "bn2_grad_none": model.bn2.weight.grad is None,
            "conv1_b": model.conv1.bias}  # fmt: skip


@program
def vidm_mixup_cutmix_fixed_lambda(torch):
    """Video mixup and cutmix as mmaction2's blending classes write them, with fixed lambdas and a
    fixed permutation: mixup of whole clips and one-hot labels, cutmix of a box shared by every
    frame (``rand_bbox`` from ``sqrt(1 - lam)``, clamped, lambda re-computed from the box area),
    soft-target cross entropy with label smoothing, and the gradient w.r.t. the logits."""
    F = torch.nn.functional
    n, num_classes = 4, 5
    imgs = _video(torch, 91, n=n, c=3, t=3, h=8, w=10)
    label = torch.tensor(np.array([0, 2, 4, 2]))
    one_hot = F.one_hot(label, num_classes=num_classes).float()
    perm = torch.tensor(np.array([2, 0, 3, 1]))

    lam = 0.7
    mixed_imgs = lam * imgs + (1 - lam) * imgs[perm, :]
    mixed_label = lam * one_hot + (1 - lam) * one_hot[perm, :]

    def rand_bbox(img_size, lam, cx, cy):
        w, h = img_size[-1], img_size[-2]
        cut_rat = torch.sqrt(1.0 - lam)
        cut_w = torch.tensor(int(w * cut_rat))
        cut_h = torch.tensor(int(h * cut_rat))
        bbx1 = torch.clamp(cx - cut_w // 2, 0, w)
        bby1 = torch.clamp(cy - cut_h // 2, 0, h)
        bbx2 = torch.clamp(cx + cut_w // 2, 0, w)
        bby2 = torch.clamp(cy + cut_h // 2, 0, h)
        return bbx1, bby1, bbx2, bby2

    lam_c = torch.tensor(0.6)
    bbx1, bby1, bbx2, bby2 = rand_bbox(imgs.size(), lam_c, torch.tensor(8), torch.tensor(1))
    cut = imgs.clone()
    cut[..., bby1:bby2, bbx1:bbx2] = imgs[perm, ..., bby1:bby2, bbx1:bbx2]
    lam_c = 1 - (1.0 * (bbx2 - bbx1) * (bby2 - bby1) / (imgs.size()[-1] * imgs.size()[-2]))
    cut_label = lam_c * one_hot + (1 - lam_c) * one_hot[perm, :]

    def smooth(target, eps=0.1):
        return target * (1 - eps) + eps / num_classes

    logits = torch.tensor(arr(92, n, num_classes), requires_grad=True)
    soft_ce = torch.sum(-smooth(mixed_label) * F.log_softmax(logits, dim=-1), dim=-1).mean()
    cut_ce = F.cross_entropy(logits, smooth(cut_label))
    hard_ls = F.cross_entropy(logits, label, label_smoothing=0.1)
    (soft_ce + cut_ce).backward()
    return {"mixed_imgs": mixed_imgs[1, :, 2, 3], "mixed_label": mixed_label,
            "box": torch.stack([bbx1, bby1, bbx2, bby2]), "lam_c": lam_c,
            "box_from_partner": bool(torch.equal(cut[0, :, :, bby1:bby2, bbx1:bbx2],
                                                 imgs[2, :, :, bby1:bby2, bbx1:bbx2])),
            "cut": cut[0, 1, :, 1, 6:], "cut_label": cut_label, "soft_ce": soft_ce,
            "cut_ce": cut_ce, "hard_ls": hard_ls, "logit_grad": logits.grad}  # fmt: skip


@program
def vidm_clip_level_losses_and_topk_accuracy(torch):
    """Evaluation as video repos do it: several clips per video averaged (``view(num_videos,
    num_clips, -1).mean(1)`` on softmax scores and on logits), top-1/top-5 accuracy by ``topk`` on
    the transposed predictions, mean class accuracy from a confusion matrix built by ``bincount``,
    multi-label BCE with ``pos_weight`` (for AVA-style actions), and a label-smoothed clip-level
    loss with class weights."""
    F = torch.nn.functional
    num_videos, num_clips, num_classes = 6, 3, 7
    clip_logits = torch.tensor(arr(101, num_videos * num_clips, num_classes, scale=2.0))
    labels = torch.tensor(ints(102, num_classes, num_videos))
    scores = F.softmax(clip_logits, dim=1).view(num_videos, num_clips, -1).mean(1)
    logit_avg = clip_logits.view(num_videos, num_clips, -1).mean(dim=1)
    top1, top5 = _top_k_accuracy(torch, scores, labels, topk=(1, 5))
    clip_top1 = _top_k_accuracy(torch, clip_logits, labels.repeat_interleave(num_clips))[0]
    pred = scores.argmax(1)
    conf = torch.bincount(labels * num_classes + pred, minlength=num_classes**2)
    conf = conf.reshape(num_classes, num_classes)
    support = conf.sum(1)
    per_class = conf.diag().float() / support.clamp(min=1).float()
    mean_class_acc = per_class[support > 0].mean()
    multi = torch.tensor((arr(103, num_videos, num_classes) > 0.8).astype(np.float32))
    logits = logit_avg.clone().requires_grad_()
    bce = F.binary_cross_entropy_with_logits(logits, multi, pos_weight=torch.full((num_classes,),
                                             3.0))  # fmt: skip
    weights = torch.linspace(0.5, 1.5, num_classes)
    ce = F.cross_entropy(logits, labels, weight=weights, label_smoothing=0.2)
    (bce + ce).backward()
    return {"scores": scores, "logit_avg": logit_avg, "top1": top1, "top5": top5,
            "clip_top1": clip_top1, "confusion": conf, "per_class": per_class,
            "mean_class_acc": mean_class_acc, "bce": bce, "ce": ce,
            "grad": logits.grad}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # batch norm and SE pooling over volumes: summation order
def vidm_x3d_channelwise_conv_squeeze_excitation(torch):
    """An X3D bottleneck: ``1x1x1`` expansion, a channel-wise (``groups=channels``) ``3x3x3``
    conv, squeeze-excitation with ``AdaptiveAvgPool3d`` and a rounded reduced width, Swish
    (``x * sigmoid(x)``) written by hand next to ``nn.SiLU``, a ``1x1x1`` projection and the
    residual; two AdamW steps."""
    nn = torch.nn

    def round_width(width, multiplier, min_width=8, divisor=8):
        width *= multiplier
        width_out = max(min_width, int(width + divisor / 2) // divisor * divisor)
        if width_out < 0.9 * width:
            width_out += divisor
        return int(width_out)

    class Swish(nn.Module):
        def forward(self, x):
            return x * torch.sigmoid(x)

    class SE(nn.Module):
        def __init__(self, c, ratio):
            super().__init__()
            mid = round_width(c, ratio)
            self.avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
            self.fc1 = nn.Conv3d(c, mid, 1, bias=True)
            self.fc2 = nn.Conv3d(mid, c, 1, bias=True)

        def forward(self, x):
            s = self.fc2(torch.relu(self.fc1(self.avg_pool(x))))
            return x * s.sigmoid()

    class X3DBottleneck(nn.Module):
        def __init__(self, c=4, inner=12):
            super().__init__()
            self.a = nn.Conv3d(c, inner, 1, bias=False)
            self.a_bn = nn.BatchNorm3d(inner)
            self.b = nn.Conv3d(inner, inner, 3, padding=1, groups=inner, bias=False)
            self.b_bn = nn.BatchNorm3d(inner)
            self.se = SE(inner, 0.0625)
            self.swish = Swish()
            self.c = nn.Conv3d(inner, c, 1, bias=False)
            self.c_bn = nn.BatchNorm3d(c)

        def forward(self, x):
            y = nn.functional.relu(self.a_bn(self.a(x)))
            y = self.swish(self.se(self.b_bn(self.b(y))))
            return nn.functional.relu(x + self.c_bn(self.c(y)))

    widths = [round_width(24, 2.0), round_width(12, 0.0625), round_width(432, 2.2),
              round_width(54, 1.0)]  # fmt: skip
    block = set_weights(torch, X3DBottleneck(), seed=111)
    x = _video(torch, 112, n=2, c=4, t=3, h=4, w=4)
    silu_gap = (block.swish(x) - nn.SiLU()(x)).abs().max()
    opt = torch.optim.AdamW(block.parameters(), lr=1e-2, weight_decay=0.05)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        out = block(x)
        loss = (out - 0.5).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"widths": widths, "silu_gap_small": bool(silu_gap < 1e-6), "losses": losses,
            "out": out[0, :, 1, 2], "dw_grad": block.b.weight.grad[:4, 0, 1],
            "se_fc1": block.se.fc1.weight[:, :3, 0, 0, 0]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # THW x THW attention matmuls: float32 summation order
def vidm_nonlocal_block_embedded_gaussian(torch):
    """The non-local block (embedded Gaussian) on ``(N, C, T, H, W)`` features as in mmaction2 /
    the Non-local paper: ``theta``/``phi``/``g`` as ``1x1x1`` convs, ``phi`` and ``g`` subsampled
    by ``MaxPool3d((1, 2, 2))``, the pairwise ``(THW x T'H'W')`` affinity scaled by
    ``inter_channels ** -0.5`` and softmaxed, the output projected, zero-initialised BN-less
    residual ``out = x + W(y)``, and gradients."""
    nn = torch.nn

    class NonLocal3d(nn.Module):
        def __init__(self, c, reduction=2):
            super().__init__()
            self.inter = c // reduction
            self.g = nn.Conv3d(c, self.inter, 1)
            self.theta = nn.Conv3d(c, self.inter, 1)
            self.phi = nn.Conv3d(c, self.inter, 1)
            self.conv_out = nn.Conv3d(self.inter, c, 1)
            self.pool = nn.MaxPool3d(kernel_size=(1, 2, 2))

        def forward(self, x):
            n = x.size(0)
            g_x = self.pool(self.g(x)).view(n, self.inter, -1).permute(0, 2, 1)
            theta_x = self.theta(x).view(n, self.inter, -1).permute(0, 2, 1)
            phi_x = self.pool(self.phi(x)).view(n, self.inter, -1)
            pairwise = torch.matmul(theta_x, phi_x) / self.inter**0.5
            pairwise = pairwise.softmax(dim=-1)
            y = torch.matmul(pairwise, g_x)
            y = y.permute(0, 2, 1).contiguous().reshape(n, self.inter, *x.size()[2:])
            return x + self.conv_out(y), pairwise

    block = set_weights(torch, NonLocal3d(6), seed=121)
    zero_init = NonLocal3d(6)
    set_weights(torch, zero_init, seed=121)
    nn.init.constant_(zero_init.conv_out.weight, 0)
    nn.init.constant_(zero_init.conv_out.bias, 0)
    x = _video(torch, 122, n=2, c=6, t=2, h=4, w=4).requires_grad_()
    out, pairwise = block(x)
    identity, _ = zero_init(x)
    (out * torch.tensor(arr(123, 2, 6, 2, 4, 4))).sum().backward()
    return {"out": out[1, :, 1, 2], "pairwise_shape": list(pairwise.shape),
            "pairwise_rows": pairwise[0, :3], "row_sums": pairwise.sum(-1)[1, :5],
            "identity": bool(torch.equal(identity, x)), "x_grad": x.grad[0, :, 0, 1],
            "theta_grad": block.theta.weight.grad.flatten()[:9],
            "phi_grad": block.phi.bias.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # attention and interpolation chains: float32 summation order
def vidm_vivit_tubelet_embedding_and_time_interp(torch):
    """ViViT / VideoMAE tubelet embedding: a ``Conv3d`` with ``kernel_size = stride = (2, P, P)``,
    ``flatten(2).transpose(1, 2)`` to tokens, fixed sinusoidal position tables (VideoMAE's
    ``get_sinusoid_encoding_table``), a learned time embedding stretched to more frames with
    ``interpolate(mode='linear')`` as when fine-tuning on longer clips, tube masking by a fixed
    permutation, and a ``TransformerEncoderLayer`` over the visible tokens with mean pooling."""
    nn = torch.nn
    F = nn.functional
    B, C, T, H, W, P, D = 2, 3, 4, 8, 8, 4, 8
    embed = nn.Conv3d(C, D, kernel_size=(2, P, P), stride=(2, P, P))
    set_weights(torch, embed, seed=131)
    clips = _video(torch, 132, n=B, c=C, t=T, h=H, w=W)
    tokens = embed(clips).flatten(2).transpose(1, 2)  # B, (T/2 * H/P * W/P), D
    n_tok = tokens.shape[1]

    def sinusoid_table(n_position, d_hid):
        pos = torch.arange(n_position, dtype=torch.float64)[:, None]
        j = torch.arange(d_hid)[None]
        angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), 2 * (j // 2) / d_hid)
        table = torch.zeros(n_position, d_hid, dtype=torch.float64)
        table[:, 0::2] = torch.sin(angle[:, 0::2])
        table[:, 1::2] = torch.cos(angle[:, 1::2])
        return table.float().unsqueeze(0)

    table = sinusoid_table(n_tok, D)
    x = tokens + table
    time_embed = torch.tensor(arr(133, 1, 2, D, scale=0.5))
    stretched = F.interpolate(time_embed.transpose(1, 2), size=4, mode="linear",
                              align_corners=False).transpose(1, 2)  # fmt: skip
    stretched_ac = F.interpolate(time_embed.transpose(1, 2), size=5, mode="linear",
                                 align_corners=True).transpose(1, 2)  # fmt: skip
    per_frame = n_tok // 2
    x = x + time_embed.repeat_interleave(per_frame, dim=1)
    keep = torch.tensor(np.random.default_rng(134).permutation(per_frame)[: per_frame // 2])
    keep_all = torch.cat([keep + t * per_frame for t in range(2)])  # the same tube every frame
    visible = x[:, keep_all]
    layer = nn.TransformerEncoderLayer(D, nhead=2, dim_feedforward=16, dropout=0.0,
                                       batch_first=True, norm_first=True)  # fmt: skip
    set_weights(torch, layer, seed=135, scale=0.3)
    enc = layer(visible)
    pooled = enc.mean(1)
    pooled.pow(2).sum().backward()
    return {"tokens_shape": list(tokens.shape), "tokens": tokens[0, :3], "table": table[0, :3],
            "stretched": stretched, "stretched_ac": stretched_ac, "keep_all": keep_all,
            "pooled": pooled, "embed_grad": embed.weight.grad[:2, :, 1, 0],
            "embed_bias_grad": embed.bias.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # LSTM recurrences over frames: float32 summation order
def vidm_lrcn_frame_cnn_lstm_packed_lengths(torch):
    """LRCN-style recognition: a 2-D CNN applied to every frame by folding time into the batch
    (``x.view(b * t, c, h, w)``), features unfolded back to ``(B, T, F)``, videos of different
    lengths packed with ``pack_padded_sequence`` (``enforce_sorted=False``) into an ``LSTM``, the
    last valid hidden state classified, and the padded outputs' masked temporal mean; gradients
    of the LSTM and CNN."""
    nn = torch.nn
    rnn_utils = nn.utils.rnn

    class LRCN(nn.Module):
        def __init__(self, hidden=6, num_classes=3):
            super().__init__()
            self.cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten())  # fmt: skip
            self.lstm = nn.LSTM(4, hidden, batch_first=True)
            self.fc = nn.Linear(hidden, num_classes)

        def forward(self, x, lengths):
            b, t, c, h, w = x.shape
            feats = self.cnn(x.view(b * t, c, h, w)).view(b, t, -1)
            packed = rnn_utils.pack_padded_sequence(feats, lengths, batch_first=True,
                                                    enforce_sorted=False)  # fmt: skip
            out, (h_n, _) = self.lstm(packed)
            padded, out_lens = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=t)
            mask = (torch.arange(t)[None, :] < out_lens[:, None]).unsqueeze(-1).float()
            mean = (padded * mask).sum(1) / mask.sum(1)
            return self.fc(h_n[-1]), mean, padded

    model = set_weights(torch, LRCN(), seed=141)
    x = torch.tensor(arr(142, 3, 5, 3, 4, 4))
    lengths = torch.tensor(np.array([3, 5, 2]))
    logits, mean, padded = model(x, lengths)
    loss = (
        nn.functional.cross_entropy(logits, torch.tensor(np.array([0, 2, 1]))) + mean.pow(2).mean()
    )
    loss.backward()
    return {"logits": logits, "mean": mean, "padded_tail_zero": bool((padded[2, 2:] == 0).all()),
            "padded": padded[0], "loss": loss, "w_hh_grad": model.lstm.weight_hh_l0.grad[:4],
            "conv_grad": model.cnn[0].weight.grad[:, 0, 1]}  # fmt: skip


@program
def vidm_3d_pooling_variants_c3d_i3d(torch):
    """The 3-D pooling layers of video backbones: C3D's ``pool5`` (``(2, 2, 2)`` with spatial
    padding ``(0, 1, 1)``), ``ceil_mode`` max pooling over an odd temporal length, I3D's final
    ``AvgPool3d((2, 3, 3), stride=1)``, average pooling with padding excluded from the count,
    ``AdaptiveMaxPool3d`` / ``AdaptiveAvgPool3d`` to ``(T', 1, 1)`` (temporal-only outputs), and the
    gradients that flow back through each."""
    nn = torch.nn
    x = _video(torch, 151, n=2, c=3, t=5, h=7, w=7).requires_grad_()
    outs = {
        "pool5": nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 1, 1))(x),
        "ceil": nn.MaxPool3d(kernel_size=2, stride=2, ceil_mode=True)(x),
        "i3d_avg": nn.AvgPool3d(kernel_size=(2, 3, 3), stride=(1, 1, 1))(x),
        "avg_no_pad": nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False)(x),
        "avg_pad": nn.AvgPool3d(3, stride=2, padding=1)(x),
        "amax_t": nn.AdaptiveMaxPool3d((3, 1, 1))(x),
        "aavg_t": nn.AdaptiveAvgPool3d((None, 1, 1))(x),
    }
    total = sum((o * (i + 1)).mean() for i, o in enumerate(outs.values()))
    total.backward()
    return {"shapes": {k: list(v.shape) for k, v in outs.items()},
            "pool5": outs["pool5"][0, 1, 1], "ceil": outs["ceil"][1, 2, 2],
            "i3d_avg": outs["i3d_avg"][0, 0, 3], "avg_no_pad": outs["avg_no_pad"][1, :, 0],
            "avg_pad": outs["avg_pad"][1, :, 0], "amax_t": outs["amax_t"].flatten(2),
            "aavg_t": outs["aavg_t"].flatten(2), "x_grad": x.grad[0, 1, 4]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # windowed attention: float32 summation order
def vidm_video_swin_shifted_window_attention(torch):
    """Video Swin's 3-D shifted windows: ``window_partition`` of ``(B, D, H, W, C)`` into
    ``(wd, wh, ww)`` windows by ``view``/``permute``, the cyclic shift ``torch.roll(x, shifts=(-sd,
    -sh, -sw), dims=(1, 2, 3))``, the attention mask built by counting regions over slices of an
    ``img_mask`` and ``masked_fill(mask != 0, -100.0)``, a relative position bias gathered from a
    table by a precomputed index, window attention, reverse partition and roll back."""
    nn = torch.nn
    B, D, H, W, C, heads = 1, 4, 4, 4, 8, 2
    ws, ss = (2, 2, 2), (1, 1, 1)

    def window_partition(x, ws):
        b, d, h, w, c = x.shape
        x = x.view(b, d // ws[0], ws[0], h // ws[1], ws[1], w // ws[2], ws[2], c)
        return x.permute(0, 1, 3, 5, 2, 4, 6, 7).contiguous().view(-1, ws[0] * ws[1] * ws[2], c)

    def window_reverse(windows, ws, b, d, h, w):
        x = windows.view(b, d // ws[0], h // ws[1], w // ws[2], ws[0], ws[1], ws[2], -1)
        return x.permute(0, 1, 4, 2, 5, 3, 6, 7).contiguous().view(b, d, h, w, -1)

    def compute_mask(d, h, w, ws, ss):
        img_mask = torch.zeros((1, d, h, w, 1))
        cnt = 0
        for ds in (slice(-ws[0]), slice(-ws[0], -ss[0]), slice(-ss[0], None)):
            for hs in (slice(-ws[1]), slice(-ws[1], -ss[1]), slice(-ss[1], None)):
                for wsl in (slice(-ws[2]), slice(-ws[2], -ss[2]), slice(-ss[2], None)):
                    img_mask[:, ds, hs, wsl, :] = cnt
                    cnt += 1
        mask_windows = window_partition(img_mask, ws).squeeze(-1)
        attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
        return attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)

    class WindowAttention3D(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = (C // heads) ** -0.5
            n_rel = (2 * ws[0] - 1) * (2 * ws[1] - 1) * (2 * ws[2] - 1)
            self.relative_position_bias_table = nn.Parameter(torch.zeros(n_rel, heads))
            coords = torch.stack(torch.meshgrid(torch.arange(ws[0]), torch.arange(ws[1]),
                                                torch.arange(ws[2]), indexing="ij"))  # fmt: skip
            flat = torch.flatten(coords, 1)
            rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
            rel[:, :, 0] += ws[0] - 1
            rel[:, :, 1] += ws[1] - 1
            rel[:, :, 2] += ws[2] - 1
            rel[:, :, 0] *= (2 * ws[1] - 1) * (2 * ws[2] - 1)
            rel[:, :, 1] *= 2 * ws[2] - 1
            self.register_buffer("relative_position_index", rel.sum(-1))
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)

        def forward(self, x, mask=None):
            b_, n, c = x.shape
            qkv = self.qkv(x).reshape(b_, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q * self.scale) @ k.transpose(-2, -1)
            idx = self.relative_position_index[:n, :n].reshape(-1)
            bias = self.relative_position_bias_table[idx].reshape(n, n, -1)
            attn = attn + bias.permute(2, 0, 1).contiguous().unsqueeze(0)
            if mask is not None:
                nw = mask.shape[0]
                attn = attn.view(b_ // nw, nw, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, heads, n, n)
            attn = attn.softmax(dim=-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(b_, n, c)), attn

    attn_mod = set_weights(torch, WindowAttention3D(), seed=161, scale=0.3)
    x = torch.tensor(arr(162, B, D, H, W, C)).requires_grad_()
    mask = compute_mask(D, H, W, ws, ss)
    shifted = torch.roll(x, shifts=(-ss[0], -ss[1], -ss[2]), dims=(1, 2, 3))
    windows = window_partition(shifted, ws)
    out_w, attn = attn_mod(windows, mask)
    out = window_reverse(out_w.view(-1, *ws, C), ws, B, D, H, W)
    out = torch.roll(out, shifts=ss, dims=(1, 2, 3))
    (out.pow(2).sum() * 0.1).backward()
    return {"mask_unique": torch.unique(mask), "mask_nonzero": (mask != 0).sum(dim=(1, 2)),
            "rel_index": attn_mod.relative_position_index[:3], "attn": attn[-1, 1, :3],
            "out": out[0, 3, 1, 2], "x_grad": x.grad[0, 0, 0, :2],
            "table_grad": attn_mod.relative_position_bias_table.grad[:10]}  # fmt: skip


@program
def vidm_temporal_action_localization_heads(torch):
    """Temporal action localisation as BSN/BMN-style code writes it: snippet features rescaled to a
    fixed temporal length by ``interpolate(mode='linear')``, ``Conv1d`` start/end/actionness heads
    with sigmoids, a positive-ratio-weighted binary logistic loss, temporal IoU between proposals
    and ground truth by broadcasting, Soft-NMS with Gaussian decay and hard temporal NMS written as
    loops over ``argmax``/``torch.where``."""
    nn = torch.nn
    F = nn.functional
    feats = torch.tensor(arr(171, 2, 6, 13))
    feats = F.interpolate(feats, size=16, mode="linear", align_corners=True)

    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = nn.Sequential(nn.Conv1d(6, 8, 3, padding=1, groups=2), nn.ReLU())
            self.start = nn.Conv1d(8, 1, 1)
            self.end = nn.Conv1d(8, 1, 1)

        def forward(self, x):
            h = self.base(x)
            return torch.sigmoid(self.start(h)).squeeze(1), torch.sigmoid(self.end(h)).squeeze(1)

    def bi_loss(pred, gt, threshold=0.5):
        pmask = (gt > threshold).float()
        num_entries = pmask.numel()
        num_positive = max(torch.sum(pmask).item(), 1)
        ratio = num_entries / num_positive
        coef_0 = 0.5 * ratio / (ratio - 1)
        coef_1 = 0.5 * ratio
        eps = 1e-6
        loss_pos = coef_1 * torch.log(pred + eps) * pmask
        loss_neg = coef_0 * torch.log(1.0 - pred + eps) * (1.0 - pmask)
        return -torch.mean(loss_pos + loss_neg)

    heads = set_weights(torch, Heads(), seed=172)
    start, end = heads(feats)
    gt_start = torch.zeros(2, 16)
    gt_start[0, 3], gt_start[1, [5, 11]] = 1.0, 1.0
    gt_end = torch.roll(gt_start, 3, dims=1)
    loss = bi_loss(start, gt_start) + bi_loss(end, gt_end)
    loss.backward()

    def tiou(anchors, box):
        inter = torch.minimum(anchors[:, 1], box[1]) - torch.maximum(anchors[:, 0], box[0])
        inter = inter.clamp(min=0)
        union = (anchors[:, 1] - anchors[:, 0]) + (box[1] - box[0]) - inter
        return inter / union

    props = torch.tensor(np.array([[0.1, 0.4], [0.15, 0.45], [0.5, 0.9], [0.55, 0.8],
                                   [0.0, 0.2], [0.6, 0.95]], dtype=np.float32))  # fmt: skip
    scores = torch.tensor(np.array([0.9, 0.85, 0.7, 0.8, 0.3, 0.6], dtype=np.float32))
    gts = torch.tensor(np.array([[0.12, 0.42], [0.58, 0.9]], dtype=np.float32))
    iou_mat = torch.stack([tiou(props, g) for g in gts], dim=1)

    def soft_nms(props, scores, alpha=0.4, top_k=4):
        props, scores = props.clone(), scores.clone()
        keep_p, keep_s = [], []
        while len(keep_p) < top_k and scores.numel() > 0:
            i = int(scores.argmax())
            keep_p.append(props[i])
            keep_s.append(scores[i])
            ious = tiou(props, props[i])
            scores = scores * torch.exp(-(ious**2) / alpha)
            others = torch.arange(scores.numel()) != i
            props, scores = props[others], scores[others]
        return torch.stack(keep_p), torch.stack(keep_s)

    def hard_nms(props, scores, thr=0.5):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(int(i))
            ious = tiou(props[order[1:]], props[i])
            order = order[1:][torch.where(ious <= thr)[0]]
        return torch.tensor(keep)

    sp, ss = soft_nms(props, scores)
    return {"feats": feats[1, 2], "start": start[0], "end": end[1], "loss": loss,
            "base_grad": heads.base[0].weight.grad[:, :, 1], "iou": iou_mat,
            "best_gt": iou_mat.argmax(1), "soft_props": sp, "soft_scores": ss,
            "hard_keep": hard_nms(props, scores)}  # fmt: skip


@program
def vidm_sliding_window_clips_unfold_and_temporal_resize(torch):
    """Clip extraction and temporal resizing on feature/frame tensors: ``Tensor.unfold`` along time
    to get overlapping clips (``(C, T, H, W) -> (C, n_clips, H, W, L)``, then ``permute``), a short
    video padded by replicating its last frame with ``F.pad(mode='replicate')`` on ``(N, C, T, H,
    W)``, trilinear resampling of a feature volume to more frames, ``as_strided``-free frame
    differences (``x[:, :, 1:] - x[:, :, :-1]``) as the RGB-difference modality, and the mean of
    the clip scores with a gradient back to the frames."""
    F = torch.nn.functional
    video = _video(torch, 181, n=1, c=2, t=9, h=3, w=3)[0].requires_grad_()
    clip_len, stride = 4, 2
    clips = video.unfold(1, clip_len, stride)  # C, n_clips, H, W, L
    clips = clips.permute(1, 0, 4, 2, 3)  # n_clips, C, L, H, W
    short = _video(torch, 182, n=1, c=2, t=3, h=3, w=3)
    padded = F.pad(short, (0, 0, 0, 0, 0, 2), mode="replicate")
    padded_reflect = F.pad(short, (1, 1, 1, 1, 0, 0), mode="reflect")
    up = F.interpolate(short, size=(6, 3, 3), mode="trilinear", align_corners=False)
    up_ac = F.interpolate(short, scale_factor=(2, 1, 1), mode="trilinear", align_corners=True)
    near = F.interpolate(short, size=(5, 3, 3), mode="nearest")
    diff = clips[:, :, 1:] - clips[:, :, :-1]
    w = torch.tensor(arr(183, 2, scale=0.5))
    scores = (diff * w[None, :, None, None, None]).abs().mean(dim=(1, 2, 3, 4))
    scores.mean().backward()
    return {"clips_shape": list(clips.shape), "clips": clips[2, 1, :, 0], "padded": padded[0, 0, :, 1],
            "padded_reflect": padded_reflect[0, 1, 2], "up": up[0, 0, :, 1, 1],
            "up_ac": up_ac[0, 1, :, 2, 0], "near": near[0, 0, :, 0, 0], "scores": scores,
            "video_grad": video.grad[1, :, 1]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # stacked dilated convs over a masked sequence: summation order
def vidm_mstcn_action_segmentation_smoothing_loss(torch):
    """MS-TCN temporal action segmentation: stages of dilated residual ``Conv1d`` layers (dilation
    ``2**i``, padding = dilation) over frame features, padded frames masked out, each later stage
    refining the softmax of the previous one; the loss sums frame-wise cross entropy with
    ``ignore_index=-100`` and the truncated MSE smoothing term on log-probabilities of adjacent
    frames (``clamp(max=16)``, the previous frame detached); Adam with a linear-warmup then cosine
    schedule (``SequentialLR``) for a few steps."""
    nn = torch.nn
    F = nn.functional
    num_classes, dim, n_frames = 4, 5, 12

    class DilatedResidualLayer(nn.Module):
        def __init__(self, dilation, c):
            super().__init__()
            self.conv_dilated = nn.Conv1d(c, c, 3, padding=dilation, dilation=dilation)
            self.conv_1x1 = nn.Conv1d(c, c, 1)

        def forward(self, x, mask):
            out = self.conv_1x1(F.relu(self.conv_dilated(x)))
            return (x + out) * mask[:, 0:1, :]

    class SingleStage(nn.Module):
        def __init__(self, num_layers, c, cin, num_classes):
            super().__init__()
            self.conv_1x1 = nn.Conv1d(cin, c, 1)
            self.layers = nn.ModuleList([DilatedResidualLayer(2**i, c) for i in range(num_layers)])
            self.conv_out = nn.Conv1d(c, num_classes, 1)

        def forward(self, x, mask):
            out = self.conv_1x1(x)
            for layer in self.layers:
                out = layer(out, mask)
            return self.conv_out(out) * mask[:, 0:1, :]

    class MultiStage(nn.Module):
        def __init__(self, num_stages=2):
            super().__init__()
            self.stage1 = SingleStage(3, 6, dim, num_classes)
            self.stages = nn.ModuleList([SingleStage(3, 6, num_classes, num_classes)
                                         for _ in range(num_stages - 1)])  # fmt: skip

        def forward(self, x, mask):
            out = self.stage1(x, mask)
            outputs = out.unsqueeze(0)
            for s in self.stages:
                out = s(F.softmax(out, dim=1) * mask[:, 0:1, :], mask)
                outputs = torch.cat((outputs, out.unsqueeze(0)), dim=0)
            return outputs

    model = set_weights(torch, MultiStage(), seed=191, scale=0.3)
    feats = torch.tensor(arr(192, 2, dim, n_frames))
    mask = torch.ones(2, num_classes, n_frames)
    mask[1, :, 9:] = 0
    lab = ints(193, num_classes, 2, n_frames)
    lab[1, 9:] = -100
    labels = torch.tensor(lab)
    ce = nn.CrossEntropyLoss(ignore_index=-100)
    mse = nn.MSELoss(reduction="none")
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.2, total_iters=2)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3, eta_min=1e-4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    losses, lrs = [], []
    for _ in range(4):
        opt.zero_grad()
        predictions = model(feats, mask)
        loss = 0
        for p in predictions:
            loss += ce(p.transpose(2, 1).contiguous().view(-1, num_classes), labels.view(-1))
            smooth = mse(F.log_softmax(p[:, :, 1:], dim=1), F.log_softmax(p.detach()[:, :, :-1],
                                                                          dim=1))  # fmt: skip
            loss += 0.15 * torch.mean(torch.clamp(smooth, min=0, max=16) * mask[:, :, 1:])
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    _, predicted = torch.max(predictions[-1].data, 1)
    correct = ((predicted == labels).float() * mask[:, 0, :]).sum()
    return {"losses": losses, "lrs": lrs, "predicted": predicted, "correct": correct,
            "final": predictions[-1][1, :, 7],
            "dilated_w": model.stage1.layers[2].conv_dilated.weight[0, 0]}  # fmt: skip
