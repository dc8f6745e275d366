"""Vision code as timm, torchvision and kornia write it: ViT blocks with stochastic depth (fixed
masks) and LayerScale, Swin window attention (V1 and V2) with rolled windows and relative position
biases, torchvision's tensor transforms (crops, resizes, pads, colour jitter, equalize, affine and
perspective warps), timm's mixup/cutmix modes and soft-target losses, timm's ModelEmaV3 on a
channels_last model, kornia's rotation, quaternion and homography geometry, warps and image
gradients, kornia's losses and a Swin training step with AdamW and gradient clipping."""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


# ---------------------------------------------------------------------------------------- timm ViT


@program(rtol=5e-4, atol=5e-5)
def timm_vit_drop_path_layer_scale_qk_norm_agc(torch):
    nn, F = torch.nn, torch.nn.functional
    keep_rng = np.random.default_rng(5101)  # stands in for drop_path's bernoulli_

    def drop_path(x, drop_prob=0.0, training=False, scale_by_keep=True):
        if drop_prob == 0.0 or not training:
            return x
        keep_prob = 1 - drop_prob
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        keep = torch.from_numpy((keep_rng.random(x.shape[0]) < keep_prob).astype(np.float32))
        random_tensor = x.new_empty(shape).copy_(keep.view(shape))
        if keep_prob > 0.0 and scale_by_keep:
            random_tensor.div_(keep_prob)
        return x * random_tensor

    class DropPath(nn.Module):
        def __init__(self, drop_prob=0.0, scale_by_keep=True):
            super().__init__()
            self.drop_prob = drop_prob
            self.scale_by_keep = scale_by_keep

        def forward(self, x):
            return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

        def extra_repr(self):
            return f"drop_prob={round(self.drop_prob, 3):0.3f}"

    class LayerScale(nn.Module):
        def __init__(self, dim, init_values=1e-5, inplace=False):
            super().__init__()
            self.inplace = inplace
            self.gamma = nn.Parameter(init_values * torch.ones(dim))

        def forward(self, x):
            return x.mul_(self.gamma) if self.inplace else x * self.gamma

    class Mlp(nn.Module):
        def __init__(self, in_features, hidden_features=None, act_layer=nn.GELU, drop=0.0):
            super().__init__()
            hidden_features = hidden_features or in_features
            self.fc1 = nn.Linear(in_features, hidden_features)
            self.act = act_layer()
            self.drop1 = nn.Dropout(drop)
            self.norm = nn.Identity()
            self.fc2 = nn.Linear(hidden_features, in_features)
            self.drop2 = nn.Dropout(drop)

        def forward(self, x):
            x = self.drop1(self.act(self.fc1(x)))
            return self.drop2(self.fc2(self.norm(x)))

    class Attention(nn.Module):
        def __init__(self, dim, num_heads=2, qkv_bias=False, qk_norm=False, fused_attn=False):
            super().__init__()
            self.num_heads = num_heads
            self.head_dim = dim // num_heads
            self.scale = self.head_dim**-0.5
            self.fused_attn = fused_attn
            self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
            self.q_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
            self.k_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
            self.attn_drop = nn.Dropout(0.0)
            self.proj = nn.Linear(dim, dim)
            self.proj_drop = nn.Dropout(0.0)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            q, k = self.q_norm(q), self.k_norm(k)
            if self.fused_attn:
                x = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
            else:
                q = q * self.scale
                attn = q @ k.transpose(-2, -1)
                attn = self.attn_drop(attn.softmax(dim=-1))
                x = attn @ v
            x = x.transpose(1, 2).reshape(B, N, C)
            return self.proj_drop(self.proj(x))

    class Block(nn.Module):
        def __init__(self, dim, num_heads, mlp_ratio=2.0, qk_norm=False, fused=False,
                     init_values=None, drop_path=0.0, inplace_ls=False):  # fmt: skip
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = Attention(dim, num_heads, qkv_bias=True, qk_norm=qk_norm, fused_attn=fused)
            self.ls1 = LayerScale(dim, init_values, inplace_ls) if init_values else nn.Identity()
            self.drop_path1 = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = Mlp(dim, int(dim * mlp_ratio))
            self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
            self.drop_path2 = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

        def forward(self, x):
            x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
            return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))

    class VisionTransformer(nn.Module):
        def __init__(self, img_size=8, patch_size=4, in_chans=3, num_classes=5, embed_dim=16,
                     depth=3, num_heads=2, drop_path_rate=0.5, global_pool="token"):  # fmt: skip
            super().__init__()
            self.global_pool = global_pool
            self.patch_embed = nn.Conv2d(in_chans, embed_dim, patch_size, patch_size)
            num_patches = (img_size // patch_size) ** 2
            self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
            dpr = [x.item() for x in torch.linspace(0, drop_path_rate, depth)]
            self.blocks = nn.Sequential(*[
                Block(embed_dim, num_heads, qk_norm=i == 1, fused=i == 2, init_values=0.1,
                      drop_path=dpr[i], inplace_ls=i == 1)
                for i in range(depth)])  # fmt: skip
            self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
            self.fc_norm = nn.Identity()
            self.head = nn.Linear(embed_dim, num_classes)

        def no_weight_decay(self):
            return {"pos_embed", "cls_token"}

        def forward_features(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
            x = x + self.pos_embed
            return self.norm(self.blocks(x))

        def forward_head(self, x, pre_logits=False):
            x = x[:, 1:].mean(dim=1) if self.global_pool == "avg" else x[:, 0]
            x = self.fc_norm(x)
            return x if pre_logits else self.head(x)

        def forward(self, x):
            return self.forward_head(self.forward_features(x))

    def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
        no_weight_decay_list = set(no_weight_decay_list)
        decay, no_decay = [], []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
                no_decay.append(param)
            else:
                decay.append(param)
        return [{"params": no_decay, "weight_decay": 0.0},
                {"params": decay, "weight_decay": weight_decay}]  # fmt: skip

    def unitwise_norm(x, norm_type=2.0):
        if x.ndim <= 1:
            return x.norm(norm_type)
        return x.norm(norm_type, dim=tuple(range(1, x.ndim)), keepdim=True)

    def adaptive_clip_grad(parameters, clip_factor=0.01, eps=1e-3, norm_type=2.0):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        for p in parameters:
            if p.grad is None:
                continue
            p_data = p.detach()
            g_data = p.grad.detach()
            max_norm = unitwise_norm(p_data, norm_type=norm_type).clamp_(min=eps).mul_(clip_factor)
            grad_norm = unitwise_norm(g_data, norm_type=norm_type)
            clipped_grad = g_data * (max_norm / grad_norm.clamp(min=1e-6))
            new_grads = torch.where(grad_norm < max_norm, g_data, clipped_grad)
            p.grad.detach().copy_(new_grads)

    model = set_weights(torch, VisionTransformer(), seed=5102)
    groups = param_groups_weight_decay(model, 0.05, model.no_weight_decay())
    opt = torch.optim.AdamW(groups, lr=5e-3, betas=(0.9, 0.999))
    losses = []
    for step in range(3):
        x = torch.from_numpy(arr(5110 + step, 4, 3, 8, 8))
        y = torch.from_numpy(ints(5120 + step, 5, 4))
        model.train()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        adaptive_clip_grad(model.parameters(), clip_factor=0.05)
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        xe = torch.from_numpy(arr(5130, 2, 3, 8, 8))
        logits = model(xe)
        model.global_pool = "avg"
        pooled = model.forward_head(model.forward_features(xe), pre_logits=True)
    return {"losses": losses, "logits": logits, "pooled": pooled, "grads": grads(model),
            "gammas": [b.ls1.gamma for b in model.blocks], "cls_token": model.cls_token,
            "drop_path_repr": repr(model.blocks[2].drop_path1),
            "n_groups": [len(g["params"]) for g in opt.param_groups]}  # fmt: skip


# ---------------------------------------------------------------------------------------- Swin


def _swin(torch):
    """timm's Swin Transformer pieces (dynamic padding, shifted windows, relative position bias)."""
    nn, F = torch.nn, torch.nn.functional

    def window_partition(x, window_size):
        B, H, W, C = x.shape
        x = x.view(B, H // window_size[0], window_size[0], W // window_size[1], window_size[1], C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size[0], window_size[1], C)

    def window_reverse(windows, window_size, H, W):
        C = windows.shape[-1]
        x = windows.view(
            -1, H // window_size[0], W // window_size[1], window_size[0], window_size[1], C
        )
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)

    def get_relative_position_index(win_h, win_w):
        coords = torch.stack(
            torch.meshgrid(torch.arange(win_h), torch.arange(win_w), indexing="ij")
        )
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += win_h - 1
        relative_coords[:, :, 1] += win_w - 1
        relative_coords[:, :, 0] *= 2 * win_w - 1
        return relative_coords.sum(-1)

    class WindowAttention(nn.Module):
        def __init__(self, dim, num_heads, window_size=(4, 4), qkv_bias=True):
            super().__init__()
            self.window_size = window_size
            win_h, win_w = window_size
            self.window_area = win_h * win_w
            self.num_heads = num_heads
            self.scale = (dim // num_heads) ** -0.5
            self.relative_position_bias_table = nn.Parameter(
                torch.zeros((2 * win_h - 1) * (2 * win_w - 1), num_heads)
            )
            self.register_buffer("relative_position_index",
                                 get_relative_position_index(win_h, win_w), persistent=False)  # fmt: skip
            self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
            self.proj = nn.Linear(dim, dim)
            self.softmax = nn.Softmax(dim=-1)

        def _get_rel_pos_bias(self):
            relative_position_bias = self.relative_position_bias_table[
                self.relative_position_index.view(-1)
            ].view(self.window_area, self.window_area, -1)
            relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
            return relative_position_bias.unsqueeze(0)

        def forward(self, x, mask=None):
            B_, N, C = x.shape
            qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn + self._get_rel_pos_bias()
            if mask is not None:
                num_win = mask.shape[0]
                attn = attn.view(-1, num_win, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.num_heads, N, N)
            attn = self.softmax(attn)
            x = (attn @ v).transpose(1, 2).reshape(B_, N, -1)
            return self.proj(x)

    class SwinTransformerBlock(nn.Module):
        def __init__(
            self, dim, input_resolution, num_heads, window_size=4, shift_size=0, mlp_ratio=2.0
        ):
            super().__init__()
            self.input_resolution = input_resolution
            self.window_size = (window_size, window_size)
            self.shift_size = (shift_size, shift_size)
            self.window_area = window_size * window_size
            self.norm1 = nn.LayerNorm(dim)
            self.attn = WindowAttention(dim, num_heads, self.window_size)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(),
                                     nn.Linear(int(dim * mlp_ratio), dim))  # fmt: skip
            self.register_buffer("attn_mask", self.get_attn_mask(), persistent=False)

        def get_attn_mask(self):
            if not any(self.shift_size):
                return None
            H, W = self.input_resolution
            Hp = math.ceil(H / self.window_size[0]) * self.window_size[0]
            Wp = math.ceil(W / self.window_size[1]) * self.window_size[1]
            img_mask = torch.zeros((1, Hp, Wp, 1))
            cnt = 0
            ws, ss = self.window_size, self.shift_size
            for h in ((0, -ws[0]), (-ws[0], -ss[0]), (-ss[0], None)):
                for w in ((0, -ws[1]), (-ws[1], -ss[1]), (-ss[1], None)):
                    img_mask[:, h[0] : h[1], w[0] : w[1], :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, self.window_size)
            mask_windows = mask_windows.view(-1, self.window_area)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            return attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)

        def _attn(self, x):
            B, H, W, C = x.shape
            has_shift = any(self.shift_size)
            if has_shift:
                shifted_x = torch.roll(
                    x, shifts=(-self.shift_size[0], -self.shift_size[1]), dims=(1, 2)
                )
            else:
                shifted_x = x
            pad_h = (self.window_size[0] - H % self.window_size[0]) % self.window_size[0]
            pad_w = (self.window_size[1] - W % self.window_size[1]) % self.window_size[1]
            shifted_x = F.pad(shifted_x, (0, 0, 0, pad_w, 0, pad_h))
            _, Hp, Wp, _ = shifted_x.shape
            x_windows = window_partition(shifted_x, self.window_size).view(-1, self.window_area, C)
            attn_windows = self.attn(x_windows, mask=self.attn_mask)
            attn_windows = attn_windows.view(-1, self.window_size[0], self.window_size[1], C)
            shifted_x = window_reverse(attn_windows, self.window_size, Hp, Wp)
            shifted_x = shifted_x[:, :H, :W, :].contiguous()
            return (
                torch.roll(shifted_x, shifts=self.shift_size, dims=(1, 2))
                if has_shift
                else shifted_x
            )

        def forward(self, x):
            B, H, W, C = x.shape
            x = x + self._attn(self.norm1(x))
            x = x.reshape(B, -1, C)
            x = x + self.mlp(self.norm2(x))
            return x.reshape(B, H, W, C)

    class PatchMerging(nn.Module):
        def __init__(self, dim, out_dim=None):
            super().__init__()
            self.out_dim = out_dim or 2 * dim
            self.norm = nn.LayerNorm(4 * dim)
            self.reduction = nn.Linear(4 * dim, self.out_dim, bias=False)

        def forward(self, x):
            B, H, W, C = x.shape
            x = x.reshape(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 4, 2, 5).flatten(3)
            return self.reduction(self.norm(x))

    return window_partition, window_reverse, WindowAttention, SwinTransformerBlock, PatchMerging


@program(rtol=5e-4, atol=5e-5)
def swin_shifted_window_attention_padding_and_relative_bias(torch):
    window_partition, window_reverse, _, SwinBlock, PatchMerging = _swin(torch)
    block = set_weights(
        torch, SwinBlock(8, (6, 6), num_heads=2, window_size=4, shift_size=2), seed=5201
    )
    x = torch.from_numpy(arr(5202, 2, 6, 6, 8)).requires_grad_()
    out = block(x)
    w = torch.from_numpy(arr(5203, 2, 6, 6, 8))
    (out * w).sum().backward()
    feats = torch.from_numpy(arr(5204, 1, 8, 8, 3))
    rolled = torch.roll(feats, shifts=(-2, -2), dims=(1, 2))
    windows = window_partition(rolled, (4, 4))
    back = torch.roll(window_reverse(windows, (4, 4), 8, 8), shifts=(2, 2), dims=(1, 2))
    # the original PatchMerging: strided slices, concatenated on channels
    x0, x1 = feats[:, 0::2, 0::2, :], feats[:, 1::2, 0::2, :]
    x2, x3 = feats[:, 0::2, 1::2, :], feats[:, 1::2, 1::2, :]
    merged_v1 = torch.cat([x0, x1, x2, x3], -1)
    merged_v2 = feats.reshape(1, 4, 2, 4, 2, 3).permute(0, 1, 3, 4, 2, 5).flatten(3)
    pm = set_weights(torch, PatchMerging(3), seed=5205)
    return {"out": out, "dx": x.grad, "attn_mask": block.attn_mask,
            "rel_index": block.attn.relative_position_index,
            "bias_table_grad": block.attn.relative_position_bias_table.grad,
            "qkv_grad": block.attn.qkv.weight.grad, "norm1_grad": block.norm1.weight.grad,
            "windows": windows, "roundtrip": torch.equal(back, feats),
            "state_keys": sorted(block.state_dict().keys()),
            "merged_v1": merged_v1, "merged_v2": merged_v2, "pm": pm(feats)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def swinv2_cosine_attention_log_spaced_cpb_res_post_norm(torch):
    nn, F = torch.nn, torch.nn.functional

    def ndgrid(*tensors):
        return torch.meshgrid(*tensors, indexing="ij")

    class WindowAttentionV2(nn.Module):
        def __init__(self, dim, window_size, num_heads, qkv_bias=True):
            super().__init__()
            self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
            self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))))
            self.cpb_mlp = nn.Sequential(nn.Linear(2, 16, bias=True), nn.ReLU(inplace=True),
                                         nn.Linear(16, num_heads, bias=False))  # fmt: skip
            self.qkv = nn.Linear(dim, dim * 3, bias=False)
            if qkv_bias:
                self.q_bias = nn.Parameter(torch.zeros(dim))
                self.register_buffer("k_bias", torch.zeros(dim), persistent=False)
                self.v_bias = nn.Parameter(torch.zeros(dim))
            else:
                self.q_bias, self.k_bias, self.v_bias = None, None, None
            self.proj = nn.Linear(dim, dim)
            self.softmax = nn.Softmax(dim=-1)
            self._make_pair_wise_relative_positions()

        def _make_pair_wise_relative_positions(self):
            ws = self.window_size
            relative_coords_h = torch.arange(-(ws[0] - 1), ws[0]).to(torch.float32)
            relative_coords_w = torch.arange(-(ws[1] - 1), ws[1]).to(torch.float32)
            relative_coords_table = torch.stack(ndgrid(relative_coords_h, relative_coords_w))
            relative_coords_table = relative_coords_table.permute(1, 2, 0).contiguous().unsqueeze(0)
            relative_coords_table[:, :, :, 0] /= ws[0] - 1
            relative_coords_table[:, :, :, 1] /= ws[1] - 1
            relative_coords_table *= 8  # normalize to -8, 8
            relative_coords_table = (torch.sign(relative_coords_table)
                                     * torch.log2(torch.abs(relative_coords_table) + 1.0) / math.log2(8))  # fmt: skip
            self.register_buffer("relative_coords_table", relative_coords_table, persistent=False)
            coords = torch.stack(ndgrid(torch.arange(ws[0]), torch.arange(ws[1])))
            coords_flatten = torch.flatten(coords, 1)
            relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
            relative_coords = relative_coords.permute(1, 2, 0).contiguous()
            relative_coords[:, :, 0] += ws[0] - 1
            relative_coords[:, :, 1] += ws[1] - 1
            relative_coords[:, :, 0] *= 2 * ws[1] - 1
            self.register_buffer(
                "relative_position_index", relative_coords.sum(-1), persistent=False
            )

        def forward(self, x, mask=None):
            B_, N, C = x.shape
            qkv_bias = None
            if self.q_bias is not None:
                qkv_bias = torch.cat((self.q_bias, self.k_bias, self.v_bias))
            qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
            qkv = qkv.reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
            logit_scale = torch.clamp(self.logit_scale, max=math.log(1.0 / 0.01)).exp()
            attn = attn * logit_scale
            relative_position_bias_table = self.cpb_mlp(self.relative_coords_table).view(
                -1, self.num_heads
            )
            relative_position_bias = relative_position_bias_table[
                self.relative_position_index.view(-1)
            ].view(
                self.window_size[0] * self.window_size[1],
                self.window_size[0] * self.window_size[1],
                -1,
            )
            relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
            relative_position_bias = 16 * torch.sigmoid(relative_position_bias)
            attn = attn + relative_position_bias.unsqueeze(0)
            if mask is not None:
                num_win = mask.shape[0]
                attn = attn.view(-1, num_win, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, self.num_heads, N, N)
            attn = self.softmax(attn)
            x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
            return self.proj(x)

    class SwinV2Block(nn.Module):  # no shift, res-post-norm
        def __init__(self, dim, num_heads, window_size=(4, 4)):
            super().__init__()
            self.window_size = window_size
            self.attn = WindowAttentionV2(dim, window_size, num_heads)
            self.norm1 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(approximate="tanh"),
                                     nn.Linear(2 * dim, dim))  # fmt: skip
            self.norm2 = nn.LayerNorm(dim)

        def _attn(self, x):
            B, H, W, C = x.shape
            ws = self.window_size
            xw = x.view(B, H // ws[0], ws[0], W // ws[1], ws[1], C).permute(0, 1, 3, 2, 4, 5)
            xw = xw.reshape(-1, ws[0] * ws[1], C)
            aw = self.attn(xw).view(B, H // ws[0], W // ws[1], ws[0], ws[1], C)
            return aw.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)

        def forward(self, x):
            B, H, W, C = x.shape
            x = x + self.norm1(self._attn(x))
            x = x.reshape(B, -1, C)
            x = x + self.norm2(self.mlp(x))
            return x.reshape(B, H, W, C)

    class PatchMergingV2(nn.Module):  # reduction first, then norm
        def __init__(self, dim):
            super().__init__()
            self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
            self.norm = nn.LayerNorm(2 * dim)

        def forward(self, x):
            B, H, W, C = x.shape
            x = x.reshape(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 4, 2, 5).flatten(3)
            return self.norm(self.reduction(x))

    model = nn.Sequential(SwinV2Block(8, 2), PatchMergingV2(8))
    set_weights(torch, model, seed=5301)
    with torch.no_grad():
        model[0].attn.logit_scale.copy_(torch.tensor([math.log(10.0), 5.0]).view(2, 1, 1))
        model[0].attn.q_bias.mul_(4.0)
    x = torch.from_numpy(arr(5302, 2, 8, 8, 8))
    out = model(x)
    loss = out.pow(2).mean() + out.mean(dim=(1, 2)).logsumexp(-1).sum()
    loss.backward()
    attn = model[0].attn
    return {"out": out, "loss": loss, "coords_table": attn.relative_coords_table,
            "rel_index": attn.relative_position_index, "logit_scale_grad": attn.logit_scale.grad,
            "q_bias_grad": attn.q_bias.grad, "v_bias_grad": attn.v_bias.grad,
            "cpb_grads": [p.grad for p in attn.cpb_mlp.parameters()],
            "state_keys": list(model.state_dict().keys()),
            "buffer_names": [n for n, _ in model.named_buffers()]}  # fmt: skip


# ---------------------------------------------------------------------------------------- torchvision


def _tv_functional(torch):
    """torchvision.transforms' tensor kernels (``_functional_tensor``), as written there."""
    F = torch.nn.functional

    def normalize(tensor, mean, std, inplace=False):
        if not inplace:
            tensor = tensor.clone()
        dtype = tensor.dtype
        mean = torch.as_tensor(mean, dtype=dtype, device=tensor.device)
        std = torch.as_tensor(std, dtype=dtype, device=tensor.device)
        if (std == 0).any():
            raise ValueError("std evaluated to zero, leading to division by zero.")
        if mean.ndim == 1:
            mean = mean.view(-1, 1, 1)
        if std.ndim == 1:
            std = std.view(-1, 1, 1)
        return tensor.sub_(mean).div_(std)

    def crop(img, top, left, height, width):
        _, h, w = img.shape[-3:]
        right, bottom = left + width, top + height
        if left < 0 or top < 0 or right > w or bottom > h:
            padding_ltrb = [max(-left + min(0, right), 0), max(-top + min(0, bottom), 0),
                            max(right - max(w, left), 0), max(bottom - max(h, top), 0)]  # fmt: skip
            return F.pad(
                img[..., max(top, 0) : bottom, max(left, 0) : right], padding_ltrb, value=0
            )
        return img[..., top:bottom, left:right]

    def center_crop(img, output_size):
        crop_height, crop_width = output_size
        image_height, image_width = img.shape[-2:]
        if crop_width > image_width or crop_height > image_height:
            padding_ltrb = [
                (crop_width - image_width) // 2 if crop_width > image_width else 0,
                (crop_height - image_height) // 2 if crop_height > image_height else 0,
                (crop_width - image_width + 1) // 2 if crop_width > image_width else 0,
                (crop_height - image_height + 1) // 2 if crop_height > image_height else 0,
            ]
            img = F.pad(img, padding_ltrb, value=0)
            image_height, image_width = img.shape[-2:]
            if crop_width == image_width and crop_height == image_height:
                return img
        crop_top = int(round((image_height - crop_height) / 2.0))
        crop_left = int(round((image_width - crop_width) / 2.0))
        return crop(img, crop_top, crop_left, crop_height, crop_width)

    def resize(img, size, interpolation="bilinear", antialias=False):
        need_squeeze = img.ndim < 4
        if need_squeeze:
            img = img.unsqueeze(dim=0)
        out_dtype = img.dtype
        need_cast = out_dtype not in (torch.float32, torch.float64)
        if need_cast:
            img = img.to(torch.float32)
        align_corners = False if interpolation in ("bilinear", "bicubic") else None
        img = F.interpolate(img, size=size, mode=interpolation, align_corners=align_corners,
                            antialias=antialias)  # fmt: skip
        if interpolation == "bicubic" and out_dtype == torch.uint8:
            img = img.clamp(min=0, max=255)
        if need_squeeze:
            img = img.squeeze(dim=0)
        if need_cast:
            if out_dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
                img = torch.round(img)
            img = img.to(out_dtype)
        return img

    def rgb_to_grayscale(img, num_output_channels=1):
        r, g, b = img.unbind(dim=-3)
        l_img = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype)
        l_img = l_img.unsqueeze(dim=-3)
        if num_output_channels == 3:
            return l_img.expand(img.shape)
        return l_img

    return normalize, crop, center_crop, resize, rgb_to_grayscale


