"""Audio and speech: spectral features, convolutional encoders, vocoders, recurrent acoustic models and audio losses."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _mel_filterbank(torch, n_freqs, n_mels, sample_rate):
    """A triangular HTK mel filterbank (n_freqs, n_mels), as torchaudio.functional.melscale_fbanks."""
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    m_min, m_max = 0.0, 2595.0 * math.log10(1.0 + (sample_rate / 2) / 700.0)
    m_pts = torch.linspace(m_min, m_max, n_mels + 2)
    f_pts = 700.0 * (10 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.max(torch.zeros(1), torch.min(down, up))


@program(rtol=5e-4, atol=5e-5)
def log_mel_mfcc_with_deltas_and_cmvn(torch):
    F = torch.nn.functional
    wav = torch.tensor(arr(1, 2, 400, scale=0.3))
    n_fft, hop, n_mels, n_mfcc = 64, 16, 10, 6
    spec = torch.stft(wav, n_fft, hop_length=hop, window=torch.hann_window(n_fft),
                      center=True, pad_mode="reflect", return_complex=True)  # fmt: skip
    power = spec.real.pow(2) + spec.imag.pow(2)
    fb = _mel_filterbank(torch, n_fft // 2 + 1, n_mels, 8000)
    mel = torch.matmul(power.transpose(-1, -2), fb).transpose(-1, -2)  # (B, n_mels, T)
    db = 10.0 * torch.log10(torch.clamp(mel, min=1e-10))
    db = torch.max(db, db.amax(dim=(-2, -1), keepdim=True) - 80.0)
    # back to amplitude, as torchaudio.functional.DB_to_amplitude(db, ref=1.0, power=0.5)
    amplitude = torch.pow(torch.pow(10.0, 0.1 * db), 0.5)
    # orthonormal DCT-II matrix, as torchaudio.functional.create_dct
    n = torch.arange(float(n_mels))
    k = torch.arange(float(n_mfcc)).unsqueeze(1)
    dct = torch.cos(math.pi / float(n_mels) * (n + 0.5) * k)
    dct[0] *= 1.0 / math.sqrt(2.0)
    dct *= math.sqrt(2.0 / float(n_mels))
    mfcc = torch.einsum("bmt,km->bkt", db, dct)
    # deltas: a regression over +/- 2 frames as a grouped conv1d with replicate padding
    kernel = torch.arange(-2, 3, dtype=torch.float32).repeat(n_mfcc, 1, 1) / 10.0
    padded = F.pad(mfcc, (2, 2), mode="replicate")
    deltas = F.conv1d(padded, kernel, groups=n_mfcc)
    feats = torch.cat([mfcc, deltas], dim=1)
    mean, std = feats.mean(dim=-1, keepdim=True), feats.std(dim=-1, keepdim=True, unbiased=True)
    cmvn = (feats - mean) / (std + 1e-5)
    return {"fb": fb, "power_shape": list(power.shape), "db": db, "mfcc": mfcc,
            "deltas": deltas, "cmvn": cmvn, "fb_rowsum": fb.sum(0),
            "amplitude": amplitude}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def wav2vec_conv_feature_encoder_training(torch):
    nn, F = torch.nn, torch.nn.functional

    class FeatureEncoder(nn.Module):
        def __init__(self, dim=8, layers=((8, 10, 5), (8, 3, 2), (8, 2, 2))):
            super().__init__()
            blocks, in_c = [], 1
            for i, (c, k, s) in enumerate(layers):
                norm = nn.GroupNorm(c, c, affine=True) if i == 0 else nn.Identity()
                blocks.append(nn.Sequential(nn.Conv1d(in_c, c, k, stride=s, bias=False), norm,
                                            nn.GELU()))  # fmt: skip
                in_c = c
            self.conv_layers = nn.ModuleList(blocks)
            self.layer_norm = nn.LayerNorm(in_c)
            self.proj = nn.Linear(in_c, dim)

        def forward(self, wav):
            x = wav.unsqueeze(1)
            for conv in self.conv_layers:
                x = conv(x)
            x = self.layer_norm(x.transpose(1, 2))
            return self.proj(x)

    enc = set_weights(torch, FeatureEncoder(), seed=2)
    wav = torch.tensor(arr(3, 3, 200))
    wav = (wav - wav.mean(-1, keepdim=True)) / torch.sqrt(wav.var(-1, keepdim=True) + 1e-7)
    wav_lengths = torch.tensor([200, 163, 121])
    wav = wav * (torch.arange(200) < wav_lengths.unsqueeze(1))
    out_lengths = wav_lengths
    for k, s in ((10, 5), (3, 2), (2, 2)):  # conv output lengths, layer by layer
        out_lengths = torch.div(out_lengths - k, s, rounding_mode="trunc") + 1
    frame_mask = torch.arange(9).unsqueeze(0) < out_lengths.unsqueeze(1)  # (B, T')
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-6,
                            weight_decay=0.01)  # fmt: skip
    losses, norms = [], []
    for _ in range(3):
        feats = enc(wav)  # (B, T', D)
        z = F.normalize(feats, dim=-1)
        logits = torch.bmm(z, z.transpose(1, 2)) / 0.1  # frame-vs-frame contrastive
        logits = logits.masked_fill(~frame_mask.unsqueeze(1), float("-inf"))
        targets = torch.arange(z.shape[1]).expand(z.shape[0], -1).masked_fill(~frame_mask, -100)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(enc.parameters(), max_norm=1.0))
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "norms": norms, "feats": feats, "params": params(enc),
            "n_frames": feats.shape[1], "out_lengths": out_lengths}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def specaugment_fixed_masks_cnn_classifier(torch):
    nn, F = torch.nn, torch.nn.functional
    feats = torch.tensor(arr(4, 4, 1, 12, 20))  # (B, 1, n_mels, T)
    f_start, f_width = torch.tensor([1, 5, 0, 8]), torch.tensor([3, 2, 4, 2])
    t_start, t_width = torch.tensor([2, 10, 15, 0]), torch.tensor([4, 5, 3, 6])
    freq = torch.arange(feats.shape[2]).view(1, -1, 1)
    time = torch.arange(feats.shape[3]).view(1, 1, -1)
    f_mask = (freq >= f_start.view(-1, 1, 1)) & (freq < (f_start + f_width).view(-1, 1, 1))
    t_mask = (time >= t_start.view(-1, 1, 1)) & (time < (t_start + t_width).view(-1, 1, 1))
    mask = (f_mask | t_mask).unsqueeze(1)
    mean = feats.mean(dim=(2, 3), keepdim=True)
    augmented = torch.where(mask, mean, feats)
    zeroed = feats.masked_fill(mask, 0.0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
        nn.MaxPool2d((2, 2)), nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))  # fmt: skip
    set_weights(torch, model, seed=5)
    labels = torch.tensor([0, 2, 1, 2])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)  # fmt: skip
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(augmented), labels, label_smoothing=0.1)
        loss.backward()
        opt.step()
        losses.append(loss)
    model.eval()
    with torch.no_grad():
        probs = model(zeroed).softmax(-1)
    bn = model[1]
    return {"mask_frac": mask.float().mean(), "augmented": augmented, "losses": losses,
            "probs": probs, "running_mean": bn.running_mean, "running_var": bn.running_var,
            "num_batches_tracked": bn.num_batches_tracked, "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def wavenet_gated_dilated_causal_stack(torch):
    nn, F = torch.nn, torch.nn.functional

    class ResidualBlock(nn.Module):
        def __init__(self, res, skip, dilation, cond):
            super().__init__()
            self.dilation = dilation
            self.dil_conv = nn.Conv1d(res, 2 * res, kernel_size=2, dilation=dilation)
            self.cond = nn.Conv1d(cond, 2 * res, 1, bias=False)
            self.res_conv = nn.Conv1d(res, res, 1)
            self.skip_conv = nn.Conv1d(res, skip, 1)

        def forward(self, x, c):
            h = self.dil_conv(F.pad(x, (self.dilation, 0))) + self.cond(c)
            filt, gate = h.chunk(2, dim=1)
            z = torch.tanh(filt) * torch.sigmoid(gate)
            return (x + self.res_conv(z)) * math.sqrt(0.5), self.skip_conv(z)

    class WaveNet(nn.Module):
        def __init__(self, classes=16, res=6, skip=8, cond=3):
            super().__init__()
            self.inp = nn.Conv1d(classes, res, 1)
            self.blocks = nn.ModuleList(ResidualBlock(res, skip, 2**i, cond) for i in range(4))
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(),
                                     nn.Conv1d(skip, classes, 1))  # fmt: skip

        def forward(self, x, c):
            x = self.inp(x)
            skips = 0
            for block in self.blocks:
                x, s = block(x, c)
                skips = skips + s
            return self.out(skips)

    mu = 15
    wav = torch.tanh(torch.tensor(arr(6, 2, 33)))
    encoded = torch.sign(wav) * torch.log1p(mu * wav.abs()) / math.log1p(mu)
    decoded = torch.sign(encoded) * ((1 + mu) ** encoded.abs() - 1) / mu
    q = torch.tensor(ints(7, mu + 1, 2, 33))
    inputs = F.one_hot(q[:, :-1], mu + 1).permute(0, 2, 1).float()
    cond = torch.tensor(arr(8, 2, 3, 32))
    net = set_weights(torch, WaveNet(), seed=9)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, amsgrad=True)
    losses = []
    for _ in range(3):
        logits = net(inputs, cond)  # (B, classes, T)
        loss = F.cross_entropy(logits, q[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # causality: changing the last input step changes only the last output step
    x2 = inputs.clone()
    x2[:, :, -1] = 0.0
    with torch.no_grad():
        diff = (net(inputs, cond) - net(x2, cond)).abs().sum(dim=(0, 1))
    return {"encoded": encoded, "decoded": decoded, "round_trip": torch.allclose(decoded, wav,
            atol=1e-5), "losses": losses, "logits": logits, "causal_diff": diff,
            "grads": grads(net)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def hifigan_transposed_conv_upsampler(torch):
    nn, F = torch.nn, torch.nn.functional

    def get_padding(k, d=1):
        return (k * d - d) // 2

    class ResBlock(nn.Module):
        def __init__(self, ch, k=3, dilations=(1, 3)):
            super().__init__()
            self.convs = nn.ModuleList(
                nn.Conv1d(ch, ch, k, dilation=d, padding=get_padding(k, d)) for d in dilations
            )

        def forward(self, x):
            for c in self.convs:
                x = x + c(F.leaky_relu(x, 0.1))
            return x

    class Generator(nn.Module):
        def __init__(self, n_mels=5, ch=8, rates=(4, 2)):
            super().__init__()
            self.pre = nn.Conv1d(n_mels, ch, 7, padding=3)
            self.ups, self.res = nn.ModuleList(), nn.ModuleList()
            for i, r in enumerate(rates):
                c_in, c_out = ch // 2**i, ch // 2 ** (i + 1)
                self.ups.append(nn.ConvTranspose1d(c_in, c_out, 2 * r, stride=r,
                                                   padding=(2 * r - r) // 2))  # fmt: skip
                self.res.append(ResBlock(c_out))
            self.post = nn.Conv1d(c_out, 1, 7, padding=3)

        def forward(self, mel):
            x = self.pre(mel)
            for up, res in zip(self.ups, self.res):
                x = res(up(F.leaky_relu(x, 0.1)))
            return torch.tanh(self.post(F.leaky_relu(x))).squeeze(1)

    gen = set_weights(torch, Generator(), seed=10)
    mel = torch.tensor(arr(11, 2, 5, 6))
    target = torch.tensor(arr(12, 2, 48, scale=0.3)).clamp(-1, 1)
    opt = torch.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.8, 0.99))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.999)
    losses = []
    for _ in range(3):
        wav = gen(mel)
        loss = F.l1_loss(wav, target) + 0.5 * F.mse_loss(wav[:, 1:] - wav[:, :-1],
                                                         target[:, 1:] - target[:, :-1])  # fmt: skip
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    up = gen.ups[0]
    manual = F.conv_transpose1d(torch.tensor(arr(13, 1, 8, 3)), up.weight, up.bias, stride=4,
                                padding=2, output_padding=1)  # fmt: skip
    return {"wav": wav, "losses": losses, "lr": sched.get_last_lr(), "manual": manual,
            "grads": grads(gen)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def multi_resolution_stft_loss_training(torch):
    F = torch.nn.functional

    def stft_mag(x, n_fft, hop, win):
        spec = torch.stft(x, n_fft, hop, win, window=torch.hann_window(win), return_complex=True)
        ri = torch.view_as_real(spec)
        return torch.sqrt(torch.clamp(ri[..., 0] ** 2 + ri[..., 1] ** 2, min=1e-7)).transpose(2, 1)

    def mr_stft_loss(x, y, resolutions=((64, 16, 48), (32, 8, 32), (128, 32, 96))):
        sc_total, mag_total = 0.0, 0.0
        for n_fft, hop, win in resolutions:
            x_mag, y_mag = stft_mag(x, n_fft, hop, win), stft_mag(y, n_fft, hop, win)
            sc = torch.norm(y_mag - x_mag, p="fro") / torch.norm(y_mag, p="fro")
            mag = F.l1_loss(torch.log(y_mag), torch.log(x_mag))
            sc_total, mag_total = sc_total + sc, mag_total + mag
        return sc_total / len(resolutions), mag_total / len(resolutions)

    target = torch.tensor(arr(14, 2, 256, scale=0.5))
    noise = torch.tensor(arr(15, 2, 1, 256))
    filt = torch.nn.Conv1d(1, 1, 9, padding=4)
    set_weights(torch, filt, seed=16)
    opt = torch.optim.Adam(filt.parameters(), lr=1e-2)
    history = []
    for _ in range(4):
        pred = filt(noise).squeeze(1)
        sc, mag = mr_stft_loss(pred, target)
        loss = sc + mag
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append([sc.item(), mag.item()])
    return {"history": history, "weight": filt.weight, "bias": filt.bias,
            "mag_shape": list(stft_mag(target, 64, 16, 48).shape)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def si_sdr_pit_separation_training(torch):
    nn = torch.nn

    def si_sdr(est, ref, eps=1e-8):
        est = est - est.mean(dim=-1, keepdim=True)
        ref = ref - ref.mean(dim=-1, keepdim=True)
        alpha = (est * ref).sum(-1, keepdim=True) / (ref.pow(2).sum(-1, keepdim=True) + eps)
        proj = alpha * ref
        noise = est - proj
        return 10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)

    class TinyTasNet(nn.Module):
        def __init__(self, n_src=2, n_filters=8, k=8):
            super().__init__()
            self.n_src = n_src
            self.encoder = nn.Conv1d(1, n_filters, k, stride=k // 2, bias=False)
            self.masker = nn.Sequential(nn.Conv1d(n_filters, 12, 1), nn.PReLU(),
                                        nn.Conv1d(12, 12, 3, padding=2, dilation=2),
                                        nn.PReLU(num_parameters=12),
                                        nn.Conv1d(12, n_src * n_filters, 1))  # fmt: skip
            self.decoder = nn.ConvTranspose1d(n_filters, 1, k, stride=k // 2, bias=False)

        def forward(self, mix):
            w = torch.relu(self.encoder(mix.unsqueeze(1)))
            masks = torch.sigmoid(self.masker(w)).view(w.shape[0], self.n_src, *w.shape[1:])
            est = self.decoder((masks * w.unsqueeze(1)).flatten(0, 1))
            return est.view(mix.shape[0], self.n_src, -1)

    sources = torch.tensor(arr(17, 3, 2, 64))
    mix = sources.sum(1)
    model = set_weights(torch, TinyTasNet(), seed=18)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, momentum=0.5)
    losses = []
    for _ in range(3):
        est = model(mix)
        direct = si_sdr(est, sources).mean(-1)
        swapped = si_sdr(est.flip(1), sources).mean(-1)
        best, perm = torch.stack([direct, swapped], dim=-1).max(dim=-1)
        loss = -best.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "est": est, "perm": perm, "prelu": model.masker[1].weight,
            "self_sdr": si_sdr(sources, sources), "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def bilstm_packed_ctc_acoustic_model(torch):
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn

    class AcousticModel(nn.Module):
        def __init__(self, n_feats=6, hidden=5, n_tokens=5):
            super().__init__()
            self.lstm = nn.LSTM(n_feats, hidden, num_layers=2, bidirectional=True,
                                batch_first=True)  # fmt: skip
            self.fc = nn.Linear(2 * hidden, n_tokens)

        def forward(self, feats, lengths):
            packed = rnn.pack_padded_sequence(feats, lengths, batch_first=True,
                                              enforce_sorted=False)  # fmt: skip
            out, (h, c) = self.lstm(packed)
            out, out_lens = rnn.pad_packed_sequence(out, batch_first=True,
                                                    total_length=feats.shape[1])  # fmt: skip
            return self.fc(out).log_softmax(-1), out_lens, h

    lengths = torch.tensor([9, 12, 7])
    feats = torch.tensor(arr(19, 3, 12, 6))
    feats = feats * (torch.arange(12)[None, :, None] < lengths[:, None, None])
    targets = torch.tensor(np.array([[1, 2, 2, 3], [4, 1, 3, 0], [2, 4, 0, 0]]))
    target_lengths = torch.tensor([4, 3, 2])
    model = set_weights(torch, AcousticModel(), seed=20)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for _ in range(3):
        log_probs, out_lens, h = model(feats, lengths)
        loss = F.ctc_loss(log_probs.transpose(0, 1), targets, out_lens, target_lengths,
                          blank=0, reduction="mean", zero_infinity=True)  # fmt: skip
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        losses.append(loss.item())
    best = log_probs.argmax(-1)
    decoded = []
    for b in range(3):
        tokens = torch.unique_consecutive(best[b, : lengths[b]])
        decoded.append(tokens[tokens != 0].tolist())
    return {"losses": losses, "log_probs": log_probs, "out_lens": out_lens, "h_n": h,
            "padded_rows_zero": bool((log_probs[2, 7:] == log_probs[2, 7]).all()),
            "decoded": str(decoded), "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def ecapa_attentive_stats_pooling_speaker_embedding(torch):
    nn, F = torch.nn, torch.nn.functional

    class SpeakerEncoder(nn.Module):
        def __init__(self, n_mels=8, ch=12, emb=6):
            super().__init__()
            self.tdnn = nn.Sequential(
                nn.Conv1d(n_mels, ch, 5, padding=2),
                nn.ReLU(),
                nn.BatchNorm1d(ch),
                nn.Conv1d(ch, ch, 3, dilation=2, padding=2),
                nn.ReLU(),
                nn.BatchNorm1d(ch),
            )
            self.attention = nn.Sequential(nn.Conv1d(ch, 4, 1), nn.Tanh(), nn.Conv1d(4, ch, 1))
            self.fc = nn.Linear(2 * ch, emb)
            self.bn = nn.BatchNorm1d(emb)

        def forward(self, x):
            h = self.tdnn(x)
            w = torch.softmax(self.attention(h), dim=2)
            mu = torch.sum(h * w, dim=2)
            sg = torch.sqrt((torch.sum(h**2 * w, dim=2) - mu**2).clamp(min=1e-5))
            return self.bn(self.fc(torch.cat((mu, sg), dim=1)))

    enc = set_weights(torch, SpeakerEncoder(), seed=21)
    n_spk = 3
    W = nn.Parameter(torch.tensor(arr(22, n_spk, 6)))
    x = torch.tensor(arr(23, 6, 8, 20))
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    opt = torch.optim.SGD([{"params": enc.parameters()}, {"params": [W], "lr": 0.05}], lr=0.1,
                          momentum=0.9)  # fmt: skip
    margin, scale, losses = 0.2, 10.0, []
    for _ in range(3):
        emb = enc(x)
        cosine = F.linear(F.normalize(emb), F.normalize(W))
        sine = torch.sqrt((1.0 - cosine.pow(2)).clamp(0, 1))
        phi = cosine * math.cos(margin) - sine * math.sin(margin)  # cos(theta + m)
        one_hot = torch.zeros_like(cosine).scatter_(1, labels.view(-1, 1), 1.0)
        logits = scale * (one_hot * phi + (1.0 - one_hot) * cosine)
        loss = nn.CrossEntropyLoss()(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    enc.eval()
    with torch.no_grad():
        e = F.normalize(enc(x), dim=1)
        sim = e @ e.T
        pair = F.cosine_similarity(enc(x[0::2]), enc(x[1::2]), dim=1)
    return {"losses": losses, "sim": sim, "pair": pair, "W": W, "bn_var": enc.bn.running_var,
            "norms": torch.linalg.vector_norm(e, dim=1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def istft_round_trips_and_griffin_lim(torch):
    x = torch.tensor(arr(24, 2, 200))
    results = {}
    for name, kw in {
        "hann": dict(n_fft=32, hop_length=8, window=torch.hann_window(32)),
        "hamming_win24": dict(n_fft=32, hop_length=6, win_length=24,
                              window=torch.hamming_window(24)),
        "normalized": dict(n_fft=16, hop_length=4, window=torch.hann_window(16), normalized=True),
        "constant_pad": dict(n_fft=32, hop_length=8, window=torch.hann_window(32),
                             pad_mode="constant"),
        "kaiser": dict(n_fft=32, hop_length=8, window=torch.signal.windows.kaiser(32, beta=8.0,
                                                                                  sym=False)),
        "gaussian": dict(n_fft=32, hop_length=4, window=torch.signal.windows.gaussian(32, std=6.0,
                                                                                   sym=False)),
    }.items():  # fmt: skip
        spec = torch.stft(x, return_complex=True, **kw)
        kw.pop("pad_mode", None)
        back = torch.istft(spec, length=x.shape[-1], **kw)
        results[name] = {"max_err": (back - x).abs().max(), "frames": spec.shape[-1]}
    # Griffin-Lim from a fixed initial phase
    n_fft, hop = 32, 8
    window = torch.hann_window(n_fft)
    mag = torch.stft(x, n_fft, hop, window=window, return_complex=True).abs()
    phase = torch.tensor(np.random.default_rng(25).uniform(-np.pi, np.pi, mag.shape)
                         .astype(np.float32))  # fmt: skip
    angles = torch.polar(torch.ones_like(mag), phase)
    errs = []
    for _ in range(5):
        wav = torch.istft(mag * angles, n_fft, hop, window=window, length=200)
        rebuilt = torch.stft(wav, n_fft, hop, window=window, return_complex=True)
        angles = rebuilt / rebuilt.abs().clamp(min=1e-8)
        errs.append(torch.linalg.norm(rebuilt.abs() - mag) / torch.linalg.norm(mag))
    results["gl_errs"] = errs
    results["gl_wav"] = wav
    results["angle"] = torch.angle(angles[0, 1:4, 2:5])
    return results


@program(rtol=5e-4, atol=5e-5)
def preemphasis_framing_unfold_overlap_add(torch):
    F = torch.nn.functional
    wav = torch.tensor(arr(26, 2, 160, scale=0.5), requires_grad=True)
    emph = torch.cat([wav[:, :1], wav[:, 1:] - 0.97 * wav[:, :-1]], dim=1)
    frame_len, hop, n_fft = 32, 16, 64
    frames = emph.unfold(-1, frame_len, hop)  # (B, n_frames, frame_len)
    n_frames = 1 + (emph.shape[-1] - frame_len) // hop
    strided = emph.detach().contiguous().as_strided((2, n_frames, frame_len), (160, hop, 1))
    frames = frames - frames.mean(dim=-1, keepdim=True)  # remove DC offset per frame
    windowed = frames * torch.hamming_window(frame_len, periodic=False)
    spec = torch.fft.rfft(windowed, n=n_fft)
    power = spec.abs() ** 2 / n_fft
    log_energy = torch.log(windowed.pow(2).sum(-1).clamp_min(torch.finfo(torch.float32).eps))
    zcr = (torch.sign(frames[..., 1:]) != torch.sign(frames[..., :-1])).float().mean(-1)
    voiced = log_energy > log_energy.median(dim=-1, keepdim=True).values
    # same frames through F.unfold on a (B, 1, 1, T) image
    patches = F.unfold(emph.detach().view(2, 1, 1, -1), kernel_size=(1, frame_len), stride=(1, hop))
    # overlap-add the windowed frames back with F.fold, normalized by the summed window
    ola = F.fold(windowed.transpose(1, 2), output_size=(1, (n_frames - 1) * hop + frame_len),
                 kernel_size=(1, frame_len), stride=(1, hop)).flatten(1)  # fmt: skip
    wsum = F.fold(torch.hamming_window(frame_len, periodic=False).view(1, -1, 1)
                  .expand(1, -1, n_frames), (1, ola.shape[-1]), (1, frame_len),
                  stride=(1, hop)).flatten()  # fmt: skip
    (power.mean() + ola.pow(2).mean()).backward()
    return {"emph": emph, "power": power, "log_energy": log_energy, "zcr": zcr,
            "voiced": voiced, "patches_equal": torch.equal(patches.transpose(1, 2),
            emph.detach().unfold(-1, frame_len, hop)), "ola": ola, "wsum": wsum,
            "wav_grad": wav.grad, "strided": strided[:, ::3],
            "strided_equal": torch.equal(strided, emph.detach().unfold(-1, frame_len, hop))}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def conformer_block_padded_batch_noam_warmup(torch):
    nn, F = torch.nn, torch.nn.functional

    class ConvModule(nn.Module):
        def __init__(self, dim=8, kernel=5, expansion=2):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.pw1 = nn.Conv1d(dim, dim * expansion * 2, 1)
            self.glu = nn.GLU(dim=1)
            # no bias before BatchNorm: its gradient would be only round-off (amplified by Adam)
            self.dw = nn.Conv1d(dim * expansion, dim * expansion, kernel, padding=kernel // 2,
                                groups=dim * expansion, bias=False)  # fmt: skip
            self.bn = nn.BatchNorm1d(dim * expansion)
            self.act = nn.SiLU()
            self.pw2 = nn.Conv1d(dim * expansion, dim, 1)

        def forward(self, x, mask):  # x: (B, T, D), mask: (B, T) True on real frames
            h = self.glu(self.pw1(self.norm(x).transpose(1, 2)))
            h = h.masked_fill(~mask.unsqueeze(1), 0.0)
            h = self.act(self.bn(self.dw(h)))
            return x + self.pw2(h).transpose(1, 2)

    class SelfAttention(nn.Module):
        def __init__(self, dim=8, heads=2):
            super().__init__()
            self.heads = heads
            self.norm = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim, bias=False)  # a key bias only gets round-off grads
            self.out = nn.Linear(dim, dim)

        def forward(self, x, mask):
            B, T, D = x.shape
            q, k, v = self.qkv(self.norm(x)).split(D, dim=-1)
            q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
            pair = mask[:, None, :, None] & mask[:, None, None, :]  # (B, 1, T, T)
            h = F.scaled_dot_product_attention(q, k, v, attn_mask=pair)
            return x + self.out(h.transpose(1, 2).reshape(B, T, D))

    class FeedForward(nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.SiLU(),
                                     nn.Linear(4 * dim, dim))  # fmt: skip

        def forward(self, x):
            return x + 0.5 * self.net(x)

    class ConformerBlock(nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.ff1, self.mhsa, self.conv = FeedForward(dim), SelfAttention(dim), ConvModule(dim)
            self.ff2, self.norm = FeedForward(dim), nn.LayerNorm(dim)

        def forward(self, x, mask):
            x = self.conv(self.mhsa(self.ff1(x), mask), mask)
            return self.norm(self.ff2(x))

    model = set_weights(torch, ConformerBlock(), seed=27)
    x = torch.tensor(arr(28, 2, 10, 8))
    target = torch.tensor(arr(29, 2, 10, 8))
    mask = torch.arange(10).unsqueeze(0) < torch.tensor([[10], [7]])
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d_model, warmup = 8, 4
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: d_model**-0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5) * 0.1
    )
    losses, lrs = [], []
    for _ in range(4):
        per_frame = F.smooth_l1_loss(model(x, mask), target, beta=0.5, reduction="none").mean(-1)
        loss = (per_frame * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    with torch.no_grad():
        out = model(x, mask)
    return {"losses": losses, "lrs": lrs, "out_valid": out[mask], "params": params(model)}
