"""Dense retrieval and vector search as DPR, ColBERT, sentence-transformers, BEIR and FAISS-style
code written on torch write them: bi-encoders trained with in-batch and hard negatives under a
temperature, sentence-transformers' chunked ``semantic_search`` (cosine scores, ``torch.topk`` per
chunk merged across chunks), product quantization (k-means codebooks with ``cdist``/``argmin``,
``uint8`` codes, asymmetric distance tables read back with ``gather``), an IVF index (coarse
k-means, inverted lists from ``argsort``/``bincount``/``searchsorted``, ``nprobe`` lists scanned),
ColBERT's late-interaction MaxSim with ``einsum`` and padding masks, MMR re-ranking in a loop,
hard-negative mining with label masks and false-negative filtering, recall@k / MRR / nDCG / MAP as
BEIR computes them, Matryoshka embeddings truncated and renormalised with binary and int8
quantization, and LSH with random hyperplanes (fixed NumPy planes) packed into integer codes.

Every corpus, query and weight comes from NumPy with a fixed seed; scores are continuous, so the
top-k and argmin decisions have no ties (the bucket orderings, which do tie, use
``stable=True``)."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _clustered(seed: int, n: int, d: int, k: int, spread: float = 0.3) -> np.ndarray:
    """``n`` float32 points around ``k`` Gaussian centres in ``d`` dimensions."""
    rng = _rng(seed)
    centres = rng.standard_normal((k, d)) * 2.0
    labels = rng.integers(0, k, n)
    return (centres[labels] + rng.standard_normal((n, d)) * spread).astype(np.float32)


def _kmeans(torch, x, init_idx, n_iter):
    """Lloyd's k-means as FAISS-on-torch snippets write it: ``cdist`` + ``argmin`` assignments,
    centroid sums with ``index_add_``, counts with ``bincount``; empty clusters keep their
    centroid."""
    k = len(init_idx)
    c = x[torch.tensor(init_idx)].clone()
    inertia = []
    for _ in range(n_iter):
        d = torch.cdist(x, c) ** 2
        assign = d.argmin(dim=1)
        inertia.append(d.gather(1, assign[:, None]).sum().item())
        sums = torch.zeros_like(c).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=k)
        nonempty = counts > 0
        c = torch.where(nonempty[:, None], sums / counts.clamp(min=1)[:, None].to(x.dtype), c)
    assign = torch.cdist(x, c).argmin(dim=1)
    return c, assign, inertia


# --------------------------------------------------------------------------------- bi-encoders
@program(rtol=5e-4, atol=5e-5)  # matmuls and log-softmax sums accumulate in a different order
def retr_dpr_in_batch_and_hard_negatives_biencoder(torch):
    """DPR's ``BiEncoderNllLoss``: a question tower and a passage tower (two-layer MLPs over bag
    features), each question scored against every passage of the batch (its gold passage plus one
    BM25-style hard negative per question, ``2B`` passages), ``log_softmax`` over passages with
    ``nll_loss`` at the positive indices, and ``correct_predictions_count`` from ``max``; then the
    same loss with cosine scores over a temperature (sentence-transformers'
    ``MultipleNegativesRankingLoss`` with ``scale=20``); AdamW with gradient clipping for a few
    steps and the rank of each gold passage in the final batch."""
    nn, F = torch.nn, torch.nn.functional
    B, d_in, d = 6, 10, 8

    def tower():
        return nn.Sequential(nn.Linear(d_in, 12), nn.GELU(), nn.Linear(12, d))

    q_enc = set_weights(torch, tower(), seed=1)
    p_enc = set_weights(torch, tower(), seed=2)
    q_x = torch.tensor(arr(3, B, d_in))
    pos_x = torch.tensor(arr(3, B, d_in) + arr(4, B, d_in, scale=0.5))
    neg_x = torch.tensor(arr(3, B, d_in)[[1, 2, 3, 4, 5, 0]] + arr(5, B, d_in, scale=0.8))
    ctx_x = torch.cat([pos_x, neg_x], dim=0)
    positive_idx = torch.arange(B)  # DPR puts each question's positive first in its group

    def nll(q, ctx):
        scores = torch.matmul(q, torch.transpose(ctx, 0, 1))
        softmax_scores = F.log_softmax(scores, dim=1)
        loss = F.nll_loss(softmax_scores, positive_idx, reduction="mean")
        max_score, max_idxs = torch.max(softmax_scores, 1)
        correct = (max_idxs == positive_idx).sum()
        return loss, correct, scores

    def mnrl(q, ctx, scale=20.0):
        scores = F.normalize(q, p=2, dim=1) @ F.normalize(ctx, p=2, dim=1).t() * scale
        return nn.CrossEntropyLoss()(scores, positive_idx)

    opt = torch.optim.AdamW(list(q_enc.parameters()) + list(p_enc.parameters()), lr=0.02,
                            weight_decay=0.01)  # fmt: skip
    losses, mn_losses, corrects, norms = [], [], [], []
    for _ in range(4):
        opt.zero_grad()
        q, ctx = q_enc(q_x), p_enc(ctx_x)
        loss, correct, scores = nll(q, ctx)
        mn = mnrl(q, ctx)
        (loss + 0.5 * mn).backward()
        norms.append(nn.utils.clip_grad_norm_(list(q_enc.parameters()) + list(p_enc.parameters()),
                                              max_norm=1.0))  # fmt: skip
        opt.step()
        losses.append(loss.item())
        mn_losses.append(mn.item())
        corrects.append(int(correct))
    with torch.no_grad():
        q, ctx = q_enc(q_x), p_enc(ctx_x)
        scores = q @ ctx.T
        gold = scores.gather(1, positive_idx[:, None])
        rank = (scores > gold).sum(dim=1) + 1
    return {"losses": losses, "mnrl_losses": mn_losses, "correct": corrects,
            "grad_norms": torch.stack(norms), "final_scores": scores, "gold_rank": rank,
            "q_params": params(q_enc), "p_grads": grads(p_enc)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # normalised dot products summed in a different order
def retr_semantic_search_chunked_cosine_topk(torch):
    """sentence-transformers' ``util.semantic_search``: queries and corpus embeddings L2-normalised
    with ``F.normalize``, ``cos_sim`` computed per (query chunk, corpus chunk), ``torch.topk`` in
    each corpus chunk with indices shifted by the chunk's start, the per-chunk winners merged with
    ``cat`` + ``topk`` again, and the hits turned into ``{"corpus_id", "score"}`` dicts sorted by
    score; compared with one full ``topk`` over the whole score matrix, ``dot_score`` and
    ``F.cosine_similarity`` broadcasting, and the FAISS-style L2 search through
    ``|q|^2 - 2 q.x + |x|^2`` with ``addmm``."""
    F = torch.nn.functional
    corpus = torch.tensor(_clustered(10, 60, 6, 5))
    queries = torch.tensor(arr(11, 5, 6))
    top_k, q_chunk, c_chunk = 4, 2, 16

    def cos_sim(a, b):
        a_norm = F.normalize(a, p=2, dim=1)
        b_norm = F.normalize(b, p=2, dim=1)
        return torch.mm(a_norm, b_norm.transpose(0, 1))

    results = [[] for _ in range(len(queries))]
    for qs in range(0, len(queries), q_chunk):
        chunk_vals, chunk_idx = [], []
        for cs in range(0, len(corpus), c_chunk):
            scores = cos_sim(queries[qs : qs + q_chunk], corpus[cs : cs + c_chunk])
            vals, idx = torch.topk(scores, min(top_k, scores.shape[1]), dim=1, largest=True,
                                   sorted=False)  # fmt: skip
            chunk_vals.append(vals)
            chunk_idx.append(idx + cs)
        vals, pos = torch.cat(chunk_vals, dim=1).topk(top_k, dim=1)
        idx = torch.cat(chunk_idx, dim=1).gather(1, pos)
        for i in range(vals.shape[0]):
            for s, c in zip(vals[i].tolist(), idx[i].tolist()):
                results[qs + i].append({"corpus_id": c, "score": s})
    results = [sorted(r, key=lambda h: h["score"], reverse=True) for r in results]
    hit_ids = torch.tensor([[h["corpus_id"] for h in r] for r in results])
    hit_scores = torch.tensor([[h["score"] for h in r] for r in results])

    full = cos_sim(queries, corpus)
    full_vals, full_idx = torch.topk(full, top_k)
    bcast = F.cosine_similarity(queries[:, None, :], corpus[None, :, :], dim=-1)
    dot_vals, dot_idx = (queries @ corpus.T).topk(top_k, dim=1)
    sq = (queries**2).sum(1, keepdim=True)
    l2 = torch.addmm(sq + (corpus**2).sum(1)[None, :], queries, corpus.T, alpha=-2.0)
    l2_vals, l2_idx = l2.topk(top_k, dim=1, largest=False)
    return {"hit_ids": hit_ids, "hit_scores": hit_scores, "full_idx": full_idx,
            "full_vals": full_vals, "same_hits": bool(torch.equal(hit_ids, full_idx)),
            "bcast_minus_mm": (bcast - full).abs().max() < 1e-5, "dot_idx": dot_idx,
            "dot_vals": dot_vals, "l2_idx": l2_idx, "l2_vals": l2_vals,
            "l2_vs_cdist": torch.cdist(queries, corpus)[0, :5] ** 2 - l2[0, :5],
            "first_hits": results[0]}  # fmt: skip


# ------------------------------------------------------------------------ product quantization
@program(rtol=5e-4, atol=5e-5)  # cdist and centroid sums accumulate in a different order
def retr_product_quantization_codebooks_and_adc_tables(torch):
    """A PQ index in torch: vectors split into ``M`` sub-vectors (``view(n, M, dsub)``), one k-means
    codebook per subspace (``cdist``/``argmin``/``index_add_``), codes stored as ``uint8``;
    decoding by gathering centroids; asymmetric distance computation (ADC) with a per-query
    ``(M, ksub)`` table of squared distances summed over subspaces through
    ``gather(table, codes)``; symmetric distances (SDC) from centroid-to-centroid tables; the
    top-k by ADC against exact search, and the quantization MSE."""
    n, d, M, ksub = 96, 8, 4, 6
    dsub = d // M
    xb = torch.tensor(_clustered(20, n, d, 6, spread=0.5))
    xq = torch.tensor(_clustered(21, 3, d, 6, spread=0.5))
    rng = _rng(22)
    sub = xb.view(n, M, dsub)
    codebooks, inertias, codes = [], [], []
    for m in range(M):
        init = rng.choice(n, ksub, replace=False)
        c, assign, inertia = _kmeans(torch, sub[:, m, :].contiguous(), init, n_iter=6)
        codebooks.append(c)
        inertias.append(inertia)
        codes.append(assign)
    codebooks = torch.stack(codebooks)  # (M, ksub, dsub)
    codes = torch.stack(codes, dim=1).to(torch.uint8)  # (n, M)
    recon = codebooks[torch.arange(M)[None, :], codes.long()].reshape(n, d)
    mse = ((xb - recon) ** 2).sum(1).mean()

    q_sub = xq.view(-1, M, dsub)
    tables = ((q_sub[:, :, None, :] - codebooks[None]) ** 2).sum(-1)  # (nq, M, ksub)
    idx = codes.long().T[None].expand(len(xq), M, n)  # (nq, M, n)
    adc = tables.gather(2, idx).sum(1)  # (nq, n)
    # vectors with equal codes tie exactly: a stable sort keeps them in id order, as FAISS does
    adc_d, adc_i = (t[:, :5] for t in adc.sort(dim=1, stable=True))
    exact = torch.cdist(xq, xb) ** 2
    ex_d, ex_i = exact.topk(5, dim=1, largest=False)
    recall = torch.tensor([len(set(a) & set(b)) / 5 for a, b in zip(adc_i.tolist(),
                                                                      ex_i.tolist())])  # fmt: skip
    sdc_tables = torch.cdist(codebooks, codebooks) ** 2  # (M, ksub, ksub)
    q_codes = torch.stack([torch.cdist(q_sub[:, m], codebooks[m]).argmin(1) for m in range(M)], 1)
    sdc = torch.zeros(len(xq), n)
    for m in range(M):
        sdc += sdc_tables[m][q_codes[:, m]][:, codes[:, m].long()]
    return {"codebooks": codebooks, "codes": codes, "code_hist": torch.bincount(codes[:, 0].long(),
            minlength=ksub), "mse": mse, "inertia": inertias, "tables": tables,
            "adc_top": adc_i, "adc_d": adc_d, "exact_top": ex_i, "exact_d": ex_d,
            "recall5": recall, "adc_vs_recon": (adc - torch.cdist(xq, recon) ** 2).abs().max(),
            "q_codes": q_codes, "sdc": sdc[:, :12], "codes_dtype": str(codes.dtype)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # cdist and centroid sums accumulate in a different order
def retr_ivf_coarse_quantizer_inverted_lists_nprobe(torch):
    """An IVF-Flat index: a coarse k-means quantizer, every database vector assigned to its nearest
    list, the inverted lists laid out contiguously by a stable ``argsort`` of the assignments with
    sizes from ``bincount`` and offsets from ``cumsum`` (checked against ``searchsorted`` on the
    sorted list ids); search probes the ``nprobe`` nearest lists of each query (``topk`` on
    centroid distances), concatenates their slices and reranks the candidates exactly; also the
    residuals ``x - c[assign]`` an IVF-PQ would encode, and recall against brute force."""
    n, d, nlist, nprobe, k = 120, 4, 8, 3, 5
    xb = torch.tensor(_clustered(30, n, d, 8, spread=0.6))
    xq = torch.tensor(_clustered(31, 4, d, 8, spread=0.6))
    init = _rng(32).choice(n, nlist, replace=False)
    centroids, assign, inertia = _kmeans(torch, xb, init, n_iter=8)
    order = torch.argsort(assign, stable=True)
    sizes = torch.bincount(assign, minlength=nlist)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(sizes, 0)])
    sorted_lists = assign[order]
    starts = torch.searchsorted(sorted_lists, torch.arange(nlist))
    ends = torch.searchsorted(sorted_lists, torch.arange(nlist), right=True)
    list_vecs = xb[order]
    residuals = xb - centroids[assign]

    coarse_d = torch.cdist(xq, centroids)
    _, probe = coarse_d.topk(nprobe, dim=1, largest=False)
    all_ids, all_d, n_scanned = [], [], []
    for qi in range(len(xq)):
        cand = torch.cat([order[offsets[c] : offsets[c + 1]] for c in probe[qi].tolist()])
        vecs = torch.cat([list_vecs[offsets[c] : offsets[c + 1]] for c in probe[qi].tolist()])
        dist = ((vecs - xq[qi]) ** 2).sum(1)
        kk = min(k, len(cand))
        dd, pos = dist.topk(kk, largest=False)
        all_ids.append(cand[pos])
        all_d.append(dd)
        n_scanned.append(len(cand))
    ivf_ids = torch.stack(all_ids)
    brute_d, brute_i = (torch.cdist(xq, xb) ** 2).topk(k, dim=1, largest=False)
    hits = (ivf_ids[:, :, None] == brute_i[:, None, :]).any(-1).float().mean(1)
    return {"centroids": centroids, "assign": assign, "inertia": inertia, "order": order,
            "sizes": sizes, "offsets": offsets, "starts": starts, "ends": ends,
            "offsets_match": bool(torch.equal(starts, offsets[:-1]) and torch.equal(ends,
                                                                             offsets[1:])),
            "probe": probe, "ivf_ids": ivf_ids, "ivf_d": torch.stack(all_d),
            "n_scanned": n_scanned, "brute_i": brute_i, "recall": hits,
            "residual_norms": residuals.norm(dim=1)[:10]}  # fmt: skip


# ---------------------------------------------------------------------------- late interaction
@program(rtol=5e-4, atol=5e-5)  # einsum contractions and max-sim sums in a different order
def retr_colbert_late_interaction_maxsim_training(torch):
    """ColBERT: token embeddings from a linear projection of (fixed) contextual states,
    L2-normalised per token; queries padded with ``[MASK]`` tokens that are kept (query
    augmentation), documents padded and their padding tokens masked out of the MaxSim by a
    punctuation/padding mask; scores ``einsum("qid,pjd->qpij")`` then ``max`` over document tokens
    and ``sum`` over query tokens; trained with the in-batch cross-entropy over (positive, hard
    negative) passages for a few Adam steps; finally re-ranking a candidate set with the trained
    projection and ``colbert_score``'s ``D_padded @ Q`` form."""
    nn, F = torch.nn, torch.nn.functional
    B, Lq, Ld, h, dim = 3, 5, 7, 10, 6
    proj = set_weights(torch, nn.Linear(h, dim, bias=False), seed=40)
    q_states = torch.tensor(arr(41, B, Lq, h))
    d_states = torch.tensor(arr(42, 2 * B, Ld, h))
    d_lens = torch.tensor([7, 4, 6, 3, 5, 7])
    d_mask = torch.arange(Ld)[None, :] < d_lens[:, None]  # (2B, Ld)

    def encode_q(x):
        return F.normalize(proj(x), p=2, dim=2)

    def encode_d(x, mask):
        D = proj(x) * mask.unsqueeze(2).float()
        return F.normalize(D, p=2, dim=2)

    def maxsim(Q, D, mask):
        sim = torch.einsum("qid,pjd->qpij", Q, D)
        sim = sim.masked_fill(~mask[None, :, None, :], -9999.0)
        return sim.max(dim=3).values.sum(dim=2)

    opt = torch.optim.Adam(proj.parameters(), lr=0.05)
    labels = torch.arange(B)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        scores = maxsim(encode_q(q_states), encode_d(d_states, d_mask), d_mask)  # (B, 2B)
        loss = F.cross_entropy(scores, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    grad_after = proj.weight.grad.clone()
    with torch.no_grad():
        Q = encode_q(q_states)
        D = encode_d(d_states, d_mask)
        scores = maxsim(Q, D, d_mask)
        # colbert_score: D_padded (N, Ld, dim) @ Q (dim, Lq) -> max over doc tokens -> sum
        Qt = Q[0].T
        D_padded = D.masked_fill(~d_mask[:, :, None], 0.0)  # zeros at padding
        per_tok = (D_padded @ Qt).masked_fill(~d_mask[:, :, None], -9999.0)
        cs = per_tok.max(1).values.sum(-1)
        order = cs.sort(descending=True).indices
    return {"losses": losses, "weight": proj.weight, "grad": grad_after, "scores": scores,
            "colbert_score": cs, "rerank": order, "matches_einsum": torch.allclose(
                cs, scores[0], atol=1e-5)}  # fmt: skip


# --------------------------------------------------------------------------------- re-ranking
@program
def retr_mmr_diversified_reranking_loop(torch):
    """Maximal Marginal Relevance as LangChain / KeyBERT write it: cosine similarity of the query
    to each candidate and between candidates, the first pick the most relevant, then a loop that
    scores each remaining candidate ``lambda * rel - (1 - lambda) * max sim to the selected`` with
    the already chosen ones masked to ``-inf`` and picks ``argmax``; run for two lambdas, with the
    marginal scores of every step, and a batched version over several queries with a boolean
    selection mask updated by ``scatter_``."""
    F = torch.nn.functional
    cands = torch.tensor(_clustered(50, 14, 5, 3, spread=0.25).astype(np.float64))
    query = torch.tensor(arr(51, 5).astype(np.float64))
    queries = torch.tensor(arr(52, 3, 5).astype(np.float64))
    c_norm = F.normalize(cands, dim=1)
    rel = c_norm @ F.normalize(query, dim=0)
    pair = c_norm @ c_norm.T

    def mmr(rel, pair, k, lam):
        selected = [int(torch.argmax(rel))]
        steps = []
        for _ in range(k - 1):
            redundancy = pair[:, selected].max(dim=1).values
            score = lam * rel - (1 - lam) * redundancy
            score[selected] = float("-inf")
            steps.append(score.clone())
            selected.append(int(score.argmax()))
        return selected, torch.stack(steps)

    sel_07, steps_07 = mmr(rel, pair, 5, 0.7)
    sel_03, steps_03 = mmr(rel, pair, 5, 0.3)

    rel_b = F.normalize(queries, dim=1) @ c_norm.T  # (3, N)
    chosen = torch.zeros_like(rel_b, dtype=torch.bool)
    first = rel_b.argmax(dim=1, keepdim=True)
    chosen.scatter_(1, first, True)
    picks = [first.squeeze(1)]
    for _ in range(3):
        red = torch.where(chosen[:, None, :], pair[None], torch.full_like(pair[None], -2.0))
        red = red.max(dim=2).values  # (3, N): max similarity to anything chosen
        score = (0.5 * rel_b - 0.5 * red).masked_fill(chosen, float("-inf"))
        nxt = score.argmax(dim=1)
        chosen.scatter_(1, nxt[:, None], True)
        picks.append(nxt)
    return {"rel": rel, "sel_07": sel_07, "sel_03": sel_03, "steps_07": steps_07,
            "steps_03": steps_03, "batched_picks": torch.stack(picks, 1), "chosen": chosen,
            "plain_top5": rel.topk(5).indices}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # matmuls and losses accumulate in a different order
def retr_hard_negative_mining_masks_and_false_negative_filter(torch):
    """Hard-negative mining for a retriever: query and document embeddings from a shared encoder,
    the relevance mask from label equality, positives excluded with ``masked_fill(-inf)``, the
    ``topk`` hardest negatives per query, NV-Retriever's positive-aware filtering (negatives
    scoring above 95% of the positive's score are treated as false negatives and dropped),
    semi-hard negatives (``pos - margin < neg < pos``) counted with masks and a random negative
    as fallback where none exists (index from NumPy); then a margin ranking loss and an InfoNCE
    loss over (positive + mined negatives) trained for a few SGD-with-momentum steps."""
    nn, F = torch.nn, torch.nn.functional
    nq, nd, d_in, d = 6, 20, 8, 6
    enc = set_weights(torch, nn.Sequential(nn.Linear(d_in, d), nn.Tanh(), nn.Linear(d, d)),
                      seed=60)  # fmt: skip
    labels_np = ints(61, 5, nd)
    pos_np = np.array([0, 3, 5, 8, 11, 14])
    centres = arr(62, 5, d_in)
    docs_x = torch.tensor(centres[labels_np] + arr(63, nd, d_in, scale=0.9))
    q_x = torch.tensor(centres[labels_np[pos_np]] + arr(64, nq, d_in, scale=0.9))
    doc_labels, pos_idx = torch.tensor(labels_np), torch.tensor(pos_np)
    q_labels = doc_labels[pos_idx]
    fallback = torch.tensor(_rng(65).integers(0, nd, nq))

    with torch.no_grad():
        q = F.normalize(enc(q_x), dim=-1)
        D = F.normalize(enc(docs_x), dim=-1)
        sim = q @ D.T
        is_pos = q_labels[:, None] == doc_labels[None, :]
        neg_sim = sim.masked_fill(is_pos, float("-inf"))
        hard_vals, hard_idx = neg_sim.topk(3, dim=1)
        pos_score = sim.gather(1, pos_idx[:, None])
        false_neg = (neg_sim > 0.95 * pos_score) & ~is_pos
        filtered = neg_sim.masked_fill(false_neg, float("-inf"))
        filt_vals, filt_idx = filtered.topk(3, dim=1)
        semi = (neg_sim < pos_score) & (neg_sim > pos_score - 0.3)
        n_semi = semi.sum(1)
        semi_pick = torch.where(
            n_semi > 0, neg_sim.masked_fill(~semi, float("-inf")).argmax(1), fallback
        )

    opt = torch.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9)
    margin_losses, nce_losses = [], []
    for _ in range(4):
        opt.zero_grad()
        qe = F.normalize(enc(q_x), dim=-1)
        De = F.normalize(enc(docs_x), dim=-1)
        p = (qe * De[pos_idx]).sum(-1)
        n = (qe[:, None, :] * De[filt_idx]).sum(-1)  # (nq, 3)
        ml = F.margin_ranking_loss(p[:, None].expand_as(n), n, torch.ones_like(n), margin=0.2)
        logits = torch.cat([p[:, None], n], dim=1) / 0.05
        nce = F.cross_entropy(logits, torch.zeros(nq, dtype=torch.long))
        (ml + nce).backward()
        opt.step()
        margin_losses.append(ml.item())
        nce_losses.append(nce.item())
    return {"sim": sim, "is_pos": is_pos, "hard_idx": hard_idx, "hard_vals": hard_vals,
            "false_neg": false_neg, "filt_idx": filt_idx, "filt_vals": filt_vals,
            "n_semi": n_semi, "semi_pick": semi_pick, "margin_losses": margin_losses,
            "nce_losses": nce_losses, "params": params(enc)}  # fmt: skip


