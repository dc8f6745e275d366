"""Classical image processing on tensors, as kornia and torchvision.transforms.v2's functional API
compute it: colour-space conversions (grayscale, HSV, YCbCr, linear RGB, Lab), Gaussian blur as a
separable grouped convolution (with a learned sigma) and unsharp masking, Sobel and Laplacian edges
with a small Canny, resizing in every ``F.interpolate`` mode, reflect / replicate / circular
padding in 1-D, 2-D and 3-D, an ESPCN super-resolution net with ICNR-initialised pixel shuffle,
affine warps with ``affine_grid`` + ``grid_sample`` (and a registration fit), histogram
equalisation and matching, the photometric adjustments, grey-scale morphology, Gaussian and
Laplacian pyramids, total-variation denoising and SSIM / MS-SSIM. Images are NumPy arrays from
fixed seeds; every differentiable step is also differentiated."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def _uint8(seed: int, *shape: int, low: int = 0, high: int = 256) -> np.ndarray:
    return np.random.default_rng(seed).integers(low, high, shape).astype(np.uint8)


# ------------------------------------------------------------------------------ shared kornia bits


def _compute_padding(kernel_size):
    """kornia's "same" padding for an F.pad call: last dimension first, front then rear."""
    computed = [k - 1 for k in kernel_size]
    out_padding = 2 * len(kernel_size) * [0]
    for i in range(len(kernel_size)):
        computed_tmp = computed[-(i + 1)]
        pad_front = computed_tmp // 2
        pad_rear = computed_tmp - pad_front
        out_padding[2 * i + 0] = pad_front
        out_padding[2 * i + 1] = pad_rear
    return out_padding


def _filter2d(torch, input, kernel, border_type="reflect", normalized=False):
    """kornia.filters.filter2d: a (B or 1, kh, kw) kernel, applied per channel as one grouped conv."""
    F = torch.nn.functional
    b, c, h, w = input.shape
    tmp_kernel = kernel[:, None, ...].to(device=input.device, dtype=input.dtype)
    if normalized:
        norm = tmp_kernel.abs().sum(dim=-1).sum(dim=-1)
        tmp_kernel = tmp_kernel / norm[..., None, None]
    tmp_kernel = tmp_kernel.expand(-1, c, -1, -1)
    height, width = tmp_kernel.shape[-2:]
    input = F.pad(input, _compute_padding([height, width]), mode=border_type)
    tmp_kernel = tmp_kernel.reshape(-1, 1, height, width)
    input = input.view(-1, tmp_kernel.size(0), input.size(-2), input.size(-1))
    output = F.conv2d(input, tmp_kernel, groups=tmp_kernel.size(0), padding=0, stride=1)
    return output.view(b, c, h, w)


def _gaussian(torch, window_size, sigma):
    """kornia's batched 1-D Gaussian: ``sigma`` is (B, 1), the kernel (B, window_size)."""
    batch_size = sigma.shape[0]
    x = (
        torch.arange(window_size, device=sigma.device, dtype=sigma.dtype) - window_size // 2
    ).expand(batch_size, -1)
    if window_size % 2 == 0:
        x = x + 0.5
    gauss = torch.exp(-x.pow(2.0) / (2 * sigma.pow(2.0)))
    return gauss / gauss.sum(-1, keepdim=True)


def _gaussian_blur2d(torch, input, kernel_size, sigma, border_type="reflect", separable=True):
    """kornia.filters.gaussian_blur2d with a (B, 2) tensor sigma (sigma_y, sigma_x)."""
    ky, kx = kernel_size
    bs = sigma.shape[0]
    kernel_x = _gaussian(torch, kx, sigma[:, 1].view(bs, 1))
    kernel_y = _gaussian(torch, ky, sigma[:, 0].view(bs, 1))
    if separable:
        out = _filter2d(torch, input, kernel_x[:, None, :], border_type)
        return _filter2d(torch, out, kernel_y[..., None], border_type)
    kernel = kernel_y[..., None] * kernel_x[:, None, :]
    return _filter2d(torch, input, kernel, border_type)


# ------------------------------------------------------------------------------------ colour spaces


@program
def kornia_color_conversions_gray_hsv_ycbcr_lab_roundtrips_and_grads(torch):
    """kornia.color: grayscale (also torchvision's uint8 one, truncating), HSV with ``gather`` on
    the argmax channel and back through an 18-way stacked lookup, YCbCr, sRGB <-> linear RGB and
    CIE Lab; round-trip errors, and the gradient of a loss over all of them."""
    image = torch.tensor(_uniform(100, 2, 3, 5, 6), requires_grad=True)

    def rgb_to_grayscale(image, rgb_weights=None):
        if rgb_weights is None:
            rgb_weights = torch.tensor([0.299, 0.587, 0.114], device=image.device)
        r, g, b = image[..., 0:1, :, :], image[..., 1:2, :, :], image[..., 2:3, :, :]
        w_r, w_g, w_b = rgb_weights.to(image).unbind()
        return w_r * r + w_g * g + w_b * b

    def tv_rgb_to_grayscale(img, num_output_channels=1):
        r, g, b = img.unbind(dim=-3)
        l_img = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype)
        l_img = l_img.unsqueeze(dim=-3)
        if num_output_channels == 3:
            return l_img.expand(img.shape)
        return l_img

    def rgb_to_hsv(image, eps=1e-8):
        max_rgb, argmax_rgb = image.max(-3)
        min_rgb, argmin_rgb = image.min(-3)
        deltac = max_rgb - min_rgb
        v = max_rgb
        s = deltac / (max_rgb + eps)
        deltac = torch.where(deltac == 0, torch.ones_like(deltac), deltac)
        rc, gc, bc = torch.unbind((max_rgb.unsqueeze(-3) - image), dim=-3)
        h1 = bc - gc
        h2 = (rc - bc) + 2.0 * deltac
        h3 = (gc - rc) + 4.0 * deltac
        h = torch.stack((h1, h2, h3), dim=-3) / deltac.unsqueeze(-3)
        h = torch.gather(h, dim=-3, index=argmax_rgb.unsqueeze(-3)).squeeze(-3)
        h = (h / 6.0) % 1.0
        h = 2.0 * math.pi * h
        return torch.stack((h, s, v), dim=-3)

    def hsv_to_rgb(image):
        h = image[..., 0, :, :] / (2 * math.pi)
        s = image[..., 1, :, :]
        v = image[..., 2, :, :]
        hi = torch.floor(h * 6) % 6
        f = ((h * 6) % 6) - hi
        one = torch.tensor(1.0, device=image.device, dtype=image.dtype)
        p = v * (one - s)
        q = v * (one - f * s)
        t = v * (one - (one - f) * s)
        hi = hi.long()
        indices = torch.stack([hi, hi + 6, hi + 12], dim=-3)
        out = torch.stack((v, q, p, p, t, v, t, v, v, q, p, p, p, p, t, v, v, q), dim=-3)
        return torch.gather(out, -3, indices)

    def rgb_to_ycbcr(image):
        r, g, b = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        delta = 0.5
        y = 0.299 * r + 0.587 * g + 0.114 * b
        cb = (b - y) * 0.564 + delta
        cr = (r - y) * 0.713 + delta
        return torch.stack([y, cb, cr], -3)

    def ycbcr_to_rgb(image):
        y, cb, cr = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        delta = 0.5
        cb_shifted = cb - delta
        cr_shifted = cr - delta
        r = y + 1.403 * cr_shifted
        g = y - 0.714 * cr_shifted - 0.344 * cb_shifted
        b = y + 1.773 * cb_shifted
        return torch.stack([r, g, b], -3)

    def rgb_to_linear_rgb(image):
        return torch.where(image > 0.04045, torch.pow((image + 0.055) / 1.055, 2.4), image / 12.92)

    def linear_rgb_to_rgb(image):
        threshold = 0.0031308
        return torch.where(
            image > threshold,
            1.055 * torch.pow(image.clamp(min=threshold), 1 / 2.4) - 0.055,
            12.92 * image,
        )

    def rgb_to_xyz(image):
        r, g, b = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
        x = 0.412453 * r + 0.357580 * g + 0.180423 * b
        y = 0.212671 * r + 0.715160 * g + 0.072169 * b
        z = 0.019334 * r + 0.119193 * g + 0.950227 * b
        return torch.stack([x, y, z], -3)

    def rgb_to_lab(image):
        lin_rgb = rgb_to_linear_rgb(image)
        xyz_im = rgb_to_xyz(lin_rgb)
        xyz_ref_white = torch.tensor([0.95047, 1.0, 1.08883], device=xyz_im.device)[
            ..., :, None, None
        ]
        xyz_normalized = torch.div(xyz_im, xyz_ref_white)
        threshold = 0.008856
        power = torch.pow(xyz_normalized.clamp(min=threshold), 1 / 3.0)
        scale = 7.787 * xyz_normalized + 4.0 / 29.0
        xyz_int = torch.where(xyz_normalized > threshold, power, scale)
        x, y, z = xyz_int[..., 0, :, :], xyz_int[..., 1, :, :], xyz_int[..., 2, :, :]
        L = (116.0 * y) - 16.0
        a = 500.0 * (x - y)
        _b = 200.0 * (y - z)
        return torch.stack([L, a, _b], dim=-3)

    gray = rgb_to_grayscale(image)
    hsv = rgb_to_hsv(image)
    rgb_back = hsv_to_rgb(hsv)
    ycbcr = rgb_to_ycbcr(image)
    lab = rgb_to_lab(image)
    lin = rgb_to_linear_rgb(image)
    w = torch.tensor(arr(101, 4))
    loss = (
        w[0] * gray.mean()
        + w[1] * (hsv[:, 1:] ** 2).mean()
        + w[2] * torch.cos(hsv[:, 0]).mean()
        + w[3] * (lab / 100).pow(2).mean()
        + (ycbcr[:, 1:] - 0.5).abs().mean()
    )
    loss.backward()
    img_u8 = torch.tensor(_uint8(102, 3, 4, 5))
    gray_u8 = tv_rgb_to_grayscale(img_u8, num_output_channels=3)
    return {
        "gray": gray,
        "hsv": hsv,
        "hsv_roundtrip_err": (rgb_back - image).abs().max(),
        "ycbcr": ycbcr,
        "ycbcr_roundtrip_err": (ycbcr_to_rgb(ycbcr) - image).abs().max() < 2e-3,
        "linear": lin,
        "srgb_roundtrip": linear_rgb_to_rgb(lin),
        "lab": lab,
        "loss": loss,
        "grad": image.grad,
        "gray_u8": gray_u8,
        "gray_u8_info": f"{gray_u8.dtype} {tuple(gray_u8.shape)} {gray_u8.is_contiguous()}",
    }


# ---------------------------------------------------------------------------------- Gaussian blur


