"""Knowledge-graph embeddings and link prediction, written in the idioms of the reference code of
OpenKE, PyKEEN, DGL-KE, the KBC repository and the papers' own releases: TransE with L1/L2
distances, entity renormalisation and a margin ranking loss; TransH's hyperplane projections with
soft constraints; TransR's relation matrices initialised to the identity; DistMult trained
1-vs-all with label smoothing; ComplEx with real and imaginary halves, reciprocal relations and
the N3 regulariser, and again with torch's complex tensors; RotatE's phases with self-adversarial
negative sampling; ConvE and TuckER; R-GCN's basis decomposition; Bernoulli corruption of heads or
tails with filtered negatives; PyKEEN's pairwise and setwise losses; and filtered rank metrics
(MRR, Hits@k, optimistic/pessimistic/realistic ranks). Triples, negatives and initial weights
are NumPy arrays from fixed seeds."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, ints, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _triples(seed: int, n: int, num_entities: int, num_relations: int) -> np.ndarray:
    """``n`` distinct (head, relation, tail) triples as an int64 ``[n, 3]`` array."""
    rng = _rng(seed)
    seen: set[tuple[int, int, int]] = set()
    while len(seen) < n:
        h, t = rng.integers(0, num_entities, 2)
        if h != t:
            seen.add((int(h), int(rng.integers(0, num_relations)), int(t)))
    return np.array(sorted(seen), dtype=np.int64)


@program(rtol=5e-4, atol=5e-5)  # L1/L2 norms and means accumulate in a different order
def kg_transe_openke_margin_l1_l2(torch):
    """TransE as OpenKE writes it: ``nn.Embedding`` tables initialised uniformly in
    ``±6/sqrt(d)``, ``F.normalize`` of heads, relations and tails inside ``_calc``, the distance
    ``torch.norm(h + r - t, p, -1).flatten()`` for ``p=1`` and ``p=2``, tails corrupted from
    fixed NumPy indices (``head_batch``/``tail_batch`` modes), OpenKE's ``MarginLoss``
    (``torch.max(p - n, -margin).mean() + margin``) next to ``nn.MarginRankingLoss(target=-1)``,
    trained with SGD."""
    nn = torch.nn
    F = nn.functional
    E, R, d = 14, 3, 6

    class TransE(nn.Module):
        def __init__(self, p_norm):
            super().__init__()
            self.p_norm = p_norm
            self.ent_embeddings = nn.Embedding(E, d)
            self.rel_embeddings = nn.Embedding(R, d)

        def _calc(self, h, t, r, mode):
            h, r, t = F.normalize(h, 2, -1), F.normalize(r, 2, -1), F.normalize(t, 2, -1)
            if mode != "normal":
                h = h.view(-1, r.shape[0], h.shape[-1])
                t = t.view(-1, r.shape[0], t.shape[-1])
                r = r.view(-1, r.shape[0], r.shape[-1])
            score = h + (r - t) if mode == "head_batch" else (h + r) - t
            return torch.norm(score, self.p_norm, -1).flatten()

        def forward(self, data):
            h = self.ent_embeddings(data["batch_h"])
            t = self.ent_embeddings(data["batch_t"])
            r = self.rel_embeddings(data["batch_r"])
            return self._calc(h, t, r, data["mode"])

    class MarginLoss(nn.Module):
        def __init__(self, margin=1.0):
            super().__init__()
            self.margin = nn.Parameter(torch.Tensor([margin]))
            self.margin.requires_grad = False

        def forward(self, p_score, n_score):
            return (torch.max(p_score - n_score, -self.margin)).mean() + self.margin

    triples = _triples(1, 8, E, R)
    out = {}
    for p in (1, 2):
        model = set_weights(torch, TransE(p), seed=2, scale=6 / math.sqrt(d))
        criterion, ranking = MarginLoss(2.0), nn.MarginRankingLoss(margin=2.0)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        losses, rank_losses = [], []
        for step in range(3):
            neg_t = ints(10 + step, E, len(triples))
            neg_h = ints(20 + step, E, len(triples))
            corrupt_head = torch.tensor(_rng(30 + step).random(len(triples)) < 0.5)
            pos = torch.tensor(triples)
            batch_h = torch.cat(
                [pos[:, 0], torch.where(corrupt_head, torch.tensor(neg_h), pos[:, 0])]
            )
            batch_t = torch.cat(
                [pos[:, 2], torch.where(corrupt_head, pos[:, 2], torch.tensor(neg_t))]
            )
            batch_r = torch.cat([pos[:, 1], pos[:, 1]])
            score = model({"batch_h": batch_h, "batch_t": batch_t, "batch_r": batch_r,
                           "mode": "normal"})  # fmt: skip
            p_score, n_score = score[: len(triples)], score[len(triples) :]
            loss = criterion(p_score, n_score)
            rank_losses.append(ranking(p_score, n_score, -torch.ones_like(p_score)).item())
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
        tail_scores = model({"batch_h": torch.tensor(triples[:2, 0]).repeat_interleave(E),
                             "batch_r": torch.tensor(triples[:2, 1]),
                             "batch_t": torch.arange(E).repeat(2), "mode": "tail_batch"})  # fmt: skip
        out[f"L{p}"] = {"losses": [x.detach() for x in losses], "ranking": rank_losses,
                        "ent": model.ent_embeddings.weight, "rel": model.rel_embeddings.weight,
                        "tail_scores": tail_scores,
                        "margin_grad": criterion.margin.grad is None}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)  # row norms accumulate in a different order
def kg_transe_renorm_entities_max_norm(torch):
    """The original TransE loop: relations normalised once at initialisation, entity rows divided
    in place by their L2 norm before each batch (``weight.data[:-1].div_(...norm(p=2, dim=1,
    keepdim=True))``, the padding row left alone), the same constraint with ``renorm_(p=2,
    dim=0, maxnorm=1)`` and with ``nn.Embedding(max_norm=1.0)`` renormalising looked-up rows;
    ``MarginRankingLoss`` with ``reduction='none'`` on pairwise distances; SGD."""
    nn = torch.nn
    E, R, d = 12, 3, 5
    triples = _triples(3, 7, E, R)
    bound = 6 / math.sqrt(d)

    def make(max_norm=None):
        ent = nn.Embedding(E + 1, d, padding_idx=E, max_norm=max_norm)
        rel = nn.Embedding(R + 1, d, padding_idx=R)
        with torch.no_grad():
            ent.weight.copy_(
                torch.tensor(_rng(4).uniform(-bound, bound, (E + 1, d)).astype(np.float32))
            )
            rel.weight.copy_(
                torch.tensor(_rng(5).uniform(-bound, bound, (R + 1, d)).astype(np.float32))
            )
            ent.weight[E].zero_()
            rel.weight[R].zero_()
        rel.weight.data[:-1, :].div_(rel.weight.data[:-1, :].norm(p=2, dim=1, keepdim=True))
        return ent, rel

    def distance(ent, rel, trip):
        return (ent(trip[:, 0]) + rel(trip[:, 1]) - ent(trip[:, 2])).norm(p=1, dim=1)

    out = {}
    for variant in ("div", "renorm", "max_norm"):
        ent, rel = make(max_norm=1.0 if variant == "max_norm" else None)
        criterion = nn.MarginRankingLoss(margin=1.0, reduction="none")
        opt = torch.optim.SGD([ent.weight, rel.weight], lr=0.1)
        losses = []
        for step in range(3):
            if variant == "div":
                ent.weight.data[:-1, :].div_(ent.weight.data[:-1, :].norm(p=2, dim=1, keepdim=True))
            elif variant == "renorm":
                ent.weight.data.renorm_(p=2, dim=0, maxnorm=1)
            pos = torch.tensor(triples)
            neg = pos.clone()
            heads = torch.tensor(_rng(40 + step).random(len(triples)) < 0.5)
            rand = torch.tensor(ints(50 + step, E, len(triples)))
            neg[:, 0] = torch.where(heads, rand, neg[:, 0])
            neg[:, 2] = torch.where(heads, neg[:, 2], rand)
            pd, nd = distance(ent, rel, pos), distance(ent, rel, neg)
            loss = criterion(pd, nd, torch.tensor([-1], dtype=torch.long))
            opt.zero_grad()
            loss.mean().backward()
            opt.step()
            losses.append(loss.detach())
        out[variant] = {"losses": losses, "ent": ent.weight, "rel": rel.weight,
                        "norms": ent.weight.detach().norm(dim=1),
                        "pad_grad": ent.weight.grad[E]}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)  # projections and sums accumulate in a different order
def kg_transh_hyperplane_soft_constraints(torch):
    """TransH as OpenKE writes ``_transfer``: the relation's normal vector normalised with
    ``F.normalize`` and the entity projected onto the hyperplane, ``e - torch.sum(e * norm, -1,
    True) * norm``; the paper's soft constraints (entity scale ``relu(||e||^2 - 1)`` and the
    orthogonality ``relu((w.d)^2 / ||d||^2 - eps^2)``) added to the margin loss; Bernoulli
    corruption probabilities ``tph / (tph + hpt)`` from the training triples; Adam."""
    nn = torch.nn
    F = nn.functional
    E, R, d = 15, 3, 6

    class TransH(nn.Module):
        def __init__(self):
            super().__init__()
            self.ent_embeddings = nn.Embedding(E, d)
            self.rel_embeddings = nn.Embedding(R, d)
            self.norm_vector = nn.Embedding(R, d)

        def _transfer(self, e, norm):
            norm = F.normalize(norm, p=2, dim=-1)
            return e - torch.sum(e * norm, -1, True) * norm

        def forward(self, h_idx, r_idx, t_idx):
            h, t = self.ent_embeddings(h_idx), self.ent_embeddings(t_idx)
            r, r_norm = self.rel_embeddings(r_idx), self.norm_vector(r_idx)
            h, t = self._transfer(h, r_norm), self._transfer(t, r_norm)
            return torch.norm(h + r - t, 2, -1), h, t

    triples = torch.tensor(_triples(6, 12, E, R))
    # Bernoulli "bern" sampling: average tails per head and heads per tail of each relation
    tph, hpt = torch.zeros(R), torch.zeros(R)
    for r in range(R):
        sel = triples[triples[:, 1] == r]
        if len(sel):
            tph[r] = len(sel) / torch.unique(sel[:, 0]).numel()
            hpt[r] = len(sel) / torch.unique(sel[:, 2]).numel()
    prob_head = tph / (tph + hpt)
    model = set_weights(torch, TransH(), seed=7, scale=0.8)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    C, eps, margin = 0.25, 0.1, 1.0
    losses, parts = [], []
    for step in range(4):
        u = torch.tensor(_rng(60 + step).random(len(triples)).astype(np.float32))
        corrupt_head = u < prob_head[triples[:, 1]]
        rand = torch.tensor(ints(70 + step, E, len(triples)))
        h = torch.where(corrupt_head, rand, triples[:, 0])
        t = torch.where(corrupt_head, triples[:, 2], rand)
        p_score, ph, pt = model(triples[:, 0], triples[:, 1], triples[:, 2])
        n_score, _, _ = model(h, triples[:, 1], t)
        margin_loss = F.relu(p_score - n_score + margin).sum()
        ents = model.ent_embeddings(torch.cat([triples[:, 0], triples[:, 2], h, t]))
        scale = F.relu(ents.pow(2).sum(dim=1) - 1).sum()
        w, dr = model.norm_vector.weight, model.rel_embeddings.weight
        orth = F.relu((w * dr).sum(dim=1).pow(2) / dr.pow(2).sum(dim=1) - eps**2).sum()
        loss = margin_loss + C * (scale + orth)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        parts.append(torch.stack([margin_loss, scale, orth]).detach())
    return {"tph": tph, "hpt": hpt, "prob_head": prob_head, "losses": losses, "parts": parts,
            "proj_dot": (ph * F.normalize(model.norm_vector(triples[:, 1]), dim=-1)).sum(-1),
            "ent": model.ent_embeddings.weight, "norm_vector": model.norm_vector.weight,
            "rel_grad": model.rel_embeddings.weight.grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # batched matmuls accumulate in a different order
def kg_transr_identity_transfer_matrices(torch):
    """TransR as OpenKE writes it: a ``transfer_matrix`` embedding of ``dim_e * dim_r`` values
    per relation, initialised to the (rectangular) identity row by row through ``weight.data[i]
    = identity`` and perturbed, entities mapped with ``torch.matmul(e.view(-1, 1, dim_e),
    M.view(-1, dim_e, dim_r))``, the norm constraints ``clamp(||.|| - 1, min=0)`` on entity and
    projected vectors, margin ranking, Adagrad."""
    nn = torch.nn
    F = nn.functional
    E, R, de, dr = 13, 3, 5, 4

    class TransR(nn.Module):
        def __init__(self):
            super().__init__()
            self.ent_embeddings = nn.Embedding(E, de)
            self.rel_embeddings = nn.Embedding(R, dr)
            self.transfer_matrix = nn.Embedding(R, de * dr)

        def _transfer(self, e, r_transfer):
            r_transfer = r_transfer.view(-1, de, dr)
            e = e.view(-1, 1, de)
            return torch.matmul(e, r_transfer).view(-1, dr)

        def forward(self, h_idx, r_idx, t_idx):
            h, t = self.ent_embeddings(h_idx), self.ent_embeddings(t_idx)
            r, m = self.rel_embeddings(r_idx), self.transfer_matrix(r_idx)
            hp, tp = self._transfer(h, m), self._transfer(t, m)
            score = torch.norm(hp + r - tp, 1, -1)
            cons = (torch.clamp(torch.norm(hp, 2, -1) - 1, min=0) + torch.clamp(torch.norm(tp, 2, -1) - 1, min=0)
                    + torch.clamp(torch.norm(h, 2, -1) - 1, min=0))  # fmt: skip
            return score, cons

    model = set_weights(torch, TransR(), seed=8, scale=0.6)
    identity = torch.zeros(de, dr)
    for i in range(min(de, dr)):
        identity[i][i] = 1
    identity = identity.view(dr * de)
    for i in range(R):
        model.transfer_matrix.weight.data[i] = identity
    model.transfer_matrix.weight.data += torch.tensor(arr(9, R, de * dr, scale=0.05))
    triples = torch.tensor(_triples(10, 10, E, R))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    loss_fn = nn.MarginRankingLoss(margin=1.5)
    losses = []
    for step in range(4):
        neg_t = torch.tensor(ints(80 + step, E, len(triples)))
        p, pc = model(triples[:, 0], triples[:, 1], triples[:, 2])
        n, nc = model(triples[:, 0], triples[:, 1], neg_t)
        loss = loss_fn(p, n, torch.full_like(p, -1.0)) + 0.1 * (pc.mean() + nc.mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state = opt.state[model.transfer_matrix.weight]
    return {"losses": losses, "M": model.transfer_matrix.weight.view(R, de, dr),
            "ent": model.ent_embeddings.weight, "sum": state["sum"], "step": state["step"],
            "proj": model._transfer(model.ent_embeddings.weight,
                                    model.transfer_matrix.weight[1].expand(E, -1)),
            "unit_rows": F.normalize(model.rel_embeddings.weight, dim=1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # 1-vs-all scores are matmuls over the entity table
def kg_distmult_kvsall_bce_label_smoothing(torch):
    """DistMult trained 1-vs-all (KvsAll) as ConvE's and LibKGE's code does: the multi-hot
    targets of every distinct (head, relation) pair built with ``index_put_`` on an
    ``nonzero``-derived row index, smoothed as ``(1 - eps) * y + 1 / num_entities``, scores
    ``(h * r) @ E.T`` through ``BCEWithLogitsLoss`` plus the DistMult paper's L2 penalty on the
    looked-up embeddings; Adagrad with ``initial_accumulator_value``."""
    nn = torch.nn
    E, R, d = 16, 4, 6
    triples = torch.tensor(_triples(11, 20, E, R))
    hr, inverse = torch.unique(triples[:, :2], dim=0, return_inverse=True)
    targets = torch.zeros(len(hr), E)
    targets.index_put_((inverse, triples[:, 2]), torch.ones(len(triples)))
    targets = (1.0 - 0.1) * targets + 1.0 / E

    class DistMult(nn.Module):
        def __init__(self):
            super().__init__()
            self.ent = nn.Embedding(E, d)
            self.rel = nn.Embedding(R, d)

        def forward(self, h, r):
            eh, er = self.ent(h), self.rel(r)
            return (eh * er) @ self.ent.weight.t(), (eh.pow(2).sum() + er.pow(2).sum()) / len(h)

    model = set_weights(torch, DistMult(), seed=12, scale=0.3)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=0.1)
    loss_fn = nn.BCEWithLogitsLoss()
    losses = []
    batches = [torch.tensor(b) for b in np.array_split(_rng(13).permutation(len(hr)), 2)]
    for _epoch in range(2):
        for idx in batches:
            scores, reg = model(hr[idx, 0], hr[idx, 1])
            loss = loss_fn(scores, targets[idx]) + 1e-2 * reg
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with torch.no_grad():
        scores, _ = model(hr[:, 0], hr[:, 1])
    return {"hr": hr, "inverse": inverse, "targets_sum": targets.sum(1), "losses": losses,
            "probs": torch.sigmoid(scores), "top3": scores.topk(3, dim=1).indices,
            "ent": model.ent.weight, "symmetric": torch.allclose(
                (model.ent.weight[0] * model.rel.weight[1] * model.ent.weight[3]).sum(),
                (model.ent.weight[3] * model.rel.weight[1] * model.ent.weight[0]).sum())}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # 1-vs-all matmuls and N3 sums accumulate in a different order
def kg_complex_kbc_n3_reciprocal_adagrad(torch):
    """ComplEx as the KBC repository (Lacroix et al.) writes it: one embedding of ``2 * rank``
    values split into real and imaginary halves by slicing, reciprocal relations added as
    ``r + num_relations`` with heads and tails swapped, 1-vs-all scores ``(re_h re_r - im_h
    im_r) @ re_E.T + (re_h im_r + im_h re_r) @ im_E.T``, the factors' moduli ``sqrt(re^2 +
    im^2)`` penalised by the weighted N3 norm ``sum(|f|^3) / batch``, ``CrossEntropyLoss``,
    Adagrad on the tables' sparse gradients (``sparse=True``), batches of a shuffled copy of the
    examples; the ``weight.data *= init_size`` initialisation idiom."""
    nn = torch.nn
    E, R, rank = 14, 3, 4

    class ComplEx(nn.Module):
        def __init__(self, sizes, rank, init_size=1e-3):
            super().__init__()
            self.rank = rank
            self.embeddings = nn.ModuleList(
                [nn.Embedding(s, 2 * rank, sparse=True) for s in sizes[:2]]
            )
            self.embeddings[0].weight.data *= init_size
            self.embeddings[1].weight.data *= init_size

        def forward(self, x):
            lhs = self.embeddings[0](x[:, 0])
            rel = self.embeddings[1](x[:, 1])
            rhs = self.embeddings[0](x[:, 2])
            lhs = lhs[:, : self.rank], lhs[:, self.rank :]
            rel = rel[:, : self.rank], rel[:, self.rank :]
            rhs = rhs[:, : self.rank], rhs[:, self.rank :]
            to_score = self.embeddings[0].weight
            to_score = to_score[:, : self.rank], to_score[:, self.rank :]
            return (
                (lhs[0] * rel[0] - lhs[1] * rel[1]) @ to_score[0].transpose(0, 1)
                + (lhs[0] * rel[1] + lhs[1] * rel[0]) @ to_score[1].transpose(0, 1)
            ), (
                torch.sqrt(lhs[0] ** 2 + lhs[1] ** 2),
                torch.sqrt(rel[0] ** 2 + rel[1] ** 2),
                torch.sqrt(rhs[0] ** 2 + rhs[1] ** 2),
            )

    class N3(nn.Module):
        def __init__(self, weight):
            super().__init__()
            self.weight = weight

        def forward(self, factors):
            norm = 0
            for f in factors:
                norm += self.weight * torch.sum(torch.abs(f) ** 3)
            return norm / factors[0].shape[0]

    model = ComplEx((E, 2 * R, E), rank, init_size=1.0)
    set_weights(torch, model, seed=14, scale=0.4)
    with torch.no_grad():
        for emb in model.embeddings:
            emb.weight.data *= 0.9
    train = _triples(15, 12, E, R)
    inverse = np.stack([train[:, 2], train[:, 1] + R, train[:, 0]], axis=1)
    examples = torch.from_numpy(np.concatenate([train, inverse]))
    regularizer = N3(5e-3)
    loss_fn = nn.CrossEntropyLoss(reduction="mean")
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    actual_examples = examples[torch.tensor(_rng(16).permutation(len(examples)))]
    losses, l_regs = [], []
    b_begin, batch_size = 0, 8
    while b_begin < examples.shape[0]:
        input_batch = actual_examples[b_begin : b_begin + batch_size]
        predictions, factors = model(input_batch)
        truth = input_batch[:, 2]
        l_fit = loss_fn(predictions, truth)
        l_reg = regularizer(factors)
        loss = l_fit + l_reg
        opt.zero_grad()
        loss.backward()
        opt.step()
        b_begin += batch_size
        losses.append(l_fit.item())
        l_regs.append(l_reg.item())
    with torch.no_grad():
        queries = torch.from_numpy(train[:4])
        scores, _ = model(queries)
        targets = scores[torch.arange(4), queries[:, 2]]
    return {"fit": losses, "reg": l_regs, "ent": model.embeddings[0].weight,
            "rel": model.embeddings[1].weight, "scores": scores, "targets": targets,
            "ranks": (scores >= targets.unsqueeze(1)).float().sum(1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # complex products and sums accumulate in a different order
def kg_complex_torch_complex_tensors(torch):
    """ComplEx and RotatE written with torch's complex dtype as PyKEEN's interactions do: the
    ``[n, d, 2]`` real storage turned into ``complex64`` with ``view_as_complex``, the score
    ``torch.real(torch.sum(h * r * torch.conj(t), dim=-1))``, the same score from
    ``torch.complex`` of the halves and from ``einsum`` over all tails, RotatE's unit-modulus
    relations from ``torch.polar(ones, phase)`` and its distance ``(h * r - t).abs()``;
    gradients flow back through ``view_as_complex`` into the real parameters; Adam."""
    nn = torch.nn
    F = nn.functional
    E, R, d = 10, 3, 4
    ent = nn.Parameter(torch.tensor(arr(17, E, d, 2, scale=0.5)))
    rel = nn.Parameter(torch.tensor(arr(18, R, d, 2, scale=0.5)))
    phase = nn.Parameter(
        torch.tensor(_rng(19).uniform(-math.pi, math.pi, (R, d)).astype(np.float32))
    )
    triples = torch.tensor(_triples(20, 8, E, R))
    labels = torch.tensor(ints(21, 2, len(triples)).astype(np.float32))
    opt = torch.optim.Adam([ent, rel, phase], lr=0.05)
    losses, rot_losses = [], []
    for _step in range(3):
        ec, rc = torch.view_as_complex(ent), torch.view_as_complex(rel)
        h, r, t = ec[triples[:, 0]], rc[triples[:, 1]], ec[triples[:, 2]]
        score = torch.real(torch.sum(h * r * torch.conj(t), dim=-1))
        loss = F.binary_cross_entropy_with_logits(score, labels)
        rot = torch.polar(torch.ones_like(phase), phase)[triples[:, 1]]
        dist = (h * rot - t).abs().sum(-1)
        rot_loss = -F.logsigmoid(6.0 - dist).mean()
        opt.zero_grad()
        (loss + rot_loss).backward()
        opt.step()
        losses.append(loss.item())
        rot_losses.append(rot_loss.item())
    with torch.no_grad():
        ec, rc = torch.view_as_complex(ent), torch.view_as_complex(rel)
        halves = torch.complex(ent[..., 0], ent[..., 1])
        h, r = ec[triples[:, 0]], rc[triples[:, 1]]
        all_tails = torch.einsum("bd,ed->be", h * r, ec.conj()).real
        real_form = ((h.real * r.real - h.imag * r.imag) @ ec.real.T
                     + (h.real * r.imag + h.imag * r.real) @ ec.imag.T)  # fmt: skip
    return {"losses": losses, "rot_losses": rot_losses, "ent": ent, "phase": phase,
            "ent_grad": ent.grad, "same_halves": torch.equal(halves, ec),
            "all_tails": all_tails, "real_form": real_form, "modulus": ec.abs(),
            "angle": torch.angle(rc), "dtype": str(ec.dtype), "view_back": torch.view_as_real(rc[:2])}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # trig, norms and weighted sums accumulate in a different order
def kg_rotate_self_adversarial_negative_sampling(torch):
    """RotatE as its authors' KnowledgeGraphEmbedding code writes it: ``gamma`` and
    ``embedding_range`` as frozen ``nn.Parameter`` s, entity rows chunked into real and
    imaginary halves, relation phases ``relation / (embedding_range.item() / pi)``, head-batch and
    tail-batch negatives gathered with ``index_select(...).view(B, K, -1)``, the distance
    ``torch.stack([re, im], dim=0).norm(dim=0).sum(dim=2)``, the subsampling weights
    ``sqrt(1 / count)`` of (head, relation) and (tail, -relation-1) frequencies, and the
    self-adversarial loss ``(softmax(neg * alpha).detach() * logsigmoid(-neg)).sum(1)``; Adam."""
    nn = torch.nn
    F = nn.functional
    E, R, hidden, K = 12, 3, 4, 5
    gamma_v, epsilon, alpha = 6.0, 2.0, 1.0

    class KGEModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.gamma = nn.Parameter(torch.Tensor([gamma_v]), requires_grad=False)
            self.embedding_range = nn.Parameter(
                torch.Tensor([(self.gamma.item() + epsilon) / hidden]), requires_grad=False
            )
            rng = _rng(22)
            lim = self.embedding_range.item()
            self.entity_embedding = nn.Parameter(
                torch.tensor(rng.uniform(-lim, lim, (E, 2 * hidden)).astype(np.float32))
            )
            self.relation_embedding = nn.Parameter(
                torch.tensor(rng.uniform(-lim, lim, (R, hidden)).astype(np.float32))
            )

        def forward(self, sample, mode="single"):
            if mode == "single":
                head = torch.index_select(
                    self.entity_embedding, dim=0, index=sample[:, 0]
                ).unsqueeze(1)
                relation = torch.index_select(
                    self.relation_embedding, dim=0, index=sample[:, 1]
                ).unsqueeze(1)
                tail = torch.index_select(
                    self.entity_embedding, dim=0, index=sample[:, 2]
                ).unsqueeze(1)
            elif mode == "head-batch":
                tail_part, head_part = sample
                batch_size, negative_sample_size = head_part.size(0), head_part.size(1)
                head = torch.index_select(self.entity_embedding, dim=0, index=head_part.view(-1)).view(
                    batch_size, negative_sample_size, -1)  # fmt: skip
                relation = torch.index_select(
                    self.relation_embedding, dim=0, index=tail_part[:, 1]
                ).unsqueeze(1)
                tail = torch.index_select(
                    self.entity_embedding, dim=0, index=tail_part[:, 2]
                ).unsqueeze(1)
            else:
                head_part, tail_part = sample
                batch_size, negative_sample_size = tail_part.size(0), tail_part.size(1)
                head = torch.index_select(
                    self.entity_embedding, dim=0, index=head_part[:, 0]
                ).unsqueeze(1)
                relation = torch.index_select(
                    self.relation_embedding, dim=0, index=head_part[:, 1]
                ).unsqueeze(1)
                tail = torch.index_select(self.entity_embedding, dim=0, index=tail_part.view(-1)).view(
                    batch_size, negative_sample_size, -1)  # fmt: skip
            return self.RotatE(head, relation, tail, mode)

        def RotatE(self, head, relation, tail, mode):
            pi = 3.14159265358979323846
            re_head, im_head = torch.chunk(head, 2, dim=2)
            re_tail, im_tail = torch.chunk(tail, 2, dim=2)
            phase_relation = relation / (self.embedding_range.item() / pi)
            re_relation = torch.cos(phase_relation)
            im_relation = torch.sin(phase_relation)
            if mode == "head-batch":
                re_score = re_relation * re_tail + im_relation * im_tail
                im_score = re_relation * im_tail - im_relation * re_tail
                re_score = re_score - re_head
                im_score = im_score - im_head
            else:
                re_score = re_head * re_relation - im_head * im_relation
                im_score = re_head * im_relation + im_head * re_relation
                re_score = re_score - re_tail
                im_score = im_score - im_tail
            score = torch.stack([re_score, im_score], dim=0)
            score = score.norm(dim=0)
            return self.gamma.item() - score.sum(dim=2)

    train = _triples(23, 10, E, R)
    count: dict[tuple[int, int], int] = {}
    for h, r, t in train.tolist():
        count[(h, r)] = count.get((h, r), 3) + 1
        count[(t, -r - 1)] = count.get((t, -r - 1), 3) + 1
    model = KGEModel()
    opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=0.05)
    logs = []
    for step in range(4):
        mode = "head-batch" if step % 2 == 0 else "tail-batch"
        positive_sample = torch.LongTensor(train)
        negative_sample = torch.LongTensor(ints(90 + step, E, len(train), K))
        subsampling_weight = torch.cat([torch.sqrt(1 / torch.Tensor([count[(h, r)] + count[(t, -r - 1)]]))
                                        for h, r, t in train.tolist()])  # fmt: skip
        negative_score = model((positive_sample, negative_sample), mode=mode)
        negative_score = (F.softmax(negative_score * alpha, dim=1).detach()
                          * F.logsigmoid(-negative_score)).sum(dim=1)  # fmt: skip
        positive_score = model(positive_sample)
        positive_score = F.logsigmoid(positive_score).squeeze(dim=1)
        positive_sample_loss = (
            -(subsampling_weight * positive_score).sum() / subsampling_weight.sum()
        )
        negative_sample_loss = (
            -(subsampling_weight * negative_score).sum() / subsampling_weight.sum()
        )
        loss = (positive_sample_loss + negative_sample_loss) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        logs.append({"positive_sample_loss": positive_sample_loss.item(),
                     "negative_sample_loss": negative_sample_loss.item(), "loss": loss.item()})  # fmt: skip
    with torch.no_grad():
        all_tails = model(
            (torch.LongTensor(train[:3]), torch.arange(E).repeat(3, 1)), mode="tail-batch"
        )
        argsort = torch.argsort(all_tails, dim=1, descending=True)
        ranks = [(argsort[i, :] == int(train[i, 2])).nonzero().item() + 1 for i in range(3)]
    return {"logs": logs, "ent": model.entity_embedding, "rel": model.relation_embedding,
            "rel_grad": model.relation_embedding.grad, "gamma_grad": model.gamma.grad is None,
            "all_tails": all_tails, "ranks": ranks,
            "n_trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # conv, batch norm and 1-N matmuls accumulate in a different order
def kg_conve_reshape_conv_fc(torch):
    """ConvE (Dettmers et al.) as its reference code writes it: head and relation embeddings
    reshaped to ``[-1, 1, H, W]`` and stacked along height, ``BatchNorm2d``, input/feature/hidden
    dropout (p=0), a 3x3 ``Conv2d``, ``BatchNorm2d``, ReLU, flatten, ``Linear``,
    ``BatchNorm1d``, ReLU, ``torch.mm`` with the transposed entity table plus a per-entity bias
    ``b.expand_as(x)``, sigmoid and ``BCELoss`` on label-smoothed 1-N targets; Adam, then an eval
    pass. The convolution and projection take LibKGE's ``convolution_bias=False`` and
    ``padding=1``: a bias right before a training-mode batch norm (and ``bn0``'s bias before an
    unpadded convolution and ``bn1``) gets a zero gradient up to round-off, which Adam would blow
    up to steps of ``±lr`` that no two summation orders agree on."""
    nn = torch.nn
    F = nn.functional
    E, R, d1, d2 = 12, 3, 2, 4
    D = d1 * d2

    class ConvE(nn.Module):
        def __init__(self, use_bias=False):
            super().__init__()
            self.emb_e = nn.Embedding(E, D, padding_idx=0)
            self.emb_rel = nn.Embedding(R, D, padding_idx=0)
            self.inp_drop = nn.Dropout(0.0)
            self.hidden_drop = nn.Dropout(0.0)
            self.feature_map_drop = nn.Dropout2d(0.0)
            self.conv1 = nn.Conv2d(1, 3, (3, 3), 1, 1, bias=use_bias)
            self.bn0 = nn.BatchNorm2d(1)
            self.bn1 = nn.BatchNorm2d(3)
            self.bn2 = nn.BatchNorm1d(D)
            self.register_parameter("b", nn.Parameter(torch.zeros(E)))
            self.fc = nn.Linear(3 * (2 * d1) * d2, D, bias=use_bias)

        def forward(self, e1, rel):
            e1_embedded = self.emb_e(e1).view(-1, 1, d1, d2)
            rel_embedded = self.emb_rel(rel).view(-1, 1, d1, d2)
            stacked_inputs = torch.cat([e1_embedded, rel_embedded], 2)
            stacked_inputs = self.bn0(stacked_inputs)
            x = self.inp_drop(stacked_inputs)
            x = self.conv1(x)
            x = self.bn1(x)
            x = F.relu(x)
            x = self.feature_map_drop(x)
            x = x.view(x.shape[0], -1)
            x = self.fc(x)
            x = self.hidden_drop(x)
            x = self.bn2(x)
            x = F.relu(x)
            x = torch.mm(x, self.emb_e.weight.transpose(1, 0))
            x += self.b.expand_as(x)
            return torch.sigmoid(x)

    model = set_weights(torch, ConvE(), seed=24)
    with torch.no_grad():
        model.bn0.weight.fill_(1.0)
        model.bn1.weight.fill_(1.0)
        model.bn2.weight.fill_(1.0)
    triples = _triples(25, 14, E, R)
    e1, rel, e2 = (torch.tensor(triples[:, i]) for i in range(3))
    e2_multi = torch.zeros(len(triples), E).scatter_(1, e2.view(-1, 1), 1.0)
    e2_multi = ((1.0 - 0.1) * e2_multi) + (1.0 / e2_multi.size(1))
    loss_fn = torch.nn.BCELoss()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0)
    losses = []
    model.train()
    for _step in range(3):
        opt.zero_grad()
        pred = model(e1, rel)
        loss = loss_fn(pred, e2_multi)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        pred = model(e1[:4], rel[:4])
        max_values, argsort1 = torch.sort(pred, 1, descending=True)
    return {"losses": losses, "pred": pred, "max_values": max_values[:, :3],
            "b": model.b, "conv": model.conv1.weight, "bn2_mean": model.bn2.running_mean,
            "bn0_var": model.bn0.running_var, "emb_pad": model.emb_e.weight[0],
            "fc_grad": model.fc.weight.grad}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # the core-tensor bmm and batch norm accumulate in a different order
def kg_tucker_core_tensor_bmm(torch):
    """TuckER as its authors write it: a core tensor ``W`` of shape ``[d_r, d_e, d_e]`` as a
    parameter, ``torch.mm(r, W.view(r.size(1), -1)).view(-1, d_e, d_e)``, the head as ``[B, 1,
    d_e]`` batch-normed and ``bmm``-ed with it, ``BatchNorm1d``, scored against every entity and
    trained with ``BCELoss`` on smoothed 1-N targets; an ``ExponentialLR`` decay; Adam."""
    nn = torch.nn
    E, R, de, dr = 11, 3, 4, 3

    class TuckER(nn.Module):
        def __init__(self):
            super().__init__()
            self.E = nn.Embedding(E, de)
            self.R = nn.Embedding(R, dr)
            self.W = nn.Parameter(
                torch.tensor(_rng(26).uniform(-1, 1, (dr, de, de)), dtype=torch.float)
            )
            self.input_dropout = nn.Dropout(0.0)
            self.hidden_dropout1 = nn.Dropout(0.0)
            self.hidden_dropout2 = nn.Dropout(0.0)
            self.bn0 = nn.BatchNorm1d(de)
            self.bn1 = nn.BatchNorm1d(de)

        def forward(self, e1_idx, r_idx):
            e1 = self.E(e1_idx)
            x = self.bn0(e1)
            x = self.input_dropout(x)
            x = x.view(-1, 1, e1.size(1))
            r = self.R(r_idx)
            W_mat = torch.mm(r, self.W.view(r.size(1), -1))
            W_mat = W_mat.view(-1, e1.size(1), e1.size(1))
            W_mat = self.hidden_dropout1(W_mat)
            x = torch.bmm(x, W_mat)
            x = x.view(-1, e1.size(1))
            x = self.bn1(x)
            x = self.hidden_dropout2(x)
            x = torch.mm(x, self.E.weight.transpose(1, 0))
            return torch.sigmoid(x)

    model = TuckER()
    with torch.no_grad():
        model.E.weight.copy_(torch.tensor(arr(27, E, de, scale=0.5)))
        model.R.weight.copy_(torch.tensor(arr(28, R, dr, scale=0.5)))
    triples = _triples(29, 12, E, R)
    er_vocab: dict[tuple[int, int], list[int]] = {}
    for h, r, t in triples.tolist():
        er_vocab.setdefault((h, r), []).append(t)
    er_vocab_pairs = sorted(er_vocab)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    loss_fn = torch.nn.BCELoss()
    losses, lrs = [], []
    model.train()
    for _it in range(3):
        data_batch = np.array(er_vocab_pairs)
        targets = np.zeros((len(data_batch), E))
        for idx, pair in enumerate(data_batch):
            targets[idx, er_vocab[tuple(pair.tolist())]] = 1.0
        targets = torch.FloatTensor(targets)
        targets = ((1.0 - 0.1) * targets) + (1.0 / targets.size(1))
        opt.zero_grad()
        predictions = model(torch.tensor(data_batch[:, 0]), torch.tensor(data_batch[:, 1]))
        loss = loss_fn(predictions, targets)
        loss.backward()
        opt.step()
        scheduler.step()
        losses.append(loss.item())
        lrs.append(scheduler.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        pred = model(torch.tensor(triples[:3, 0]), torch.tensor(triples[:3, 1]))
    return {"losses": losses, "lrs": lrs, "pred": pred, "W": model.W, "W_grad": model.W.grad,
            "bn1_mean": model.bn1.running_mean, "n_pairs": len(er_vocab_pairs)}  # fmt: skip


def _scores_with_ties(seed: int, B: int, E: int) -> np.ndarray:
    # rounded to quarters so that some candidates tie with the true entity
    return (np.round(_rng(seed).standard_normal((B, E)) * 4) / 4).astype(np.float32)


@program
def kg_filtered_rank_metrics_mrr_hits(torch):
    """Filtered link-prediction evaluation three ways: PyKEEN's (other known tails of each query
    set to ``nan`` with advanced-index assignment, optimistic ``(s > t).sum + 1``, pessimistic
    ``(s >= t).sum`` and realistic ranks, MRR, Hits@{1,3,10}, mean rank and the
    adjusted-for-chance index); the KBC repository's (known tails set to ``-1e6`` through a
    filter list, the target score restored, ``(scores >= targets).float().sum(1)``); and DGL-KE's
    / RotatE's ``argsort(descending=True)`` with ``nonzero`` on distinct scores."""
    E, B = 12, 6
    scores_np = _scores_with_ties(30, B, E)
    queries = _triples(31, B, E, 3)
    known = _triples(32, 20, E, 3)
    tails = torch.tensor(queries[:, 2])
    # PyKEEN: a dense filter of every other true tail of (h, r)
    filter_rows, filter_cols = [], []
    for i, (h, r, t) in enumerate(queries.tolist()):
        for h2, r2, t2 in known.tolist():
            if (h2, r2) == (h, r) and t2 != t:
                filter_rows.append(i)
                filter_cols.append(t2)
    for i, c in ((0, 1), (2, 0), (2, 1), (5, 7)):  # a few more known tails, never the true one
        filter_rows.append(i)
        filter_cols.append(c if c != queries[i, 2] else c + 2)
    filt = torch.tensor([filter_rows, filter_cols])
    scores = torch.tensor(scores_np)
    true_scores = scores[torch.arange(B), tails].unsqueeze(-1)
    filtered = scores.clone()
    filtered[filt[0], filt[1]] = float("nan")
    optimistic = (filtered > true_scores).sum(dim=1) + 1
    pessimistic = (filtered >= true_scores).sum(dim=1)
    realistic = 0.5 * (optimistic + pessimistic).float()
    num_candidates = (~torch.isnan(filtered)).sum(dim=1)
    ranks = realistic
    metrics = {"mrr": torch.reciprocal(ranks).mean().item(), "mr": ranks.mean().item(),
               **{f"hits@{k}": (ranks <= k).float().mean().item() for k in (1, 3, 10)},
               "amri": 1.0 - (ranks - 1).mean().item() / ((num_candidates.float() - 1) / 2).mean().item()}  # fmt: skip
    # KBC: mask with -1e6 and restore the target
    kbc = torch.tensor(scores_np)
    targets = torch.stack([kbc[i, int(t)] for i, t in enumerate(tails)]).unsqueeze(1)
    for i, c in zip(filter_rows, filter_cols):
        kbc[i, c] = -1e6
    kbc_ranks = torch.sum((kbc >= targets).float(), dim=1).cpu()
    # argsort with distinct scores (ties broken by a tiny entity-index offset)
    distinct = filtered.nan_to_num(nan=-1e9) - torch.arange(E) * 1e-4
    argsort = torch.argsort(distinct, dim=1, descending=True)
    arg_ranks = []
    for i in range(B):
        ranking = (argsort[i, :] == tails[i]).nonzero()
        assert ranking.size(0) == 1
        arg_ranks.append(1 + ranking.item())
    stable = torch.sort(-filtered.nan_to_num(nan=-1e9), dim=1, stable=True)
    return {"optimistic": optimistic, "pessimistic": pessimistic, "realistic": realistic,
            "num_candidates": num_candidates, "metrics": metrics, "kbc_ranks": kbc_ranks,
            "arg_ranks": arg_ranks, "stable_indices": stable.indices,
            "mrr_str": f"MRR {metrics['mrr']:.4f} Hits@10 {metrics['hits@10']:.4f}",
            "nan_mask": torch.isnan(filtered), "ranks_repr": repr(realistic),
            "opt_str": str(optimistic.view(2, 3)), "mean_rank_repr": repr(ranks.mean()),
            "hits_table": str(torch.stack([(ranks <= k).float().mean() for k in (1, 3, 10)]))}  # fmt: skip