# ------------------------------------------------------------------------------------- metrics
@program
def retr_beir_metrics_recall_mrr_ndcg_map_at_k(torch):
    """BEIR / pytrec_eval-style metrics from a score matrix and graded qrels: rankings from
    ``argsort(descending=True)``, relevance gathered in rank order, recall@k (hits over the number
    of relevant documents), precision@k, MRR@10 from the first relevant rank found with
    ``argmax`` over a boolean cumsum, nDCG@k with ``log2(rank + 1)`` discounts and the ideal DCG
    from the sorted qrels (queries without relevant documents guarded with ``where``), MAP@k from
    cumulative precision at relevant positions, and the top-k hit matrix from ``topk`` plus
    ``isin``."""
    f64 = torch.float64
    nq, nd = 5, 16
    scores = torch.tensor(_rng(70).standard_normal((nq, nd)))
    qrels = np.zeros((nq, nd), dtype=np.int64)
    rng = _rng(71)
    for i in range(nq - 1):  # the last query has no relevant document
        docs = rng.choice(nd, 3, replace=False)
        qrels[i, docs] = rng.integers(1, 4, 3)
    qrels = torch.tensor(qrels)
    ranking = scores.argsort(dim=1, descending=True)
    rel_sorted = qrels.gather(1, ranking)
    binary = (rel_sorted > 0).to(f64)
    n_rel = (qrels > 0).sum(1)
    out = {"ranking": ranking, "rel_sorted": rel_sorted}
    for k in (1, 3, 5, 10):
        hits = binary[:, :k].sum(1)
        out[f"recall@{k}"] = torch.where(
            n_rel > 0, hits / n_rel.clamp(min=1), torch.zeros_like(hits)
        )
        out[f"P@{k}"] = hits / k
        disc = 1.0 / torch.log2(torch.arange(2, k + 2, dtype=f64))
        dcg = ((2.0 ** rel_sorted[:, :k].to(f64) - 1) * disc).sum(1)
        ideal = qrels.sort(dim=1, descending=True).values[:, :k].to(f64)
        idcg = ((2.0**ideal - 1) * disc).sum(1)
        out[f"nDCG@{k}"] = torch.where(idcg > 0, dcg / idcg, torch.zeros_like(dcg))
        prec_at = binary[:, :k].cumsum(1) / torch.arange(1, k + 1, dtype=f64)
        ap = (prec_at * binary[:, :k]).sum(1) / n_rel.clamp(min=1).clamp(max=k)
        out[f"MAP@{k}"] = ap
    found = binary[:, :10].cumsum(1) > 0
    first = found.to(torch.int64).argmax(1)
    out["MRR@10"] = torch.where(found.any(1), 1.0 / (first + 1).to(f64), torch.zeros(nq, dtype=f64))
    out["mean_nDCG@10"] = round(out["nDCG@10"].mean().item(), 5)
    top = scores.topk(5, dim=1).indices
    relevant_ids = [torch.nonzero(qrels[i]).flatten() for i in range(nq)]
    out["hit_matrix"] = torch.stack([torch.isin(top[i], relevant_ids[i]) for i in range(nq)])
    out["relevant_ids"] = relevant_ids
    return out