@program
def torchvision_tensor_crops_resizes_pads_flips_and_erasing(torch):
    F = torch.nn.functional
    normalize, crop, center_crop, resize, rgb_to_grayscale = _tv_functional(torch)

    def _pad_symmetric(img, padding):
        in_sizes = img.size()
        _x_indices = [i for i in range(in_sizes[-1])]
        left_indices = [i for i in range(padding[0] - 1, -1, -1)]
        right_indices = [-(i + 1) for i in range(padding[1])]
        x_indices = torch.tensor(left_indices + _x_indices + right_indices, device=img.device)
        _y_indices = [i for i in range(in_sizes[-2])]
        top_indices = [i for i in range(padding[2] - 1, -1, -1)]
        bottom_indices = [-(i + 1) for i in range(padding[3])]
        y_indices = torch.tensor(top_indices + _y_indices + bottom_indices, device=img.device)
        if img.ndim == 3:
            return img[:, y_indices[:, None], x_indices[None, :]]
        return img[:, :, y_indices[:, None], x_indices[None, :]]

    def pad(img, padding, fill=0, padding_mode="constant"):
        if isinstance(padding, int):
            pad_left = pad_right = pad_top = pad_bottom = padding
        elif len(padding) == 2:
            pad_left = pad_right = padding[0]
            pad_top = pad_bottom = padding[1]
        else:
            pad_left, pad_top, pad_right, pad_bottom = padding
        p = [pad_left, pad_right, pad_top, pad_bottom]
        if padding_mode == "edge":
            padding_mode = "replicate"
        elif padding_mode == "symmetric":
            return _pad_symmetric(img, p)
        if padding_mode == "constant":
            return F.pad(img, p, mode="constant", value=float(fill))
        need_cast = img.dtype not in (torch.float32, torch.float64)
        out_dtype = img.dtype
        if need_cast:
            img = img.to(torch.float32)
        img = F.pad(img, p, mode=padding_mode)
        return img.to(out_dtype) if need_cast else img

    def convert_image_dtype(image, dtype=torch.float):
        if image.dtype == dtype:
            return image
        if image.is_floating_point():
            eps = 1e-3
            max_val = float(torch.iinfo(dtype).max)
            return image.mul(max_val + 1.0 - eps).to(dtype)
        return image.to(dtype) / float(torch.iinfo(image.dtype).max)

    def erase(img, i, j, h, w, v, inplace=False):
        if not inplace:
            img = img.clone()
        img[..., i : i + h, j : j + w] = v
        return img

    def five_crop(img, size):
        image_height, image_width = img.shape[-2:]
        crop_height, crop_width = size
        tl = crop(img, 0, 0, crop_height, crop_width)
        tr = crop(img, 0, image_width - crop_width, crop_height, crop_width)
        bl = crop(img, image_height - crop_height, 0, crop_height, crop_width)
        br = crop(
            img, image_height - crop_height, image_width - crop_width, crop_height, crop_width
        )
        return tl, tr, bl, br, center_crop(img, [crop_height, crop_width])

    img_u8 = torch.from_numpy(
        np.random.default_rng(5401).integers(0, 256, (3, 10, 12)).astype(np.uint8)
    )
    img = convert_image_dtype(img_u8, torch.float32).requires_grad_()
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    x = normalize(img, mean, std)
    # RandomResizedCrop with its sampled box fixed, then a horizontal flip and a pad
    rrc = resize(crop(x, 1, 2, 8, 9), [6, 6], "bilinear")
    flipped = rrc.flip(-1)
    outs = {"center_crop": center_crop(x, [6, 8]), "center_crop_pad": center_crop(x, [12, 13]),
            "crop_outside": crop(x, -1, 9, 4, 5), "rrc_flip": flipped,
            "resize_bicubic": resize(x, [7, 5], "bicubic"), "resize_nearest": resize(x, [4, 17], "nearest"),
            "resize_nearest_exact": resize(x, [15, 7], "nearest-exact"),
            "pad_reflect": pad(x, [2, 1], padding_mode="reflect"), "pad_edge": pad(x, 1, padding_mode="edge"),
            "pad_symmetric": pad(x, [1, 2, 3, 1], padding_mode="symmetric"), "pad_fill": pad(x, [1, 0, 2, 3], fill=0.5),
            "vflip": x.flip(-2), "gray3": rgb_to_grayscale(x, 3)}  # fmt: skip
    weights = torch.from_numpy(arr(5402, len(outs)))
    total = sum(weights[i] * (o**2).mean() for i, o in enumerate(outs.values()))
    total.backward()
    batch_u8 = img_u8.unsqueeze(0).repeat(2, 1, 1, 1)
    v = torch.from_numpy(arr(5403, 3, 3, 4))
    return {**outs, "dimg": img.grad, "shapes": [list(o.shape) for o in outs.values()],
            "u8_down": resize(batch_u8, [5, 6], "bilinear"), "u8_up": resize(img_u8, [20, 24], "bilinear"),
            "u8_nearest": resize(img_u8, [7, 9], "nearest"), "u8_symmetric": pad(img_u8, [2, 2, 1, 1], padding_mode="symmetric"),
            "u8_reflect": pad(img_u8, [1, 1, 2, 2], padding_mode="reflect"),
            "to_u8": convert_image_dtype(img.detach() * 0.9 + 0.05, torch.uint8),
            "erased": erase(x.detach(), 2, 3, 3, 4, v), "erased_const": erase(img_u8, 0, 0, 2, 2, 0),
            "five_crop": torch.stack(five_crop(x.detach(), [4, 5])),
            "ten_crop_flip": torch.stack(five_crop(x.detach().flip(-1), [4, 5]))}  # fmt: skip