@program
def kg_bernoulli_corruption_filtered_negatives(torch):
    """Negative sampling as PyKEEN's ``BernoulliNegativeSampler`` and its filterer do: per
    relation the mean tails per head and heads per tail from ``unique(..., return_counts=True)``
    and ``scatter_add_``, head-or-tail choice from fixed uniforms, corrupted entities drawn from
    fixed integers and shifted past the true one (``neg += neg >= true``), ``repeat_interleave``
    of positives, and false negatives removed by hashing triples to ``h * R * E + r * E + t``
    and testing membership with ``torch.isin``; the kept negatives' mask and counts."""
    E, R, K = 10, 3, 3
    mapped = torch.tensor(_triples(33, 16, E, R))
    # tails per head: for each relation, mean over distinct heads of the number of triples
    hr_pairs, hr_counts = torch.unique(mapped[:, :2], dim=0, return_counts=True)
    rt_pairs, rt_counts = torch.unique(mapped[:, 1:], dim=0, return_counts=True)
    tph_sum = torch.zeros(R).scatter_add_(0, hr_pairs[:, 1], hr_counts.float())
    tph_n = torch.zeros(R).scatter_add_(0, hr_pairs[:, 1], torch.ones(len(hr_pairs)))
    hpt_sum = torch.zeros(R).scatter_add_(0, rt_pairs[:, 0], rt_counts.float())
    hpt_n = torch.zeros(R).scatter_add_(0, rt_pairs[:, 0], torch.ones(len(rt_pairs)))
    tph, hpt = tph_sum / tph_n.clamp_min(1), hpt_sum / hpt_n.clamp_min(1)
    corrupt_head_probability = tph / (tph + hpt)
    batch = mapped[:8]
    negative_batch = batch.repeat_interleave(K, dim=0)
    head_probs = corrupt_head_probability[negative_batch[:, 1]]
    head_mask = torch.tensor(_rng(34).random(len(negative_batch)).astype(np.float32)) < head_probs
    col = torch.where(
        head_mask, torch.zeros_like(negative_batch[:, 0]), torch.full_like(negative_batch[:, 0], 2)
    )
    true_entities = negative_batch.gather(1, col.unsqueeze(1)).squeeze(1)
    negatives = torch.tensor(ints(35, E - 1, len(negative_batch)))
    negatives += (negatives >= true_entities).long()
    negative_batch.scatter_(1, col.unsqueeze(1), negatives.unsqueeze(1))

    def hash_triples(t):
        return t[:, 0] * (R * E) + t[:, 1] * E + t[:, 2]

    known = hash_triples(torch.cat([mapped, torch.tensor([[1, 0, 2], [3, 1, 4], [5, 2, 6]])]))
    keep = ~torch.isin(hash_triples(negative_batch), known)
    negatives_kept = negative_batch[keep]
    return {"tph": tph, "hpt": hpt, "p_head": corrupt_head_probability, "head_mask": head_mask,
            "negative_batch": negative_batch.view(-1, K, 3), "keep": keep.view(-1, K),
            "kept": negatives_kept, "n_kept": keep.sum().item(),
            "never_true": bool((negatives != true_entities).all()),
            "hr_counts": hr_counts, "rt_pairs": rt_pairs}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # log-sum-exp and softplus sums accumulate in a different order