# ------------------------------------------------------------------------ matryoshka, hashing
@program(rtol=5e-4, atol=5e-5)  # matmuls and softmax sums accumulate in a different order
def retr_matryoshka_truncated_embeddings_and_quantization(torch):
    """Matryoshka representation learning as sentence-transformers' ``MatryoshkaLoss`` does it: one
    encoder's embeddings truncated to ``[4, 8, 16]`` dimensions, each prefix renormalised and
    scored with in-batch negatives at a temperature, the per-dimension losses weighted and summed;
    a few Adam steps; then retrieval with each prefix (``topk`` overlap with the full dimension),
    and ``quantize_embeddings``-style int8 (per-dimension ranges from calibration embeddings) and
    ubinary (``> 0`` bits packed eight per byte into ``uint8``) with Hamming candidates (a stable
    ``argsort``, since integer distances tie) rescored by float dot products."""
    nn, F = torch.nn, torch.nn.functional
    B, d_in, d = 8, 12, 16
    dims, weights = [4, 8, 16], [1.0, 1.0, 1.0]
    enc = set_weights(torch, nn.Sequential(nn.Linear(d_in, 24), nn.ReLU(), nn.Linear(24, d)),
                      seed=80)  # fmt: skip
    a_x = torch.tensor(arr(81, B, d_in))
    p_x = torch.tensor(arr(81, B, d_in) + arr(82, B, d_in, scale=0.6))
    labels = torch.arange(B)
    opt = torch.optim.Adam(enc.parameters(), lr=0.01)
    history = []
    for _ in range(4):
        opt.zero_grad()
        a, p = enc(a_x), enc(p_x)
        per_dim = []
        for dim, w in zip(dims, weights):
            sa = F.normalize(a[..., :dim], p=2, dim=-1)
            sp = F.normalize(p[..., :dim], p=2, dim=-1)
            per_dim.append(w * F.cross_entropy(sa @ sp.T / 0.05, labels))
        loss = torch.stack(per_dim).sum()
        loss.backward()
        opt.step()
        history.append([x.item() for x in per_dim])
    with torch.no_grad():
        corpus = enc(torch.tensor(arr(83, 40, d_in)))
        queries = enc(a_x[:4])
        full_top = (F.normalize(queries, dim=-1) @ F.normalize(corpus, dim=-1).T).topk(5).indices
        overlaps = {}
        for dim in dims[:-1]:
            s = F.normalize(queries[:, :dim], dim=-1) @ F.normalize(corpus[:, :dim], dim=-1).T
            t = s.topk(5).indices
            overlaps[str(dim)] = (t[:, :, None] == full_top[:, None, :]).any(-1).sum(1)
        calib = corpus[:20]
        starts = calib.min(dim=0).values
        steps = (calib.max(dim=0).values - starts) / 255
        q8 = ((corpus - starts) / steps - 128).round().clamp(-128, 127).to(torch.int8)
        bits = (corpus > 0).to(torch.uint8).view(len(corpus), d // 8, 8)
        packed = (bits * torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8)).sum(
            -1, dtype=torch.uint8
        )  # np.packbits's big-endian bit order
        qbits = (queries > 0).to(torch.int64)
        cbits = (corpus > 0).to(torch.int64)
        hamming = (qbits[:, None, :] != cbits[None, :, :]).sum(-1)
        cand = hamming.argsort(dim=1, stable=True)[:, :10]  # integer distances tie
        rescored = (queries[:, None, :] * corpus[cand]).sum(-1)
        rerank = cand.gather(1, rescored.argsort(dim=1, descending=True))
    return {"history": history, "params": params(enc), "overlaps": overlaps, "full_top": full_top,
            "int8": q8, "packed": packed, "hamming": hamming, "rerank": rerank[:, :5],
            "int8_dtype": str(q8.dtype)}  # fmt: skip