@program(rtol=5e-4, atol=5e-5)  # sigma fit: Adam steps amplify conv summation-order differences
def gaussian_blur_separable_grouped_conv_unsharp_mask_sigma_fit(torch):
    """kornia's gaussian_blur2d with a per-sample sigma (one grouped conv over B*C channels),
    separable against full 2-D, torchvision v2's softmax-made kernel on a uint8 image (rounded
    back), kornia's and scikit-image's unsharp masks, and sigma learnt by gradient descent."""
    F = torch.nn.functional
    img = torch.tensor(_uniform(110, 2, 3, 7, 8), requires_grad=True)
    sigma = torch.tensor([[1.0, 1.5], [0.7, 0.9]])
    blur_sep = _gaussian_blur2d(torch, img, (5, 5), sigma)
    blur_full = _gaussian_blur2d(torch, img, (5, 5), sigma, separable=False)
    blur_even = _gaussian_blur2d(torch, img, (4, 3), sigma, border_type="replicate")

    def tv_get_gaussian_kernel1d(kernel_size, sigma, dtype, device):
        lim = (kernel_size - 1) / (2.0 * math.sqrt(2.0) * sigma)
        x = torch.linspace(-lim, lim, steps=kernel_size, dtype=dtype, device=device).pow_(2)
        return torch.softmax(x.neg_(), dim=0)

    def tv_gaussian_blur(image, kernel_size, sigma):
        shape = image.shape
        if image.ndim == 3:
            image = image.unsqueeze(dim=0)
        fp = torch.is_floating_point(image)
        dtype = image.dtype if fp else torch.float32
        kernel1d_x = tv_get_gaussian_kernel1d(kernel_size[0], sigma[0], dtype, image.device)
        kernel1d_y = tv_get_gaussian_kernel1d(kernel_size[1], sigma[1], dtype, image.device)
        kernel = kernel1d_y.unsqueeze(-1) * kernel1d_x
        kernel = kernel.expand(shape[-3], 1, kernel.shape[0], kernel.shape[1])
        output = image if fp else image.to(dtype=torch.float32)
        padding = [
            kernel_size[0] // 2,
            kernel_size[0] // 2,
            kernel_size[1] // 2,
            kernel_size[1] // 2,
        ]
        output = F.pad(output, padding, mode="reflect")
        output = F.conv2d(output, kernel, groups=shape[-3])
        if not fp:
            output = output.round_().to(dtype=image.dtype)
        return output.reshape(shape)

    u8 = torch.tensor(_uint8(111, 3, 6, 7))
    tv_u8 = tv_gaussian_blur(u8, [3, 5], [0.8, 1.2])
    tv_float = tv_gaussian_blur(img.detach()[0], [5, 3], [1.1, 0.6])

    def unsharp_mask(input, kernel_size, sigma, border_type="reflect"):
        data_blur = _gaussian_blur2d(torch, input, kernel_size, sigma, border_type)
        return input + (input - data_blur)

    def skimage_unsharp(image, sigma, amount=1.0, threshold=0.05):
        blurred = _gaussian_blur2d(torch, image, (5, 5), sigma)
        detail = image - blurred
        sharpened = image + amount * detail
        low_contrast_mask = detail.abs() < threshold
        return torch.where(low_contrast_mask, image, sharpened).clamp(0.0, 1.0)

    sharp = unsharp_mask(img, (3, 3), sigma)
    sharp_sk = skimage_unsharp(img, sigma, amount=1.5)
    (blur_sep.pow(2).sum() + sharp.mean() + sharp_sk.sum() + blur_even.mean()).backward()

    target = _gaussian_blur2d(torch, img.detach(), (5, 5), torch.tensor([[1.6, 1.2]]).expand(2, 2))
    log_sigma = torch.zeros(1, 2, requires_grad=True)
    opt = torch.optim.Adam([log_sigma], lr=0.1)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        pred = _gaussian_blur2d(torch, img.detach(), (5, 5), log_sigma.exp().expand(2, 2))
        loss = F.mse_loss(pred, target) * 1e3
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {
        "blur_sep": blur_sep,
        "sep_matches_full": torch.allclose(blur_sep, blur_full, atol=1e-6),
        "blur_full": blur_full,
        "blur_even": blur_even,
        "tv_u8": tv_u8,
        "tv_float": tv_float,
        "sharp": sharp,
        "sharp_sk": sharp_sk,
        "img_grad": img.grad,
        "losses": losses,
        "sigma": log_sigma.exp(),
    }


# ------------------------------------------------------------------------------------------ edges