def kg_pykeen_pairwise_setwise_losses(torch):
    """PyKEEN's losses on DistMult scores of positives ``[B]`` and negatives ``[B, K]``:
    pairwise ``MarginRankingLoss`` broadcast as ``relu(margin + neg - pos[:, None])``, the
    softplus loss, the NSSA loss with self-adversarial weights ``softmax(neg / T).detach()``
    and a margin, BCE after ``logsigmoid``, the ``CrossEntropyLoss`` over ``cat([pos, neg])`` and
    the ``InfoNCE``-style loss with a log-margin; an L_p regulariser ``p=3`` averaged over
    dimensions; the gradient of the sum; Adam steps with all of them."""
    nn = torch.nn
    F = nn.functional
    E, R, d, K = 12, 3, 5, 4
    ent = nn.Embedding(E, d)
    rel = nn.Embedding(R, d)
    with torch.no_grad():
        ent.weight.copy_(torch.tensor(arr(36, E, d, scale=0.6)))
        rel.weight.copy_(torch.tensor(arr(37, R, d, scale=0.6)))
    pos_t = torch.tensor(_triples(38, 6, E, R))
    opt = torch.optim.Adam(list(ent.parameters()) + list(rel.parameters()), lr=0.03)
    history = []
    for step in range(3):
        neg_tails = torch.tensor(ints(100 + step, E, len(pos_t), K))
        h, r = ent(pos_t[:, 0]), rel(pos_t[:, 1])
        pos = (h * r * ent(pos_t[:, 2])).sum(-1)
        neg = (h.unsqueeze(1) * r.unsqueeze(1) * ent(neg_tails)).sum(-1)
        margin_rank = F.relu(1.0 + neg - pos.unsqueeze(1)).mean()
        softplus = (F.softplus(-pos).sum() + F.softplus(neg).sum()) / (pos.numel() + neg.numel())
        weights = F.softmax(neg / 0.5, dim=-1).detach()
        nssa = (
            -F.logsigmoid(9.0 + pos).mean()
            - (weights * F.logsigmoid(-neg - 9.0)).sum(dim=-1).mean()
        ) / 2
        bce = F.binary_cross_entropy_with_logits(torch.cat([pos, neg.flatten()]),
                                                 torch.cat([torch.ones_like(pos), torch.zeros(neg.numel())]))  # fmt: skip
        ce = nn.CrossEntropyLoss()(
            torch.cat([pos.unsqueeze(1), neg], dim=1), torch.zeros(len(pos), dtype=torch.long)
        )
        info_nce = (
            -(pos - math.log(0.2))
            + torch.logsumexp(torch.cat([(pos - math.log(0.2)).unsqueeze(1), neg], 1), 1)
        ).mean()
        reg = torch.cat([h, r], dim=-1).abs().pow(3).mean()
        total = margin_rank + softplus + nssa + bce + ce + info_nce + 0.1 * reg
        opt.zero_grad()
        total.backward()
        opt.step()
        history.append(torch.stack([margin_rank, softplus, nssa, bce, ce, info_nce, reg]).detach())
    return {"history": history, "ent": ent.weight, "rel_grad": rel.weight.grad,
            "state_steps": [float(s["step"]) for s in opt.state.values()]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # index_add_ message sums accumulate in a different order
def kg_rgcn_basis_decomposition_distmult_decoder(torch):
    """R-GCN (Schlichtkrull et al.) for link prediction as DGL's and PyG's examples write it: relation
    weights from a basis decomposition ``einsum('rb,bio->rio', coeff, bases)``, inverse relations
    appended, messages ``bmm`` of gathered source features with their relation's weight,
    normalised by ``1 / c_{i,r}`` from ``scatter_add_`` of in-degrees per (dst, rel) and summed
    with ``index_add_``, a self-loop, ReLU; a DistMult decoder with BCE on positives and fixed
    negatives and an L2 penalty on relation embeddings; Adam."""
    nn = torch.nn
    F = nn.functional
    N, R, d, B = 9, 2, 4, 2
    triples = _triples(39, 10, N, R)
    src = torch.tensor(np.concatenate([triples[:, 0], triples[:, 2]]))
    dst = torch.tensor(np.concatenate([triples[:, 2], triples[:, 0]]))
    etype = torch.tensor(np.concatenate([triples[:, 1], triples[:, 1] + R]))

    class RGCNLayer(nn.Module):
        def __init__(self, in_feat, out_feat, num_rels, num_bases):
            super().__init__()
            self.bases = nn.Parameter(torch.Tensor(num_bases, in_feat, out_feat))
            self.coeff = nn.Parameter(torch.Tensor(num_rels, num_bases))
            self.loop_weight = nn.Parameter(torch.Tensor(in_feat, out_feat))
            self.num_rels = num_rels

        def forward(self, x, src, dst, etype):
            weight = torch.einsum("rb,bio->rio", self.coeff, self.bases)
            msg = torch.bmm(x[src].unsqueeze(1), weight[etype]).squeeze(1)
            key = dst * self.num_rels + etype
            deg = torch.zeros(x.shape[0] * self.num_rels).scatter_add_(0, key, torch.ones(len(key)))
            norm = 1.0 / deg[key]
            out = torch.zeros(x.shape[0], msg.shape[1]).index_add_(0, dst, msg * norm.unsqueeze(-1))
            return out + x @ self.loop_weight

    class LinkPredict(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(N, d)
            self.layer1 = RGCNLayer(d, d, 2 * R, B)
            self.layer2 = RGCNLayer(d, d, 2 * R, B)
            self.w_relation = nn.Parameter(torch.Tensor(R, d))

        def forward(self):
            h = F.relu(self.layer1(self.emb.weight, src, dst, etype))
            return self.layer2(h, src, dst, etype)

        def calc_score(self, embedding, triplets):
            s = embedding[triplets[:, 0]]
            r = self.w_relation[triplets[:, 1]]
            o = embedding[triplets[:, 2]]
            return torch.sum(s * r * o, dim=1)

    model = set_weights(torch, LinkPredict(), seed=40, scale=0.5)
    neg = triples.copy()
    neg[:, 2] = (neg[:, 2] + ints(41, N - 1, len(neg)) + 1) % N
    samples = torch.tensor(np.concatenate([triples, neg]))
    labels = torch.cat([torch.ones(len(triples)), torch.zeros(len(neg))])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _step in range(3):
        embed = model()
        score = model.calc_score(embed, samples)
        predict_loss = F.binary_cross_entropy_with_logits(score, labels)
        reg_loss = torch.mean(embed.pow(2)) + torch.mean(model.w_relation.pow(2))
        loss = predict_loss + 0.01 * reg_loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "embed": embed.detach(), "coeff": model.layer1.coeff,
            "bases_grad": model.layer2.bases.grad, "w_relation": model.w_relation}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # baddbmm, cdist and row sums accumulate in a different order
def kg_dglke_chunked_negatives_rowwise_adagrad(torch):
    """DGL-KE's training loop: embeddings held as plain tensors, the rows of a batch gathered and
    traced with ``requires_grad_(True)``, negatives shared per chunk (``view(num_chunks,
    chunk_size, d)`` against ``[num_chunks, neg_sample_size, d]``), TransE-L2 scored by
    ``batched_l2_dist`` (``baddbmm(b_sq.unsqueeze(-2), a, b.transpose(-2, -1), alpha=-2)
    .add_(a_sq.unsqueeze(-1)).clamp_min_(1e-30).sqrt_()``) and TransE-L1 by ``cdist(p=1)``,
    ``-logsigmoid`` losses with a ``neg_adversarial_sampling`` variant, an L3 regulariser, and
    the row-sparse Adagrad update (``state.index_add_(0, idx, (g * g).mean(1))``, ``std =
    state[idx]``, ``emb.index_add_(0, idx, -lr * g / std.sqrt_().add_(1e-10).unsqueeze(1))``)."""
    F = torch.nn.functional
    E, R, d = 14, 3, 4
    gamma, lr = 4.0, 0.1

    def batched_l2_dist(a, b):
        a_squared = a.norm(dim=-1) ** 2
        b_squared = b.norm(dim=-1) ** 2
        squared_res = torch.baddbmm(b_squared.unsqueeze(-2), a, b.transpose(-2, -1), alpha=-2).add_(
            a_squared.unsqueeze(-1))  # fmt: skip
        return squared_res.clamp_min_(1e-30).sqrt_()

    def batched_l1_dist(a, b):
        return torch.cdist(a, b, p=1)

    class ExternalEmbedding:
        def __init__(self, num, dim, seed):
            self.emb = torch.tensor(
                _rng(seed).uniform(-gamma / d, gamma / d, (num, dim)).astype(np.float32)
            )
            self.state_sum = self.emb.new().resize_(self.emb.size(0)).zero_()
            self.trace = []

        def __call__(self, idx, trace=True):
            data = self.emb[idx]
            if trace:
                data.requires_grad_(True)
                self.trace.append((idx, data))
            return data

        def update(self):
            with torch.no_grad():
                for idx, data in self.trace:
                    grad = data.grad.data
                    grad_indices, grad_values = idx, grad
                    grad_sum = (grad_values * grad_values).mean(1)
                    self.state_sum.index_add_(0, grad_indices, grad_sum)
                    std = self.state_sum[grad_indices]
                    std_values = std.sqrt_().add_(1e-10).unsqueeze(1)
                    tmp = -lr * grad_values / std_values
                    self.emb.index_add_(0, grad_indices, tmp)
            self.trace = []

    triples = _triples(42, 12, E, R)
    out = {}
    for name, dist in (("l2", batched_l2_dist), ("l1", batched_l1_dist)):
        entity_emb, relation_emb = ExternalEmbedding(E, d, 43), ExternalEmbedding(R, d, 44)
        num_chunks, neg_sample_size = 3, 4
        chunk_size = len(triples) // num_chunks
        logs = []
        for step in range(3):
            pos = torch.tensor(triples)
            neg_ids = torch.tensor(ints(110 + step, E, num_chunks * neg_sample_size))
            head, rel, tail = entity_emb(pos[:, 0]), relation_emb(pos[:, 1]), entity_emb(pos[:, 2])
            neg = entity_emb(neg_ids)
            pos_score = gamma - torch.norm(head + rel - tail, p=2 if name == "l2" else 1, dim=-1)
            heads = (head + rel).reshape(num_chunks, chunk_size, d)
            neg_score = gamma - dist(heads, neg.reshape(num_chunks, neg_sample_size, d))
            neg_score = neg_score.reshape(-1, neg_sample_size)
            pos_loss = -F.logsigmoid(pos_score).mean()
            if step == 2:
                w = F.softmax(neg_score * 1.0, dim=-1).detach()
                neg_loss = -(F.logsigmoid(-neg_score) * w).sum(-1).mean()
            else:
                neg_loss = -F.logsigmoid(-neg_score).mean()
            reg = (
                head.abs().pow(3).sum() + tail.abs().pow(3).sum() + rel.abs().pow(3).sum()
            ) / len(pos)
            loss = (pos_loss + neg_loss) / 2 + 1e-3 * reg
            loss.backward()
            entity_emb.update()
            relation_emb.update()
            logs.append(
                {"pos_loss": pos_loss.item(), "neg_loss": neg_loss.item(), "loss": loss.item()}
            )
        out[name] = {"logs": logs, "ent": entity_emb.emb, "rel": relation_emb.emb,
                     "state": entity_emb.state_sum, "neg_score": neg_score.detach(),
                     "same": torch.allclose(batched_l2_dist(heads, neg.reshape(num_chunks, -1, d)),
                                            torch.cdist(heads, neg.reshape(num_chunks, -1, d)), atol=1e-4)}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)  # FFTs and Hamilton products accumulate in a different order