@program
def retr_lsh_random_hyperplanes_packed_codes_and_buckets(torch):
    """Locality-sensitive hashing for cosine similarity (SimHash): signs of projections on random
    hyperplanes (fixed NumPy normals), the bits packed into ``int64`` codes with powers of two,
    several hash tables bucketed with ``unique(return_inverse=True, return_counts=True)``,
    candidates as the union of the query's buckets over the tables, Hamming distances by XOR
    and popcount with shifts and ``& 1``, the angle estimate ``pi * hamming / nbits`` against the
    true angle, and multi-probe flipping each bit of the query code in turn."""
    nbits, ntables, n, d = 8, 3, 50, 6
    X = torch.tensor(_clustered(90, n, d, 4, spread=0.4).astype(np.float64))
    q = X[[3, 17, 40]] + torch.tensor(arr(91, 3, d, scale=0.2).astype(np.float64))
    planes = torch.tensor(_rng(92).standard_normal((ntables, nbits, d)))
    pow2 = 2 ** torch.arange(nbits, dtype=torch.int64)

    def hash_codes(x):
        bits = (torch.einsum("tbd,nd->tnb", planes, x) > 0).to(torch.int64)
        return (bits * pow2).sum(-1)  # (ntables, n)

    codes = hash_codes(X)
    q_codes = hash_codes(q)
    buckets, cand_sets, n_cands = [], [], []
    for t in range(ntables):
        uniq, inverse, counts = torch.unique(codes[t], return_inverse=True, return_counts=True)
        buckets.append({"uniq": uniq, "inverse": inverse, "counts": counts})
    for qi in range(len(q)):
        mask = torch.zeros(n, dtype=torch.bool)
        for t in range(ntables):
            mask |= codes[t] == q_codes[t, qi]
        cand_sets.append(torch.nonzero(mask).flatten())
        n_cands.append(int(mask.sum()))

    def popcount(v):
        c = torch.zeros_like(v)
        for s in range(nbits):
            c += (v >> s) & 1
        return c

    ham = popcount(torch.bitwise_xor(q_codes[0][:, None], codes[0][None, :]))  # (nq, n)
    cos = torch.nn.functional.cosine_similarity(q[:, None, :], X[None, :, :], dim=-1)
    true_angle = torch.acos(cos.clamp(-1, 1))
    est_angle = math.pi * ham.to(torch.float64) / nbits
    probes = q_codes[0][:, None] ^ pow2[None, :]  # flip one bit at a time
    probe_hits = (codes[0][None, None, :] == probes[:, :, None]).sum(-1)
    order = torch.argsort(ham, dim=1, stable=True)[:, :6]
    return {"codes": codes, "q_codes": q_codes, "buckets": buckets, "cand_sets": cand_sets,
            "n_cands": n_cands, "hamming": ham, "est_angle": est_angle,
            "angle_err": (est_angle - true_angle).abs().mean(), "probe_hits": probe_hits,
            "hamming_order": order,
            "codes_hex": [hex(int(c)) for c in q_codes[0]]}  # fmt: skip