@program
def sobel_laplacian_canny_edges_and_conv_padding_modes(torch):
    """kornia's spatial_gradient (normalised Sobel, first and second order, replicate-padded),
    sobel magnitude, the Laplacian filter, a small Canny (angle bins, non-maximum suppression with
    ``gather``, hysteresis with ``max_pool2d``), Conv2d with padding_mode replicate/reflect/circular
    holding Sobel weights, and the gradient of the edge energy."""
    nn, F = torch.nn, torch.nn.functional
    yy, xx = np.mgrid[0:9, 0:10].astype(np.float32)
    base = ((xx - 4.3) ** 2 + (yy - 4.1) ** 2 < 9.0).astype(np.float32) * 0.7 + 0.1
    noisy = base[None, None] + _uniform(120, 2, 1, 9, 10, low=-0.05, high=0.05)
    img = torch.tensor(noisy, requires_grad=True)

    def get_sobel_kernel2d():
        kernel_x = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
        kernel_y = kernel_x.transpose(0, 1)
        return torch.stack([kernel_x, kernel_y])

    def get_sobel_kernel2d_2nd_order():
        gxx = torch.tensor(
            [[-1.0, 0.0, 2.0, 0.0, -1.0], [-4.0, 0.0, 8.0, 0.0, -4.0], [-6.0, 0.0, 12.0, 0.0, -6.0],
             [-4.0, 0.0, 8.0, 0.0, -4.0], [-1.0, 0.0, 2.0, 0.0, -1.0]]
        )  # fmt: skip
        gyy = gxx.transpose(0, 1)
        gxy = torch.tensor(
            [[-1.0, -2.0, 0.0, 2.0, 1.0], [-2.0, -4.0, 0.0, 4.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0],
             [2.0, 4.0, 0.0, -4.0, -2.0], [1.0, 2.0, 0.0, -2.0, -1.0]]
        )  # fmt: skip
        return torch.stack([gxx, gxy, gyy])

    def spatial_gradient(input, order=1, normalized=True):
        kernel = get_sobel_kernel2d() if order == 1 else get_sobel_kernel2d_2nd_order()
        if normalized:
            kernel = kernel / kernel.abs().sum(dim=(-2, -1), keepdim=True)
        b, c, h, w = input.shape
        tmp_kernel = kernel.to(input).detach()[:, None]
        k = kernel.size(-1) // 2
        padded_inp = F.pad(input.reshape(b * c, 1, h, w), [k, k, k, k], "replicate")
        out = F.conv2d(padded_inp, tmp_kernel, padding=0)
        return out.reshape(b, c, -1, h, w)

    def sobel(input, normalized=True, eps=1e-6):
        edges = spatial_gradient(input, normalized=normalized)
        gx, gy = edges[:, :, 0], edges[:, :, 1]
        return torch.sqrt(gx * gx + gy * gy + eps)

    def laplacian(input, kernel_size, border_type="reflect", normalized=True):
        kernel = torch.ones((kernel_size, kernel_size), device=input.device, dtype=input.dtype)
        mid = kernel_size // 2
        kernel[mid, mid] = 1 - kernel_size**2
        return _filter2d(torch, input, kernel[None], border_type, normalized=normalized)

    def canny(magnitude, gx, gy, low=0.05, high=0.12):
        angle = torch.atan2(gy, gx)
        angle_bin = torch.round(angle * 4 / math.pi) % 4
        pad = F.pad(magnitude, [1, 1, 1, 1])
        h, w = magnitude.shape[-2:]

        def shifted(dy, dx):
            return pad[..., 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

        pos = torch.stack([shifted(0, 1), shifted(1, 1), shifted(1, 0), shifted(1, -1)], -3)
        neg = torch.stack([shifted(0, -1), shifted(-1, -1), shifted(-1, 0), shifted(-1, 1)], -3)
        idx = angle_bin.long().unsqueeze(-3)
        n_pos = torch.gather(pos, -3, idx).squeeze(-3)
        n_neg = torch.gather(neg, -3, idx).squeeze(-3)
        is_max = (magnitude >= n_pos) & (magnitude >= n_neg)
        thin = magnitude * is_max
        strong = thin > high
        weak = (thin > low) & ~strong
        grown = F.max_pool2d(strong.float(), kernel_size=3, stride=1, padding=1) > 0
        return angle_bin, is_max, strong | (weak & grown)

    grad1 = spatial_gradient(img)
    grad2 = spatial_gradient(img, order=2)
    mag = sobel(img)
    lap = laplacian(img, 3)
    lap5 = laplacian(img, 5, border_type="replicate", normalized=False)
    bins, is_max, edges = canny(mag.detach(), grad1[:, :, 0].detach(), grad1[:, :, 1].detach())
    convs = {}
    for mode in ("zeros", "replicate", "reflect", "circular"):
        conv = nn.Conv2d(1, 2, 3, padding=1, padding_mode=mode, bias=False)
        with torch.no_grad():
            conv.weight.copy_(get_sobel_kernel2d()[:, None] / 8.0)
        convs[mode] = conv(img)
    (
        mag.sum() + lap.pow(2).mean() + grad2.abs().mean() + convs["circular"].pow(2).mean()
    ).backward()
    return {
        "grad1": grad1,
        "grad2": grad2,
        "magnitude": mag,
        "laplacian": lap,
        "laplacian5": lap5,
        "angle_bins": bins,
        "is_max": is_max,
        "edges": edges,
        "edge_count": int(edges.sum()),
        "convs": convs,
        "replicate_matches_kornia": torch.allclose(convs["replicate"], grad1.squeeze(1), atol=1e-6),
        "img_grad": img.grad,
    }


# ------------------------------------------------------------------------------------------ resize


@program
def resize_every_interpolate_mode_antialias_uint8_and_grads(torch):
    """torchvision-style resizing: antialiased bilinear/bicubic downscales, nearest vs
    nearest-exact at a non-integer scale, area (adaptive average) downscale, bilinear and bicubic
    with and without align_corners, scale factors with and without recompute_scale_factor,
    1-D linear and 3-D trilinear/nearest-exact, a uint8 image resized through float and rounded
    and resized as uint8 (PyTorch's fixed-point path), the layout of a channels-last input, and the
    gradient of every differentiable resize."""
    F = torch.nn.functional
    x = torch.tensor(_uniform(130, 1, 2, 7, 9), requires_grad=True)
    outs = {
        "aa_bilinear": F.interpolate(x, size=(4, 5), mode="bilinear", antialias=True),
        "aa_bicubic": F.interpolate(x, size=(3, 4), mode="bicubic", antialias=True),
        "aa_bilinear_ac": F.interpolate(
            x, size=(3, 4), mode="bilinear", align_corners=True, antialias=True
        ),
        "aa_bilinear_up": F.interpolate(x, size=(9, 12), mode="bilinear", antialias=True),
        "nearest": F.interpolate(x, scale_factor=1.5, mode="nearest"),
        "nearest_exact": F.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
        "nearest_exact_down": F.interpolate(x, size=(4, 4), mode="nearest-exact"),
        "area": F.interpolate(x, size=(3, 4), mode="area"),
        "area_sf": F.interpolate(x, scale_factor=0.5, mode="area"),
        "bilinear": F.interpolate(x, size=(10, 13), mode="bilinear", align_corners=False),
        "bilinear_ac": F.interpolate(x, size=(10, 13), mode="bilinear", align_corners=True),
        "bicubic": F.interpolate(x, size=(5, 11), mode="bicubic", align_corners=False),
        "bicubic_ac": F.interpolate(x, size=(5, 11), mode="bicubic", align_corners=True),
        "sf_recompute": F.interpolate(
            x, scale_factor=0.6, mode="bilinear", recompute_scale_factor=True
        ),
        "sf_no_recompute": F.interpolate(x, scale_factor=0.6, mode="bilinear"),
    }
    w = torch.tensor(arr(131, len(outs)))
    total = sum(w[i] * (o * o).mean() for i, o in enumerate(outs.values()))
    total.backward()
    sig = torch.tensor(_uniform(132, 2, 1, 6))
    vol = torch.tensor(_uniform(133, 1, 1, 3, 4, 5), requires_grad=True)
    tri = F.interpolate(vol, size=(5, 6, 3), mode="trilinear", align_corners=False)
    tri_ac = F.interpolate(vol, scale_factor=(1.5, 0.75, 1.2), mode="trilinear", align_corners=True)
    (tri.sum() + tri_ac.pow(2).sum()).backward()

    u8 = torch.tensor(_uint8(134, 3, 4, 5))
    x_cl = x.detach().contiguous(memory_format=torch.channels_last)
    up = F.interpolate(u8[None].float(), scale_factor=2, mode="bilinear", align_corners=False)
    u8_up = up.round().clamp(0, 255).to(torch.uint8)[0]
    return {
        **outs,
        "shapes": [list(o.shape) for o in outs.values()],
        "x_grad": x.grad,
        "linear": F.interpolate(sig, size=10, mode="linear", align_corners=False),
        "linear_ac": F.interpolate(sig, size=4, mode="linear", align_corners=True),
        "nearest_exact_1d": F.interpolate(sig, scale_factor=1.7, mode="nearest-exact"),
        "tri": tri,
        "tri_ac": tri_ac,
        "tri_nearest_exact": F.interpolate(vol, size=(2, 6, 7), mode="nearest-exact"),
        "vol_grad": vol.grad,
        "u8_up": u8_up,
        "u8_native": [
            F.interpolate(u8[None], size=(7, 9), mode="bilinear", align_corners=True),
            F.interpolate(u8[None], size=(3, 3), mode="bilinear", antialias=True),
            F.interpolate(u8[None], size=(6, 4), mode="bicubic"),
        ],
        "upsample_module": torch.nn.Upsample(scale_factor=(2, 1.5), mode="bicubic")(x),
        "channels_last_strides": [
            F.interpolate(x_cl, size=(4, 5), mode=m).stride() for m in ("bilinear", "area")
        ],
    }


# ----------------------------------------------------------------------------------------- padding


@program
def border_padding_reflect_replicate_circular_1d_2d_3d_and_grads(torch):
    """F.pad with reflect, replicate, circular and constant (negative pads crop) on 1-D, 2-D and
    3-D images, batched and unbatched, the padding modules, periodic convolution by circular
    padding, and the gradients that fold back onto the border pixels."""
    nn, F = torch.nn, torch.nn.functional
    x1 = torch.tensor(arr(140, 2, 3, 6), requires_grad=True)
    x2 = torch.tensor(arr(141, 1, 2, 5, 6), requires_grad=True)
    x3 = torch.tensor(arr(142, 1, 1, 3, 4, 5), requires_grad=True)
    chw = torch.tensor(arr(143, 2, 4, 4))
    pads = {
        "r1": F.pad(x1, (3, 2), mode="reflect"),
        "p1": F.pad(x1, (0, 4), mode="replicate"),
        "c1": F.pad(x1, (2, 3), mode="circular"),
        "r2": F.pad(x2, (2, 1, 3, 0), mode="reflect"),
        "r2_max": F.pad(x2, (5, 5, 4, 4), mode="reflect"),
        "p2": F.pad(x2, (1, 2, 0, 3), mode="replicate"),
        "c2": F.pad(x2, (2, 2, 1, 1), mode="circular"),
        "k2_crop": F.pad(x2, (-1, 1, 0, -2), value=0.5),
        "r3": F.pad(x3, (1, 1, 2, 0, 1, 2), mode="reflect"),
        "p3": F.pad(x3, (2, 0, 1, 1, 0, 2), mode="replicate"),
        "c3": F.pad(x3, (1, 2, 1, 0, 2, 1), mode="circular"),
        "mod_reflect2d": nn.ReflectionPad2d(2)(x2),
        "mod_replicate2d": nn.ReplicationPad2d((1, 0, 2, 1))(x2),
        "mod_reflect3d": nn.ReflectionPad3d(1)(x3),
        "mod_replicate3d": nn.ReplicationPad3d((0, 1, 1, 0, 1, 1))(x3),
        "mod_zero2d": nn.ZeroPad2d((1, 2, 0, 1))(x2),
        "mod_const3d": nn.ConstantPad3d(1, -1.0)(x3),
        "mod_reflect1d": nn.ReflectionPad1d((2, 1))(x1),
    }
    w = torch.tensor(arr(144, len(pads)))
    sum(w[i] * (p * p).sum() for i, p in enumerate(pads.values())).backward()

    kernel = torch.tensor(arr(145, 3, 2, 3, 3))
    periodic_manual = F.conv2d(F.pad(x2.detach(), (1, 1, 1, 1), mode="circular"), kernel)
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular", bias=False)
    with torch.no_grad():
        conv.weight.copy_(kernel)
    return {
        **pads,
        "shapes": {k: list(v.shape) for k, v in pads.items()},
        "unbatched_reflect": F.pad(chw, (1, 2, 2, 1), mode="reflect"),
        "unbatched_replicate": F.pad(chw, (3, 0, 0, 3), mode="replicate"),
        "unbatched_circular": F.pad(chw, (1, 1, 2, 2), mode="circular"),
        "x1_grad": x1.grad,
        "x2_grad": x2.grad,
        "x3_grad": x3.grad,
        "periodic_conv": conv(x2.detach()),
        "periodic_equal": torch.allclose(conv(x2.detach()), periodic_manual, atol=1e-6),
    }


# -------------------------------------------------------------------------------- pixel shuffle SR


@program(rtol=5e-4, atol=5e-5)  # training steps through convolutions (summation order)
def espcn_pixel_shuffle_icnr_super_resolution_training(torch):
    """ESPCN (Shi et al.): tanh convs on the low-resolution image and a sub-pixel convolution
    (``nn.PixelShuffle``) whose weights are ICNR-initialised (fastai's ``icnr_``, from a fixed
    base instead of kaiming) so the first output is a nearest-neighbour upsample; trained a few
    Adam steps against the high-resolution image, with pixel_unshuffle round trips."""
    nn, F = torch.nn, torch.nn.functional
    r = 2

    def icnr_(w, scale=2, base=None):
        ni, nf, h, w_ = w.shape
        ni2 = int(ni / (scale**2))
        k = base.transpose(0, 1)
        k = k.contiguous().view(ni2, nf, -1)
        k = k.repeat(1, 1, scale**2)
        return k.contiguous().view([nf, ni, h, w_]).transpose(0, 1)

    class ESPCN(nn.Module):
        def __init__(self, scale_factor, num_channels=1):
            super().__init__()
            self.first_part = nn.Sequential(
                nn.Conv2d(num_channels, 8, kernel_size=5, padding=5 // 2),
                nn.Tanh(),
                nn.Conv2d(8, 4, kernel_size=3, padding=3 // 2),
                nn.Tanh(),
            )
            self.last_part = nn.Sequential(
                nn.Conv2d(4, num_channels * (scale_factor**2), kernel_size=3, padding=3 // 2),
                nn.PixelShuffle(scale_factor),
            )

        def forward(self, x):
            return self.last_part(self.first_part(x))

    model = set_weights(torch, ESPCN(r), seed=150)
    conv = model.last_part[0]
    base = torch.tensor(arr(151, conv.out_channels // r**2, conv.in_channels, 3, 3, scale=0.2))
    with torch.no_grad():
        conv.weight.copy_(icnr_(conv.weight, r, base))
        conv.bias.zero_()
    yy, xx = np.mgrid[0:8, 0:10].astype(np.float32)
    hr = np.sin(xx / 2.0) * np.cos(yy / 3.0) * 0.4 + 0.5
    hr = torch.tensor(hr[None, None] + _uniform(152, 2, 1, 8, 10, high=0.05))
    lr = F.interpolate(hr, scale_factor=1 / r, mode="bicubic", align_corners=False, antialias=True)
    sub = model.first_part(lr)
    with torch.no_grad():
        init_out = model(lr)
        sub_conv = F.conv2d(sub, base, padding=1)
        icnr_is_nearest = torch.allclose(
            init_out, F.interpolate(sub_conv, scale_factor=r, mode="nearest"), atol=1e-6
        )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses, psnrs = [], []
    for _ in range(4):
        sr = model(lr)
        loss = F.mse_loss(sr, hr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        psnrs.append((10 * torch.log10(1.0 / loss.detach())).item())
    feats = torch.tensor(arr(153, 2, 3, 6, 4))
    unshuffled = F.pixel_unshuffle(feats, 2)
    return {
        "lr": lr,
        "init_out": init_out,
        "icnr_is_nearest": icnr_is_nearest,
        "losses": losses,
        "psnrs": psnrs,
        "sr": sr,
        "grads": grads(model),
        "unshuffled": unshuffled,
        "roundtrip": torch.equal(nn.PixelShuffle(2)(unshuffled), feats),
        "shapes": [list(lr.shape), list(sr.shape), list(unshuffled.shape)],
        "module_repr": repr(model.last_part),
    }


# ---------------------------------------------------------------------------------- affine warps


@program(rtol=5e-4, atol=5e-5)  # registration fit: Adam steps over grid_sample gradients
def affine_grid_sample_padding_modes_align_corners_and_registration(torch):
    """Rotation/scale/translation matrices built from tensors, ``affine_grid`` + ``grid_sample``
    in bilinear, nearest and bicubic modes with zeros, border and reflection padding and both
    align_corners settings, gradients to the image and the angle, a 3-D warp, and an image
    registration fit of the four warp parameters with Adam."""
    F = torch.nn.functional
    img = torch.tensor(_uniform(160, 2, 1, 6, 7), requires_grad=True)
    angle = torch.tensor([0.3, -0.5], requires_grad=True)
    scale = torch.tensor([1.2, 0.8], requires_grad=True)
    shift = torch.tensor([[0.13, -0.21], [-0.37, 0.29]], requires_grad=True)

    def affine_theta(angle, scale, shift):
        cos, sin = torch.cos(angle) * scale, torch.sin(angle) * scale
        row0 = torch.stack([cos, -sin, shift[:, 0]], -1)
        row1 = torch.stack([sin, cos, shift[:, 1]], -1)
        return torch.stack([row0, row1], -2)

    theta = affine_theta(angle, scale, shift)
    warps = {}
    for align_corners in (False, True):
        grid = F.affine_grid(theta, list(img.shape), align_corners=align_corners)
        for padding_mode in ("zeros", "border", "reflection"):
            key = f"bilinear_{padding_mode}_{'ac' if align_corners else 'noac'}"
            warps[key] = F.grid_sample(img, grid, mode="bilinear", padding_mode=padding_mode,
                                       align_corners=align_corners)  # fmt: skip
        warps[f"nearest_{align_corners}"] = F.grid_sample(
            img, grid, mode="nearest", padding_mode="reflection", align_corners=align_corners
        )
        warps[f"bicubic_{align_corners}"] = F.grid_sample(
            img, grid, mode="bicubic", padding_mode="border", align_corners=align_corners
        )
    w = torch.tensor(arr(161, len(warps)))
    sum(w[i] * (o * o).mean() for i, o in enumerate(warps.values())).backward()

    vol = torch.tensor(_uniform(162, 1, 1, 3, 4, 5), requires_grad=True)
    theta3 = torch.tensor([[[0.9, 0.1, 0.0, 0.05], [-0.1, 0.9, 0.2, 0.0], [0.0, -0.2, 1.1, -0.1]]],
                          requires_grad=True)  # fmt: skip
    grid3 = F.affine_grid(theta3, [1, 1, 3, 4, 5], align_corners=False)
    warped3 = F.grid_sample(vol, grid3, mode="bilinear", padding_mode="border", align_corners=False)
    warped3.pow(2).sum().backward()

    fixed = img.detach()
    true_theta = affine_theta(torch.tensor([0.2, -0.15]), torch.tensor([1.1, 0.95]),
                              torch.tensor([[0.1, -0.05], [0.0, 0.1]]))  # fmt: skip
    target = F.grid_sample(fixed, F.affine_grid(true_theta, list(fixed.shape), align_corners=False),
                           padding_mode="border", align_corners=False)  # fmt: skip
    p_angle = torch.zeros(2, requires_grad=True)
    p_log_scale = torch.zeros(2, requires_grad=True)
    p_shift = torch.zeros(2, 2, requires_grad=True)
    opt = torch.optim.Adam([p_angle, p_log_scale, p_shift], lr=0.03)
    losses = []
    for _ in range(6):
        th = affine_theta(p_angle, p_log_scale.exp(), p_shift)
        grid = F.affine_grid(th, list(fixed.shape), align_corners=False)
        moved = F.grid_sample(fixed, grid, padding_mode="border", align_corners=False)
        loss = F.mse_loss(moved, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {
        "theta": theta,
        "warps": warps,
        "img_grad": img.grad,
        "angle_grad": angle.grad,
        "scale_grad": scale.grad,
        "shift_grad": shift.grad,
        "warped3": warped3,
        "vol_grad": vol.grad,
        "theta3_grad": theta3.grad,
        "losses": losses,
        "params": [p_angle, p_log_scale, p_shift],
    }


# --------------------------------------------------------------------------------------- histograms


@program
def histogram_equalization_histc_bincount_matching_and_soft_histogram(torch):
    """Histogram equalisation three ways: float images with ``histc`` and a normalised
    ``cumsum`` CDF used as a lookup table, torchvision v1's uint8 ``_scale_channel`` (bincount,
    floor divisions, a padded LUT), scikit-image's histogram matching (``unique`` counts,
    quantiles, ``searchsorted`` interpolation), and kornia's differentiable Gaussian-kernel
    histogram fitted to a flat target by gradient descent."""
    F = torch.nn.functional
    img = torch.tensor(_uniform(170, 3, 8, 8) ** 2)

    def equalize_float(channel, bins=16):
        hist = torch.histc(channel, bins=bins, min=0.0, max=1.0)
        cdf = hist.cumsum(0)
        cdf = (cdf - cdf.min()) / (cdf[-1] - cdf.min())
        idx = (channel * bins).long().clamp(max=bins - 1)
        return cdf[idx], hist

    eq_float, hists = zip(*(equalize_float(c) for c in img))
    eq_float = torch.stack(eq_float)

    def scale_channel(img_chan):
        hist = torch.bincount(img_chan.reshape(-1), minlength=256)
        nonzero_hist = hist[hist != 0]
        step = torch.div(nonzero_hist[:-1].sum(), 255, rounding_mode="floor")
        if step == 0:
            return img_chan
        lut = torch.div(torch.cumsum(hist, 0) + torch.div(step, 2, rounding_mode="floor"), step,
                        rounding_mode="floor")  # fmt: skip
        lut = F.pad(lut, [1, 0])[:-1].clamp(0, 255)
        return lut[img_chan.to(torch.int64)].to(torch.uint8)

    u8 = torch.tensor(_uint8(171, 3, 10, 10, low=90, high=150))
    u8[1] = 7  # a flat channel is returned unchanged
    eq_u8 = torch.stack([scale_channel(u8[c]) for c in range(u8.size(0))])
    gpu_style_hist = torch.histc(u8[0].to(torch.float32), bins=256, min=0, max=255)

    def match_histograms(source, reference):
        src_values, src_unique_indices, src_counts = torch.unique(
            source.reshape(-1), return_inverse=True, return_counts=True
        )
        ref_values, ref_counts = torch.unique(reference.reshape(-1), return_counts=True)
        src_quantiles = torch.cumsum(src_counts, 0).double() / source.numel()
        ref_quantiles = torch.cumsum(ref_counts, 0).double() / reference.numel()
        idx = torch.searchsorted(ref_quantiles, src_quantiles).clamp(1, ref_quantiles.numel() - 1)
        q0, q1 = ref_quantiles[idx - 1], ref_quantiles[idx]
        v0, v1 = ref_values[idx - 1].double(), ref_values[idx].double()
        t = ((src_quantiles - q0) / (q1 - q0)).clamp(0, 1)
        interp = v0 + t * (v1 - v0)
        return interp[src_unique_indices].reshape(source.shape)

    ref = torch.tensor(_uint8(172, 10, 10, low=0, high=256))
    matched = match_histograms(u8[0], ref)

    def marginal_pdf(values, bins, sigma, epsilon=1e-10):
        residuals = values - bins.unsqueeze(0).unsqueeze(0)
        kernel_values = torch.exp(-0.5 * (residuals / sigma).pow(2))
        pdf = torch.mean(kernel_values, dim=1)
        normalization = torch.sum(pdf, dim=1).unsqueeze(1) + epsilon
        return pdf / normalization, kernel_values

    def histogram(x, bins, bandwidth, epsilon=1e-10):
        pdf, _ = marginal_pdf(x.unsqueeze(2), bins, bandwidth, epsilon)
        return pdf

    bins = torch.linspace(0, 1, 12)
    bandwidth = torch.tensor(0.9 * (bins[1] - bins[0]).item())
    x = img[:2].reshape(2, -1).clone().requires_grad_(True)
    opt = torch.optim.SGD([x], lr=0.5)
    target = torch.full((2, 12), 1.0 / 12)
    losses = []
    for _ in range(5):
        pdf = histogram(x, bins, bandwidth)
        loss = (pdf - target).abs().sum() + F.kl_div(pdf.clamp_min(1e-8).log(), target,
                                                      reduction="batchmean")  # fmt: skip
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(0, 1)
        losses.append(loss.item())
    return {
        "eq_float": eq_float,
        "hists": list(hists),
        "eq_u8": eq_u8,
        "flat_unchanged": torch.equal(eq_u8[1], u8[1]),
        "gpu_style_hist_nonzero": gpu_style_hist.nonzero().flatten(),
        "gpu_matches_bincount": torch.equal(
            gpu_style_hist.long(), torch.bincount(u8[0].flatten(), minlength=256)[:256]
        ),
        "matched": matched,
        "soft_losses": losses,
        "soft_final": x,
        "soft_hist": histogram(x.detach(), bins, bandwidth),
    }


# ------------------------------------------------------------------------------------ adjustments


@program
def photometric_adjustments_gamma_brightness_contrast_saturation_hue_sharpness(torch):
    """torchvision's functional adjustments on float and uint8 images (``_blend`` with clamping
    and truncation, contrast against the grayscale mean, saturation, hue through ``_rgb2hsv`` /
    ``_hsv2rgb`` with its one-hot ``einsum``, gamma, sharpness keeping the border, autocontrast,
    posterize with a negative int mask, solarize, invert), a fixed-order ColorJitter, and kornia's
    per-sample tensor factors with gradients to the image and the factors."""
    F = torch.nn.functional
    img = torch.tensor(_uniform(180, 2, 3, 5, 6), requires_grad=True)
    u8 = torch.tensor(_uint8(181, 3, 5, 6))

    def _max_value(dtype):
        return 255 if dtype == torch.uint8 else 1.0

    def _blend(img1, img2, ratio):
        ratio = float(ratio)
        bound = _max_value(img1.dtype)
        return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, bound).to(img1.dtype)

    def rgb_to_grayscale(img):
        r, g, b = img.unbind(dim=-3)
        return (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(dim=-3)

    def adjust_brightness(img, brightness_factor):
        return _blend(img, torch.zeros_like(img), brightness_factor)

    def adjust_contrast(img, contrast_factor):
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        mean = torch.mean(rgb_to_grayscale(img).to(dtype), dim=(-3, -2, -1), keepdim=True)
        return _blend(img, mean, contrast_factor)

    def adjust_saturation(img, saturation_factor):
        return _blend(img, rgb_to_grayscale(img), saturation_factor)

    def _rgb2hsv(img):
        r, g, _ = img.unbind(dim=-3)
        maxc = torch.max(img, dim=-3).values
        minc = torch.min(img, dim=-3).values
        eqc = maxc == minc
        cr = maxc - minc
        ones = torch.ones_like(maxc)
        s = cr / torch.where(eqc, ones, maxc)
        cr_divisor = torch.where(eqc, ones, cr)
        rc = (maxc - r) / cr_divisor
        gc = (maxc - g) / cr_divisor
        bc = (maxc - img[..., 2, :, :]) / cr_divisor
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
        if img.dtype == torch.uint8:
            img = img.to(dtype=torch.float32) / 255.0
        img = _rgb2hsv(img)
        h, s, v = img.unbind(dim=-3)
        h = (h + hue_factor) % 1.0
        img_hue_adj = _hsv2rgb(torch.stack((h, s, v), dim=-3))
        if orig_dtype == torch.uint8:
            img_hue_adj = (img_hue_adj * 255.0).to(dtype=orig_dtype)
        return img_hue_adj

    def convert_image_dtype(image, dtype):
        if image.is_floating_point():
            eps = 1e-3
            max_val = float(torch.iinfo(dtype).max)
            return image.mul(max_val + 1.0 - eps).to(dtype)
        return image.to(dtype) / float(torch.iinfo(image.dtype).max)

    def adjust_gamma(img, gamma, gain=1.0):
        result = img
        dtype = img.dtype
        if not torch.is_floating_point(img):
            result = convert_image_dtype(result, torch.float32)
        result = (gain * result**gamma).clamp(0, 1)
        return convert_image_dtype(result, dtype) if dtype == torch.uint8 else result

    def adjust_sharpness(img, sharpness_factor):
        if img.size(-1) <= 2 or img.size(-2) <= 2:
            return img
        dtype = img.dtype if torch.is_floating_point(img) else torch.float32
        kernel = torch.ones((3, 3), dtype=dtype, device=img.device)
        kernel[1, 1] = 5.0
        kernel /= kernel.sum()
        kernel = kernel.expand(img.shape[-3], 1, kernel.shape[0], kernel.shape[1])
        result_tmp = img.reshape(-1, *img.shape[-3:]).to(dtype)
        result_tmp = F.conv2d(result_tmp, kernel, groups=result_tmp.shape[-3])
        if img.dtype == torch.uint8:
            result_tmp = torch.round(result_tmp).clamp(0, 255)
        result_tmp = result_tmp.to(img.dtype).reshape(*img.shape[:-2], *result_tmp.shape[-2:])
        degenerate = img.clone()
        degenerate[..., 1:-1, 1:-1] = result_tmp
        return _blend(img, degenerate, sharpness_factor)

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

    def posterize(img, bits):
        mask = -int(2 ** (8 - bits))
        return img & mask

    def invert(img):
        return img.bitwise_not() if img.dtype == torch.uint8 else _max_value(img.dtype) - img

    def solarize(img, threshold):
        return torch.where(img >= threshold, invert(img), img)

    u8_flat = u8.clone()
    u8_flat[2] = 200  # autocontrast leaves a constant channel alone
    uint8_results = {
        "brightness": adjust_brightness(u8, 1.7),
        "contrast": adjust_contrast(u8, 0.6),
        "saturation": adjust_saturation(u8, 1.8),
        "hue": adjust_hue(u8, 0.2),
        "gamma": adjust_gamma(u8, 0.7),
        "sharpness": adjust_sharpness(u8, 2.0),
        "autocontrast": autocontrast(u8_flat),
        "posterize": posterize(u8, 3),
        "solarize": solarize(u8, 128),
        "invert": invert(u8),
    }
    fimg = img.detach()
    jitter_order = [int(i) for i in np.random.default_rng(182).permutation(4)]
    factors = [1.3, 0.7, 1.4, -0.12]
    jittered = fimg
    for fn_id in jitter_order:
        if fn_id == 0:
            jittered = adjust_brightness(jittered, factors[0])
        elif fn_id == 1:
            jittered = adjust_contrast(jittered, factors[1])
        elif fn_id == 2:
            jittered = adjust_saturation(jittered, factors[2])
        else:
            jittered = adjust_hue(jittered, factors[3])
    float_results = {
        "hue": adjust_hue(fimg, 0.35),
        "hue_roundtrip": (_hsv2rgb(_rgb2hsv(fimg)) - fimg).abs().max(),
        "gamma": adjust_gamma(fimg, 2.2, gain=0.9),
        "sharpness": adjust_sharpness(fimg, 0.3),
        "autocontrast": autocontrast(fimg),
        "solarize": solarize(fimg, 0.6),
        "jittered": jittered,
    }

    # kornia.enhance: per-sample tensor factors that broadcast and are differentiated
    brightness = torch.tensor([0.1, -0.2], requires_grad=True)
    contrast = torch.tensor([1.2, 0.8], requires_grad=True)
    saturation = torch.tensor([0.5, 1.5], requires_grad=True)
    gamma = torch.tensor([0.8, 1.6], requires_grad=True)

    def k_brightness(image, factor):
        return (image + factor.view(-1, 1, 1, 1)).clamp(0, 1)

    def k_contrast(image, factor):
        return (image * factor.view(-1, 1, 1, 1)).clamp(0, 1)

    def k_saturation(image, factor):
        gray = 0.299 * image[:, 0:1] + 0.587 * image[:, 1:2] + 0.114 * image[:, 2:3]
        return (gray + factor.view(-1, 1, 1, 1) * (image - gray)).clamp(0, 1)

    def k_gamma(image, g, gain=1.0):
        return torch.pow(image, g.view(-1, 1, 1, 1)) * gain

    out = k_gamma(k_saturation(k_contrast(k_brightness(img, brightness), contrast), saturation),
                  gamma)  # fmt: skip
    loss = ((out - 0.5) ** 2).mean()
    loss.backward()
    return {
        "u8": uint8_results,
        "dtypes": [str(v.dtype) for v in uint8_results.values()],
        "float": float_results,
        "jitter_order": jitter_order,
        "kornia_out": out,
        "kornia_loss": loss,
        "img_grad": img.grad,
        "factor_grads": [brightness.grad, contrast.grad, saturation.grad, gamma.grad],
    }


# ------------------------------------------------------------------------------------- morphology


@program
def grayscale_morphology_max_pool_and_unfold_structuring_elements(torch):
    """Dilation and erosion two ways: ``max_pool2d`` (erosion as ``-max_pool2d(-x)``) and kornia's
    unfold engine with a non-flat structuring element and geodesic borders; opening, closing,
    morphological gradient, top-hat and black-hat, a binary mask cleaned by opening, a skeleton
    step, the im2col (``F.unfold``) variant, and gradients through the max selections."""
    F = torch.nn.functional
    img = torch.tensor(_uniform(190, 2, 1, 7, 8), requires_grad=True)
    kernel = torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    structuring_element = torch.tensor(_uniform(191, 3, 3, high=0.1))

    def dilation(tensor, kernel, structuring_element=None, border_type="geodesic",
                 border_value=0.0, max_val=1e4):  # fmt: skip
        se_h, se_w = kernel.shape
        origin = [se_h // 2, se_w // 2]
        pad_e = [origin[1], se_w - origin[1] - 1, origin[0], se_h - origin[0] - 1]
        if border_type == "geodesic":
            border_value = -max_val
            border_type = "constant"
        output = F.pad(tensor, pad_e, mode=border_type, value=border_value)
        if structuring_element is None:
            neighborhood = torch.zeros_like(kernel)
            neighborhood[kernel == 0] = -max_val
        else:
            neighborhood = structuring_element.clone()
            neighborhood[kernel == 0] = -max_val
        output = output.unfold(2, se_h, 1).unfold(3, se_w, 1)
        output, _ = torch.max(output + neighborhood.flip((0, 1)), 4)
        output, _ = torch.max(output, 4)
        return output

    def erosion(tensor, kernel, structuring_element=None, border_type="geodesic",
                border_value=0.0, max_val=1e4):  # fmt: skip
        se_h, se_w = kernel.shape
        origin = [se_h // 2, se_w // 2]
        pad_e = [origin[1], se_w - origin[1] - 1, origin[0], se_h - origin[0] - 1]
        if border_type == "geodesic":
            border_value = max_val
            border_type = "constant"
        output = F.pad(tensor, pad_e, mode=border_type, value=border_value)
        if structuring_element is None:
            neighborhood = torch.zeros_like(kernel)
            neighborhood[kernel == 0] = -max_val
        else:
            neighborhood = structuring_element.clone()
            neighborhood[kernel == 0] = -max_val
        output = output.unfold(2, se_h, 1).unfold(3, se_w, 1)
        output, _ = torch.min(output - neighborhood, 4)
        output, _ = torch.min(output, 4)
        return output

    def opening(t, k, **kw):
        return dilation(erosion(t, k, **kw), k, **kw)

    def closing(t, k, **kw):
        return erosion(dilation(t, k, **kw), k, **kw)

    dil = dilation(img, kernel)
    ero = erosion(img, kernel)
    dil_se = dilation(img, kernel, structuring_element)
    ero_replicate = erosion(img, torch.ones(3, 3), border_type="replicate")
    results = {
        "dilation": dil,
        "erosion": ero,
        "dilation_se": dil_se,
        "erosion_replicate": ero_replicate,
        "opening": opening(img, kernel),
        "closing": closing(img, kernel),
        "gradient": dil - ero,
        "top_hat": img - opening(img, kernel),
        "black_hat": closing(img, kernel) - img,
    }
    pool_dil = F.max_pool2d(img, kernel_size=3, stride=1, padding=1)
    pool_ero = -F.max_pool2d(-img, kernel_size=3, stride=1, padding=1)
    square = torch.ones(3, 3)
    b, c, h, w = img.shape
    cols = F.unfold(F.pad(img, [1, 1, 1, 1], mode="replicate"), kernel_size=3)
    im2col_dil = cols.view(b, c, 9, h * w).amax(dim=2).view(b, c, h, w)
    weights = torch.tensor(arr(192, len(results)))
    loss = sum(weights[i] * (v * v).mean() for i, v in enumerate(results.values()))
    loss = loss + pool_dil.mean() + pool_ero.pow(2).mean() + im2col_dil.sum() * 0.1
    loss.backward()

    mask = (img.detach() > 0.5).float()
    cleaned = F.max_pool2d(-F.max_pool2d(-mask, 3, 1, 1), 3, 1, 1)
    skel_step = torch.relu(mask - cleaned)
    return {
        **results,
        "pool_matches_unfold": torch.allclose(pool_dil, dilation(img, square), atol=0),
        "pool_erosion_matches": torch.allclose(pool_ero, erosion(img, square), atol=0),
        "im2col_dilation": im2col_dil,
        "mask_cleaned": cleaned,
        "skeleton_step": skel_step,
        "img_grad": img.grad,
    }


# ---------------------------------------------------------------------------------------- pyramids


@program
def gaussian_laplacian_pyramids_avg_pool_and_multiscale_loss(torch):
    """kornia's pyrdown (5x5 binomial blur with reflect padding, then ``avg_pool2d`` with
    ceil_mode on odd sizes) and pyrup (bilinear upsample, then blur), a Gaussian pyramid, a
    Laplacian pyramid with exact reconstruction, an average-pooling pyramid with
    ``count_include_pad=False``, and a multi-scale L1 loss differentiated to the prediction."""
    F = torch.nn.functional
    img = torch.tensor(_uniform(200, 1, 2, 11, 13))

    def pyramid_gaussian_kernel():
        return (
            torch.tensor(
                [
                    [1.0, 4.0, 6.0, 4.0, 1.0],
                    [4.0, 16.0, 24.0, 16.0, 4.0],
                    [6.0, 24.0, 36.0, 24.0, 6.0],
                    [4.0, 16.0, 24.0, 16.0, 4.0],
                    [1.0, 4.0, 6.0, 4.0, 1.0],
                ]
            )  # fmt: skip
            / 256.0
        )

    def pyrdown(input, border_type="reflect", factor=2.0):
        kernel = pyramid_gaussian_kernel()[None].to(input)
        x_blur = _filter2d(torch, input, kernel, border_type)
        return F.avg_pool2d(x_blur, kernel_size=int(factor), stride=int(factor), ceil_mode=True)

    def pyrup(input, border_type="reflect", align_corners=False):
        kernel = pyramid_gaussian_kernel()[None].to(input)
        _, _, height, width = input.shape
        x_up = F.interpolate(input, size=(height * 2, width * 2), mode="bilinear",
                             align_corners=align_corners)  # fmt: skip
        return _filter2d(torch, x_up, kernel, border_type)

    def build_pyramid(input, max_level):
        pyramid = [input]
        for _ in range(max_level - 1):
            pyramid.append(pyrdown(pyramid[-1]))
        return pyramid

    def build_laplacian_pyramid(input, max_level):
        gaussian = build_pyramid(input, max_level)
        laplacian = []
        for i in range(max_level - 1):
            up = F.interpolate(gaussian[i + 1], size=gaussian[i].shape[-2:], mode="bilinear",
                               align_corners=False)  # fmt: skip
            laplacian.append(gaussian[i] - up)
        laplacian.append(gaussian[-1])
        return laplacian

    def reconstruct(laplacian):
        out = laplacian[-1]
        for lap in reversed(laplacian[:-1]):
            out = lap + F.interpolate(
                out, size=lap.shape[-2:], mode="bilinear", align_corners=False
            )
        return out

    gauss = build_pyramid(img, 3)
    lap = build_laplacian_pyramid(img, 3)
    recon = reconstruct(lap)
    up = pyrup(gauss[1])
    up_ac = pyrup(gauss[2], border_type="replicate", align_corners=True)
    pool_pyr = [img]
    for _ in range(2):
        pool_pyr.append(F.avg_pool2d(pool_pyr[-1], 3, stride=2, padding=1, count_include_pad=False))

    pred = torch.tensor(_uniform(201, 1, 2, 11, 13), requires_grad=True)

    def multiscale_l1(pred, target, levels=3, weights=(1.0, 0.5, 0.25)):
        loss = 0.0
        for w, p, t in zip(weights, build_pyramid(pred, levels), build_pyramid(target, levels)):
            loss = loss + w * F.l1_loss(p, t)
        return loss

    loss = multiscale_l1(pred, img)
    loss.backward()
    return {
        "gauss": gauss,
        "gauss_shapes": [list(g.shape) for g in gauss],
        "laplacian": lap,
        "recon_err": (recon - img).abs().max() < 1e-5,
        "pyrup": up,
        "pyrup_ac": up_ac,
        "pool_pyramid": pool_pyr,
        "ms_loss": loss,
        "pred_grad": pred.grad,
    }


# ----------------------------------------------------------------------------- total variation


@program(rtol=5e-4, atol=5e-5)  # Adam steps on sums over the image
def total_variation_denoising_anisotropic_isotropic_adam(torch):
    """kornia's anisotropic total variation (sum and mean reductions), an isotropic TV with
    replicate-padded forward differences, and TV-regularised denoising (ROF) by Adam on a noisy
    piecewise-constant image, tracking the loss and the PSNR against the clean image."""
    F = torch.nn.functional
    clean = np.zeros((1, 3, 10, 10), np.float32)
    clean[:, :, 2:7, 3:8] = 0.8
    clean[:, 1, 5:9, 1:5] = 0.4
    noisy = torch.tensor(clean + arr(210, 1, 3, 10, 10, scale=0.1))
    clean = torch.tensor(clean)

    def total_variation(img, reduction="sum"):
        pixel_dif1 = img[..., 1:, :] - img[..., :-1, :]
        pixel_dif2 = img[..., :, 1:] - img[..., :, :-1]
        res1 = pixel_dif1.abs()
        res2 = pixel_dif2.abs()
        reduce_axes = (-3, -2, -1)
        if reduction == "mean":
            if img.is_floating_point():
                res1 = res1.to(img).mean(dim=reduce_axes)
                res2 = res2.to(img).mean(dim=reduce_axes)
            else:
                res1 = res1.float().mean(dim=reduce_axes)
                res2 = res2.float().mean(dim=reduce_axes)
        else:
            res1 = res1.sum(dim=reduce_axes)
            res2 = res2.sum(dim=reduce_axes)
        return res1 + res2

    def isotropic_tv(img, eps=1e-8):
        dx = F.pad(img[..., :, 1:] - img[..., :, :-1], (0, 1, 0, 0), mode="replicate")
        dy = F.pad(img[..., 1:, :] - img[..., :-1, :], (0, 0, 0, 1), mode="replicate")
        return torch.sqrt(dx**2 + dy**2 + eps).sum(dim=(-3, -2, -1))

    def psnr(a, b, max_val=1.0):
        return 10.0 * torch.log10(max_val**2 / F.mse_loss(a, b))

    x = noisy.clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=0.02)
    lam = 0.02
    losses, psnrs = [], []
    for _ in range(8):
        opt.zero_grad()
        loss = 0.5 * F.mse_loss(x, noisy, reduction="sum") + lam * isotropic_tv(x).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        psnrs.append(psnr(x.detach(), clean).item())
    y = noisy.clone().requires_grad_(True)
    tv_mean = total_variation(y, reduction="mean")
    tv_mean.sum().backward()
    u8 = torch.tensor(_uint8(211, 2, 1, 4, 5))
    return {
        "tv_sum_noisy": total_variation(noisy),
        "tv_sum_clean": total_variation(clean),
        "tv_mean": tv_mean,
        "tv_mean_grad": y.grad,
        "tv_u8": total_variation(u8.long()),
        "tv_u8_mean": total_variation(u8, reduction="mean"),
        "iso_tv": isotropic_tv(noisy),
        "losses": losses,
        "psnrs": psnrs,
        "psnr_noisy": psnr(noisy, clean),
        "denoised": x,
    }


# ------------------------------------------------------------------------------------------- SSIM


@program(rtol=1e-3, atol=1e-4)  # SSIM subtracts nearly equal moments (E[x^2] - mu^2)
def ssim_gaussian_window_ms_ssim_and_ssim_loss_training(torch):
    """pytorch-msssim's SSIM (a 1-D Gaussian window applied along H then W with grouped
    ``conv2d``, valid padding), a small MS-SSIM with ``avg_pool2d`` between scales, kornia's
    same-size SSIM map (reflect padding, 2-D window), and a tiny denoising net trained with
    the loss ``1 - SSIM`` mixed with L1."""
    nn, F = torch.nn, torch.nn.functional

    def _fspecial_gauss_1d(size, sigma):
        coords = torch.arange(size, dtype=torch.float)
        coords -= size // 2
        g = torch.exp(-(coords**2) / (2 * sigma**2))
        g /= g.sum()
        return g.unsqueeze(0).unsqueeze(0)

    def gaussian_filter(input, win):
        C = input.shape[1]
        out = input
        for i, s in enumerate(input.shape[2:]):
            if s >= win.shape[-1]:
                out = F.conv2d(out, weight=win.transpose(2 + i, -1), stride=1, padding=0, groups=C)
        return out

    def _ssim(X, Y, data_range, win, K=(0.01, 0.03)):
        K1, K2 = K
        compensation = 1.0
        C1 = (K1 * data_range) ** 2
        C2 = (K2 * data_range) ** 2
        win = win.to(X.device, dtype=X.dtype)
        mu1 = gaussian_filter(X, win)
        mu2 = gaussian_filter(Y, win)
        mu1_sq = mu1.pow(2)
        mu2_sq = mu2.pow(2)
        mu1_mu2 = mu1 * mu2
        sigma1_sq = compensation * (gaussian_filter(X * X, win) - mu1_sq)
        sigma2_sq = compensation * (gaussian_filter(Y * Y, win) - mu2_sq)
        sigma12 = compensation * (gaussian_filter(X * Y, win) - mu1_mu2)
        cs_map = (2 * sigma12 + C2) / (sigma1_sq + sigma2_sq + C2)
        ssim_map = ((2 * mu1_mu2 + C1) / (mu1_sq + mu2_sq + C1)) * cs_map
        ssim_per_channel = torch.flatten(ssim_map, 2).mean(-1)
        cs = torch.flatten(cs_map, 2).mean(-1)
        return ssim_per_channel, cs

    def ssim(X, Y, data_range=1.0, size_average=True, win_size=7, win_sigma=1.5):
        win = _fspecial_gauss_1d(win_size, win_sigma)
        win = win.repeat([X.shape[1]] + [1] * (len(X.shape) - 1))
        ssim_per_channel, _ = _ssim(X, Y, data_range=data_range, win=win)
        return ssim_per_channel.mean() if size_average else ssim_per_channel.mean(1)

    def ms_ssim(X, Y, data_range=1.0, win_size=3, win_sigma=1.0, weights=None):
        win = _fspecial_gauss_1d(win_size, win_sigma).repeat([X.shape[1], 1, 1, 1])
        weights_tensor = X.new_tensor(weights)
        levels = weights_tensor.shape[0]
        mcs = []
        for i in range(levels):
            ssim_per_channel, cs = _ssim(X, Y, win=win, data_range=data_range)
            if i < levels - 1:
                mcs.append(torch.relu(cs))
                padding = [s % 2 for s in X.shape[2:]]
                X = F.avg_pool2d(X, kernel_size=2, padding=padding)
                Y = F.avg_pool2d(Y, kernel_size=2, padding=padding)
        ssim_per_channel = torch.relu(ssim_per_channel)
        mcs_and_ssim = torch.stack(mcs + [ssim_per_channel], dim=0)
        ms_ssim_val = torch.prod(mcs_and_ssim ** weights_tensor.view(-1, 1, 1), dim=0)
        return ms_ssim_val.mean()

    def kornia_ssim_map(img1, img2, window_size=5, max_val=1.0, eps=1e-12):
        sigma = torch.tensor([[1.5, 1.5]])
        kernel_x = _gaussian(torch, window_size, sigma[:, 1:])
        kernel = (kernel_x[:, :, None] * kernel_x[:, None, :]).expand(1, window_size, window_size)
        C1 = (0.01 * max_val) ** 2
        C2 = (0.03 * max_val) ** 2
        mu1 = _filter2d(torch, img1, kernel)
        mu2 = _filter2d(torch, img2, kernel)
        mu1_sq, mu2_sq, mu1_mu2 = mu1**2, mu2**2, mu1 * mu2
        sigma1_sq = _filter2d(torch, img1**2, kernel) - mu1_sq
        sigma2_sq = _filter2d(torch, img2**2, kernel) - mu2_sq
        sigma12 = _filter2d(torch, img1 * img2, kernel) - mu1_mu2
        num = (2.0 * mu1_mu2 + C1) * (2.0 * sigma12 + C2)
        den = (mu1_sq + mu2_sq + C1) * (sigma1_sq + sigma2_sq + C2)
        return num / (den + eps)

    yy, xx = np.mgrid[0:16, 0:16].astype(np.float32)
    clean = (0.5 + 0.3 * np.sin(xx / 2.5)[None, None] * np.cos(yy / 3.5)).repeat(3, axis=1)
    clean = torch.tensor(clean.astype(np.float32))
    noisy = (clean + torch.tensor(arr(220, 1, 3, 16, 16, scale=0.08))).clamp(0, 1)
    x = noisy.clone().requires_grad_(True)
    s = ssim(x, clean)
    ms = ms_ssim(x, clean, weights=[0.3, 0.3, 0.4])
    smap = kornia_ssim_map(x, clean)
    (s + ms + smap.mean()).backward()

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(6, 3, 3, padding=1))  # fmt: skip

        def forward(self, x):
            return x - self.body(x)

    net = set_weights(torch, Denoiser(), seed=221, scale=0.05)
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    losses = []
    for _ in range(4):
        out = net(noisy)
        loss = 0.84 * (1 - ssim(out, clean)) + 0.16 * F.l1_loss(out, clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {
        "ssim": s,
        "ssim_self": ssim(clean, clean),
        "ssim_per_image": ssim(noisy, clean, size_average=False),
        "ms_ssim": ms,
        "ssim_map": smap,
        "x_grad": x.grad,
        "losses": losses,
        "grads": grads(net),
    }


# -------------------------------------------------------------------------- local filters


@program
def box_median_bilateral_guided_filters_unfold_and_integral_images(torch):
    """kornia's box_blur (normalised ones kernel), the same box filter from an integral image
    (``cumsum`` twice, zero-padded), median_blur by unfolded neighbourhoods and ``median``,
    a bilateral filter (spatial Gaussian times range kernel over ``F.unfold`` patches), He et al.'s
    guided filter from box means, and the gradients of the median and bilateral outputs."""
    F = torch.nn.functional
    img = torch.tensor(_uniform(230, 1, 2, 7, 9), requires_grad=True)
    box = _filter2d(torch, img, torch.ones(1, 3, 3), "reflect", normalized=True)

    def box_integral(x, r):
        b, c, h, w = x.shape
        padded = F.pad(x, [r + 1, r, r + 1, r], mode="replicate")
        integral = padded.cumsum(dim=-2).cumsum(dim=-1)
        k = 2 * r + 1
        s = (
            integral[..., k:, k:]
            - integral[..., :-k, k:]
            - integral[..., k:, :-k]
            + integral[..., :-k, :-k]
        )
        return s / (k * k)

    def median_blur(input, kernel_size=(3, 3)):
        b, c, h, w = input.shape
        ky, kx = kernel_size
        padded = F.pad(input, [kx // 2, kx // 2, ky // 2, ky // 2], mode="reflect")
        patches = padded.unfold(2, ky, 1).unfold(3, kx, 1)
        return patches.contiguous().view(b, c, h, w, -1).median(dim=-1)[0]

    def bilateral_blur(input, kernel_size=5, sigma_color=0.1, sigma_space=1.5):
        b, c, h, w = input.shape
        pad = kernel_size // 2
        padded = F.pad(input, [pad, pad, pad, pad], mode="reflect")
        patches = F.unfold(padded, kernel_size).view(b, c, kernel_size * kernel_size, h, w)
        center = input.unsqueeze(2)
        color_distance_sq = (patches - center).pow(2).sum(dim=1, keepdim=True)
        color_kernel = (-0.5 / sigma_color**2 * color_distance_sq).exp()
        sigma = torch.tensor([[sigma_space]])
        g = _gaussian(torch, kernel_size, sigma)
        space_kernel = (g[:, :, None] * g[:, None, :]).view(1, 1, -1, 1, 1)
        kernel = space_kernel * color_kernel
        return (patches * kernel).sum(2) / kernel.sum(2)

    def guided_filter(guide, p, r=1, eps=1e-2):
        mean_I = box_integral(guide, r)
        mean_p = box_integral(p, r)
        cov_Ip = box_integral(guide * p, r) - mean_I * mean_p
        var_I = box_integral(guide * guide, r) - mean_I * mean_I
        a = cov_Ip / (var_I + eps)
        b = mean_p - a * mean_I
        return box_integral(a, r) * guide + box_integral(b, r)

    med = median_blur(img)
    med5 = median_blur(img, (3, 5))
    bil = bilateral_blur(img)
    guide = img.detach()[:, :1]
    guided = guided_filter(guide, img[:, 1:])
    (med.pow(2).sum() + bil.sum() + med5.mean() + guided.pow(2).mean()).backward()
    return {
        "box": box,
        "box_integral": box_integral(img.detach(), 1),
        "box_matches_replicate": torch.allclose(
            box_integral(img.detach(), 1),
            _filter2d(torch, img.detach(), torch.ones(1, 3, 3) / 9.0, "replicate"),
            atol=1e-5,
        ),
        "median": med,
        "median5": med5,
        "bilateral": bil,
        "guided": guided,
        "img_grad": img.grad,
    }


# --------------------------------------------------------------------------------- JPEG / DCT


@program(rtol=5e-4, atol=1e-4)  # DCT matmuls over 64-term blocks, values in the hundreds
def differentiable_jpeg_dct_blocks_quantization_chroma_subsampling(torch):
    """DiffJPEG: full-range JPEG YCbCr in [0, 255], 4:2:0 chroma subsampling with ``avg_pool2d``,
    8x8 block splitting with view/permute, the DCT as a ``tensordot`` with a cosine table, the
    standard quantisation tables scaled by quality, the cubic differentiable rounding and the
    straight-through estimator, decoding back to RGB, the PSNR, and the gradient to the image."""
    F = torch.nn.functional
    yy, xx = np.mgrid[0:16, 0:16].astype(np.float32)
    base = np.stack([np.sin(xx / 3) * np.cos(yy / 5), np.cos(xx / 4 + yy / 6), np.sin(yy / 2.5)])
    image = torch.tensor((base * 0.35 + 0.5 + _uniform(240, 3, 16, 16, high=0.05))[None],
                         requires_grad=True)  # fmt: skip
    y_table = torch.tensor(
        [[16, 11, 10, 16, 24, 40, 51, 61], [12, 12, 14, 19, 26, 58, 60, 55],
         [14, 13, 16, 24, 40, 57, 69, 56], [14, 17, 22, 29, 51, 87, 80, 62],
         [18, 22, 37, 56, 68, 109, 103, 77], [24, 35, 55, 64, 81, 104, 113, 92],
         [49, 64, 78, 87, 103, 121, 120, 101], [72, 92, 95, 98, 112, 100, 103, 99]],
        dtype=torch.float32,
    ).t()  # fmt: skip
    c_table = torch.full((8, 8), 99.0)
    c_table[:4, :4] = torch.tensor([[17, 18, 24, 47], [18, 21, 26, 66], [24, 26, 56, 99],
                                    [47, 66, 99, 99]], dtype=torch.float32).t()  # fmt: skip

    def quality_to_factor(quality):
        quality = 5000.0 / quality if quality < 50 else 200.0 - quality * 2
        return quality / 100.0

    def rgb_to_ycbcr_jpeg(image):
        matrix = torch.tensor([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5],
                               [0.5, -0.418688, -0.081312]], dtype=torch.float32).t()  # fmt: skip
        shift = torch.tensor([0.0, 128.0, 128.0])
        result = torch.tensordot(image, matrix, dims=1) + shift
        return result.view(image.shape)

    def ycbcr_to_rgb_jpeg(image):
        matrix = torch.tensor([[1.0, 0.0, 1.402], [1, -0.344136, -0.714136], [1, 1.772, 0]],
                              dtype=torch.float32).t()  # fmt: skip
        shift = torch.tensor([0, -128.0, -128.0])
        return torch.tensordot(image + shift, matrix, dims=1).view(image.shape)

    def block_splitting(image, k=8):
        height, width = image.shape[1:3]
        batch_size = image.shape[0]
        image_reshaped = image.view(batch_size, height // k, k, -1, k)
        image_transposed = image_reshaped.permute(0, 1, 3, 2, 4)
        return image_transposed.contiguous().view(batch_size, -1, k, k)

    def block_merging(patches, height, width, k=8):
        batch_size = patches.shape[0]
        image_reshaped = patches.view(batch_size, height // k, width // k, k, k)
        image_transposed = image_reshaped.permute(0, 1, 3, 2, 4)
        return image_transposed.contiguous().view(batch_size, height, width)

    tensor = np.zeros((8, 8, 8, 8), dtype=np.float32)
    for x, y, u, v in __import__("itertools").product(range(8), repeat=4):
        tensor[x, y, u, v] = np.cos((2 * x + 1) * u * np.pi / 16) * np.cos(
            (2 * y + 1) * v * np.pi / 16
        )
    alpha = np.array([1.0 / np.sqrt(2)] + [1] * 7)
    dct_tensor = torch.from_numpy(tensor).float()
    dct_scale = torch.from_numpy(np.outer(alpha, alpha) * 0.25).float()
    idct_alpha = torch.from_numpy(np.outer(alpha, alpha)).float()
    idct_tensor = torch.from_numpy(tensor.transpose(2, 3, 0, 1).copy()).float()

    def dct_8x8(image):
        image = image - 128
        return dct_scale * torch.tensordot(image, dct_tensor, dims=2)

    def idct_8x8(image):
        image = image * idct_alpha
        return 0.25 * torch.tensordot(image, idct_tensor, dims=2) + 128

    def diff_round(x):
        return torch.round(x) + (x - torch.round(x)) ** 3

    def ste_round(x):
        return x + (torch.round(x) - x).detach()

    def jpeg(image, quality=75, rounding=diff_round):
        factor = quality_to_factor(quality)
        image = image.permute(0, 2, 3, 1) * 255
        ycbcr = rgb_to_ycbcr_jpeg(image)
        y = ycbcr[..., 0]
        cb = F.avg_pool2d(ycbcr[..., 1].unsqueeze(1), kernel_size=2, stride=(2, 2),
                          count_include_pad=False).squeeze(1)  # fmt: skip
        cr = F.avg_pool2d(ycbcr[..., 2].unsqueeze(1), kernel_size=2).squeeze(1)
        components = {}
        for name, comp, table in (("y", y, y_table), ("cb", cb, c_table), ("cr", cr, c_table)):
            blocks = dct_8x8(block_splitting(comp))
            q = rounding(blocks / (table * factor))
            components[name] = q
            rec = idct_8x8(q * (table * factor))
            components[name + "_rec"] = block_merging(rec, comp.shape[1], comp.shape[2])

        def upsample(x, k=2):
            height, width = x.shape[1:3]
            x = x.unsqueeze(-1)
            x = x.repeat(1, 1, k, k)
            return x.view(-1, height * k, width * k)

        rec = torch.stack([components["y_rec"], upsample(components["cb_rec"]),
                           upsample(components["cr_rec"])], dim=-1)  # fmt: skip
        rgb = ycbcr_to_rgb_jpeg(rec)
        rgb = torch.min(255 * torch.ones_like(rgb), torch.max(torch.zeros_like(rgb), rgb))
        return rgb.permute(0, 3, 1, 2) / 255, components

    out, comps = jpeg(image)
    loss = F.mse_loss(out, image)
    loss.backward()
    out_ste, comps_ste = jpeg(image.detach(), quality=30, rounding=ste_round)
    return {
        "decoded": out,
        "y_coeffs": comps["y"],
        "cb_coeffs": comps["cb"],
        "zero_coeffs": int((comps_ste["y"] == 0).sum()),
        "decoded_q30": out_ste,
        "mse": loss,
        "psnr": 10 * torch.log10(1 / loss.detach()),
        "grad": image.grad,
    }


# ------------------------------------------------------------------------ Fourier deconvolution


@program(rtol=5e-4, atol=5e-5)  # FFTs and iterative deconvolution (summation order)
def fft_blur_wiener_richardson_lucy_deconvolution(torch):
    """Blur as a product of spectra (``rfft2``/``irfft2`` with the PSF padded to the image and
    centred by ``ifftshift``), checked against circular ``conv2d``, Wiener deconvolution with the
    conjugate spectrum, Richardson-Lucy iterations with flipped-kernel convolutions, a
    ``fftshift``-ed log-magnitude spectrum, and the gradient through ``irfft2``."""
    F = torch.nn.functional
    H, W = 12, 12
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    sharp = ((np.abs(xx - 5.5) < 3) & (np.abs(yy - 5.5) < 2)).astype(np.float32) * 0.8 + 0.1
    sharp = torch.tensor(sharp[None, None] + _uniform(250, 1, 1, H, W, high=0.05))
    psf = _gaussian(torch, 5, torch.tensor([[1.0]]))
    psf = (psf[:, :, None] * psf[:, None, :])[None]  # (1, 1, 5, 5)

    def psf2otf(psf, shape):
        padded = torch.zeros(shape)
        kh, kw = psf.shape[-2:]
        padded[..., :kh, :kw] = psf
        padded = torch.roll(padded, shifts=(-(kh // 2), -(kw // 2)), dims=(-2, -1))
        return torch.fft.rfft2(padded)

    otf = psf2otf(psf, (1, 1, H, W))
    blurred = torch.fft.irfft2(torch.fft.rfft2(sharp) * otf, s=(H, W))
    circ = F.conv2d(F.pad(sharp, (2, 2, 2, 2), mode="circular"), psf)
    noisy = blurred + torch.tensor(arr(251, 1, 1, H, W, scale=0.01))

    def wiener(y, otf, k=1e-2):
        Y = torch.fft.rfft2(y)
        G = otf.conj() / (otf.abs() ** 2 + k)
        return torch.fft.irfft2(Y * G, s=y.shape[-2:])

    def richardson_lucy(y, psf, iterations=5, eps=1e-7):
        est = torch.full_like(y, 0.5)
        psf_mirror = torch.flip(psf, dims=(-2, -1))
        for _ in range(iterations):
            conv = F.conv2d(F.pad(est, (2, 2, 2, 2), mode="reflect"), psf)
            relative = y / (conv + eps)
            est = est * F.conv2d(F.pad(relative, (2, 2, 2, 2), mode="reflect"), psf_mirror)
        return est

    spectrum = torch.fft.fftshift(torch.fft.fft2(sharp[0, 0]))
    log_mag = torch.log1p(spectrum.abs())
    x = noisy.clone().requires_grad_(True)
    restored = wiener(x, otf)
    restored.pow(2).sum().backward()
    shifted_psf = torch.fft.ifftshift(F.pad(psf, (3, 4, 3, 4)))
    return {
        "blurred": blurred,
        "fft_matches_circular_conv": torch.allclose(blurred, circ, atol=1e-5),
        "wiener": wiener(noisy, otf),
        "wiener_err": F.mse_loss(wiener(noisy, otf), sharp),
        "rl": richardson_lucy(noisy.clamp_min(0), psf),
        "log_magnitude": log_mag,
        "dc_at_center": log_mag.argmax().item(),
        "shifted_psf_peak": shifted_psf.flatten().argmax().item(),
        "grad": x.grad,
    }


# ----------------------------------------------------------------- thresholds and components


@program
def otsu_threshold_connected_components_and_distance_transform(torch):
    """Otsu's threshold from ``histc`` (between-class variance over ``cumsum``, ``argmax``), the
    connected components of the mask by iterated ``max_pool2d`` label propagation (kornia's loop
    with a convergence test), relabelling with ``unique(return_inverse=True)``, areas by
    ``bincount``, bounding boxes by ``scatter_reduce`` amin/amax, and kornia's soft distance
    transform of the mask's inner boundary (``conv2d`` with an exponential kernel, ``-h*log``)."""
    F = torch.nn.functional
    img = np.full((12, 14), 0.2, np.float32)
    img[1:5, 1:6] = 0.8
    img[7:11, 2:4] = 0.75
    img[3:10, 9:13] = 0.9
    img[6, 10:12] = 0.3
    img = torch.tensor(img + _uniform(260, 12, 14, high=0.1))

    def otsu(image, bins=32):
        hist = torch.histc(image, bins=bins, min=0.0, max=1.0)
        centers = (torch.arange(bins, dtype=torch.float32) + 0.5) / bins
        weight1 = torch.cumsum(hist, 0)
        weight2 = torch.cumsum(hist.flip(0), 0).flip(0)
        mean1 = torch.cumsum(hist * centers, 0) / weight1.clamp_min(1)
        mean2 = (torch.cumsum((hist * centers).flip(0), 0) / weight2.flip(0).clamp_min(1)).flip(0)
        variance12 = weight1[:-1] * weight2[1:] * (mean1[:-1] - mean2[1:]) ** 2
        idx = torch.argmax(variance12)
        return centers[:-1][idx], variance12

    thr, var12 = otsu(img)
    mask = (img > thr).float()[None, None]

    def connected_components(image, num_iterations=100):
        H, W = image.shape[-2:]
        mask = image == 1
        B, _, _, _ = image.shape
        out = torch.arange(B * H * W, device=image.device, dtype=image.dtype).view((-1, 1, H, W))
        out[~mask] = 0
        iterations = 0
        for _ in range(num_iterations):
            iterations += 1
            prev = out
            out = F.max_pool2d(out, kernel_size=3, stride=1, padding=1)
            out = torch.mul(out, mask)
            if torch.equal(out, prev):
                break
        return out, iterations

    labels, n_iter = connected_components(mask)
    uniq, relabelled = torch.unique(labels.long(), return_inverse=True)
    areas = torch.bincount(relabelled.flatten())
    n = int(uniq.numel())
    H, W = img.shape
    ys = torch.arange(H).view(H, 1).expand(H, W).flatten()
    xs = torch.arange(W).view(1, W).expand(H, W).flatten()
    flat = relabelled.flatten()
    y_min = torch.full((n,), H).scatter_reduce(0, flat, ys, reduce="amin")
    y_max = torch.full((n,), -1).scatter_reduce(0, flat, ys, reduce="amax")
    x_min = torch.full((n,), W).scatter_reduce(0, flat, xs, reduce="amin", include_self=True)
    x_max = torch.zeros(n, dtype=torch.long).scatter_reduce(0, flat, xs, reduce="amax",
                                                            include_self=False)  # fmt: skip
    boxes = torch.stack([x_min, y_min, x_max, y_max], dim=1)

    def distance_transform(image, kernel_size=3, h=0.35):
        n_iters = math.ceil(max(image.shape[2], image.shape[3]) / math.floor(kernel_size / 2))
        grid = torch.stack(
            torch.meshgrid(torch.arange(kernel_size) - kernel_size // 2,
                           torch.arange(kernel_size) - kernel_size // 2, indexing="ij"), -1
        ).to(image.dtype)  # fmt: skip
        kernel = torch.hypot(grid[..., 0], grid[..., 1])
        kernel = torch.exp(kernel / -h).unsqueeze(0)
        out = torch.zeros_like(image)
        boundary = image.clone()
        signal_ones = torch.ones_like(boundary)
        for i in range(n_iters):
            cdt = _filter2d(torch, boundary, kernel, border_type="replicate")
            cdt = -h * torch.log(cdt)
            cdt = torch.nan_to_num(cdt, posinf=0.0)
            mask = torch.where(cdt > 0, 1.0, 0.0)
            if mask.sum() == 0:
                break
            offset = i * (kernel_size // 2)
            out = out + (offset + cdt) * mask
            boundary = torch.where(mask == 1, signal_ones, boundary)
        return out

    edge = mask - (-F.max_pool2d(-mask, 3, 1, 1))
    dist = distance_transform(edge)
    return {
        "threshold": thr,
        "between_class_variance": var12,
        "mask": mask,
        "labels": labels,
        "iterations": n_iter,
        "num_components": n - 1,
        "relabelled": relabelled,
        "areas": areas,
        "boxes": boxes,
        "edge": edge,
        "distance": dist,
    }


# ------------------------------------------------------------------------------- optical flow


# The census transform differences 255-scaled intensities of neighbouring warped pixels: a last-bit
# difference in grid_sample's interpolation moves its gradient by ~1e-4 relative, and five SGD
# steps with momentum carry that into the flow (worst: 7e-5 absolute on a value near zero).
@program(rtol=5e-4, atol=2e-4)
def optical_flow_backwarp_census_smoothness_and_torch_gradient(torch):
    """PWC-Net's backward warp (a ``meshgrid`` base grid, flow normalised by (size-1)/2,
    ``grid_sample`` with align_corners=True, the occlusion mask from warping ones), UnFlow's
    ternary census loss over unfolded 3x3 patches, a Charbonnier edge-aware second-order
    smoothness term, ``torch.gradient`` image derivatives
    (spacing, edge_order=2), and a few SGD steps of flow."""
    F = torch.nn.functional
    H, W = 8, 9
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    img1 = np.stack([np.sin(xx / 2 + yy / 3), np.cos(xx / 3 - yy / 2)]) * 0.4 + 0.5
    img2 = np.stack(
        [np.sin((xx + 0.6) / 2 + (yy - 0.3) / 3), np.cos((xx + 0.6) / 3 - (yy - 0.3) / 2)]
    )
    img1 = torch.tensor(img1[None].astype(np.float32))
    img2 = torch.tensor((img2 * 0.4 + 0.5)[None].astype(np.float32))

    def backwarp(tensor, flow):
        B, _, H, W = flow.shape
        grid_y, grid_x = torch.meshgrid(torch.linspace(-1.0, 1.0, H), torch.linspace(-1.0, 1.0, W),
                                        indexing="ij")  # fmt: skip
        grid = torch.stack([grid_x, grid_y], 0).unsqueeze(0).expand(B, -1, -1, -1)
        flow = torch.cat([flow[:, 0:1] / ((W - 1.0) / 2.0), flow[:, 1:2] / ((H - 1.0) / 2.0)], 1)
        tensor = torch.cat([tensor, flow.new_ones([B, 1, H, W])], 1)
        output = F.grid_sample(tensor, (grid + flow).permute(0, 2, 3, 1), mode="bilinear",
                               padding_mode="zeros", align_corners=True)  # fmt: skip
        mask = output[:, -1:]
        mask = (mask > 0.999).float()
        return output[:, :-1] * mask, mask

    def ternary(image, max_distance=1):
        patch_size = 2 * max_distance + 1
        intensities = image.mean(1, keepdim=True) * 255
        patches = F.unfold(F.pad(intensities, [max_distance] * 4, mode="replicate"), patch_size)
        patches = patches.view(image.shape[0], -1, image.shape[2], image.shape[3])
        transf = patches - intensities
        return transf / torch.sqrt(0.81 + transf**2)

    def census_loss(img1, img2_warped, mask):
        t1, t2 = ternary(img1), ternary(img2_warped)
        dist = (t1 - t2) ** 2
        dist_norm = (dist / (0.1 + dist)).sum(1, keepdim=True)
        return (dist_norm * mask).sum() / (mask.sum() + 1e-6)

    def robust_l1(x):  # ARFlow's Charbonnier penalty
        return ((x**2) + 0.001**2) ** 0.5

    def smoothness(flow, image, alpha=10.0):
        img_dx = (image[..., :, 1:] - image[..., :, :-1]).abs().mean(1, keepdim=True)
        img_dy = (image[..., 1:, :] - image[..., :-1, :]).abs().mean(1, keepdim=True)
        dx2 = flow[..., :, 2:] - 2 * flow[..., :, 1:-1] + flow[..., :, :-2]
        dy2 = flow[..., 2:, :] - 2 * flow[..., 1:-1, :] + flow[..., :-2, :]
        wx = torch.exp(-alpha * img_dx[..., :, 1:])
        wy = torch.exp(-alpha * img_dy[..., 1:, :])
        return (wx * robust_l1(dx2)).mean() + (wy * robust_l1(dy2)).mean()

    flow = torch.zeros(1, 2, H, W)
    flow[:, 0] = 0.3
    flow.requires_grad_(True)
    # (SGD: Adam's normalised first steps would turn float noise in the census gradients of
    # near-flat regions into whole steps)
    opt = torch.optim.SGD([flow], lr=2.0, momentum=0.9)
    losses = []
    for _ in range(5):
        warped, mask = backwarp(img2, flow)
        photo = ((warped - img1).abs() * mask).sum() / (mask.sum() * 2 + 1e-6)
        loss = photo + census_loss(img1, warped, mask) * 0.1 + 0.05 * smoothness(flow, img1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    dy, dx = torch.gradient(img1[0, 0], spacing=(0.5, 2.0), edge_order=2)
    gy1, gx1 = torch.gradient(img1[0, 0])
    coords = torch.tensor([0.0, 1.0, 3.0, 4.5, 5.0, 7.0, 8.0, 9.5, 10.0])
    (gx_coords,) = torch.gradient(img1[0, 1, 0], spacing=(coords,))
    return {
        "losses": losses,
        "flow": flow,
        "warped": warped,
        "mask": mask,
        "census": ternary(img1),
        "gradient_spacing": [dy, dx],
        "gradient_default": [gy1, gx1],
        "gradient_coords": gx_coords,
        "gradient_dims": torch.gradient(img1[0], dim=(1, 2))[1],
    }


# ------------------------------------------------------------ demosaicing and learned upsampling


@program
def bayer_demosaic_fcn_bilinear_deconv_and_fold_patch_averaging(torch):
    """A raw Bayer mosaic by strided slicing, bilinear demosaicing by masked convolutions (the
    classic 3x3 kernels), FCN's bilinear ``ConvTranspose2d`` initialisation (``get_upsampling_
    weight``, groups=channels) compared with ``F.interpolate``, ``F.fold`` overlap-averaging of
    ``F.unfold`` patches (patch denoising's reconstruction), dilated and strided max pooling with
    indices, and the gradients of the demosaic and the transposed convolution."""
    nn, F = torch.nn, torch.nn.functional
    rgb = torch.tensor(_uniform(270, 1, 3, 8, 10))
    raw = torch.zeros(1, 1, 8, 10)
    raw[..., 0::2, 0::2] = rgb[:, 0:1, 0::2, 0::2]  # R
    raw[..., 0::2, 1::2] = rgb[:, 1:2, 0::2, 1::2]  # G
    raw[..., 1::2, 0::2] = rgb[:, 1:2, 1::2, 0::2]  # G
    raw[..., 1::2, 1::2] = rgb[:, 2:3, 1::2, 1::2]  # B
    raw.requires_grad_(True)

    def demosaic_bilinear(raw):
        r_mask = torch.zeros_like(raw)
        r_mask[..., 0::2, 0::2] = 1
        b_mask = torch.zeros_like(raw)
        b_mask[..., 1::2, 1::2] = 1
        g_mask = 1 - r_mask - b_mask
        k_g = torch.tensor([[0.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 0.0]]) / 4
        k_rb = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]) / 4
        pad = F.pad(torch.cat([raw * r_mask, raw * g_mask, raw * b_mask], 1), [1, 1, 1, 1],
                    mode="reflect")  # fmt: skip
        weight = torch.stack([k_rb, k_g, k_rb])[:, None]
        return F.conv2d(pad, weight, groups=3)

    demosaiced = demosaic_bilinear(raw)
    demosaiced.pow(2).sum().backward()

    def get_upsampling_weight(in_channels, out_channels, kernel_size):
        factor = (kernel_size + 1) // 2
        center = factor - 1 if kernel_size % 2 == 1 else factor - 0.5
        og = np.ogrid[:kernel_size, :kernel_size]
        filt = (1 - abs(og[0] - center) / factor) * (1 - abs(og[1] - center) / factor)
        weight = np.zeros((in_channels, out_channels, kernel_size, kernel_size), dtype=np.float64)
        weight[range(in_channels), range(out_channels), :, :] = filt
        return torch.from_numpy(weight).float()

    up = nn.ConvTranspose2d(3, 3, kernel_size=4, stride=2, padding=1, bias=False)
    with torch.no_grad():
        up.weight.copy_(get_upsampling_weight(3, 3, 4))
    x = rgb.clone().requires_grad_(True)
    upsampled = up(x)
    grouped = F.conv_transpose2d(x, get_upsampling_weight(1, 1, 4).expand(3, 1, 4, 4),
                                 stride=2, padding=1, groups=3)  # fmt: skip
    interp = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    (upsampled.pow(2).mean() + grouped.sum()).backward()

    noisy = rgb + torch.tensor(arr(271, 1, 3, 8, 10, scale=0.05))
    patches = F.unfold(noisy, kernel_size=4, stride=2)
    patches = patches - patches.mean(dim=1, keepdim=True) * 0.5  # a stand-in "denoiser"
    summed = F.fold(patches, output_size=(8, 10), kernel_size=4, stride=2)
    counts = F.fold(torch.ones_like(patches), output_size=(8, 10), kernel_size=4, stride=2)
    pooled, idx = F.max_pool2d(noisy, kernel_size=2, stride=2, dilation=2, return_indices=True)
    return {
        "raw": raw,
        "demosaiced": demosaiced,
        "raw_grad": raw.grad,
        "upsampled": upsampled,
        "interior_matches_interp": torch.allclose(
            upsampled[..., 1:-1, 1:-1], interp[..., 1:-1, 1:-1], atol=1e-5
        ),
        "grouped_equals_module": torch.allclose(grouped, upsampled, atol=1e-6),
        "x_grad": x.grad,
        "patch_counts": counts,
        "patch_average": summed / counts,
        "pooled": pooled,
        "pool_indices": idx,
        "unpooled": torch.zeros(1, 3, 80)
        .scatter_(2, idx.flatten(2), pooled.flatten(2))
        .view(1, 3, 8, 10),
    }


# ---------------------------------------------------------------------- torchvision uint8 resize


@program
def torchvision_v2_uint8_resize_crop_to_dtype_normalize_pipeline(torch):
    """torchvision.transforms.v2's functional image pipeline on uint8 tensors: ``resize`` of the
    shorter edge (with ``max_size``) that hands uint8 straight to ``F.interpolate`` for bilinear
    on the CPU (antialiased or not) and casts through float, clamps and rounds for bicubic,
    ``resized_crop`` with fixed RandomResizedCrop parameters, ``center_crop`` padding a small
    image, ``to_dtype(scale=True)`` and ``normalize``; leading batch dimensions included."""
    F = torch.nn.functional

    def compute_resized_output_size(canvas_size, size, max_size=None):
        h, w = canvas_size
        if len(size) == 1:
            short, long = (w, h) if w <= h else (h, w)
            requested_new_short = size[0]
            new_short, new_long = requested_new_short, int(requested_new_short * long / short)
            if max_size is not None and new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
            new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
        else:
            new_h, new_w = size
        return [new_h, new_w]

    def resize_image(image, size, interpolation="bilinear", max_size=None, antialias=True):
        shape = image.shape
        num_channels, old_height, old_width = shape[-3:]
        new_height, new_width = compute_resized_output_size((old_height, old_width), size,
                                                            max_size)  # fmt: skip
        if (new_height, new_width) == (old_height, old_width):
            return image
        dtype = image.dtype
        acceptable_dtypes = [torch.float32, torch.float64]
        if interpolation in ("nearest", "nearest-exact"):
            acceptable_dtypes.append(torch.uint8)
        elif interpolation == "bilinear" and image.device.type == "cpu":
            acceptable_dtypes.append(torch.uint8)
        image = image.reshape(-1, num_channels, old_height, old_width)
        need_cast = dtype not in acceptable_dtypes
        if need_cast:
            image = image.to(dtype=torch.float32)
        align_corners = False if interpolation in ("bilinear", "bicubic") else None
        antialias = antialias if interpolation in ("bilinear", "bicubic") else False
        image = F.interpolate(image, size=[new_height, new_width], mode=interpolation,
                              align_corners=align_corners, antialias=antialias)  # fmt: skip
        if need_cast:
            if interpolation == "bicubic" and dtype == torch.uint8:
                image = image.clamp_(min=0, max=255)
            image = image.round_()
            image = image.to(dtype=dtype)
        return image.reshape(shape[:-3] + (num_channels, new_height, new_width))

    def crop(image, top, left, height, width):
        return image[..., top : top + height, left : left + width]

    def center_crop(image, output_size):
        crop_height, crop_width = output_size
        image_height, image_width = image.shape[-2:]
        if crop_height > image_height or crop_width > image_width:
            padding_ltrb = [
                (crop_width - image_width) // 2 if crop_width > image_width else 0,
                (crop_height - image_height) // 2 if crop_height > image_height else 0,
                (crop_width - image_width + 1) // 2 if crop_width > image_width else 0,
                (crop_height - image_height + 1) // 2 if crop_height > image_height else 0,
            ]
            image = F.pad(image, [padding_ltrb[0], padding_ltrb[2], padding_ltrb[1],
                                  padding_ltrb[3]], value=0.0)  # fmt: skip
            image_height, image_width = image.shape[-2:]
            if crop_width == image_width and crop_height == image_height:
                return image
        crop_top = int(round((image_height - crop_height) / 2.0))
        crop_left = int(round((image_width - crop_width) / 2.0))
        return crop(image, crop_top, crop_left, crop_height, crop_width)

    def to_dtype(image, dtype=torch.float32, scale=True):
        if not scale or image.dtype == dtype:
            return image.to(dtype)
        return image.to(dtype).mul_(1.0 / 255)

    def normalize(image, mean, std):
        mean = torch.as_tensor(mean, dtype=image.dtype).view(-1, 1, 1)
        std = torch.as_tensor(std, dtype=image.dtype).view(-1, 1, 1)
        return image.sub(mean).div_(std)

    img = torch.tensor(_uint8(280, 3, 9, 12))
    batch = torch.tensor(_uint8(281, 2, 3, 10, 7))
    small = torch.tensor(_uint8(282, 3, 3, 4))
    resized = {
        "short_aa": resize_image(img, [6]),
        "short_no_aa": resize_image(img, [6], antialias=False),
        "max_size": resize_image(img, [8], max_size=10),
        "up": resize_image(img, [13, 17]),
        "bicubic_cast": resize_image(img, [5, 7], interpolation="bicubic"),
        "nearest": resize_image(img, [6, 5], interpolation="nearest"),
        "nearest_exact": resize_image(img, [6, 5], interpolation="nearest-exact"),
        "batched": resize_image(batch, [4]),
        "float_path": resize_image(img.float(), [6]),
    }
    top, left, height, width = (
        int(v) for v in np.random.default_rng(283).integers(0, 4, 4) + [0, 0, 5, 6]
    )
    rrc = resize_image(crop(img, top, left, height, width), [8, 8])
    cc = center_crop(small, [5, 6])
    x = normalize(to_dtype(rrc), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    return {
        **resized,
        "dtypes": [str(v.dtype) for v in resized.values()],
        "rrc": rrc,
        "center_crop": cc,
        "center_crop_inner": center_crop(img, [4, 5]),
        "model_input": x,
        "channel_stats": torch.stack([x.mean(dim=(-2, -1)), x.std(dim=(-2, -1))]),
    }


@program
def uint8_preprocessing_with_lookup_tables(torch):
    """uint8 images as preprocessing code handles them: a gamma table indexed by the pixels,
    posterize and solarize, a per-channel auto-contrast whose ``255.0 / (hi - lo)`` is rounded
    twice as PyTorch computes ``number / tensor`` (then rounded to integers, where one ulp shows),
    wrapping and saturating additions, integer divisions, crops and flips, normalisation and a
    small conv net's training steps."""
    nn = torch.nn
    img = torch.from_numpy(_uint8(61, 2, 12, 10, 3))  # N H W C
    out = {}
    table = (torch.linspace(0, 1, 256) ** (1 / 2.2) * 255).round().to(torch.uint8)
    out["gamma"] = table[img.long()]
    out["posterize"] = img & torch.tensor(0xF0, dtype=torch.uint8)
    out["solarize"] = torch.where(img >= 128, 255 - img, img)
    lo = img.amin(dim=(1, 2), keepdim=True).float()
    hi = img.amax(dim=(1, 2), keepdim=True).float()
    scale = 255.0 / (hi - lo).clamp(min=1)
    out["autocontrast"] = ((img.float() - lo) * scale).clamp(0, 255).round().to(torch.uint8)
    out["wrap"] = img + 100
    out["saturate"] = (img.to(torch.int16) + 100).clamp(0, 255).to(torch.uint8)
    out["floor_div"] = torch.div(img, 3, rounding_mode="floor")
    out["trunc_div"] = torch.div(img.to(torch.int32) - 128, 3, rounding_mode="trunc")
    out["modulo"] = img % 7
    chw = img[:, 2:10, 1:9].flip(2).permute(0, 3, 1, 2).contiguous()
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    x = (chw.to(torch.float32) / 255 - mean) / std
    jitter = (x * 1.2 + 0.1).clamp(-2, 2)
    out["back_to_uint8"] = ((jitter * std + mean) * 255).round().clamp(0, 255).byte()
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(4, 2))  # fmt: skip
    set_weights(torch, net, seed=62)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    labels = torch.tensor([0, 1])
    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(net(jitter), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {**out, "losses": losses, **grads(net)}