@program
def torchvision_color_jitter_hsv_posterize_solarize_equalize(torch):
    F = torch.nn.functional
    _, _, _, _, rgb_to_grayscale = _tv_functional(torch)

    def _max_value(dtype):
        return 255 if dtype == torch.uint8 else 1.0

    def _blend(img1, img2, ratio):
        ratio = float(ratio)
        bound = _max_value(img1.dtype)
        return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, bound).to(img1.dtype)

    def adjust_brightness(img, brightness_factor):
        return _blend(img, torch.zeros_like(img), brightness_factor)

    def adjust_contrast(img, contrast_factor):
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        mean = torch.mean(rgb_to_grayscale(img).to(dtype), dim=(-3, -2, -1), keepdim=True)
        return _blend(img, mean, contrast_factor)

    def adjust_saturation(img, saturation_factor):
        return _blend(img, rgb_to_grayscale(img), saturation_factor)

    def _rgb2hsv(img):
        r, g, b = img.unbind(dim=-3)
        maxc = torch.max(img, dim=-3).values
        minc = torch.min(img, dim=-3).values
        eqc = maxc == minc
        cr = maxc - minc
        ones = torch.ones_like(maxc)
        s = cr / torch.where(eqc, ones, maxc)
        cr_divisor = torch.where(eqc, ones, cr)
        rc = (maxc - r) / cr_divisor
        gc = (maxc - g) / cr_divisor
        bc = (maxc - b) / cr_divisor
        hr = (maxc == r) * (bc - gc)
        hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
        hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
        h = hr + hg + hb
        h = torch.fmod((h / 6.0 + 1.0), 1.0)
        return torch.stack((h, s, maxc), dim=-3)

    def _hsv2rgb(img):
        h, s, v = img.unbind(dim=-3)
        i = torch.floor(h * 6.0)
        f = (h * 6.0) - i
        i = i.to(dtype=torch.int32)
        p = torch.clamp((v * (1.0 - s)), 0.0, 1.0)
        q = torch.clamp((v * (1.0 - s * f)), 0.0, 1.0)
        t = torch.clamp((v * (1.0 - s * (1.0 - f))), 0.0, 1.0)
        i = i % 6
        mask = i.unsqueeze(dim=-3) == torch.arange(6, device=i.device).view(-1, 1, 1)
        a1 = torch.stack((v, q, p, p, t, v), dim=-3)
        a2 = torch.stack((t, v, v, q, p, p), dim=-3)
        a3 = torch.stack((p, p, t, v, v, q), dim=-3)
        a4 = torch.stack((a1, a2, a3), dim=-4)
        return torch.einsum("...ijk, ...xijk -> ...xjk", mask.to(dtype=img.dtype), a4)

    def adjust_hue(img, hue_factor):
        orig_dtype = img.dtype
        img = img.to(torch.float32) / 255.0 if orig_dtype == torch.uint8 else img
        h, s, v = _rgb2hsv(img).unbind(dim=-3)
        h = (h + hue_factor) % 1.0
        img_hue_adj = _hsv2rgb(torch.stack((h, s, v), dim=-3))
        if orig_dtype == torch.uint8:
            return img_hue_adj.mul(255.0 + 1.0 - 1e-3).to(torch.uint8)
        return img_hue_adj

    def adjust_gamma(img, gamma, gain=1.0):
        result = img if torch.is_floating_point(img) else img.to(torch.float32) / 255.0
        return (gain * result**gamma).clamp(0, 1)

    def _blurred_degenerate_image(img):
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        kernel = torch.ones((3, 3), dtype=dtype, device=img.device)
        kernel[1, 1] = 5.0
        kernel /= kernel.sum()
        kernel = kernel.expand(img.shape[-3], 1, kernel.shape[0], kernel.shape[1])
        result_tmp = F.conv2d(img.to(dtype), kernel, groups=img.shape[-3])
        if not torch.is_floating_point(img):
            result_tmp = torch.round(result_tmp)
        result = img.clone()
        result[..., 1:-1, 1:-1] = result_tmp.to(img.dtype)
        return result

    def adjust_sharpness(img, sharpness_factor):
        if img.size(-1) <= 2 or img.size(-2) <= 2:
            return img
        return _blend(img, _blurred_degenerate_image(img), sharpness_factor)

    def posterize(img, bits):
        mask = -int(2 ** (8 - bits))  # JIT-friendly for: ~(2 ** (8 - bits) - 1)
        return img & mask

    def invert(img):
        return _max_value(img.dtype) - img

    def solarize(img, threshold):
        return torch.where(img >= threshold, invert(img), img)

    def autocontrast(img):
        bound = _max_value(img.dtype)
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        minimum = img.amin(dim=(-2, -1), keepdim=True).to(dtype)
        maximum = img.amax(dim=(-2, -1), keepdim=True).to(dtype)
        scale = bound / (maximum - minimum)
        eq_idxs = torch.isfinite(scale).logical_not()
        minimum[eq_idxs] = 0
        scale[eq_idxs] = 1
        return ((img - minimum) * scale).clamp(0, bound).to(img.dtype)

    def _scale_channel(img_chan):
        hist = torch.bincount(img_chan.reshape(-1), minlength=256)
        nonzero_hist = hist[hist != 0]
        step = torch.div(nonzero_hist[:-1].sum(), 255, rounding_mode="floor")
        if step == 0:
            return img_chan
        lut = torch.div(torch.cumsum(hist, 0) + torch.div(step, 2, rounding_mode="floor"), step,
                        rounding_mode="floor")  # fmt: skip
        lut = torch.nn.functional.pad(lut, [1, 0])[:-1].clamp(0, 255)
        return lut[img_chan.to(torch.int64)].to(torch.uint8)

    def equalize(img):
        if img.ndim == 3:
            return torch.stack([_scale_channel(img[c]) for c in range(img.size(0))])
        return torch.stack([equalize(x) for x in img])

    rng = np.random.default_rng(5501)
    img = torch.from_numpy(rng.uniform(0.02, 0.98, (2, 3, 8, 8)).astype(np.float32))
    img[0, :, 0, :3] = 0.5  # grey pixels: max == min in the HSV conversion
    img[1, 2, 4:, 4:] = 0.9
    # ColorJitter.forward with its sampled order and factors fixed
    fn_idx = [2, 0, 3, 1]
    b, c, s, h = 1.2, 0.7, 1.4, -0.08
    jittered = img.clone()
    for fn_id in fn_idx:
        if fn_id == 0:
            jittered = adjust_brightness(jittered, b)
        elif fn_id == 1:
            jittered = adjust_contrast(jittered, c)
        elif fn_id == 2:
            jittered = adjust_saturation(jittered, s)
        elif fn_id == 3:
            jittered = adjust_hue(jittered, h)
    u8 = torch.from_numpy(rng.integers(0, 200, (2, 3, 9, 7)).astype(np.uint8))
    u8[1, 1] = 77  # a flat channel
    hsv = _rgb2hsv(img)
    return {"jittered": jittered, "hsv": hsv, "hsv_roundtrip": _hsv2rgb(hsv),
            "hue_u8": adjust_hue(u8, 0.25), "gamma": adjust_gamma(img, 2.2, gain=0.9),
            "sharp": adjust_sharpness(img, 2.5), "sharp_u8": adjust_sharpness(u8, 0.3),
            "posterize": posterize(u8, 3), "solarize": solarize(u8, 128), "solarize_f": solarize(img, 0.6),
            "invert": invert(img), "autocontrast_u8": autocontrast(u8), "autocontrast": autocontrast(img),
            "equalize": equalize(u8), "contrast_u8": adjust_contrast(u8, 1.3),
            "brightness_u8": adjust_brightness(u8, 1.5)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def torchvision_affine_rotate_perspective_grids_with_fill(torch):
    F = torch.nn.functional

    def _get_inverse_affine_matrix(center, angle, translate, scale, shear):
        rot = math.radians(angle)
        sx, sy = math.radians(shear[0]), math.radians(shear[1])
        cx, cy = center
        tx, ty = translate
        a = math.cos(rot - sy) / math.cos(sy)
        b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
        c = math.sin(rot - sy) / math.cos(sy)
        d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
        matrix = [d, -b, 0.0, -c, a, 0.0]
        matrix = [x / scale for x in matrix]
        matrix[2] += matrix[0] * (-cx - tx) + matrix[1] * (-cy - ty)
        matrix[5] += matrix[3] * (-cx - tx) + matrix[4] * (-cy - ty)
        matrix[2] += cx
        matrix[5] += cy
        return matrix

    def _gen_affine_grid(theta, w, h, ow, oh):
        d = 0.5
        base_grid = torch.empty(1, oh, ow, 3, dtype=theta.dtype, device=theta.device)
        x_grid = torch.linspace(-ow * 0.5 + d, ow * 0.5 + d - 1, steps=ow, device=theta.device)
        base_grid[..., 0].copy_(x_grid)
        y_grid = torch.linspace(
            -oh * 0.5 + d, oh * 0.5 + d - 1, steps=oh, device=theta.device
        ).unsqueeze_(-1)
        base_grid[..., 1].copy_(y_grid)
        base_grid[..., 2].fill_(1)
        rescaled_theta = theta.transpose(1, 2) / torch.tensor([0.5 * w, 0.5 * h], dtype=theta.dtype,
                                                              device=theta.device)  # fmt: skip
        output_grid = base_grid.view(1, oh * ow, 3).bmm(rescaled_theta)
        return output_grid.view(1, oh, ow, 2)

    def _apply_grid_transform(img, grid, mode, fill):
        if img.shape[0] > 1:
            grid = grid.expand(img.shape[0], grid.shape[1], grid.shape[2], grid.shape[3])
        if fill is not None:
            mask = torch.ones(
                (img.shape[0], 1, img.shape[2], img.shape[3]), dtype=img.dtype, device=img.device
            )
            img = torch.cat((img, mask), dim=1)
        img = F.grid_sample(img, grid, mode=mode, padding_mode="zeros", align_corners=False)
        if fill is not None:
            mask = img[:, -1:, :, :]
            img = img[:, :-1, :, :]
            mask = mask.expand_as(img)
            fill_list, len_fill = (
                (fill, len(fill)) if isinstance(fill, (tuple, list)) else ([float(fill)], 1)
            )
            fill_img = (
                torch.tensor(fill_list, dtype=img.dtype, device=img.device)
                .view(1, len_fill, 1, 1)
                .expand_as(img)
            )
            if mode == "nearest":
                mask = mask < 0.5
                img[mask] = fill_img[mask]
            else:
                img = img * mask + (1.0 - mask) * fill_img
        return img

    def affine(img, matrix, interpolation="nearest", fill=None):
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        theta = torch.tensor(matrix, dtype=dtype, device=img.device).reshape(1, 2, 3)
        shape = img.shape
        grid = _gen_affine_grid(theta, w=shape[-1], h=shape[-2], ow=shape[-1], oh=shape[-2])
        return _apply_grid_transform(img, grid, interpolation, fill=fill)

    def _compute_affine_output_size(matrix, w, h):
        pts = torch.tensor([[-0.5 * w, -0.5 * h, 1.0], [-0.5 * w, 0.5 * h, 1.0],
                            [0.5 * w, 0.5 * h, 1.0], [0.5 * w, -0.5 * h, 1.0]])  # fmt: skip
        theta = torch.tensor(matrix, dtype=torch.float).view(2, 3)
        new_pts = torch.matmul(pts, theta.T)
        min_vals, max_vals = new_pts.aminmax(dim=0)
        tol = 1e-4
        cmax = torch.ceil((max_vals / tol).trunc_() * tol)
        cmin = torch.floor((min_vals / tol).trunc_() * tol)
        size = cmax - cmin
        return int(size[0]), int(size[1])

    def rotate(img, matrix, interpolation="nearest", expand=False, fill=None):
        w, h = img.shape[-1], img.shape[-2]
        ow, oh = _compute_affine_output_size(matrix, w, h) if expand else (w, h)
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        theta = torch.tensor(matrix, dtype=dtype, device=img.device).reshape(1, 2, 3)
        grid = _gen_affine_grid(theta, w=w, h=h, ow=ow, oh=oh)
        return _apply_grid_transform(img, grid, interpolation, fill=fill)

    def _get_perspective_coeffs(startpoints, endpoints):
        a_matrix = torch.zeros(2 * len(startpoints), 8, dtype=torch.float64)
        for i, (p1, p2) in enumerate(zip(endpoints, startpoints)):
            a_matrix[2 * i, :] = torch.tensor(
                [p1[0], p1[1], 1, 0, 0, 0, -p2[0] * p1[0], -p2[0] * p1[1]]
            )
            a_matrix[2 * i + 1, :] = torch.tensor(
                [0, 0, 0, p1[0], p1[1], 1, -p2[1] * p1[0], -p2[1] * p1[1]]
            )
        b_matrix = torch.tensor(startpoints, dtype=torch.float64).view(8)
        res = torch.linalg.lstsq(a_matrix, b_matrix, driver="gels").solution.to(torch.float32)
        return res.tolist()

    def _perspective_grid(coeffs, ow, oh, dtype, device):
        theta1 = torch.tensor([[[coeffs[0], coeffs[1], coeffs[2]], [coeffs[3], coeffs[4], coeffs[5]]]],
                              dtype=dtype, device=device)  # fmt: skip
        theta2 = torch.tensor(
            [[[coeffs[6], coeffs[7], 1.0], [coeffs[6], coeffs[7], 1.0]]], dtype=dtype, device=device
        )
        d = 0.5
        base_grid = torch.empty(1, oh, ow, 3, dtype=dtype, device=device)
        x_grid = torch.linspace(d, ow * 1.0 + d - 1.0, steps=ow, device=device)
        base_grid[..., 0].copy_(x_grid)
        y_grid = torch.linspace(d, oh * 1.0 + d - 1.0, steps=oh, device=device).unsqueeze_(-1)
        base_grid[..., 1].copy_(y_grid)
        base_grid[..., 2].fill_(1)
        rescaled_theta1 = theta1.transpose(1, 2) / torch.tensor(
            [0.5 * ow, 0.5 * oh], dtype=dtype, device=device
        )
        output_grid1 = base_grid.view(1, oh * ow, 3).bmm(rescaled_theta1)
        output_grid2 = base_grid.view(1, oh * ow, 3).bmm(theta2.transpose(1, 2))
        output_grid = output_grid1 / output_grid2 - 1.0
        return output_grid.view(1, oh, ow, 2)

    img = torch.from_numpy(_uniform(5601, 2, 3, 9, 10)).requires_grad_()
    H, W = 9, 10
    center = [W * 0.5, H * 0.5]
    # RandomAffine with its sampled parameters fixed (center_f is relative to the image centre)
    m_affine = _get_inverse_affine_matrix([0.0, 0.0], 17.0, [1, -2], 1.1, [6.0, -4.0])
    m_rot = _get_inverse_affine_matrix([0.0, 0.0], -33.0, [0.0, 0.0], 1.0, [0.0, 0.0])
    m_shift = _get_inverse_affine_matrix([0.0, 0.0], 0.0, [2, 1], 1.0, [0.0, 0.0])
    aff_bilinear = affine(img, m_affine, "bilinear", fill=[0.2, 0.5, 0.8])
    rot_expand = rotate(img, m_rot, "bilinear", expand=True, fill=0.0)
    rot_plain = rotate(img, m_rot, "bilinear")
    start = [[0, 0], [W - 1, 0], [W - 1, H - 1], [0, H - 1]]
    end = [[1, 2], [W - 2, 0], [W - 1, H - 3], [2, H - 1]]
    coeffs = _get_perspective_coeffs(start, end)
    grid = _perspective_grid(coeffs, ow=W, oh=H, dtype=torch.float32, device=img.device)
    persp = _apply_grid_transform(img, grid, "bilinear", fill=[1.0, 0.0, 0.5])
    total = (aff_bilinear * 1.5).sum() + rot_expand.pow(2).sum() + (persp * rot_plain).sum()
    total.backward()
    with torch.no_grad():
        shift_nearest = affine(img, m_shift, "nearest", fill=[0.25, 0.5, 0.75])
    return {"m_affine": m_affine, "center": center, "aff_bilinear": aff_bilinear,
            "rot_expand": rot_expand, "rot_expand_size": list(rot_expand.shape),
            "expand_size": list(_compute_affine_output_size(m_rot, W, H)), "rot_plain": rot_plain,
            "coeffs": coeffs, "persp_grid": grid, "persp": persp, "dimg": img.grad,
            "shift_nearest": shift_nearest}  # fmt: skip


# ---------------------------------------------------------------------------------------- timm training


@program(rtol=5e-4, atol=5e-5)
def timm_mixup_cutmix_batch_pair_elem_modes_soft_target_losses(torch):
    nn, F = torch.nn, torch.nn.functional

    def one_hot(x, num_classes, on_value=1.0, off_value=0.0):
        x = x.long().view(-1, 1)
        return torch.full((x.size()[0], num_classes), off_value, device=x.device).scatter_(
            1, x, on_value
        )

    def mixup_target(target, num_classes, lam=1.0, smoothing=0.0):
        off_value = smoothing / num_classes
        on_value = 1.0 - smoothing + off_value
        y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
        y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
        return y1 * lam + y2 * (1.0 - lam)

    def rand_bbox(img_shape, lam, cy, cx):  # the box centre is fixed instead of sampled
        ratio = np.sqrt(1 - lam)
        img_h, img_w = img_shape[-2:]
        cut_h, cut_w = int(img_h * ratio), int(img_w * ratio)
        yl = np.clip(cy - cut_h // 2, 0, img_h)
        yh = np.clip(cy + cut_h // 2, 0, img_h)
        xl = np.clip(cx - cut_w // 2, 0, img_w)
        xh = np.clip(cx + cut_w // 2, 0, img_w)
        return yl, yh, xl, xh

    def cutmix_bbox_and_lam(img_shape, lam, cy, cx, correct_lam=True):
        yl, yu, xl, xu = rand_bbox(img_shape, lam, cy, cx)
        if correct_lam:
            bbox_area = (yu - yl) * (xu - xl)
            lam = 1.0 - bbox_area / float(img_shape[-2] * img_shape[-1])
        return (yl, yu, xl, xu), lam

    def mix_batch(x, lam, use_cutmix, cy=3, cx=4):
        if use_cutmix:
            (yl, yh, xl, xh), lam = cutmix_bbox_and_lam(x.shape, lam, cy, cx)
            x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
        else:
            x_flipped = x.flip(0).mul_(1.0 - lam)
            x.mul_(lam).add_(x_flipped)
        return lam

    def mix_elem(x, lam_batch, use_cutmix):
        batch_size = len(x)
        x_orig = x.clone()
        for i in range(batch_size):
            j = batch_size - i - 1
            lam = lam_batch[i]
            if lam != 1.0:
                if use_cutmix[i]:
                    (yl, yh, xl, xh), lam = cutmix_bbox_and_lam(x[i].shape, lam, 2 + i, 5 - i)
                    x[i][:, yl:yh, xl:xh] = x_orig[j][:, yl:yh, xl:xh]
                    lam_batch[i] = lam
                else:
                    x[i] = x[i] * lam + x_orig[j] * (1 - lam)
        return torch.tensor(lam_batch, device=x.device, dtype=x.dtype).unsqueeze(1)

    def mix_pair(x, lam_batch, use_cutmix):
        batch_size = len(x)
        x_orig = x.clone()
        for i in range(batch_size // 2):
            j = batch_size - i - 1
            lam = lam_batch[i]
            if lam != 1.0:
                if use_cutmix[i]:
                    (yl, yh, xl, xh), lam = cutmix_bbox_and_lam(x[i].shape, lam, 4, 3)
                    x[i][:, yl:yh, xl:xh] = x_orig[j][:, yl:yh, xl:xh]
                    x[j][:, yl:yh, xl:xh] = x_orig[i][:, yl:yh, xl:xh]
                    lam_batch[i] = lam
                else:
                    x[i] = x[i] * lam + x_orig[j] * (1 - lam)
                    x[j] = x[j] * lam + x_orig[i] * (1 - lam)
        lam_batch = np.concatenate((lam_batch, lam_batch[::-1]))
        return torch.tensor(lam_batch, device=x.device, dtype=x.dtype).unsqueeze(1)

    class SoftTargetCrossEntropy(nn.Module):
        def forward(self, x, target):
            loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
            return loss.mean()

    class LabelSmoothingCrossEntropy(nn.Module):
        def __init__(self, smoothing=0.1):
            super().__init__()
            self.smoothing, self.confidence = smoothing, 1.0 - smoothing

        def forward(self, x, target):
            logprobs = F.log_softmax(x, dim=-1)
            nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
            smooth_loss = -logprobs.mean(dim=-1)
            return (self.confidence * nll_loss + self.smoothing * smooth_loss).mean()

    class BinaryCrossEntropy(nn.Module):
        def __init__(self, smoothing=0.1, target_threshold=None, weight=None, pos_weight=None):
            super().__init__()
            self.smoothing, self.target_threshold = smoothing, target_threshold
            self.register_buffer("weight", weight)
            self.register_buffer("pos_weight", pos_weight)

        def forward(self, x, target):
            batch_size, num_classes = x.shape[0], x.shape[-1]
            if target.shape != x.shape:
                off_value = self.smoothing / num_classes
                on_value = 1.0 - self.smoothing + off_value
                target = target.long().view(-1, 1)
                target = torch.full((batch_size, num_classes), off_value, device=x.device,
                                    dtype=x.dtype).scatter_(1, target, on_value)  # fmt: skip
            if self.target_threshold is not None:
                target = target.gt(self.target_threshold).to(dtype=target.dtype)
            return F.binary_cross_entropy_with_logits(
                x, target, self.weight, pos_weight=self.pos_weight
            )

    class JsdCrossEntropy(nn.Module):  # AugMix: clean + two augmented splits
        def __init__(self, num_splits=3, alpha=12, smoothing=0.1):
            super().__init__()
            self.num_splits, self.alpha = num_splits, alpha
            self.cross_entropy_loss = LabelSmoothingCrossEntropy(smoothing)

        def __call__(self, output, target):
            split_size = output.shape[0] // self.num_splits
            logits_split = torch.split(output, split_size)
            loss = self.cross_entropy_loss(logits_split[0], target[:split_size])
            probs = [F.softmax(logits, dim=1) for logits in logits_split]
            logp_mixture = torch.clamp(torch.stack(probs).mean(axis=0), 1e-7, 1).log()
            loss += self.alpha * sum([F.kl_div(logp_mixture, p_split, reduction="batchmean")
                                      for p_split in probs]) / len(probs)  # fmt: skip
            return loss

    NC = 5
    model = set_weights(torch, nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, NC)), seed=5701)  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    soft_ce = SoftTargetCrossEntropy()
    bce = BinaryCrossEntropy(smoothing=0.1, target_threshold=0.2, pos_weight=torch.full((NC,), 2.0))
    hist, mixed_inputs, targets = [], [], []
    for step, mode in enumerate(["batch_mixup", "batch_cutmix", "elem", "pair"]):
        x = torch.from_numpy(arr(5710 + step, 4, 3, 8, 8))
        y = torch.from_numpy(ints(5720 + step, NC, 4))
        if mode.startswith("batch"):
            lam = mix_batch(x, 0.7, use_cutmix=mode == "batch_cutmix")
        elif mode == "elem":
            lam = mix_elem(
                x, np.array([0.6, 1.0, 0.8, 0.45], dtype=np.float32), [False, False, True, True]
            )
        else:
            lam = mix_pair(x, np.array([0.75, 0.6], dtype=np.float32), [True, False])
        target = mixup_target(y, NC, lam, smoothing=0.1)
        out = model(x)
        loss = soft_ce(out, target) if step % 2 == 0 else bce(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        hist.append(loss.item())
        mixed_inputs.append(x)
        targets.append(target)
    clean = torch.from_numpy(arr(5730, 2, 3, 8, 8))
    aug = torch.cat([clean, clean.flip(-1), clean * 0.8 + 0.1])  # AugMix splits
    y = torch.from_numpy(ints(5731, NC, 2))
    jsd = JsdCrossEntropy()(model(aug), y)
    jsd.backward()
    plain = BinaryCrossEntropy(smoothing=0.0)(model(clean), y)
    return {"hist": hist, "mixed_inputs": mixed_inputs, "targets": targets, "jsd": jsd, "plain_bce": plain,
            "ls_ce": LabelSmoothingCrossEntropy(0.2)(model(clean), y), "grads": grads(model),
            "buffers": sorted(n for n, _ in bce.named_buffers()),
            "running_var": model[1].running_var}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def timm_model_ema_v3_warmup_foreach_and_channels_last(torch):
    nn, F = torch.nn, torch.nn.functional

    class ModelEmaV3(nn.Module):
        def __init__(self, model, decay=0.9999, min_decay=0.0, update_after_step=0, use_warmup=False,
                     warmup_gamma=1.0, warmup_power=2 / 3, device=None, foreach=True, exclude_buffers=False):  # fmt: skip
            super().__init__()
            self.module = copy.deepcopy(model)
            self.module.eval()
            self.decay, self.min_decay = decay, min_decay
            self.update_after_step = update_after_step
            self.use_warmup, self.warmup_gamma, self.warmup_power = (
                use_warmup,
                warmup_gamma,
                warmup_power,
            )
            self.foreach, self.device, self.exclude_buffers = foreach, device, exclude_buffers
            if self.device is not None and device != next(model.parameters()).device:
                self.foreach = False
                self.module.to(device=device)

        def get_decay(self, step=None):
            if step is None:
                return self.decay
            step = max(0, step - self.update_after_step - 1)
            if step <= 0:
                return 0.0
            if self.use_warmup:
                decay = 1 - (1 + step / self.warmup_gamma) ** -self.warmup_power
                decay = max(min(decay, self.decay), self.min_decay)
            else:
                decay = self.decay
            return decay

        @torch.no_grad()
        def update(self, model, step=None):
            decay = self.get_decay(step)
            if self.exclude_buffers:
                self.apply_update_no_buffers_(model, decay)
            else:
                self.apply_update_(model, decay)
            return decay

        def apply_update_(self, model, decay):
            if self.foreach:
                ema_lerp_values, model_lerp_values = [], []
                for ema_v, model_v in zip(
                    self.module.state_dict().values(), model.state_dict().values()
                ):
                    if ema_v.is_floating_point():
                        ema_lerp_values.append(ema_v)
                        model_lerp_values.append(model_v)
                    else:
                        ema_v.copy_(model_v)
                torch._foreach_mul_(ema_lerp_values, scalar=decay)
                torch._foreach_add_(ema_lerp_values, model_lerp_values, alpha=1.0 - decay)
            else:
                for ema_v, model_v in zip(
                    self.module.state_dict().values(), model.state_dict().values()
                ):
                    if ema_v.is_floating_point():
                        ema_v.lerp_(model_v.to(device=self.device), weight=1.0 - decay)
                    else:
                        ema_v.copy_(model_v.to(device=self.device))

        def apply_update_no_buffers_(self, model, decay):
            ema_params = tuple(self.module.parameters())
            model_params = tuple(model.parameters())
            if self.foreach:
                torch._foreach_lerp_(ema_params, model_params, weight=1.0 - decay)
            else:
                for ema_p, model_p in zip(ema_params, model_params):
                    ema_p.lerp_(model_p.to(device=self.device), weight=1.0 - decay)
            for ema_b, model_b in zip(self.module.buffers(), model.buffers()):
                ema_b.copy_(model_b.to(device=self.device))

        def forward(self, *args, **kwargs):
            return self.module(*args, **kwargs)

    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.GELU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))  # fmt: skip
    set_weights(torch, model, seed=5801)
    model = model.to(memory_format=torch.channels_last)
    emas = {"warmup_foreach": ModelEmaV3(model, decay=0.99, use_warmup=True, warmup_power=3 / 4),
            "plain_loop": ModelEmaV3(model, decay=0.8, foreach=False, update_after_step=1),
            "no_buffers": ModelEmaV3(model, decay=0.7, exclude_buffers=True),
            "no_buffers_loop": ModelEmaV3(model, decay=0.75, exclude_buffers=True, foreach=False)}  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    losses, decays, layouts = [], {k: [] for k in emas}, {}
    for step in range(4):
        x = torch.from_numpy(arr(5810 + step, 3, 3, 6, 6)).contiguous(
            memory_format=torch.channels_last
        )
        y = torch.from_numpy(ints(5820 + step, 4, 3))
        if step == 0:
            h = model[0](x)
            layouts = {"conv_out_cl": h.is_contiguous(memory_format=torch.channels_last),
                       "bn_out_cl": model[1](h).is_contiguous(memory_format=torch.channels_last),
                       "x_stride": list(x.stride()), "w_stride": list(model[0].weight.stride()),
                       "ema_w_cl": emas["warmup_foreach"].module[0].weight.is_contiguous(memory_format=torch.channels_last),
                       "dw_stride": list(model[3].weight.stride())}  # fmt: skip
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        for k, ema in emas.items():
            decays[k].append(ema.update(model, step=step + 1))
    xe = torch.from_numpy(arr(5830, 2, 3, 6, 6)).to(memory_format=torch.channels_last)
    with torch.no_grad():
        evals = {k: ema(xe) for k, ema in emas.items()}
    return {"losses": losses, "decays": decays, "layouts": layouts, "evals": evals,
            "states": {k: dict(ema.module.state_dict()) for k, ema in emas.items()},
            "grad_stride": list(model[0].weight.grad.stride()),
            "ema_training": [ema.module.training for ema in emas.values()],
            "contig_stride": list(xe.contiguous(memory_format=torch.contiguous_format).stride())}  # fmt: skip


# ---------------------------------------------------------------------------------------- kornia


def _kornia_points(torch):
    F = torch.nn.functional

    def convert_points_to_homogeneous(points):
        return F.pad(points, [0, 1], "constant", 1.0)

    def convert_points_from_homogeneous(points, eps=1e-8):
        z_vec = points[..., -1:]
        mask = torch.abs(z_vec) > eps
        scale = torch.where(mask, 1.0 / (z_vec + eps), torch.ones_like(z_vec))
        return scale * points[..., :-1]

    def transform_points(trans_01, points_1):
        shape_inp = list(points_1.shape)
        points_1 = points_1.reshape(-1, points_1.shape[-2], points_1.shape[-1])
        trans_01 = trans_01.reshape(-1, trans_01.shape[-2], trans_01.shape[-1])
        trans_01 = torch.repeat_interleave(
            trans_01, repeats=points_1.shape[0] // trans_01.shape[0], dim=0
        )
        points_1_h = convert_points_to_homogeneous(points_1)
        points_0_h = torch.bmm(points_1_h, trans_01.permute(0, 2, 1))
        points_0_h = torch.squeeze(points_0_h, dim=-1)
        points_0 = convert_points_from_homogeneous(points_0_h)
        shape_inp[-2] = points_0.shape[-2]
        shape_inp[-1] = points_0.shape[-1]
        return points_0.reshape(shape_inp)

    return convert_points_to_homogeneous, convert_points_from_homogeneous, transform_points


@program(rtol=5e-4, atol=5e-5)
def kornia_rotations_quaternions_and_perspective_transform(torch):
    F = torch.nn.functional
    to_h, from_h, transform_points = _kornia_points(torch)

    def deg2rad(tensor):
        return tensor * torch.tensor(math.pi).to(tensor.device).type(tensor.dtype) / 180.0

    def eye_like(n, input):
        return torch.eye(n, device=input.device, dtype=input.dtype)[None].repeat(
            input.shape[0], 1, 1
        )

    def angle_axis_to_rotation_matrix(angle_axis):
        def _compute_rotation_matrix(angle_axis, theta2, eps=1e-6):
            k_one = 1.0
            theta = torch.sqrt(theta2)
            wxyz = angle_axis / (theta + eps)
            wx, wy, wz = torch.chunk(wxyz, 3, dim=1)
            cos_theta, sin_theta = torch.cos(theta), torch.sin(theta)
            r00 = cos_theta + wx * wx * (k_one - cos_theta)
            r10 = wz * sin_theta + wx * wy * (k_one - cos_theta)
            r20 = -wy * sin_theta + wx * wz * (k_one - cos_theta)
            r01 = wx * wy * (k_one - cos_theta) - wz * sin_theta
            r11 = cos_theta + wy * wy * (k_one - cos_theta)
            r21 = wx * sin_theta + wy * wz * (k_one - cos_theta)
            r02 = wy * sin_theta + wx * wz * (k_one - cos_theta)
            r12 = -wx * sin_theta + wy * wz * (k_one - cos_theta)
            r22 = cos_theta + wz * wz * (k_one - cos_theta)
            rotation_matrix = torch.cat([r00, r01, r02, r10, r11, r12, r20, r21, r22], dim=1)
            return rotation_matrix.view(-1, 3, 3)

        def _compute_rotation_matrix_taylor(angle_axis):
            rx, ry, rz = torch.chunk(angle_axis, 3, dim=1)
            k_one = torch.ones_like(rx)
            rotation_matrix = torch.cat([k_one, -rz, ry, rz, k_one, -rx, -ry, rx, k_one], dim=1)
            return rotation_matrix.view(-1, 3, 3)

        _angle_axis = torch.unsqueeze(angle_axis, dim=1)
        theta2 = torch.matmul(_angle_axis, _angle_axis.transpose(1, 2))
        theta2 = torch.squeeze(theta2, dim=1)
        rotation_matrix_normal = _compute_rotation_matrix(angle_axis, theta2)
        rotation_matrix_taylor = _compute_rotation_matrix_taylor(angle_axis)
        eps = 1e-6
        mask = (theta2 > eps).view(-1, 1, 1).to(theta2.device)
        mask_pos = (mask).type_as(theta2)
        mask_neg = (mask == torch.tensor(False)).type_as(theta2)
        batch_size = angle_axis.shape[0]
        rotation_matrix = torch.eye(3).to(angle_axis.device).type_as(angle_axis)
        rotation_matrix = rotation_matrix.view(1, 3, 3).repeat(batch_size, 1, 1)
        rotation_matrix[..., :3, :3] = (
            mask_pos * rotation_matrix_normal + mask_neg * rotation_matrix_taylor
        )
        return rotation_matrix

    def rotation_matrix_to_quaternion(rotation_matrix, eps=1e-8):
        def safe_zero_division(numerator, denominator):
            eps = torch.finfo(numerator.dtype).tiny
            return numerator / torch.clamp(denominator, min=eps)

        rotation_matrix_vec = rotation_matrix.reshape(*rotation_matrix.shape[:-2], 9)
        m00, m01, m02, m10, m11, m12, m20, m21, m22 = torch.chunk(
            rotation_matrix_vec, chunks=9, dim=-1
        )
        trace = m00 + m11 + m22

        def trace_positive_cond():
            sq = torch.sqrt(trace + 1.0 + eps) * 2.0
            qw = 0.25 * sq
            qx = safe_zero_division(m21 - m12, sq)
            qy = safe_zero_division(m02 - m20, sq)
            qz = safe_zero_division(m10 - m01, sq)
            return torch.cat((qw, qx, qy, qz), dim=-1)

        def cond_1():
            sq = torch.sqrt(1.0 + m00 - m11 - m22 + eps) * 2.0
            qw = safe_zero_division(m21 - m12, sq)
            qx = 0.25 * sq
            qy = safe_zero_division(m01 + m10, sq)
            qz = safe_zero_division(m02 + m20, sq)
            return torch.cat((qw, qx, qy, qz), dim=-1)

        def cond_2():
            sq = torch.sqrt(1.0 + m11 - m00 - m22 + eps) * 2.0
            qw = safe_zero_division(m02 - m20, sq)
            qx = safe_zero_division(m01 + m10, sq)
            qy = 0.25 * sq
            qz = safe_zero_division(m12 + m21, sq)
            return torch.cat((qw, qx, qy, qz), dim=-1)

        def cond_3():
            sq = torch.sqrt(1.0 + m22 - m00 - m11 + eps) * 2.0
            qw = safe_zero_division(m10 - m01, sq)
            qx = safe_zero_division(m02 + m20, sq)
            qy = safe_zero_division(m12 + m21, sq)
            qz = 0.25 * sq
            return torch.cat((qw, qx, qy, qz), dim=-1)

        where_2 = torch.where(m11 > m22, cond_2(), cond_3())
        where_1 = torch.where((m00 > m11) & (m00 > m22), cond_1(), where_2)
        return torch.where(trace > 0.0, trace_positive_cond(), where_1)

    def quaternion_to_rotation_matrix(quaternion):
        quaternion_norm = F.normalize(quaternion, p=2.0, dim=-1, eps=1e-12)
        w, x, y, z = torch.chunk(quaternion_norm, chunks=4, dim=-1)
        tx, ty, tz = 2.0 * x, 2.0 * y, 2.0 * z
        twx, twy, twz = tx * w, ty * w, tz * w
        txx, txy, txz = tx * x, ty * x, tz * x
        tyy, tyz, tzz = ty * y, tz * y, tz * z
        one = torch.tensor(1.0)
        matrix_flat = torch.stack((one - (tyy + tzz), txy - twz, txz + twy,
                                   txy + twz, one - (txx + tzz), tyz - twx,
                                   txz - twy, tyz + twx, one - (txx + tyy)), dim=-1)  # fmt: skip
        output_shape = [*list(quaternion.shape[:-1]), 3, 3]
        return matrix_flat.reshape(output_shape)

    def quaternion_log_to_exp(quaternion, eps=1e-8):
        norm_q = torch.norm(quaternion, p=2, dim=-1, keepdim=True).clamp(min=eps)
        quaternion_vector = quaternion * torch.sin(norm_q) / norm_q
        quaternion_scalar = torch.cos(norm_q)
        return torch.cat((quaternion_scalar, quaternion_vector), dim=-1)

    def quaternion_multiply(q1, q2):  # Hamilton product, wxyz
        w1, x1, y1, z1 = q1.unbind(-1)
        w2, x2, y2, z2 = q2.unbind(-1)
        return torch.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], -1)  # fmt: skip

    def angle_to_rotation_matrix(angle):
        ang_rad = deg2rad(angle)
        cos_a, sin_a = torch.cos(ang_rad), torch.sin(ang_rad)
        return torch.stack([cos_a, sin_a, -sin_a, cos_a], dim=-1).view(*angle.shape, 2, 2)

    def get_rotation_matrix2d(center, angle, scale):
        shift_m = eye_like(3, center)
        shift_m[:, :2, 2] = center
        shift_m_inv = eye_like(3, center)
        shift_m_inv[:, :2, 2] = -center
        scale_m = eye_like(3, center)
        scale_m[:, 0, 0] *= scale[:, 0]
        scale_m[:, 1, 1] *= scale[:, 1]
        rotat_m = eye_like(3, center)
        rotat_m[:, :2, :2] = angle_to_rotation_matrix(angle)
        affine_m = shift_m @ rotat_m @ scale_m @ shift_m_inv
        return affine_m[:, :2, :]

    def normalize_pixel_coordinates(pixel_coordinates, height, width, eps=1e-8):
        hw = torch.stack([torch.tensor(width, device=pixel_coordinates.device, dtype=pixel_coordinates.dtype),
                          torch.tensor(height, device=pixel_coordinates.device, dtype=pixel_coordinates.dtype)])  # fmt: skip
        factor = torch.tensor(
            2.0, device=pixel_coordinates.device, dtype=pixel_coordinates.dtype
        ) / (hw - 1).clamp(eps)
        return factor * pixel_coordinates - 1

    def denormalize_pixel_coordinates(pixel_coordinates, height, width, eps=1e-8):
        hw = (
            torch.stack([torch.tensor(width), torch.tensor(height)])
            .to(pixel_coordinates.device)
            .to(pixel_coordinates.dtype)
        )
        factor = torch.tensor(2.0) / (hw - 1).clamp(eps)
        return torch.tensor(1.0) / factor * (pixel_coordinates + 1)

    def _build_perspective_param(p, q, axis):
        ones = torch.ones_like(p)[..., 0:1]
        zeros = torch.zeros_like(p)[..., 0:1]
        if axis == "x":
            return torch.cat([p[:, 0:1], p[:, 1:2], ones, zeros, zeros, zeros,
                              -p[:, 0:1] * q[:, 0:1], -p[:, 1:2] * q[:, 0:1]], dim=1)  # fmt: skip
        return torch.cat([zeros, zeros, zeros, p[:, 0:1], p[:, 1:2], ones,
                          -p[:, 0:1] * q[:, 1:2], -p[:, 1:2] * q[:, 1:2]], dim=1)  # fmt: skip

    def get_perspective_transform(points_src, points_dst):
        p = []
        for i in [0, 1, 2, 3]:
            p.append(_build_perspective_param(points_src[:, i], points_dst[:, i], "x"))
            p.append(_build_perspective_param(points_src[:, i], points_dst[:, i], "y"))
        A = torch.stack(p, dim=1)
        b = torch.stack([points_dst[:, 0:1, 0], points_dst[:, 0:1, 1], points_dst[:, 1:2, 0], points_dst[:, 1:2, 1],
                         points_dst[:, 2:3, 0], points_dst[:, 2:3, 1], points_dst[:, 3:4, 0], points_dst[:, 3:4, 1]], dim=1)  # fmt: skip
        X = torch.linalg.solve(A, b)
        M = torch.ones(A.shape[0], 9, device=A.device, dtype=A.dtype)
        M[..., :8] = torch.squeeze(X, dim=-1)
        return M.view(-1, 3, 3)

    aa = torch.from_numpy(arr(5901, 4, 3, scale=0.8))
    aa[3] = torch.tensor([1e-4, -2e-4, 5e-5])  # the Taylor branch
    aa.requires_grad_()
    R = angle_axis_to_rotation_matrix(aa)
    q = rotation_matrix_to_quaternion(R.detach())
    R_back = quaternion_to_rotation_matrix(q)
    qlog = torch.from_numpy(arr(5902, 3, 3, scale=0.5))
    qexp = quaternion_log_to_exp(qlog)
    composed = quaternion_multiply(qexp[:1], qexp[1:])
    pts = torch.from_numpy(arr(5903, 4, 5, 3))
    R_h = F.pad(R, [0, 1, 0, 1])
    R_h[:, 3, 3] = 1.0
    rotated = transform_points(R_h, pts)
    orthonormal = torch.allclose(
        R.detach() @ R.detach().transpose(-1, -2), torch.eye(3).expand(4, 3, 3), atol=1e-5
    )
    loss_r = (rotated * torch.from_numpy(arr(5904, 4, 5, 3))).sum() + R[:, 0, 1].sum()
    center = torch.tensor([[4.0, 3.0], [2.5, 5.0]], requires_grad=True)
    angle = torch.tensor([30.0, -75.0], requires_grad=True)
    scale = torch.tensor([[1.0, 1.0], [0.8, 1.3]], requires_grad=True)
    M2 = get_rotation_matrix2d(center, angle, scale)
    pix = torch.from_numpy(_uniform(5905, 2, 6, 2, high=7.0))
    M2_h = F.pad(M2, [0, 0, 0, 1], "constant", value=0.0)  # convert_affinematrix_to_homography
    M2_h[..., -1, -1] += 1.0
    moved = transform_points(M2_h, pix)
    norm = normalize_pixel_coordinates(moved, 8, 10)
    back = denormalize_pixel_coordinates(norm, 8, 10)
    src = torch.tensor([[[0.0, 0.0], [9.0, 0.0], [9.0, 7.0], [0.0, 7.0]]]).repeat(2, 1, 1)
    dst = (src + torch.from_numpy(arr(5906, 2, 4, 2, scale=0.7))).requires_grad_()
    H = get_perspective_transform(src, dst)
    warped_corners = transform_points(H, src)
    (loss_r + norm.pow(2).sum() + (H * H).sum()).backward()
    return {"R": R, "q": q, "R_back": R_back, "qexp": qexp, "composed": composed, "rotated": rotated,
            "orthonormal": orthonormal, "d_aa": aa.grad, "M2": M2, "d_center": center.grad, "d_angle": angle.grad,
            "d_scale": scale.grad, "norm": norm, "back": back, "H": H, "warped_corners": warped_corners,
            "d_dst": dst.grad}  # fmt: skip


def _kornia_filters(torch):
    F = torch.nn.functional

    def _compute_padding(kernel_size):
        computed = [k - 1 for k in kernel_size]
        out_padding = 2 * len(kernel_size) * [0]
        for i in range(len(kernel_size)):
            computed_tmp = computed[-(i + 1)]
            pad_front = computed_tmp // 2
            pad_rear = computed_tmp - pad_front
            out_padding[2 * i + 0] = pad_front
            out_padding[2 * i + 1] = pad_rear
        return out_padding

    def filter2d(input, kernel, border_type="reflect", normalized=False):
        b, c, h, w = input.shape
        tmp_kernel = kernel[:, None, ...].to(device=input.device, dtype=input.dtype)
        if normalized:
            tmp_kernel = tmp_kernel / tmp_kernel.abs().sum(dim=(-2, -1), keepdim=True)
        tmp_kernel = tmp_kernel.expand(-1, c, -1, -1)
        height, width = tmp_kernel.shape[-2:]
        padding_shape = _compute_padding([height, width])
        input = F.pad(input, padding_shape, mode=border_type)
        tmp_kernel = tmp_kernel.reshape(-1, 1, height, width)
        input = input.view(-1, tmp_kernel.size(0), input.size(-2), input.size(-1))
        output = F.conv2d(input, tmp_kernel, groups=tmp_kernel.size(0), padding=0, stride=1)
        return output.view(b, c, h, w)

    def gaussian(window_size, sigma):
        x = torch.arange(window_size, dtype=torch.float32) - window_size // 2
        if window_size % 2 == 0:
            x = x + 0.5
        gauss = torch.exp(-x.pow(2.0) / (2 * sigma**2))
        return gauss / gauss.sum()

    def get_gaussian_kernel2d(kernel_size, sigma):
        kernel_x = gaussian(kernel_size[1], sigma[1])[None]
        kernel_y = gaussian(kernel_size[0], sigma[0])[None]
        return torch.matmul(kernel_y.unsqueeze(-1), kernel_x.unsqueeze(-1).transpose(-2, -1))

    def gaussian_blur2d(input, kernel_size, sigma, border_type="reflect"):
        return filter2d(input, get_gaussian_kernel2d(kernel_size, sigma), border_type)

    return filter2d, get_gaussian_kernel2d, gaussian_blur2d


@program(rtol=5e-4, atol=5e-5)
def kornia_warp_perspective_affine_sobel_gradients_harris(torch):
    F = torch.nn.functional
    _, _, transform_points = _kornia_points(torch)
    filter2d, _, gaussian_blur2d = _kornia_filters(torch)

    def create_meshgrid(height, width, normalized_coordinates=True, device=None, dtype=None):
        xs = torch.linspace(0, width - 1, width, device=device, dtype=dtype)
        ys = torch.linspace(0, height - 1, height, device=device, dtype=dtype)
        if normalized_coordinates:
            xs = (xs / (width - 1) - 0.5) * 2
            ys = (ys / (height - 1) - 0.5) * 2
        base_grid = torch.stack(torch.meshgrid([xs, ys], indexing="ij"), dim=-1)
        return base_grid.permute(1, 0, 2).unsqueeze(0)

    def normal_transform_pixel(height, width, eps=1e-14, device=None, dtype=None):
        tr_mat = torch.tensor(
            [[1.0, 0.0, -1.0], [0.0, 1.0, -1.0], [0.0, 0.0, 1.0]], device=device, dtype=dtype
        )
        width_denom = eps if width == 1 else width - 1.0
        height_denom = eps if height == 1 else height - 1.0
        tr_mat[0, 0] = tr_mat[0, 0] * 2.0 / width_denom
        tr_mat[1, 1] = tr_mat[1, 1] * 2.0 / height_denom
        return tr_mat.unsqueeze(0)

    def _torch_inverse_cast(input):
        dtype = input.dtype if input.dtype in (torch.float32, torch.float64) else torch.float32
        return torch.inverse(input.to(dtype)).to(input.dtype)

    def normalize_homography(dst_pix_trans_src_pix, dsize_src, dsize_dst):
        src_h, src_w = dsize_src
        dst_h, dst_w = dsize_dst
        src_norm_trans_src_pix = normal_transform_pixel(src_h, src_w).to(dst_pix_trans_src_pix)
        src_pix_trans_src_norm = _torch_inverse_cast(src_norm_trans_src_pix)
        dst_norm_trans_dst_pix = normal_transform_pixel(dst_h, dst_w).to(dst_pix_trans_src_pix)
        return dst_norm_trans_dst_pix @ (dst_pix_trans_src_pix @ src_pix_trans_src_norm)

    def warp_perspective(src, M, dsize, mode="bilinear", padding_mode="zeros", align_corners=True):
        B, _, H, W = src.size()
        h_out, w_out = dsize
        dst_norm_trans_src_norm = normalize_homography(M, (H, W), (h_out, w_out))
        src_norm_trans_dst_norm = _torch_inverse_cast(dst_norm_trans_src_norm)
        grid = create_meshgrid(h_out, w_out, normalized_coordinates=True, device=src.device)
        grid = grid.to(src.dtype).repeat(B, 1, 1, 1)
        grid = transform_points(src_norm_trans_dst_norm[:, None, None], grid)
        return F.grid_sample(
            src, grid, align_corners=align_corners, mode=mode, padding_mode=padding_mode
        )

    def warp_affine(src, M, dsize, mode="bilinear", padding_mode="zeros", align_corners=True):
        B, C, H, W = src.size()
        M_3x3 = F.pad(M, [0, 0, 0, 1], "constant", value=0.0)
        M_3x3[..., -1, -1] += 1.0
        dst_norm_trans_src_norm = normalize_homography(M_3x3, (H, W), dsize)
        src_norm_trans_dst_norm = _torch_inverse_cast(dst_norm_trans_src_norm)
        grid = F.affine_grid(
            src_norm_trans_dst_norm[:, :2, :],
            [B, C, dsize[0], dsize[1]],
            align_corners=align_corners,
        )
        return F.grid_sample(
            src, grid, align_corners=align_corners, mode=mode, padding_mode=padding_mode
        )

    def get_sobel_kernel_3x3():
        return torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])

    def get_sobel_kernel_5x5_2nd_order():
        return torch.tensor([[-1.0, 0.0, 2.0, 0.0, -1.0], [-4.0, 0.0, 8.0, 0.0, -4.0], [-6.0, 0.0, 12.0, 0.0, -6.0],
                             [-4.0, 0.0, 8.0, 0.0, -4.0], [-1.0, 0.0, 2.0, 0.0, -1.0]])  # fmt: skip

    def _get_sobel_kernel_5x5_2nd_order_xy():
        return torch.tensor([[-1.0, -2.0, 0.0, 2.0, 1.0], [-2.0, -4.0, 0.0, 4.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0],
                             [2.0, 4.0, 0.0, -4.0, -2.0], [1.0, 2.0, 0.0, -2.0, -1.0]])  # fmt: skip

    def get_spatial_gradient_kernel2d(mode, order):
        if mode == "sobel" and order == 1:
            kernel_x = get_sobel_kernel_3x3()
            return torch.stack([kernel_x, kernel_x.transpose(0, 1)])
        if mode == "sobel" and order == 2:
            gxx = get_sobel_kernel_5x5_2nd_order()
            gyy = gxx.transpose(0, 1)
            return torch.stack([gxx, _get_sobel_kernel_5x5_2nd_order_xy(), gyy])
        kernel_x = torch.tensor([[0.0, 0.0, 0.0], [-0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])  # "diff"
        return torch.stack([kernel_x, kernel_x.transpose(0, 1)])

    def normalize_kernel2d(input):
        norm = input.abs().sum(dim=-1).sum(dim=-1)
        return input / (norm[..., None, None])

    def spatial_gradient(input, mode="sobel", order=1, normalized=True):
        B, C, H, W = input.shape
        kernel = get_spatial_gradient_kernel2d(mode, order)
        if normalized:
            kernel = normalize_kernel2d(kernel)
        tmp_kernel = kernel[:, None, ...]
        spatial_pad = [
            kernel.size(1) // 2,
            kernel.size(1) // 2,
            kernel.size(2) // 2,
            kernel.size(2) // 2,
        ]
        out_channels = 3 if order == 2 else 2
        padded_inp = F.pad(input.reshape(B * C, 1, H, W), spatial_pad, "replicate")
        out = F.conv2d(padded_inp, tmp_kernel, groups=1, padding=0, stride=1)
        return out.reshape(B, C, out_channels, H, W)

    def harris_response(input, k=0.04, grads_mode="sobel", sigmas=None):
        gradients = spatial_gradient(input, grads_mode)
        dx, dy = gradients[:, :, 0], gradients[:, :, 1]
        dx2 = gaussian_blur2d(dx**2, (7, 7), (1.0, 1.0))
        dy2 = gaussian_blur2d(dy**2, (7, 7), (1.0, 1.0))
        dxy = gaussian_blur2d(dx * dy, (7, 7), (1.0, 1.0))
        det_m = dx2 * dy2 - dxy * dxy
        trace_m = dx2 + dy2
        scores = det_m - k * (trace_m**2)
        if sigmas is not None:
            scores = scores * sigmas.pow(4).view(-1, 1, 1, 1)
        return scores

    rng = np.random.default_rng(6001)
    base = rng.uniform(0, 1, (2, 1, 12, 14)).astype(np.float32)
    img = torch.from_numpy(base)
    img = gaussian_blur2d(img, (3, 3), (0.8, 0.8), border_type="replicate").requires_grad_()
    M = torch.tensor([[[1.05, 0.08, -0.7], [-0.05, 0.95, 0.4], [0.002, -0.003, 1.0]],
                      [[0.9, -0.2, 1.5], [0.15, 1.1, -0.5], [-0.004, 0.001, 1.0]]])  # fmt: skip
    warped = warp_perspective(img, M, (10, 11))
    warped_border = warp_perspective(img, M, (12, 14), padding_mode="border", align_corners=False)
    A = torch.tensor([[[0.8, -0.3, 2.0], [0.25, 0.9, -1.0]], [[1.1, 0.1, -0.5], [0.0, 1.0, 0.75]]])
    aff = warp_affine(img, A, (12, 14), padding_mode="reflection")
    grads1 = spatial_gradient(img)
    grads2 = spatial_gradient(img, order=2)
    diff = spatial_gradient(img, mode="diff", normalized=False)
    magnitude = torch.sqrt(grads1[:, :, 0] ** 2 + grads1[:, :, 1] ** 2 + 1e-6)
    scores = harris_response(img, sigmas=torch.tensor([1.0, 1.5]))
    is_peak = (F.max_pool2d(scores, 3, stride=1, padding=1) == scores) & (
        scores > 0.1 * scores.amax()
    )
    box = filter2d(img, torch.ones(1, 3, 3) / 9.0, border_type="circular")
    loss = (
        warped.pow(2).mean()
        + warped_border.mean()
        + aff.abs().mean()
        + magnitude.mean()
        + scores.sum() * 10
    )
    loss.backward()
    return {"warped": warped, "warped_border": warped_border, "aff": aff, "grads1": grads1, "grads2": grads2,
            "diff": diff, "magnitude": magnitude, "scores": scores, "n_peaks": is_peak.sum(),
            "box": box, "dimg": img.grad, "grid": transform_points(M[:, None, None], torch.zeros(2, 1, 1, 2))}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def kornia_losses_focal_einsum_dice_ssim_tv_psnr_training(torch):
    nn, F = torch.nn, torch.nn.functional
    filter2d, get_gaussian_kernel2d, _ = _kornia_filters(torch)

    def one_hot(labels, num_classes, device=None, dtype=None, eps=1e-6):
        shape = labels.shape
        one_hot = torch.zeros((shape[0], num_classes) + shape[1:], device=device, dtype=dtype)
        return one_hot.scatter_(1, labels.unsqueeze(1), 1.0) + eps

    def focal_loss(input, target, alpha, gamma=2.0, reduction="none", eps=1e-8):
        input_soft = F.softmax(input, dim=1) + eps
        target_one_hot = one_hot(
            target, num_classes=input.shape[1], device=input.device, dtype=input.dtype
        )
        weight = torch.pow(-input_soft + 1.0, gamma)
        focal = -alpha * weight * torch.log(input_soft)
        loss_tmp = torch.einsum("bc...,bc...->b...", (target_one_hot, focal))
        if reduction == "none":
            return loss_tmp
        return torch.mean(loss_tmp) if reduction == "mean" else torch.sum(loss_tmp)

    def focal_loss_v2(pred, target, alpha, gamma=2.0, weight=None):  # newer kornia
        log_pred = pred.log_softmax(1)
        target_one_hot = F.one_hot(target, num_classes=pred.shape[1]).permute(0, 3, 1, 2)
        loss_tmp = -torch.pow(1.0 - log_pred.exp(), gamma) * log_pred * target_one_hot
        num_of_classes = pred.shape[1]
        broadcast_dims = [-1] + [1] * len(pred.shape[2:])
        alpha_fac = torch.tensor([1 - alpha] + [alpha] * (num_of_classes - 1), dtype=loss_tmp.dtype)
        loss_tmp = alpha_fac.view(broadcast_dims) * loss_tmp
        if weight is not None:
            loss_tmp = weight.view(broadcast_dims) * loss_tmp
        return loss_tmp.sum(1).mean()

    def binary_focal_loss_with_logits(pred, target, alpha=0.25, gamma=2.0, pos_weight=None):
        log_probs_pos = F.logsigmoid(pred)
        log_probs_neg = F.logsigmoid(-pred)
        pos_term = -log_probs_neg.exp().pow(gamma) * target * log_probs_pos
        neg_term = -log_probs_pos.exp().pow(gamma) * (1.0 - target) * log_probs_neg
        if alpha is not None:
            pos_term = alpha * pos_term
            neg_term = (1.0 - alpha) * neg_term
        if pos_weight is not None:
            pos_term = pos_weight * pos_term
        return (pos_term + neg_term).mean()

    def dice_loss(pred, target, eps=1e-8):
        pred_soft = pred.softmax(dim=1)
        target_one_hot = (
            F.one_hot(target, num_classes=pred.shape[1]).permute(0, 3, 1, 2).to(pred.dtype)
        )
        dims = (2, 3)
        intersection = torch.sum(pred_soft * target_one_hot, dims)
        cardinality = torch.sum(pred_soft + target_one_hot, dims)
        dice_score = 2.0 * intersection / (cardinality + eps)
        return torch.mean(-dice_score + 1.0)

    def ssim(img1, img2, window_size, max_val=1.0, eps=1e-12):
        kernel = get_gaussian_kernel2d((window_size, window_size), (1.5, 1.5))
        C1 = (0.01 * max_val) ** 2
        C2 = (0.03 * max_val) ** 2
        mu1, mu2 = filter2d(img1, kernel), filter2d(img2, kernel)
        mu1_sq, mu2_sq, mu1_mu2 = mu1**2, mu2**2, mu1 * mu2
        sigma1_sq = filter2d(img1**2, kernel) - mu1_sq
        sigma2_sq = filter2d(img2**2, kernel) - mu2_sq
        sigma12 = filter2d(img1 * img2, kernel) - mu1_mu2
        num = (2.0 * mu1_mu2 + C1) * (2.0 * sigma12 + C2)
        den = (mu1_sq + mu2_sq + C1) * (sigma1_sq + sigma2_sq + C2)
        return num / (den + eps)

    def ssim_loss(img1, img2, window_size, max_val=1.0):
        return torch.clamp((1.0 - ssim(img1, img2, window_size, max_val)) / 2, min=0, max=1).mean()

    def total_variation(img, reduction="sum"):
        pixel_dif1 = img[..., 1:, :] - img[..., :-1, :]
        pixel_dif2 = img[..., :, 1:] - img[..., :, :-1]
        res1, res2 = pixel_dif1.abs(), pixel_dif2.abs()
        reduce_axes = (-2, -1)
        if reduction == "mean":
            res1, res2 = res1.mean(dim=reduce_axes), res2.mean(dim=reduce_axes)
        else:
            res1, res2 = res1.sum(dim=reduce_axes), res2.sum(dim=reduce_axes)
        return res1 + res2

    def psnr(input, target, max_val):
        return 10.0 * torch.log10(max_val**2 / F.mse_loss(input, target, reduction="mean"))

    def charbonnier(x, y, eps=1e-3):
        return torch.sqrt((x - y) ** 2 + eps**2).mean()

    class RestoreSeg(nn.Module):  # a denoiser with a segmentation head
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(1, 6, 3, padding=1), nn.Mish(), nn.Conv2d(6, 6, 3, padding=1), nn.ELU()
            )
            self.restore = nn.Conv2d(6, 1, 3, padding=1)
            self.seg = nn.Conv2d(6, 3, 1)

        def forward(self, x):
            h = self.body(x)
            return torch.sigmoid(self.restore(h) + x), self.seg(h)

    model = set_weights(torch, RestoreSeg(), seed=6101)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    clean = torch.from_numpy(_uniform(6102, 2, 1, 11, 11, low=0.1, high=0.9))
    noisy = (clean + torch.from_numpy(arr(6103, 2, 1, 11, 11, scale=0.1))).clamp(0, 1)
    labels = torch.from_numpy(ints(6104, 3, 2, 11, 11))
    class_w = torch.tensor([0.5, 1.0, 2.0])
    hist = []
    for _ in range(3):
        restored, seg = model(noisy)
        parts = {"ssim": ssim_loss(restored, clean, 5), "tv": total_variation(restored, "mean").mean() * 0.1,
                 "charb": charbonnier(restored, clean), "focal": focal_loss(seg, labels, 0.5, reduction="mean"),
                 "focal_v2": focal_loss_v2(seg, labels, 0.25, weight=class_w),
                 "bfocal": binary_focal_loss_with_logits(seg[:, 1], (labels == 1).float(), pos_weight=torch.tensor(3.0)),
                 "dice": dice_loss(seg, labels)}  # fmt: skip
        loss = sum(parts.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        hist.append({k: v.item() for k, v in parts.items()})
    with torch.no_grad():
        restored, seg = model(noisy)
    return {"hist": hist, "restored": restored, "seg": seg, "psnr": psnr(restored, clean, 1.0),
            "psnr_noisy": psnr(noisy, clean, 1.0), "ssim_map": ssim(restored, clean, 5),
            "tv_sum": total_variation(noisy), "focal_none": focal_loss(seg, labels, 0.5),
            "grads": grads(model)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def swin_stage_training_adamw_no_decay_groups_clip_warmup_cosine(torch):
    nn, F = torch.nn, torch.nn.functional
    _, _, _, SwinBlock, PatchMerging = _swin(torch)

    class PatchEmbed(nn.Module):
        def __init__(self, patch_size=2, in_chans=3, embed_dim=8):
            super().__init__()
            self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
            self.norm = nn.LayerNorm(embed_dim)

        def forward(self, x):
            return self.norm(self.proj(x).permute(0, 2, 3, 1))  # NHWC, as timm's output_fmt="NHWC"

    class TinySwin(nn.Module):
        def __init__(self, num_classes=4):
            super().__init__()
            self.patch_embed = PatchEmbed()
            self.blocks = nn.Sequential(SwinBlock(8, (8, 8), 2, window_size=4, shift_size=0),
                                        SwinBlock(8, (8, 8), 2, window_size=4, shift_size=2))  # fmt: skip
            self.downsample = PatchMerging(8)
            self.norm = nn.LayerNorm(16)
            self.head = nn.Linear(16, num_classes)

        def no_weight_decay_keywords(self):
            return {"relative_position_bias_table"}

        def forward(self, x):
            x = self.downsample(self.blocks(self.patch_embed(x)))
            return self.head(self.norm(x).mean(dim=(1, 2)))

    model = set_weights(torch, TinySwin(), seed=6201)
    skip_keywords = model.no_weight_decay_keywords()
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.ndim <= 1 or name.endswith(".bias") or any(k in name for k in skip_keywords):
            no_decay.append(param)
        else:
            decay.append(param)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.999), eps=1e-8)  # fmt: skip
    warmup, total = 2, 6

    def lr_lambda(step):
        if step < warmup:
            return float(step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    losses, norms, lrs = [], [], []
    for step in range(4):
        x = torch.from_numpy(arr(6210 + step, 3, 3, 16, 16))
        y = torch.from_numpy(ints(6220 + step, 4, 3))
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5, norm_type=2.0)
        )
        if step == 3:
            torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=0.01)
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(sched.get_last_lr())
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(arr(6230, 2, 3, 16, 16)))
    blk = model.blocks[1]
    return {"losses": losses, "norms": norms, "lrs": lrs, "logits": logits,
            "bias_table": blk.attn.relative_position_bias_table, "bias_table_grad": blk.attn.relative_position_bias_table.grad,
            "reduction_w": model.downsample.reduction.weight, "head_grad": model.head.weight.grad,
            "exp_avg_sq": opt.state[model.head.weight]["exp_avg_sq"], "group_sizes": [len(decay), len(no_decay)],
            "has_mask": [b.attn_mask is not None for b in model.blocks]}  # fmt: skip