def kg_hole_quate_simple_interactions(torch):
    """Three more interactions as PyKEEN and CompGCN write them: HolE's circular correlation
    ``irfft(conj(rfft(h)) * rfft(t), n=d)`` checked against the explicit sum over rolled copies,
    QuatE's Hamilton product of ``chunk(4, dim=-1)`` quaternions with the relation divided by
    its norm, and SimplE's forward and inverse scores averaged and ``clamp(-20, 20)``-ed; heads
    renormalised with ``torch.renorm`` and tails looked up with ``F.embedding(max_norm=1.0)``;
    trained together with ``F.softplus`` (soft-margin) losses and Adam."""
    nn = torch.nn
    F = nn.functional
    E, R, d = 10, 3, 8
    ent = nn.Parameter(torch.tensor(arr(45, E, d, scale=0.5)))
    rel = nn.Parameter(torch.tensor(arr(46, R, d, scale=0.5)))
    ent_inv = nn.Parameter(torch.tensor(arr(47, E, d, scale=0.5)))
    rel_inv = nn.Parameter(torch.tensor(arr(48, R, d, scale=0.5)))
    triples = torch.tensor(_triples(49, 8, E, R))
    labels = torch.tensor(np.where(ints(50, 2, 8) > 0, 1.0, -1.0).astype(np.float32))

    def circular_correlation(a, b):
        a_fft = torch.fft.rfft(a, dim=-1)
        b_fft = torch.fft.rfft(b, dim=-1)
        return torch.fft.irfft(torch.conj(a_fft) * b_fft, n=a.shape[-1], dim=-1)

    def hole(h, r, t):
        return (r * circular_correlation(h, t)).sum(dim=-1)

    def quate(h, r, t):
        a_h, b_h, c_h, d_h = torch.chunk(h, 4, dim=-1)
        p, q, u, v = torch.chunk(r, 4, dim=-1)
        denominator = torch.sqrt(p**2 + q**2 + u**2 + v**2)
        p, q, u, v = p / denominator, q / denominator, u / denominator, v / denominator
        a = a_h * p - b_h * q - c_h * u - d_h * v
        b = a_h * q + b_h * p + c_h * v - d_h * u
        c = a_h * u - b_h * v + c_h * p + d_h * q
        dd = a_h * v + b_h * u - c_h * q + d_h * p
        a_t, b_t, c_t, d_t = torch.chunk(t, 4, dim=-1)
        return (a * a_t + b * b_t + c * c_t + dd * d_t).sum(-1)

    def simple(hi, ri, ti):
        forward = (ent[hi] * rel[ri] * ent_inv[ti]).sum(-1)
        backward = (ent[ti] * rel_inv[ri] * ent_inv[hi]).sum(-1)
        return torch.clamp((forward + backward) / 2, -20, 20)

    opt = torch.optim.Adam([ent, rel, ent_inv, rel_inv], lr=0.05)
    losses = []
    for _step in range(3):
        h = torch.renorm(ent[triples[:, 0]], p=2, dim=0, maxnorm=1.0)
        t = F.embedding(triples[:, 2], ent, max_norm=1.0)
        r = rel[triples[:, 1]]
        scores = torch.stack(
            [hole(h, r, t), quate(h, r, t), simple(triples[:, 0], triples[:, 1], triples[:, 2])]
        )
        loss = F.softplus(-labels * scores).mean(dim=1)
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
        losses.append(loss.detach())
    with torch.no_grad():
        h, t = ent[triples[:, 0]], ent[triples[:, 2]]
        explicit = torch.stack([(h * torch.roll(t, -k, dims=-1)).sum(-1) for k in range(d)], dim=-1)
        corr = circular_correlation(h, t)
    return {"losses": losses, "ent": ent, "rel": rel, "ent_inv_grad": ent_inv.grad,
            "corr": corr, "explicit": explicit, "ent_norms": ent.norm(dim=1)}  # fmt: skip