# ----------------------------------------------------------------- streaming search, sparse
@program(rtol=5e-4, atol=5e-5)  # float32 distances summed in a different order
def retr_streaming_knn_shards_range_search_and_half_storage(torch):
    """Brute-force search over a corpus too large for one matmul, as FAISS-on-GPU wrappers write
    it: the corpus stored in ``float16`` and streamed in shards (upcast per shard), each shard's
    ``topk`` merged into the running result with ``cat`` + ``topk`` + ``take_along_dim``; a range
    search with the radius from ``kthvalue`` returning FAISS's ``lims``/``D``/``I`` layout
    (``nonzero`` per query, ``cumsum`` of counts); a distance histogram with ``bucketize``; and a
    ``torch.no_grad`` inner-product search of the shards against the full-precision corpus."""
    n, d, k, shard = 70, 8, 4, 25
    corpus32 = torch.tensor(_clustered(100, n, d, 5, spread=0.5))
    corpus = corpus32.half()
    queries = corpus32[[2, 33, 61]] + torch.tensor(arr(101, 3, d, scale=0.3))
    best_d = torch.full((3, k), float("inf"))
    best_i = torch.full((3, k), -1, dtype=torch.long)
    for start in range(0, n, shard):
        xb = corpus[start : start + shard].float()
        dist = (queries**2).sum(1, keepdim=True) - 2 * queries @ xb.T + (xb**2).sum(1)[None]
        dd, ii = dist.topk(min(k, xb.shape[0]), dim=1, largest=False)
        all_d = torch.cat([best_d, dd], dim=1)
        all_i = torch.cat([best_i, ii + start], dim=1)
        best_d, pos = all_d.topk(k, dim=1, largest=False)
        best_i = torch.take_along_dim(all_i, pos, dim=1)
    full = torch.cdist(queries, corpus.float()) ** 2
    radius = full.kthvalue(6, dim=1).values.median()
    within = full < radius
    lims = torch.cat([torch.zeros(1, dtype=torch.long), within.sum(1).cumsum(0)])
    rows, cols = torch.nonzero(within, as_tuple=True)
    edges = torch.linspace(0.0, float(full.max()), 6)
    hist = torch.bincount(torch.bucketize(full.flatten(), edges), minlength=7)
    with torch.no_grad():
        ip = queries @ corpus32.T
        ip_top = ip.topk(k, dim=1)
    half_err = (corpus.float() - corpus32).abs().max()
    return {"best_d": best_d, "best_i": best_i, "exact_i": full.topk(k, 1, largest=False)[1],
            "radius": radius, "lims": lims, "I": cols, "D": full[rows, cols], "rows": rows,
            "hist": hist, "ip_vals": ip_top.values, "ip_idx": ip_top.indices,
            "half_err": half_err, "storage_dtype": str(corpus.dtype)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # log-saturated max pooling and FLOPS sums in a different order
def retr_splade_sparse_max_pooling_flops_and_inverted_index(torch):
    """SPLADE's learned sparse retrieval: MLM logits over a small vocabulary from token states,
    ``log(1 + relu(logits))`` max-pooled over tokens with the attention mask (SPLADE v2), the
    FLOPS regularizer ``sum_j (mean_i w_ij)^2`` for queries and documents, in-batch ranking loss
    plus regularization trained for a few Adam steps; then the document vectors pruned to their
    top terms with ``topk`` + ``scatter``, an inverted index built from ``nonzero`` (postings
    sorted by term), and query scoring by accumulating postings with ``index_add_`` compared with
    the dense dot product."""
    nn, F = torch.nn, torch.nn.functional
    B, L, h, V = 4, 6, 8, 20
    mlm = set_weights(torch, nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.LayerNorm(h),
                                           nn.Linear(h, V)), seed=110)  # fmt: skip
    q_states = torch.tensor(arr(111, B, L, h))
    d_states = torch.tensor(arr(112, B, L, h) * 0.5 + arr(111, B, L, h) * 0.5)
    q_mask = torch.tensor(np.array([[1] * 4 + [0] * 2, [1] * 6, [1] * 3 + [0] * 3, [1] * 5 + [0]]))
    d_mask = torch.tensor(np.array([[1] * 6, [1] * 5 + [0], [1] * 6, [1] * 4 + [0] * 2]))

    def splade(states, mask):
        logits = mlm(states)
        values, _ = torch.max(torch.log1p(torch.relu(logits)) * mask.unsqueeze(-1), dim=1)
        return values

    def flops(reps):
        return torch.sum(torch.mean(torch.abs(reps), dim=0) ** 2)

    opt = torch.optim.Adam(mlm.parameters(), lr=0.01)
    labels = torch.arange(B)
    losses, regs = [], []
    for _ in range(4):
        opt.zero_grad()
        q, dv = splade(q_states, q_mask), splade(d_states, d_mask)
        rank_loss = F.cross_entropy(q @ dv.T, labels)
        reg = 0.03 * flops(q) + 0.01 * flops(dv)
        (rank_loss + reg).backward()
        opt.step()
        losses.append(rank_loss.item())
        regs.append(reg.item())
    with torch.no_grad():
        q, dv = splade(q_states, q_mask), splade(d_states, d_mask)
        top_vals, top_terms = dv.topk(5, dim=1)
        pruned = torch.zeros_like(dv).scatter(1, top_terms, top_vals)
        doc_ids, term_ids = torch.nonzero(pruned, as_tuple=True)
        order = torch.argsort(term_ids, stable=True)
        postings_terms, postings_docs = term_ids[order], doc_ids[order]
        weights = pruned[postings_docs, postings_terms]
        df = torch.bincount(postings_terms, minlength=V)
        scores = torch.zeros(B, B)
        for qi in range(B):
            contrib = q[qi, postings_terms] * weights
            scores[qi].index_add_(0, postings_docs, contrib)
        dense = q @ pruned.T
    return {"losses": losses, "regs": regs, "q_nnz": (q > 0).sum(1), "d_vec": dv,
            "top_terms": top_terms, "postings_terms": postings_terms,
            "postings_docs": postings_docs, "df": df, "scores": scores,
            "dense_minus_index": (scores - dense).abs().max() < 1e-5,
            "ranking": scores.argsort(dim=1, descending=True),
            "params": params(mlm)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # squared distances and log-sum-exp sums in a different order
def retr_knn_lm_datastore_interpolation_and_queue_updates(torch):
    """kNN-LM (Khandelwal et al.): a datastore of (context vector, next token) pairs, the ``k``
    nearest keys of each test context by squared L2 distance, a distribution over the vocabulary
    from ``softmax(-d / T)`` accumulated per token with ``scatter_add_``, interpolated with the
    language model's softmax in log space (``logsumexp`` of ``log(lambda) + log p_knn`` and
    ``log(1 - lambda) + log p_lm``), perplexities for several lambdas; then the datastore grown as
    a fixed-size FIFO queue with ``index_copy_`` at a wrapping pointer, as MoCo-style memory banks
    and streaming indexes do, and the lookups repeated."""
    F = torch.nn.functional
    V, d, n_keys, n_test, k = 12, 6, 40, 5, 6
    keys = torch.tensor(_clustered(120, n_keys, d, 4, spread=0.5))
    vals = torch.tensor(ints(121, V, n_keys))
    ctx = keys[[1, 7, 19, 25, 38]] + torch.tensor(arr(122, n_test, d, scale=0.4))
    target = vals[[1, 7, 19, 25, 38]].clone()
    target[3] = (target[3] + 1) % V  # one context whose neighbours predict the wrong token
    lm_logits = torch.tensor(arr(123, n_test, V))

    def knn_log_probs(keys, vals, temperature=1.0):
        dist = torch.cdist(ctx, keys) ** 2
        d_k, idx = dist.topk(k, dim=1, largest=False)
        w = F.softmax(-d_k / temperature, dim=1)
        probs = torch.zeros(n_test, V).scatter_add_(1, vals[idx], w)
        return torch.log(probs.clamp(min=1e-10)), idx

    log_knn, nn_idx = knn_log_probs(keys, vals)
    log_lm = F.log_softmax(lm_logits, dim=1)
    ppl = {}
    for lam in (0.0, 0.25, 0.5):
        if lam == 0.0:
            mixed = log_lm
        else:
            mixed = torch.logsumexp(torch.stack([log_knn + math.log(lam),
                                                 log_lm + math.log(1 - lam)]), dim=0)  # fmt: skip
        nll = -mixed.gather(1, target[:, None]).squeeze(1)
        ppl[str(lam)] = torch.exp(nll.mean())
    bank_k = torch.zeros(16, d)
    bank_v = torch.full((16,), -1, dtype=torch.long)
    ptr = 0
    for start in range(0, n_keys, 12):
        batch_k, batch_v = keys[start : start + 12], vals[start : start + 12]
        pos = (torch.arange(len(batch_k)) + ptr) % 16
        bank_k.index_copy_(0, pos, batch_k)
        bank_v.index_copy_(0, pos, batch_v)
        ptr = (ptr + len(batch_k)) % 16
    log_bank, bank_idx = knn_log_probs(bank_k, bank_v.clamp(min=0), temperature=0.5)
    return {"nn_idx": nn_idx, "log_knn": log_knn.clamp(min=-30), "ppl": ppl, "ptr": ptr,
            "bank_v": bank_v, "bank_k": bank_k, "bank_idx": bank_idx,
            "bank_argmax": log_bank.argmax(1), "knn_top1_acc": (log_knn.argmax(1) == target)
            .float().mean()}  # fmt: skip
