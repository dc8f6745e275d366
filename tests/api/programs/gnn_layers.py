"""Graph neural networks without PyG, as PyG and DGL layers compute them with plain tensor ops:
``gcn_norm`` (coalesce, remaining self loops with a fill value, degrees by ``scatter_add_``),
GATv2 with edge features and a per-destination softmax (``scatter_reduce`` amax, ``exp``,
``scatter_add`` denominators), GraphSAGE on sampled, relabelled subgraphs with mean and max-pool
aggregators, GIN with a learnable eps, BatchNorm and jumping-knowledge readouts, DynamicEdgeConv
with a batched kNN graph from ``cdist`` + ``topk``, R-GCN with basis decomposition (loop and
``bmm`` paths), global add/mean/max/attention/Set2Set pooling over a batch vector, an MPNN
(``NNConv`` + GRU) on a small ``MessagePassing`` base class, DiffPool on dense batches, (V)GAE
link prediction with negative edges and BCE, label propagation with Correct & Smooth and APPNP,
a graph transformer whose attention is masked by the adjacency and biased by shortest paths,
TopK/SAG pooling with PyG's per-graph stable-sort selection, PNA's aggregators and degree scalers
with GraphNorm, a heterogeneous ``HeteroConv`` over ``nn.ModuleDict``, and ChebConv next to SGC
fitted with L-BFGS, and Kipf's pygcn on a sparse adjacency (``torch.spmm``, ``sparse.sum``). Graphs, features and the few sampled choices come from NumPy with fixed seeds."""

from __future__ import annotations

import inspect
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _edges(seed: int, n: int, e: int, offset: int = 0) -> np.ndarray:
    """``e`` distinct directed edges (no self loops) among ``n`` nodes, as a [2, e] array."""
    rng = np.random.default_rng(seed)
    pairs = np.array([p for p in rng.permutation(n * n) if p // n != p % n][:e], dtype=np.int64)
    return np.stack([pairs // n, pairs % n]) + offset


def _batched_edges(seed: int, sizes: list[int], per_node: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """A disjoint union of small random graphs: (edge_index [2, E], batch [N])."""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ei = [_edges(seed + g, n, per_node * n, int(o)) for g, (n, o) in enumerate(zip(sizes, offsets))]
    batch = np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)
    return np.concatenate(ei, axis=1), batch


def _scatter(torch, src, index, dim_size, reduce="sum"):
    """torch_scatter's ``scatter`` along dim 0, the way PyG's ``utils.scatter`` spells it."""
    size = (dim_size,) + tuple(src.shape[1:])
    index = index.view((-1,) + (1,) * (src.dim() - 1)).expand_as(src)
    if reduce == "sum":
        return src.new_zeros(size).scatter_add_(0, index, src)
    if reduce == "mean":
        count = src.new_zeros(dim_size).scatter_add_(0, index[(slice(None),) + (0,) * (src.dim() - 1)],
                                                      src.new_ones(src.size(0)))  # fmt: skip
        out = src.new_zeros(size).scatter_add_(0, index, src)
        return out / count.clamp(min=1).view((-1,) + (1,) * (src.dim() - 1))
    return src.new_zeros(size).scatter_reduce_(0, index, src, reduce=reduce, include_self=False)


def _softmax(torch, src, index, num_nodes):
    """PyG's ``utils.softmax``: a softmax over the entries of ``src`` that share an ``index``."""
    src_max = _scatter(torch, src.detach(), index, num_nodes, reduce="amax")
    out = (src - src_max.index_select(0, index)).exp()
    out_sum = _scatter(torch, out, index, num_nodes, reduce="sum") + 1e-16
    return out / out_sum.index_select(0, index)


@program
def gcn_norm_coalesce_self_loops_param_groups(torch):
    """PyG's ``gcn_norm`` written out: ``to_undirected`` + ``coalesce`` (sort the linear edge ids
    with ``torch.unique(return_inverse=True)`` and sum duplicate weights), ``add_remaining_self_loops``
    with ``fill_value=2.`` (the "improved" GCN), ``deg.pow_(-0.5)`` with ``masked_fill_`` of inf, then
    the Cora example's two-layer GCN with weight decay on the first layer only."""
    nn, F = torch.nn, torch.nn.functional
    N = 14
    edge_index = torch.tensor(_edges(1, N, 20))
    edge_weight = torch.tensor(np.random.default_rng(2).uniform(0.5, 2.0, 20).astype(np.float32))
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    edge_weight = torch.cat([edge_weight, edge_weight])
    idx = edge_index[0] * N + edge_index[1]
    uniq, inv = torch.unique(idx, sorted=True, return_inverse=True)
    edge_weight = edge_weight.new_zeros(uniq.numel()).scatter_add_(0, inv, edge_weight)
    edge_index = torch.stack([torch.div(uniq, N, rounding_mode="floor"), uniq % N], dim=0)
    mask = edge_index[0] != edge_index[1]
    loop_index = torch.arange(0, N, dtype=torch.long).unsqueeze(0).repeat(2, 1)
    edge_index = torch.cat([edge_index[:, mask], loop_index], dim=1)
    edge_weight = torch.cat([edge_weight[mask], edge_weight.new_full((N,), 2.0)], dim=0)
    row, col = edge_index[0], edge_index[1]
    deg = torch.zeros(N).scatter_add_(0, col, edge_weight)
    deg_inv_sqrt = deg.pow_(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float("inf"), 0)
    norm = deg_inv_sqrt[row] * edge_weight * deg_inv_sqrt[col]

    class GCNConv(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin = nn.Linear(in_channels, out_channels, bias=False)
            self.bias = nn.Parameter(torch.empty(out_channels))

        def forward(self, x, edge_index, edge_weight):
            x = self.lin(x)
            x_j = x.index_select(0, edge_index[0])
            out = torch.zeros_like(x).index_add_(0, edge_index[1], edge_weight.view(-1, 1) * x_j)
            return out + self.bias

    class GCN(nn.Module):
        def __init__(self, in_channels, hidden_channels, out_channels):
            super().__init__()
            self.conv1 = GCNConv(in_channels, hidden_channels)
            self.conv2 = GCNConv(hidden_channels, out_channels)

        def forward(self, x, edge_index, edge_weight=None):
            x = F.dropout(x, p=0.5, training=self.training)
            x = self.conv1(x, edge_index, edge_weight).relu()
            x = F.dropout(x, p=0.5, training=self.training)
            return self.conv2(x, edge_index, edge_weight)

    model = set_weights(torch, GCN(6, 16, 3), seed=3)
    x, y = torch.tensor(arr(4, N, 6)), torch.tensor(ints(5, 3, N))
    train_mask = torch.tensor(np.arange(N) % 3 != 0)
    optimizer = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=5e-4),
                                  dict(params=model.conv2.parameters(), weight_decay=0)], lr=0.01)  # fmt: skip
    losses = []
    for _epoch in range(6):
        model.eval()  # (dropout off: no randomness from the library)
        optimizer.zero_grad()
        out = model(x, edge_index, norm)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        out = model(x, edge_index, norm)
        pred = out.argmax(dim=-1)
        accs = [int((pred[m] == y[m]).sum()) / int(m.sum()) for m in (train_mask, ~train_mask)]
        dense = torch.zeros(N, N)
        dense.index_put_((col, row), norm, accumulate=True)
        h = model.conv1.lin(x)
        dense_matches = torch.allclose(dense @ h + model.conv1.bias,
                                       model.conv1(x, edge_index, norm), atol=1e-5)  # fmt: skip
    return {"edge_index": edge_index, "edge_weight": edge_weight, "deg_inv_sqrt": deg_inv_sqrt,
            "norm": norm, "losses": losses, "out": out, "accs": accs, "dense": dense,
            "dense_matches": dense_matches, "params": params(model)}  # fmt: skip


@program
def gatv2_edge_attr_fill_mean_self_loops(torch):
    """GATv2Conv (attention after the nonlinearity) with edge features: self loops whose edge
    attributes are the mean of each node's incoming ones (``add_self_loops(fill_value='mean')`` via
    ``index_reduce_``), ``leaky_relu(x_i + x_j + e_ij)``, PyG's ``softmax`` (``scatter_reduce``
    amax of the detached scores, ``exp``, ``scatter_add`` denominators), multi-head concat then
    mean, ``return_attention_weights``."""
    nn, F = torch.nn, torch.nn.functional
    N, E, D_E = 10, 22, 3
    edge_index = torch.tensor(_edges(11, N, E))
    edge_attr = torch.tensor(arr(12, E, D_E))
    col = edge_index[1]
    loop_attr = edge_attr.new_zeros(N, D_E).index_reduce_(0, col, edge_attr, "mean",
                                                          include_self=False)  # fmt: skip
    loop = torch.arange(N)
    edge_index = torch.cat([edge_index, torch.stack([loop, loop])], dim=1)
    edge_attr = torch.cat([edge_attr, loop_attr], dim=0)

    class GATv2Conv(nn.Module):
        def __init__(self, in_channels, out_channels, heads, edge_dim, concat=True):
            super().__init__()
            self.heads, self.out_channels, self.concat = heads, out_channels, concat
            self.lin_l = nn.Linear(in_channels, heads * out_channels)
            self.lin_r = nn.Linear(in_channels, heads * out_channels)
            self.lin_edge = nn.Linear(edge_dim, heads * out_channels, bias=False)
            self.att = nn.Parameter(torch.empty(1, heads, out_channels))
            self.bias = nn.Parameter(torch.empty(heads * out_channels if concat else out_channels))

        def forward(self, x, edge_index, edge_attr, return_attention_weights=False):
            H, C = self.heads, self.out_channels
            x_l = self.lin_l(x).view(-1, H, C)
            x_r = self.lin_r(x).view(-1, H, C)
            j, i = edge_index
            x_j, x_i = x_l.index_select(0, j), x_r.index_select(0, i)
            e = self.lin_edge(edge_attr).view(-1, H, C)
            z = F.leaky_relu(x_i + x_j + e, 0.2)
            alpha = (z * self.att).sum(dim=-1)
            alpha = _softmax(torch, alpha, i, x.size(0))
            out = _scatter(torch, x_j * alpha.unsqueeze(-1), i, x.size(0), reduce="sum")
            out = out.view(-1, H * C) if self.concat else out.mean(dim=1)
            out = out + self.bias
            return (out, (edge_index, alpha)) if return_attention_weights else out

    class GAT(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GATv2Conv(5, 4, heads=3, edge_dim=D_E)
            self.conv2 = GATv2Conv(12, 3, heads=2, edge_dim=D_E, concat=False)

        def forward(self, x, edge_index, edge_attr):
            x = F.elu(self.conv1(x, edge_index, edge_attr))
            return self.conv2(x, edge_index, edge_attr)

    model = set_weights(torch, GAT(), seed=13)
    x, y = torch.tensor(arr(14, N, 5)), torch.tensor(ints(15, 3, N))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        out = model(x, edge_index, edge_attr)
        loss = F.nll_loss(F.log_softmax(out, dim=-1), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    _, (ei, alpha) = model.conv1(x, edge_index, edge_attr, return_attention_weights=True)
    sums = torch.zeros(N, 3).index_add_(0, ei[1], alpha)
    return {"loop_attr": loop_attr, "losses": losses, "alpha": alpha, "alpha_sums": sums,
            "top_edge": alpha.mean(1).argmax(), "grads": grads(model)}  # fmt: skip


@program
def graphsage_sampled_subgraph_relabel_pool_aggr(torch):
    """GraphSAGE on mini-batches from a two-hop neighbour sampler: CSR from ``argsort`` +
    ``bincount`` + ``cumsum``, neighbours drawn with NumPy, nodes relabelled with
    ``torch.unique(return_inverse=True)`` and an index map, a mean-aggregating layer and a
    max-pool one (``relu(lin(x_j))`` then ``scatter_reduce`` amax, zero for isolated nodes),
    ``normalize=True``, the loss on the seed nodes ``out[:batch_size]``."""
    nn, F = torch.nn, torch.nn.functional
    N, D = 30, 6
    edge_index = torch.tensor(_edges(21, N, 90))
    row, col = edge_index
    perm = torch.argsort(col * N + row)
    row, col = row[perm], col[perm]
    rowptr = torch.zeros(N + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(col, minlength=N).cumsum(0)
    rng = np.random.default_rng(22)

    def sample(seeds, k):
        srcs, dsts = [], []
        for v in seeds.tolist():
            nbrs = row[rowptr[v] : rowptr[v + 1]].tolist()
            take = rng.choice(len(nbrs), size=min(k, len(nbrs)), replace=False) if nbrs else []
            srcs += [nbrs[t] for t in take]
            dsts += [v] * len(take)
        return torch.tensor(srcs, dtype=torch.long), torch.tensor(dsts, dtype=torch.long)

    def loader(seed_nodes, sizes=(3, 2)):
        frontier, es, ed = seed_nodes, [], []
        for k in sizes:
            s, d = sample(frontier, k)
            es.append(s)
            ed.append(d)
            frontier = torch.unique(s)
        src, dst = torch.cat(es), torch.cat(ed)
        rest = torch.unique(torch.cat([src, dst]))
        rest = rest[~torch.isin(rest, seed_nodes)]
        n_id = torch.cat([seed_nodes, rest])
        mapping = torch.full((N,), -1, dtype=torch.long)
        mapping[n_id] = torch.arange(n_id.numel())
        return n_id, torch.stack([mapping[src], mapping[dst]])

    class SAGEConv(nn.Module):
        def __init__(self, in_channels, out_channels, aggr="mean", normalize=True):
            super().__init__()
            self.aggr, self.normalize = aggr, normalize
            if aggr == "max":
                self.lin = nn.Linear(in_channels, in_channels)
            self.lin_l = nn.Linear(in_channels, out_channels)
            self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x, edge_index):
            x_j = x[edge_index[0]]
            if self.aggr == "max":
                x_j = self.lin(x_j).relu()
            reduce = "amax" if self.aggr == "max" else self.aggr
            out = _scatter(torch, x_j, edge_index[1], x.size(0), reduce=reduce)
            out = self.lin_l(out) + self.lin_r(x)
            return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    class SAGE(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([SAGEConv(D, 12, "mean"), SAGEConv(12, 4, "max", False)])

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < len(self.convs) - 1:
                    x = x.relu()
            return x

    model = set_weights(torch, SAGE(), seed=23)
    x, y = torch.tensor(arr(24, N, D)), torch.tensor(ints(25, 4, N))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, sizes = [], []
    for _epoch in range(2):
        for batch in torch.arange(N).view(3, 10)[:2]:
            n_id, sub_ei = loader(batch)
            batch_size = batch.numel()
            optimizer.zero_grad()
            out = model(x[n_id], sub_ei)[:batch_size]
            loss = F.cross_entropy(out, y[n_id[:batch_size]])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            sizes.append(n_id.numel())
    model.eval()
    with torch.no_grad():
        full = model(x, edge_index)
    return {"rowptr": rowptr, "n_id": n_id, "sub_edge_index": sub_ei, "losses": losses,
            "sizes": sizes, "full": full, "pred": full.argmax(-1), "params": params(model)}  # fmt: skip


@program
def gin_train_eps_batchnorm_jumping_knowledge(torch):
    """GIN (Xu et al.) for graph classification: ``GINConv(train_eps=True)`` with an
    MLP (Linear-BatchNorm1d-ReLU-Linear-ReLU), ``(1 + eps) * x + sum_j x_j`` by ``index_add``,
    a per-layer sum readout with jumping knowledge (the paper's score is the sum of each layer's
    linear head), trained with Adam and StepLR; BatchNorm's running stats and eval outputs."""
    nn, F = torch.nn, torch.nn.functional
    sizes = [5, 7, 4, 6]
    ei, b = _batched_edges(31, sizes)
    edge_index, batch = torch.tensor(ei), torch.tensor(b)
    N, B = len(b), len(sizes)

    def global_add_pool(x, batch, size=None):
        size = int(batch.max().item() + 1) if size is None else size
        return x.new_zeros(size, x.size(-1)).index_add_(0, batch, x)

    class GINConv(nn.Module):
        def __init__(self, mlp, eps=0.0, train_eps=False):
            super().__init__()
            self.nn = mlp
            self.initial_eps = eps
            if train_eps:
                self.eps = nn.Parameter(torch.empty(1))
            else:
                self.register_buffer("eps", torch.empty(1))
            self.eps.data.fill_(self.initial_eps)

        def forward(self, x, edge_index):
            out = torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]])
            return self.nn(out + (1 + self.eps) * x)

    class GIN(nn.Module):
        def __init__(self, in_channels, hidden, num_classes, num_layers=3):
            super().__init__()
            self.convs = nn.ModuleList()
            self.heads = nn.ModuleList([nn.Linear(in_channels, num_classes)])
            for i in range(num_layers):
                # (no bias before BatchNorm: its gradient is rounding noise, which Adam would
                # turn into lr-sized steps of the running mean)
                mlp = nn.Sequential(nn.Linear(in_channels if i == 0 else hidden, hidden, bias=False),
                                    nn.BatchNorm1d(hidden), nn.ReLU(),
                                    nn.Linear(hidden, hidden), nn.ReLU())  # fmt: skip
                self.convs.append(GINConv(mlp, train_eps=True))
                self.heads.append(nn.Linear(hidden, num_classes))

        def forward(self, x, edge_index, batch):
            hs = [x]
            for conv in self.convs:
                hs.append(conv(hs[-1], edge_index))
            score = 0
            for h, head in zip(hs, self.heads):
                score = score + head(global_add_pool(h, batch, B))
            return score

    model = GIN(4, 8, 2)
    set_weights(torch, model, seed=32)
    for conv in model.convs:
        conv.eps.data.fill_(0.1)
    x = torch.tensor(arr(33, N, 4))
    y = torch.tensor(np.array([0, 1, 1, 0]))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    losses = []
    for _epoch in range(5):
        model.train()
        optimizer.zero_grad()
        out = model(x, edge_index, batch)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        eval_out = model(x, edge_index, batch)
    bn = model.convs[0].nn[1]
    return {"losses": losses, "eps": [c.eps.detach().clone() for c in model.convs],
            "running_mean": bn.running_mean, "running_var": bn.running_var,
            "batches_tracked": bn.num_batches_tracked, "eval_out": eval_out,
            "lr": scheduler.get_last_lr(), "grads": grads(model)}  # fmt: skip


@program
def dynamic_edgeconv_batched_knn_graph(torch):
    """DGCNN the PyG way: ``knn_graph(x, k, batch, loop=False)`` from ``torch.cdist`` with other
    graphs' points masked to inf and the diagonal filled, ``topk(largest=False)``; EdgeConv's
    ``h([x_i, x_j - x_i])`` messages max-aggregated by ``scatter_reduce``; the second layer's graph
    rebuilt in feature space (DynamicEdgeConv); ``global_max_pool`` and a classifier."""
    nn, F = torch.nn, torch.nn.functional
    sizes, K = [10, 12], 4
    batch = torch.tensor(np.repeat(np.arange(2), sizes))
    pos = torch.tensor(arr(41, sum(sizes), 3))
    y = torch.tensor(np.array([1, 0]))

    def knn_graph(x, k, batch, loop=False):
        with torch.no_grad():
            dist = torch.cdist(x, x)
            dist = dist.masked_fill(batch.view(-1, 1) != batch.view(1, -1), float("inf"))
            if not loop:
                dist.fill_diagonal_(float("inf"))
            nbr = dist.topk(k, dim=1, largest=False).indices
        center = torch.arange(x.size(0)).repeat_interleave(k)
        return torch.stack([nbr.reshape(-1), center], dim=0)  # flow: source_to_target

    class EdgeConv(nn.Module):
        def __init__(self, mlp):
            super().__init__()
            self.nn = mlp

        def forward(self, x, edge_index):
            x_j, x_i = x[edge_index[0]], x[edge_index[1]]
            msg = self.nn(torch.cat([x_i, x_j - x_i], dim=-1))
            return _scatter(torch, msg, edge_index[1], x.size(0), reduce="amax")

    class DGCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = EdgeConv(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16)))
            self.conv2 = EdgeConv(nn.Sequential(nn.Linear(32, 16), nn.ReLU()))
            self.lin = nn.Linear(32, 2)

        def forward(self, pos, batch):
            x1 = self.conv1(pos, knn_graph(pos, K, batch))
            self.ei2 = knn_graph(x1, K, batch)
            x2 = self.conv2(x1, self.ei2)
            h = torch.cat([x1, x2], dim=-1)
            pooled = _scatter(torch, h, batch, 2, reduce="amax")
            return self.lin(pooled)

    model = set_weights(torch, DGCNN(), seed=42)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        out = model(pos, batch)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    ei1 = knn_graph(pos, K, batch)
    same_graph = bool((batch[ei1[0]] == batch[ei1[1]]).all())
    return {"knn": ei1, "same_graph": same_graph, "feature_knn": model.ei2, "losses": losses,
            "out": out, "grads": grads(model)}  # fmt: skip


@program
def rgcn_basis_decomposition_loop_and_bmm(torch):
    """R-GCN (Schlichtkrull et al.) for entity classification: relation weights from a basis
    decomposition ``comp @ basis``, per-relation mean normalisation ``1 / c_{i,r}``, the loop over
    relations with boolean edge masks next to the "fast" path (``bincount`` of ``dst * R + type``
    and ``torch.bmm`` of ``weight[edge_type]``), a root weight, and a DistMult decoder score."""
    nn, F = torch.nn, torch.nn.functional
    N, R, E, NB = 12, 3, 30, 2
    edge_index = torch.tensor(_edges(51, N, E))
    edge_type = torch.tensor(ints(52, R, E))

    class RGCNConv(nn.Module):
        def __init__(self, in_channels, out_channels, num_relations, num_bases):
            super().__init__()
            self.in_channels, self.out_channels = in_channels, out_channels
            self.num_relations, self.num_bases = num_relations, num_bases
            self.weight = nn.Parameter(torch.empty(num_bases, in_channels, out_channels))
            self.comp = nn.Parameter(torch.empty(num_relations, num_bases))
            self.root = nn.Parameter(torch.empty(in_channels, out_channels))
            self.bias = nn.Parameter(torch.empty(out_channels))

        def relation_weights(self):
            w = self.comp @ self.weight.view(self.num_bases, -1)
            return w.view(self.num_relations, self.in_channels, self.out_channels)

        def forward(self, x, edge_index, edge_type):
            weight = self.relation_weights()
            src, dst = edge_index
            out = x.new_zeros(x.size(0), self.out_channels)
            for r in range(self.num_relations):
                mask = edge_type == r
                s, d = src[mask], dst[mask]
                h = x.index_select(0, s) @ weight[r]
                cnt = torch.zeros(x.size(0)).index_add_(0, d, torch.ones(d.numel()))
                agg = torch.zeros_like(out).index_add_(0, d, h)
                out = out + agg / cnt.clamp_(min=1).view(-1, 1)
            return out + x @ self.root + self.bias

        def forward_fast(self, x, edge_index, edge_type):
            weight = self.relation_weights()
            src, dst = edge_index
            msg = torch.bmm(x[src].unsqueeze(1), weight[edge_type]).squeeze(-2)
            key = dst * self.num_relations + edge_type
            norm = 1.0 / torch.bincount(key, minlength=x.size(0) * self.num_relations)[key]
            out = torch.zeros(x.size(0), self.out_channels)
            out = out.index_add_(0, dst, msg * norm.view(-1, 1))
            return out + x @ self.root + self.bias

    class RGCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(N, 8)
            self.conv1 = RGCNConv(8, 10, R, NB)
            self.conv2 = RGCNConv(10, 4, R, NB)
            self.rel = nn.Parameter(torch.empty(R, 4))

        def forward(self, edge_index, edge_type):
            x = F.relu(self.conv1(self.emb.weight, edge_index, edge_type))
            return self.conv2(x, edge_index, edge_type)

    model = set_weights(torch, RGCN(), seed=53)
    y = torch.tensor(ints(54, 4, N))
    train_idx = torch.tensor([0, 2, 3, 5, 7, 8, 11])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        out = model(edge_index, edge_type)
        loss = F.cross_entropy(out[train_idx], y[train_idx])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        x = model.emb.weight
        slow = model.conv1(x, edge_index, edge_type)
        fast = model.conv1.forward_fast(x, edge_index, edge_type)
        z = model(edge_index, edge_type)
        src, dst = edge_index
        distmult = (z[src] * model.rel[edge_type] * z[dst]).sum(dim=-1)
    return {"losses": losses, "slow": slow, "fast_matches": torch.allclose(slow, fast, atol=1e-5),
            "weights": model.conv1.relation_weights(), "distmult": distmult, "out": out,
            "grads": grads(model)}  # fmt: skip


@program
def global_pooling_batch_vector_set2set(torch):
    """Graph-level readouts over a ``batch`` vector: ``global_add_pool`` (``index_add_``),
    ``global_mean_pool`` (``scatter_add`` / counts), ``global_max_pool`` (``scatter_reduce`` amax),
    ``to_dense_batch`` (positions from ``cumsum``, padding and mask) with masked mean/max,
    ``torch.split`` by sizes, ``GlobalAttention`` (a gate softmax per graph) and Set2Set (an LSTM
    reading the graph three times); a small regression on all readouts trained a few steps."""
    nn, F = torch.nn, torch.nn.functional
    sizes = [3, 5, 2, 5]
    B, D = len(sizes), 6
    batch = torch.repeat_interleave(torch.arange(B), torch.tensor(sizes))
    N = batch.numel()
    x0 = torch.tensor(arr(61, N, D))

    def global_add_pool(x, batch, size):
        return torch.zeros(size, x.size(1)).index_add_(0, batch, x)

    def global_mean_pool(x, batch, size):
        out = torch.zeros(size, x.size(1)).scatter_add_(0, batch.unsqueeze(-1).expand_as(x), x)
        count = torch.bincount(batch, minlength=size).clamp(min=1)
        return out / count.unsqueeze(-1).to(out.dtype)

    def global_max_pool(x, batch, size):
        index = batch.view(-1, 1).expand_as(x)
        return x.new_full((size, x.size(1)), float("-inf")).scatter_reduce(0, index, x, "amax")

    def to_dense_batch(x, batch, fill_value=0.0):
        num_nodes = torch.bincount(batch)
        cum_nodes = torch.cat([batch.new_zeros(1), num_nodes.cumsum(dim=0)])
        max_num_nodes = int(num_nodes.max())
        idx = torch.arange(batch.size(0)) - cum_nodes[batch] + batch * max_num_nodes
        out = x.new_full([num_nodes.numel() * max_num_nodes, x.size(-1)], fill_value)
        out[idx] = x
        mask = torch.zeros(num_nodes.numel() * max_num_nodes, dtype=torch.bool)
        mask[idx] = True
        return (out.view(num_nodes.numel(), max_num_nodes, x.size(-1)),
                mask.view(num_nodes.numel(), max_num_nodes))  # fmt: skip

    class GlobalAttention(nn.Module):
        def __init__(self, gate_nn, nn_):
            super().__init__()
            self.gate_nn, self.nn = gate_nn, nn_

        def forward(self, x, batch, size):
            gate = self.gate_nn(x).view(-1, 1)
            x = self.nn(x)
            gate = _softmax(torch, gate, batch, size)
            return global_add_pool(gate * x, batch, size)

    class Set2Set(nn.Module):
        def __init__(self, in_channels, processing_steps):
            super().__init__()
            self.in_channels, self.steps = in_channels, processing_steps
            self.lstm = nn.LSTM(2 * in_channels, in_channels, num_layers=1)

        def forward(self, x, batch, size):
            h = (x.new_zeros((1, size, self.in_channels)), x.new_zeros((1, size, self.in_channels)))
            q_star = x.new_zeros(size, 2 * self.in_channels)
            for _ in range(self.steps):
                q, h = self.lstm(q_star.unsqueeze(0), h)
                q = q.view(size, self.in_channels)
                e = (x * q[batch]).sum(dim=-1, keepdim=True)
                a = _softmax(torch, e, batch, size)
                r = global_add_pool(a * x, batch, size)
                q_star = torch.cat([q, r], dim=-1)
            return q_star

    class Readout(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(D, D)
            self.att = GlobalAttention(nn.Linear(D, 1), nn.Linear(D, D))
            self.set2set = Set2Set(D, processing_steps=3)
            self.head = nn.Linear(6 * D, 1)

        def forward(self, x, batch):
            x = torch.tanh(self.lin(x))
            pooled = [global_add_pool(x, batch, B), global_mean_pool(x, batch, B),
                      global_max_pool(x, batch, B), self.att(x, batch, B),
                      self.set2set(x, batch, B)]  # fmt: skip
            return self.head(torch.cat(pooled, dim=-1)).squeeze(-1), pooled

    model = set_weights(torch, Readout(), seed=62)
    x = x0.clone().requires_grad_(True)
    target = torch.tensor(np.array([0.5, -1.0, 2.0, 0.0], dtype=np.float32))
    optimizer = torch.optim.RMSprop(model.parameters(), lr=0.01)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        pred, pooled = model(x, batch)
        loss = F.mse_loss(pred, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    dense, mask = to_dense_batch(x0, batch)
    masked_mean = (dense * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
    masked_max = dense.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1)
    split_max = torch.stack([part.max(dim=0).values for part in torch.split(x0, sizes)])
    return {"batch": batch, "losses": losses, "pooled": pooled, "x_grad": x.grad,
            "dense": dense, "mask": mask, "masked_mean": masked_mean,
            "mean_matches": torch.allclose(masked_mean, global_mean_pool(x0, batch, B)),
            "max_matches": torch.equal(masked_max, split_max), "grads": grads(model)}  # fmt: skip


@program
def mpnn_nnconv_gru_message_passing_base(torch):
    """Gilmer et al.'s MPNN as in PyG's QM9 example, on a tiny ``MessagePassing`` base class:
    ``propagate`` inspects ``message``'s signature and gathers ``x_i``/``x_j`` with
    ``index_select``, aggregates with ``scatter`` (``add``/``mean``/``max``) and calls ``update``;
    ``NNConv`` turns each edge's features into a weight matrix (``matmul`` of ``x_j.unsqueeze(1)``),
    a GRU carries the node state over three rounds, Set2Set reads out."""
    nn, F = torch.nn, torch.nn.functional
    sizes = [6, 5, 7]
    ei, b = _batched_edges(71, sizes)
    edge_index, batch = torch.tensor(ei), torch.tensor(b)
    N, E, B = len(b), ei.shape[1], len(sizes)
    edge_attr = torch.tensor(np.abs(arr(72, E, 3)))
    x = torch.tensor(arr(73, N, 4))
    y = torch.tensor(arr(74, B, 1))

    class MessagePassing(nn.Module):
        def __init__(self, aggr="add"):
            super().__init__()
            self.aggr = aggr
            self._user_args = [p for p in inspect.signature(self.message).parameters]

        def propagate(self, edge_index, **kwargs):
            size = next(v for v in kwargs.values() if hasattr(v, "size")).size(0)
            j, i = edge_index[0], edge_index[1]
            out = {}
            for arg in self._user_args:
                if arg.endswith("_j"):
                    out[arg] = kwargs[arg[:-2]].index_select(0, j)
                elif arg.endswith("_i"):
                    out[arg] = kwargs[arg[:-2]].index_select(0, i)
                else:
                    out[arg] = kwargs[arg]
            msg = self.message(**out)
            aggr = {"add": "sum", "mean": "mean", "max": "amax"}[self.aggr]
            return self.update(_scatter(torch, msg, i, size, reduce=aggr))

        def message(self, x_j):
            return x_j

        def update(self, aggr_out):
            return aggr_out

    class NNConv(MessagePassing):
        def __init__(self, in_channels, out_channels, nn_, aggr="mean"):
            super().__init__(aggr=aggr)
            self.in_channels, self.out_channels = in_channels, out_channels
            self.nn = nn_
            self.lin = nn.Linear(in_channels, out_channels, bias=False)
            self.bias = nn.Parameter(torch.empty(out_channels))

        def forward(self, x, edge_index, edge_attr):
            out = self.propagate(edge_index, x=x, edge_attr=edge_attr)
            return out + self.lin(x) + self.bias

        def message(self, x_j, edge_attr):
            weight = self.nn(edge_attr).view(-1, self.in_channels, self.out_channels)
            return torch.matmul(x_j.unsqueeze(1), weight).squeeze(1)

    class Set2Set(nn.Module):
        def __init__(self, dim, steps):
            super().__init__()
            self.dim, self.steps = dim, steps
            self.lstm = nn.LSTM(2 * dim, dim)

        def forward(self, x, batch):
            h = (x.new_zeros(1, B, self.dim), x.new_zeros(1, B, self.dim))
            q_star = x.new_zeros(B, 2 * self.dim)
            for _ in range(self.steps):
                q, h = self.lstm(q_star.unsqueeze(0), h)
                q = q.view(B, self.dim)
                a = _softmax(torch, (x * q.index_select(0, batch)).sum(-1, keepdim=True), batch, B)
                r = torch.zeros(B, self.dim).index_add_(0, batch, a * x)
                q_star = torch.cat([q, r], dim=-1)
            return q_star

    class Net(nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.lin0 = nn.Linear(4, dim)
            enn = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, dim * dim))
            self.conv = NNConv(dim, dim, enn, aggr="mean")
            self.gru = nn.GRU(dim, dim)
            self.set2set = Set2Set(dim, steps=3)
            self.lin1 = nn.Linear(2 * dim, dim)
            self.lin2 = nn.Linear(dim, 1)

        def forward(self, x, edge_index, edge_attr, batch):
            out = F.relu(self.lin0(x))
            h = out.unsqueeze(0)
            for _ in range(3):
                m = F.relu(self.conv(out, edge_index, edge_attr))
                out, h = self.gru(m.unsqueeze(0), h)
                out = out.squeeze(0)
            out = self.set2set(out, batch)
            out = F.relu(self.lin1(out))
            return self.lin2(out)

    model = set_weights(torch, Net(), seed=75)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.7,
                                                           patience=1, min_lr=1e-5)  # fmt: skip
    losses = []
    for _epoch in range(4):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x, edge_index, edge_attr, batch), y)
        loss.backward()
        optimizer.step()
        scheduler.step(loss.item())
        losses.append(loss.item())
    with torch.no_grad():
        mae = (model(x, edge_index, edge_attr, batch) - y).abs().mean()
    conv_args = model.conv._user_args
    return {"losses": losses, "mae": mae, "conv_args": ", ".join(conv_args),
            "lr": optimizer.param_groups[0]["lr"], "grads": grads(model)}  # fmt: skip


@program
def diffpool_dense_soft_assignment(torch):
    """DiffPool (Ying et al.) on dense batches: ``to_dense_batch`` and ``to_dense_adj``
    (``index_put_`` with ``accumulate=True``), ``DenseSAGEConv`` with a node mask, the soft
    assignment ``s = softmax(gnn_pool(x, adj))``, ``x' = s^T x``, ``adj' = s^T adj s``, the link
    prediction loss ``||adj - s s^T||_F / numel`` and the entropy loss, two pooling levels."""
    nn, F = torch.nn, torch.nn.functional
    sizes = [6, 8, 5]
    ei, b = _batched_edges(81, sizes)
    edge_index, batch = torch.tensor(ei), torch.tensor(b)
    B = len(sizes)
    x_flat = torch.tensor(arr(82, len(b), 5))
    y = torch.tensor(np.array([1, 0, 1]))

    def to_dense_batch(x, batch):
        num_nodes = torch.bincount(batch, minlength=B)
        ptr = torch.cat([num_nodes.new_zeros(1), num_nodes.cumsum(0)])
        pos = torch.arange(batch.numel()) - ptr[batch]
        out = x.new_zeros(B, int(num_nodes.max()), x.size(-1))
        out[batch, pos] = x
        mask = torch.zeros(B, int(num_nodes.max()), dtype=torch.bool)
        mask[batch, pos] = True
        return out, mask, pos

    def to_dense_adj(edge_index, batch, pos, max_num_nodes):
        adj = torch.zeros(B, max_num_nodes, max_num_nodes)
        src, dst = edge_index
        ones = torch.ones(src.numel())
        adj.index_put_((batch[src], pos[src], pos[dst]), ones, accumulate=True)
        return adj

    class DenseSAGEConv(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin_rel = nn.Linear(in_channels, out_channels, bias=False)
            self.lin_root = nn.Linear(in_channels, out_channels)

        def forward(self, x, adj, mask=None):
            out = torch.matmul(adj, x)
            out = out / adj.sum(dim=-1, keepdim=True).clamp(min=1)
            out = self.lin_rel(out) + self.lin_root(x)
            if mask is not None:
                out = out * mask.view(x.size(0), x.size(1), 1).to(x.dtype)
            return out

    def dense_diff_pool(x, adj, s, mask=None):
        batch_size, num_nodes, _ = x.size()
        s = torch.softmax(s, dim=-1)
        if mask is not None:
            mask = mask.view(batch_size, num_nodes, 1).to(x.dtype)
            x, s = x * mask, s * mask
        out = torch.matmul(s.transpose(1, 2), x)
        out_adj = torch.matmul(torch.matmul(s.transpose(1, 2), adj), s)
        link_loss = adj - torch.matmul(s, s.transpose(1, 2))
        link_loss = torch.norm(link_loss, p=2) / adj.numel()
        ent_loss = (-s * torch.log(s + 1e-15)).sum(dim=-1).mean()
        return out, out_adj, link_loss, ent_loss

    class DiffPool(nn.Module):
        def __init__(self):
            super().__init__()
            self.gnn1_pool = DenseSAGEConv(5, 4)
            self.gnn1_embed = DenseSAGEConv(5, 8)
            self.gnn2_pool = DenseSAGEConv(8, 2)
            self.gnn2_embed = DenseSAGEConv(8, 8)
            self.gnn3_embed = DenseSAGEConv(8, 8)
            self.lin = nn.Linear(8, 2)

        def forward(self, x, adj, mask):
            s = self.gnn1_pool(x, adj, mask)
            x = F.relu(self.gnn1_embed(x, adj, mask))
            x, adj, l1, e1 = dense_diff_pool(x, adj, s, mask)
            s = self.gnn2_pool(x, adj)
            x = F.relu(self.gnn2_embed(x, adj))
            x, adj, l2, e2 = dense_diff_pool(x, adj, s)
            x = self.gnn3_embed(x, adj)
            x = x.mean(dim=1)
            return F.log_softmax(self.lin(x), dim=-1), l1 + l2, e1 + e2, adj

    x, mask, pos = to_dense_batch(x_flat, batch)
    adj = to_dense_adj(edge_index, batch, pos, x.size(1))
    model = set_weights(torch, DiffPool(), seed=83)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, aux = [], []
    for _ in range(4):
        optimizer.zero_grad()
        out, link_loss, ent_loss, pooled_adj = model(x, adj, mask)
        loss = F.nll_loss(out, y) + link_loss + ent_loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        aux.append([link_loss.item(), ent_loss.item()])
    return {"adj": adj, "mask": mask, "degree": adj.sum(-1), "losses": losses, "aux": aux,
            "pooled_adj": pooled_adj, "grads": grads(model)}  # fmt: skip


@program
def vgae_link_prediction_negative_edges_bce(torch):
    """(V)GAE link prediction: a train/test edge split by NumPy permutation, negative edges from
    NumPy candidates filtered with ``torch.isin`` on linear ids (no self loops, no positives), a GCN
    encoder with ``mu``/``logstd`` heads, the reparameterisation with fixed noise, the inner product
    decoder, ``binary_cross_entropy_with_logits`` + the KL term, ROC-AUC by ranks, Hits@K and
    ``decode_all`` with ``nonzero``."""
    nn, F = torch.nn, torch.nn.functional
    N = 16
    und = _edges(91, N, 24)
    und = np.unique(np.sort(und, axis=0), axis=1)
    perm = np.random.default_rng(92).permutation(und.shape[1])
    n_test = 4
    test_pos = torch.tensor(und[:, perm[:n_test]])
    train_pos = torch.tensor(und[:, perm[n_test:]])
    edge_index = torch.cat([train_pos, train_pos.flip(0)], dim=1)  # message-passing graph

    def negative_sampling(pos, num, seed):
        cand = np.random.default_rng(seed).integers(0, N, (2, 4 * num))
        cand = torch.tensor(cand)
        lin = cand[0] * N + cand[1]
        pos_lin = torch.cat([pos[0] * N + pos[1], pos[1] * N + pos[0]])
        keep = ~torch.isin(lin, pos_lin) & (cand[0] != cand[1])
        return cand[:, keep][:, :num]

    all_pos = torch.tensor(und)
    x = torch.tensor(arr(93, N, 6))
    row, col = torch.cat([edge_index, torch.arange(N).repeat(2, 1)], dim=1)
    deg = torch.zeros(N).index_add_(0, col, torch.ones(col.numel()))
    norm = deg.rsqrt()[row] * deg.rsqrt()[col]

    def propagate(h):
        return torch.zeros_like(h).index_add_(0, col, norm.unsqueeze(-1) * h[row])

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Linear(6, 12)
            self.conv_mu = nn.Linear(12, 4)
            self.conv_logstd = nn.Linear(12, 4)

        def forward(self, x):
            h = propagate(self.conv1(x)).relu()
            return propagate(self.conv_mu(h)), propagate(self.conv_logstd(h))

    model = set_weights(torch, Encoder(), seed=94)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    noise = [torch.tensor(arr(95 + s, N, 4)) for s in range(5)]

    def decode(z, ei):
        return (z[ei[0]] * z[ei[1]]).sum(dim=-1)

    losses = []
    for epoch in range(5):
        model.train()
        optimizer.zero_grad()
        mu, logstd = model(x)
        logstd = logstd.clamp(max=10)
        z = mu + noise[epoch] * torch.exp(logstd)
        neg = negative_sampling(all_pos, train_pos.size(1), seed=100 + epoch)
        logits = torch.cat([decode(z, train_pos), decode(z, neg)])
        labels = torch.cat([torch.ones(train_pos.size(1)), torch.zeros(neg.size(1))])
        recon = F.binary_cross_entropy_with_logits(logits, labels)
        kl = -0.5 / N * torch.mean(torch.sum(1 + 2 * logstd - mu**2 - logstd.exp() ** 2, dim=1))
        loss = recon + kl
        loss.backward()
        optimizer.step()
        losses.append([recon.item(), kl.item()])
    model.eval()
    with torch.no_grad():
        z, _ = model(x)
        test_neg = negative_sampling(all_pos, 8, seed=200)
        scores = torch.cat([decode(z, test_pos), decode(z, test_neg)]).sigmoid()
        y_true = torch.cat([torch.ones(test_pos.size(1)), torch.zeros(test_neg.size(1))])
        ranks = scores.argsort().argsort().float() + 1
        n_pos, n_neg = y_true.sum(), (1 - y_true).sum()
        auc = (ranks[y_true.bool()].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
        kth = torch.topk(scores[n_test:], 3).values[-1]
        hits = (scores[:n_test] > kth).float().mean()
        prob_adj = torch.sigmoid(z @ z.t())
        pred_edges = (prob_adj > 0.565).nonzero(as_tuple=False).t()
    return {"train_pos": train_pos, "test_neg": test_neg, "losses": losses, "scores": scores,
            "auc": auc, "hits@3": hits, "pred_edges": pred_edges,
            "grads": grads(model)}  # fmt: skip


@program
def label_propagation_correct_smooth_appnp(torch):
    """Semi-supervised node classification without a deep GNN: PyG's LabelPropagation
    (``alpha * A_hat @ Y + (1 - alpha) * Y0``, ``clamp_(0, 1)``), Correct & Smooth on an MLP's
    softmax (the autoscaled error correction with ``scale[isinf | > 1000] = 1``, then smoothing
    with the training labels clamped), and APPNP's personalised-PageRank propagation trained a few
    steps."""
    nn, F = torch.nn, torch.nn.functional
    N, C = 18, 3
    ei = torch.tensor(_edges(101, N, 30))
    edge_index = torch.cat([ei, ei.flip(0)], dim=1)
    edge_index = torch.unique(edge_index, dim=1)
    row, col = edge_index
    deg = torch.zeros(N).index_add_(0, col, torch.ones(col.numel()))
    dinv = deg.pow(-0.5)
    dinv[dinv == float("inf")] = 0
    norm_dad = dinv[row] * dinv[col]
    norm_da = deg.pow(-1.0).masked_fill(deg == 0, 0)[col]  # row-normalised, "DA"
    x = torch.tensor(arr(102, N, 5))
    y = torch.tensor(ints(103, C, N))
    train_idx = torch.tensor([0, 1, 4, 6, 9, 13])
    test_mask = torch.ones(N, dtype=torch.bool)
    test_mask[train_idx] = False

    def propagate(h, norm):
        return torch.zeros_like(h).index_add_(0, col, norm.view(-1, 1) * h[row])

    def label_propagation(y_init, mask, num_layers, alpha, norm, post_step=None):
        out = torch.zeros_like(y_init)
        out[mask] = y_init[mask]
        res = (1 - alpha) * out
        for _ in range(num_layers):
            out = alpha * propagate(out, norm) + res
            out = post_step(out) if post_step is not None else out.clamp_(0.0, 1.0)
        return out

    y_onehot = F.one_hot(y, C).to(torch.float)
    lp = label_propagation(y_onehot, train_idx, 10, 0.9, norm_dad)
    lp_acc = (lp.argmax(-1) == y)[test_mask].float().mean()

    mlp = set_weights(torch, nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, C)), seed=104)
    optimizer = torch.optim.Adam(mlp.parameters(), lr=0.05)
    mlp_losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = F.cross_entropy(mlp(x)[train_idx], y[train_idx])
        loss.backward()
        optimizer.step()
        mlp_losses.append(loss.item())
    with torch.no_grad():
        y_soft = mlp(x).softmax(dim=-1)
        numel = train_idx.numel()
        train_mask = ~test_mask
        error = torch.where(train_mask.unsqueeze(-1), y_onehot - y_soft, 0.0)
        error_repr = repr(error[:4].round(decimals=3))
        smoothed = label_propagation(error, train_idx, 8, 0.8, norm_dad,
                                     post_step=lambda t: t.clamp_(-1.0, 1.0))  # fmt: skip
        sigma = error[train_idx].abs().sum() / numel
        scale = sigma / smoothed.abs().sum(dim=1, keepdim=True)
        scale[scale.isinf() | (scale > 1000)] = 1.0
        corrected = y_soft + scale * smoothed
        guess = corrected.clone()
        guess[train_idx] = y_onehot[train_idx]
        smoothed_final = label_propagation(guess, torch.ones(N, dtype=torch.bool), 8, 0.8, norm_da)

    class APPNP(nn.Module):
        def __init__(self, K=5, alpha=0.1):
            super().__init__()
            self.lin1, self.lin2 = nn.Linear(5, 16), nn.Linear(16, C)
            self.K, self.alpha = K, alpha

        def forward(self, x):
            h = self.lin2(F.relu(self.lin1(x)))
            h0 = h
            for _ in range(self.K):
                h = (1 - self.alpha) * propagate(h, norm_dad) + self.alpha * h0
            return F.log_softmax(h, dim=1)

    appnp = set_weights(torch, APPNP(), seed=105)
    optimizer = torch.optim.Adam(appnp.parameters(), lr=0.01, weight_decay=5e-3)
    appnp_losses = []
    for _ in range(4):
        optimizer.zero_grad()
        loss = F.nll_loss(appnp(x)[train_idx], y[train_idx])
        loss.backward()
        optimizer.step()
        appnp_losses.append(loss.item())
    return {"edge_index": edge_index, "lp": lp, "lp_acc": lp_acc, "mlp_losses": mlp_losses,
            "error_repr": error_repr, "scale": scale, "corrected": corrected, "smoothed": smoothed_final,
            "cs_pred": smoothed_final.argmax(-1), "appnp_losses": appnp_losses,
            "appnp_grads": grads(appnp)}  # fmt: skip


@program
def graph_transformer_adjacency_mask_spd_bias(torch):
    """A graph transformer on padded batches: random-walk positional encodings (the diagonals of
    ``(D^-1 A)^k``), Graphormer's degree embedding and shortest-path bias (Floyd-Warshall with
    ``torch.minimum`` and an ``nn.Embedding`` of distances per head), attention masked by the
    adjacency with self loops (``masked_fill(-inf)`` before ``softmax``), the same mask fed to
    ``F.scaled_dot_product_attention``, masked mean pooling, AdamW with ``clip_grad_norm_``."""
    nn, F = torch.nn, torch.nn.functional
    sizes, H, D, K_PE, MAX_D = [6, 8], 2, 8, 3, 4
    ei, b = _batched_edges(111, sizes)
    B, L = len(sizes), max(sizes)
    ei = np.concatenate([ei, ei[::-1]], axis=1)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pos = np.arange(len(b)) - offsets[b]
    adj = torch.zeros(B, L, L, dtype=torch.bool)
    adj[torch.tensor(b[ei[0]]), torch.tensor(pos[ei[0]]), torch.tensor(pos[ei[1]])] = True
    node_mask = torch.arange(L).unsqueeze(0) < torch.tensor(sizes).unsqueeze(1)
    x = torch.zeros(B, L, 4)
    x[torch.tensor(b), torch.tensor(pos)] = torch.tensor(arr(112, len(b), 4))
    y = torch.tensor(np.array([1.0, -0.5], dtype=np.float32))

    a = adj.float()
    deg = a.sum(-1)
    P = a / deg.clamp(min=1).unsqueeze(-1)
    rw, Pk = [], P
    for _ in range(K_PE):
        rw.append(torch.diagonal(Pk, dim1=-2, dim2=-1))
        Pk = Pk @ P
    rwpe = torch.stack(rw, dim=-1)

    dist = torch.full((B, L, L), float("inf"))
    dist[adj] = 1.0
    dist[:, torch.arange(L), torch.arange(L)] = 0.0
    for k in range(L):
        dist = torch.minimum(dist, dist[:, :, k : k + 1] + dist[:, k : k + 1, :])
    spd = torch.where(torch.isinf(dist), torch.full_like(dist, MAX_D + 1), dist.clamp(max=MAX_D))
    spd = spd.long()
    attn_mask = adj | torch.eye(L, dtype=torch.bool)

    class GraphAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D)
            self.out = nn.Linear(D, D)
            self.spatial = nn.Embedding(MAX_D + 2, H)

        def forward(self, h, spd, mask):
            q, k, v = self.qkv(h).view(B, L, 3, H, D // H).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
            scores = scores + self.spatial(spd).permute(0, 3, 1, 2)
            scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
            attn = scores.softmax(dim=-1)
            out = (attn @ v).transpose(1, 2).reshape(B, L, D)
            return self.out(out), attn

    class GraphTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(4 + K_PE, D)
            self.degree = nn.Embedding(L, D)
            self.attn = GraphAttention()
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.ffn = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
            self.head = nn.Linear(D, 1)

        def forward(self, x, rwpe, deg, spd, mask):
            h = self.inp(torch.cat([x, rwpe], dim=-1)) + self.degree(deg.long())
            a, attn = self.attn(self.norm1(h), spd, mask)
            h = h + a
            h = h + self.ffn(self.norm2(h))
            m = node_mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1)
            return self.head(pooled).squeeze(-1), attn

    model = set_weights(torch, GraphTransformer(), seed=113)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    losses, norms = [], []
    for _ in range(3):
        optimizer.zero_grad()
        pred, attn = model(x, rwpe, deg, spd, attn_mask)
        loss = F.smooth_l1_loss(pred, y)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)))
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():
        q = torch.tensor(arr(114, B, H, L, 4))
        sdpa = F.scaled_dot_product_attention(q, q, q, attn_mask=attn_mask.unsqueeze(1))
        manual = (q @ q.transpose(-2, -1) / 2.0).masked_fill(~attn_mask.unsqueeze(1), float("-inf"))
        manual = manual.softmax(-1) @ q
    return {"rwpe": rwpe, "spd": spd, "deg": deg, "losses": losses, "grad_norms": norms,
            "attn": attn, "attn_zero_off_graph": bool((attn[~attn_mask.unsqueeze(1).expand_as(attn)] == 0).all()),
            "sdpa": sdpa, "sdpa_matches": torch.allclose(sdpa, manual, atol=1e-5),
            "grads": grads(model)}  # fmt: skip


@program
def topk_sagpool_hierarchical_readout(torch):
    """Hierarchical pooling (Cangea et al.; SAGPool): PyG's ``topk`` selection per graph (``sort``
    the scores descending, then a *stable* ``sort`` of the batch vector, a batched ``arange`` minus
    ``ptr`` and ``k = ceil(ratio * n)``), ``filter_adj`` re-indexing edges through a ``-1``-filled
    map, TopKPooling's ``tanh(x . w / ||w||)`` gate, SAGPooling's GNN score, and the sum of
    ``[gmp || gap]`` readouts after each pooling."""
    nn, F = torch.nn, torch.nn.functional
    sizes = [7, 9, 6, 8]
    ei, b = _batched_edges(121, sizes, per_node=2)
    ei = np.concatenate([ei, ei[::-1]], axis=1)
    edge_index, batch = torch.tensor(ei), torch.tensor(b)
    B = len(sizes)
    x = torch.tensor(arr(122, len(b), 5))
    y = torch.tensor(np.array([0, 1, 0, 1]))

    def topk(score, ratio, batch):
        num_nodes = torch.zeros(B, dtype=torch.long).scatter_add_(0, batch, torch.ones_like(batch))
        k = (float(ratio) * num_nodes.to(score.dtype)).ceil().to(torch.long)
        score, x_perm = torch.sort(score.view(-1), descending=True)
        batch = batch[x_perm]
        batch, batch_perm = torch.sort(batch, descending=False, stable=True)
        arange = torch.arange(score.size(0), dtype=torch.long)
        ptr = torch.cat([num_nodes.new_zeros(1), num_nodes.cumsum(0)])
        batched_arange = arange - ptr[batch]
        mask = batched_arange < k[batch]
        return x_perm[batch_perm[mask]]

    def filter_adj(edge_index, perm, num_nodes):
        mask = perm.new_full((num_nodes,), -1)
        mask[perm] = torch.arange(perm.size(0), dtype=torch.long)
        row, col = mask[edge_index[0]], mask[edge_index[1]]
        keep = (row >= 0) & (col >= 0)
        return torch.stack([row[keep], col[keep]], dim=0)

    class GraphConv(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin_rel = nn.Linear(in_channels, out_channels)
            self.lin_root = nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x, edge_index):
            aggr = torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]])
            return self.lin_rel(aggr) + self.lin_root(x)

    class TopKPooling(nn.Module):
        def __init__(self, in_channels, ratio):
            super().__init__()
            self.ratio = ratio
            self.weight = nn.Parameter(torch.empty(1, in_channels))

        def forward(self, x, edge_index, batch):
            score = (x * self.weight).sum(dim=-1)
            score = torch.tanh(score / self.weight.norm(p=2, dim=-1))
            perm = topk(score, self.ratio, batch)
            x = x[perm] * score[perm].view(-1, 1)
            return x, filter_adj(edge_index, perm, score.size(0)), batch[perm], perm

    class SAGPooling(nn.Module):
        def __init__(self, in_channels, ratio):
            super().__init__()
            self.ratio, self.gnn = ratio, GraphConv(in_channels, 1)

        def forward(self, x, edge_index, batch):
            score = torch.tanh(self.gnn(x, edge_index).view(-1))
            perm = topk(score, self.ratio, batch)
            x = x[perm] * score[perm].view(-1, 1)
            return x, filter_adj(edge_index, perm, score.size(0)), batch[perm], perm

    def readout(x, batch):
        gmp = x.new_zeros(B, x.size(1)).scatter_reduce(0, batch.view(-1, 1).expand_as(x), x,
                                                       "amax", include_self=False)  # fmt: skip
        cnt = torch.bincount(batch, minlength=B).clamp(min=1).view(-1, 1)
        gap = x.new_zeros(B, x.size(1)).index_add_(0, batch, x) / cnt
        return torch.cat([gmp, gap], dim=1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.pool1 = GraphConv(5, 8), TopKPooling(8, ratio=0.8)
            self.conv2, self.pool2 = GraphConv(8, 8), SAGPooling(8, ratio=0.5)
            self.lin = nn.Linear(16, 2)

        def forward(self, x, edge_index, batch):
            x = F.relu(self.conv1(x, edge_index))
            x, edge_index, batch, self.perm1 = self.pool1(x, edge_index, batch)
            x1 = readout(x, batch)
            x = F.relu(self.conv2(x, edge_index))
            x, edge_index, batch, self.perm2 = self.pool2(x, edge_index, batch)
            x2 = readout(x, batch)
            self.kept = (edge_index, batch)
            return F.log_softmax(self.lin(x1 + x2), dim=-1)

    model = set_weights(torch, Net(), seed=123)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        out = model(x, edge_index, batch)
        loss = F.nll_loss(out, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "out": out, "perm1": model.perm1, "perm2": model.perm2,
            "pooled_edges": model.kept[0], "pooled_batch": model.kept[1],
            "grads": grads(model)}  # fmt: skip


@program
def pna_multi_aggregators_degree_scalers_graphnorm(torch):
    """PNA (Corso et al.): mean/min/max/std aggregators (``scatter_reduce`` amin/amax with
    ``include_self=False``, std as ``sqrt(relu(E[x^2] - E[x]^2) + 1e-5)``), the identity /
    amplification / attenuation scalers from ``log(deg + 1)`` normalised by the training degree
    histogram's average, edge features in the pre-tower, GraphNorm per graph, ``global_add_pool``
    and an L1 regression."""
    nn, F = torch.nn, torch.nn.functional
    sizes = [6, 8, 5]
    ei, b = _batched_edges(131, sizes, per_node=2)
    edge_index, batch = torch.tensor(ei), torch.tensor(b)
    N, E, B = len(b), ei.shape[1], len(sizes)
    x = torch.tensor(arr(132, N, 4))
    edge_attr = torch.tensor(arr(133, E, 2))
    y = torch.tensor(arr(134, B))
    in_deg = torch.bincount(edge_index[1], minlength=N)
    deg_hist = torch.bincount(in_deg, minlength=int(in_deg.max()) + 1)
    bins = torch.arange(deg_hist.numel(), dtype=torch.float)
    avg_deg_log = ((bins + 1).log() * deg_hist).sum() / deg_hist.sum()

    class PNAConv(nn.Module):
        def __init__(self, in_channels, out_channels, edge_dim):
            super().__init__()
            self.pre = nn.Linear(3 * in_channels, in_channels)
            self.edge_encoder = nn.Linear(edge_dim, in_channels)
            self.post = nn.Linear((4 * 3 + 1) * in_channels, out_channels)

        def forward(self, x, edge_index, edge_attr):
            src, dst = edge_index
            n = x.size(0)
            h = self.pre(torch.cat([x[dst], x[src], self.edge_encoder(edge_attr)], dim=-1))
            mean = _scatter(torch, h, dst, n, "mean")
            mean_sq = _scatter(torch, h * h, dst, n, "mean")
            std = torch.sqrt(torch.relu(mean_sq - mean * mean) + 1e-5)
            out = torch.cat([mean, _scatter(torch, h, dst, n, "amin"),
                             _scatter(torch, h, dst, n, "amax"), std], dim=-1)  # fmt: skip
            deg = torch.bincount(dst, minlength=n).clamp(min=1).to(x.dtype).view(-1, 1)
            log_deg = torch.log(deg + 1)
            out = torch.cat([out, out * (log_deg / avg_deg_log), out * (avg_deg_log / log_deg)], -1)
            return self.post(torch.cat([x, out], dim=-1))

    class GraphNorm(nn.Module):
        def __init__(self, channels, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(channels))
            self.bias = nn.Parameter(torch.zeros(channels))
            self.mean_scale = nn.Parameter(torch.ones(channels))
            self.eps = eps

        def forward(self, x, batch):
            mean = _scatter(torch, x, batch, B, "mean")
            out = x - mean.index_select(0, batch) * self.mean_scale
            var = _scatter(torch, out.pow(2), batch, B, "mean")
            std = (var + self.eps).sqrt().index_select(0, batch)
            return self.weight * out / std + self.bias

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([PNAConv(4, 8, 2), PNAConv(8, 8, 2)])
            self.norms = nn.ModuleList([GraphNorm(8), GraphNorm(8)])
            self.mlp = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, x, edge_index, edge_attr, batch):
            for conv, norm in zip(self.convs, self.norms):
                x = F.relu(norm(conv(x, edge_index, edge_attr), batch))
            pooled = torch.zeros(B, x.size(1)).index_add_(0, batch, x)
            return self.mlp(pooled).squeeze(-1)

    model = Net()
    set_weights(torch, model, seed=135)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        loss = (model(x, edge_index, edge_attr, batch) - y).abs().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"deg_hist": deg_hist, "avg_deg_log": avg_deg_log, "losses": losses,
            "grads": grads(model), "params": params(model)}  # fmt: skip


@program
def hetero_sage_moduledict_heteroconv(torch):
    """A heterogeneous GNN the ``HeteroConv`` way: node-type and edge-type dicts, one bipartite
    SAGEConv per edge type in an ``nn.ModuleDict`` keyed ``'src__rel__dst'``, outputs summed per
    destination type with ``torch.stack(...).sum(0)``, per-type input projections
    (``nn.ModuleDict`` of Linear), dict comprehensions for the activations, and a loss on the
    labelled node type."""
    nn, F = torch.nn, torch.nn.functional
    n = {"author": 8, "paper": 11}
    writes = _edges(141, 11, 20)
    writes = np.stack([writes[0] % n["author"], writes[1]])
    writes = np.unique(writes, axis=1)
    edge_index_dict = {
        ("author", "writes", "paper"): torch.tensor(writes),
        ("paper", "rev_writes", "author"): torch.tensor(writes[::-1].copy()),
        ("paper", "cites", "paper"): torch.tensor(_edges(142, n["paper"], 18)),
    }
    x_dict = {"author": torch.tensor(arr(143, n["author"], 3)),
              "paper": torch.tensor(arr(144, n["paper"], 6))}  # fmt: skip
    y = torch.tensor(ints(145, 3, n["paper"]))

    class BipartiteSAGE(nn.Module):
        def __init__(self, in_src, in_dst, out_channels):
            super().__init__()
            self.lin_l = nn.Linear(in_src, out_channels)
            self.lin_r = nn.Linear(in_dst, out_channels, bias=False)

        def forward(self, x, edge_index):
            x_src, x_dst = x
            aggr = _scatter(torch, x_src.index_select(0, edge_index[0]), edge_index[1],
                            x_dst.size(0), reduce="mean")  # fmt: skip
            return self.lin_l(aggr) + self.lin_r(x_dst)

    class HeteroConv(nn.Module):
        def __init__(self, convs, aggr="sum"):
            super().__init__()
            self.convs = nn.ModuleDict({"__".join(k): v for k, v in convs.items()})
            self.aggr = aggr

        def forward(self, x_dict, edge_index_dict):
            out_dict = {}
            for edge_type, edge_index in edge_index_dict.items():
                src, rel, dst = edge_type
                out = self.convs["__".join(edge_type)]((x_dict[src], x_dict[dst]), edge_index)
                out_dict.setdefault(dst, []).append(out)
            for key, value in out_dict.items():
                stacked = torch.stack(value, dim=0)
                out_dict[key] = stacked.sum(dim=0) if self.aggr == "sum" else stacked.max(0)[0]
            return out_dict

    class HeteroGNN(nn.Module):
        def __init__(self, hidden, out_channels):
            super().__init__()
            self.proj = nn.ModuleDict({"author": nn.Linear(3, hidden),
                                       "paper": nn.Linear(6, hidden)})  # fmt: skip
            self.convs = nn.ModuleList()
            for aggr in ("sum", "max"):
                self.convs.append(HeteroConv({et: BipartiteSAGE(hidden, hidden, hidden)
                                              for et in edge_index_dict}, aggr=aggr))  # fmt: skip
            self.lin = nn.Linear(hidden, out_channels)

        def forward(self, x_dict, edge_index_dict):
            x_dict = {key: self.proj[key](x) for key, x in x_dict.items()}
            for conv in self.convs:
                x_dict = conv(x_dict, edge_index_dict)
                x_dict = {key: F.leaky_relu(x) for key, x in x_dict.items()}
            return self.lin(x_dict["paper"])

    model = set_weights(torch, HeteroGNN(8, 3), seed=146)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.001)
    mask = torch.arange(n["paper"]) < 8
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        out = model(x_dict, edge_index_dict)
        loss = F.cross_entropy(out[mask], y[mask])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    pred = out.argmax(dim=-1)
    return {"losses": losses, "out": out, "test_acc": (pred[~mask] == y[~mask]).sum().item(),
            "conv_keys": ",".join(model.convs[0].convs.keys()),
            "num_params": sum(p.numel() for p in model.parameters()),
            "grads": grads(model)}  # fmt: skip


@program
def chebconv_and_sgc_lbfgs(torch):
    """Spectral filters: ChebConv (Defferrard et al.) with the scaled Laplacian
    ``2 L / lambda_max - I`` (``lambda_max = 2``: off-diagonal ``-D^-1/2 A D^-1/2``) and the
    recursion ``T_k = 2 L_hat T_{k-1} - T_{k-2}``, trained with Adam; SGC's precomputed
    ``S^K X`` (``K = 2``, self loops) and a logistic regression fitted with L-BFGS and a closure."""
    nn, F = torch.nn, torch.nn.functional
    N, C = 16, 3
    ei = torch.tensor(_edges(151, N, 24))
    edge_index = torch.unique(torch.cat([ei, ei.flip(0)], dim=1), dim=1)
    row, col = edge_index
    x = torch.tensor(arr(152, N, 5))
    y = torch.tensor(ints(153, C, N))
    train = torch.arange(N) % 4 != 3

    deg = torch.zeros(N).scatter_add_(0, row, torch.ones(row.numel()))
    dinv = deg.pow(-0.5).masked_fill(deg == 0, 0.0)
    lap_w = -dinv[row] * dinv[col]

    def prop(h, w, r=row, c=col):
        return torch.zeros_like(h).index_add_(0, c, w.view(-1, 1) * h.index_select(0, r))

    class ChebConv(nn.Module):
        def __init__(self, in_channels, out_channels, K):
            super().__init__()
            self.lins = nn.ModuleList([nn.Linear(in_channels, out_channels, bias=False)
                                       for _ in range(K)])  # fmt: skip
            self.bias = nn.Parameter(torch.empty(out_channels))

        def forward(self, x):
            Tx_0 = x
            out = self.lins[0](Tx_0)
            if len(self.lins) > 1:
                Tx_1 = prop(x, lap_w)
                out = out + self.lins[1](Tx_1)
            for lin in self.lins[2:]:
                Tx_2 = 2.0 * prop(Tx_1, lap_w) - Tx_0
                out = out + lin.forward(Tx_2)
                Tx_0, Tx_1 = Tx_1, Tx_2
            return out + self.bias

    cheb = set_weights(torch, nn.ModuleList([ChebConv(5, 8, K=3), ChebConv(8, C, K=3)]), seed=154)
    optimizer = torch.optim.Adam(cheb.parameters(), lr=0.01, weight_decay=5e-4)
    cheb_losses = []
    for _ in range(4):
        optimizer.zero_grad()
        out = cheb[1](F.relu(cheb[0](x)))
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        optimizer.step()
        cheb_losses.append(loss.item())

    loops = torch.arange(N)
    r2, c2 = torch.cat([row, loops]), torch.cat([col, loops])
    d2 = torch.zeros(N).index_add_(0, c2, torch.ones(c2.numel()))
    w2 = d2[r2].rsqrt() * d2[c2].rsqrt()
    features = x
    for _ in range(2):
        features = prop(features, w2, r2, c2)
    sgc = set_weights(torch, nn.Linear(5, C), seed=155)
    lbfgs = torch.optim.LBFGS(sgc.parameters(), lr=1, max_iter=8, history_size=5)
    closures = []

    def closure():
        lbfgs.zero_grad()
        loss = F.cross_entropy(sgc(features[train]), y[train]) + 1e-3 * sgc.weight.pow(2).sum()
        loss.backward()
        closures.append(loss.item())
        return loss

    for _ in range(2):
        lbfgs.step(closure)
    with torch.no_grad():
        sgc_acc = (sgc(features).argmax(1) == y)[~train].float().mean()
    return {"lap_w": lap_w, "cheb_losses": cheb_losses, "cheb_out": out, "features": features,
            "closures": closures, "sgc_weight": sgc.weight, "sgc_acc": sgc_acc,
            "cheb_grads": grads(cheb)}  # fmt: skip


@program
def pygcn_sparse_adjacency_spmm_and_sparse_degrees(torch):
    """Kipf's pygcn as its repository writes it: a row-normalised ``A + I`` turned into
    ``torch.sparse.FloatTensor(indices, values, torch.Size(shape))``, ``GraphConvolution`` with
    ``support = torch.mm(input, self.weight)`` and ``output = torch.spmm(adj, support)``, Adam with
    weight decay and ``nll_loss`` on ``log_softmax``; then an edge list as
    ``torch.sparse_coo_tensor`` with duplicates, ``coalesce()``, degrees from
    ``torch.sparse.sum(A, dim=1).to_dense()`` and symmetric propagation with ``A.t() @ x``."""
    nn, F = torch.nn, torch.nn.functional
    N, C = 9, 3
    ei = _edges(160, N, 20)
    a = np.zeros((N, N), np.float32)
    a[ei[0], ei[1]] = 1.0
    a = np.maximum(a, a.T) + np.eye(N, dtype=np.float32)
    a = a / a.sum(1, keepdims=True)  # pygcn's normalize(): D^-1 (A + I)
    rows, cols = np.nonzero(a)
    indices = torch.from_numpy(np.vstack((rows, cols)).astype(np.int64))
    values = torch.from_numpy(a[rows, cols])
    adj = torch.sparse.FloatTensor(indices, values, torch.Size(a.shape))

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weight = nn.Parameter(torch.FloatTensor(in_features, out_features))
            self.bias = nn.Parameter(torch.FloatTensor(out_features))

        def forward(self, input, adj):
            support = torch.mm(input, self.weight)
            return torch.spmm(adj, support) + self.bias

    class GCN(nn.Module):
        def __init__(self, nfeat, nhid, nclass):
            super().__init__()
            self.gc1 = GraphConvolution(nfeat, nhid)
            self.gc2 = GraphConvolution(nhid, nclass)

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            return F.log_softmax(self.gc2(x, adj), dim=1)

    model = set_weights(torch, GCN(4, 6, C), seed=161)
    features = torch.tensor(arr(162, N, 4))
    labels = torch.tensor(ints(163, C, N))
    idx_train = torch.LongTensor(range(5))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        losses.append(loss_train.item())
    dup = np.concatenate([ei, ei[:, :4]], axis=1)  # four edges listed twice
    A = torch.sparse_coo_tensor(torch.from_numpy(dup), torch.ones(dup.shape[1]), (N, N))
    Ac = A.coalesce()
    deg = torch.sparse.sum(Ac, dim=1).to_dense()
    x = torch.tensor(arr(164, N, 2), requires_grad=True)
    h = (A.t() @ x) / deg.clamp(min=1).unsqueeze(1)
    h.pow(2).sum().backward()
    return {"losses": losses, "output": output, "grads": grads(model), "nnz": [A._nnz(), Ac._nnz()],
            "indices": Ac.indices(), "values": Ac.values(), "deg": deg, "h": h, "x_grad": x.grad,
            "dense": adj.to_dense(), "is_sparse": [adj.is_sparse, features.is_sparse]}  # fmt: skip


@program
def csr_gcn_normalised_adjacency_training(torch):
    """A GCN whose normalised adjacency ``D^-1/2 (A + I) D^-1/2`` is a CSR matrix, as newer graph
    code keeps it (``dense.to_sparse_csr()``, ``torch.sparse.mm``, ``adj @ h``), trained with Adam;
    then the CSR parts, its COO form and the dense product it stands for."""
    nn, F = torch.nn, torch.nn.functional
    N, C = 9, 3
    src, dst = _edges(171, N, 14)
    a = np.zeros((N, N), np.float32)
    a[src, dst] = 1.0
    a = np.maximum(a, a.T) + np.eye(N, dtype=np.float32)
    dense = torch.tensor(a)
    deg = dense.sum(1)
    norm = deg.rsqrt().unsqueeze(1) * dense * deg.rsqrt().unsqueeze(0)
    adj = norm.to_sparse_csr()
    lin1 = set_weights(torch, nn.Linear(4, 8), seed=172)
    lin2 = set_weights(torch, nn.Linear(8, C), seed=173)
    x = torch.tensor(arr(174, N, 4))
    y = torch.tensor(ints(175, C, N))
    opt = torch.optim.Adam([*lin1.parameters(), *lin2.parameters()], lr=0.05)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        h = F.relu(torch.sparse.mm(adj, lin1(x)))
        out = adj @ lin2(h)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    coo = adj.to_sparse_coo()
    return {"losses": losses, "out": out, "crow": adj.crow_indices(), "col": adj.col_indices(),
            "values": adj.values(), "nnz": adj._nnz(), "coo_indices": coo.indices(),
            "dense_back": adj.to_dense(), "w1": lin1.weight, "vector": adj @ deg,
            "layout": str(adj.layout).split(".")[-1]}  # fmt: skip


@program
def csr_pagerank_power_iteration_and_learned_edge_weights(torch):
    """PageRank by power iteration over a column-stochastic CSR matrix built from offsets
    (``torch.sparse_csr_tensor(crow, col, values, size)``), then edge weights that require grad
    inside a CSR matrix, fitted so that one propagation step matches a target."""
    N = 8
    src, dst = _edges(181, N, 16)
    order = np.lexsort((src, dst))  # rows of the transition matrix are destinations
    rows, cols = dst[order], src[order]
    out_deg = np.bincount(src, minlength=N).astype(np.float32)
    vals = 1.0 / np.maximum(out_deg[cols], 1.0)
    crow = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=N))]).astype(np.int64)
    P = torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(cols), torch.tensor(vals),
                                size=(N, N))  # fmt: skip
    r = torch.full((N,), 1.0 / N)
    d = 0.85
    history = []
    for _ in range(20):
        r = (1 - d) / N + d * (P @ r)
        history.append(r.sum().item())
    w = torch.tensor(vals.copy(), requires_grad=True)
    target = torch.tensor(arr(182, N, 2))
    feats = torch.tensor(arr(183, N, 2))
    opt = torch.optim.SGD([w], lr=0.2)
    fit = []
    for _ in range(5):
        opt.zero_grad()
        A = torch.sparse_csr_tensor(torch.tensor(crow), torch.tensor(cols), w, size=(N, N))
        loss = ((A @ feats - target) ** 2).mean()
        loss.backward()
        opt.step()
        fit.append(loss.item())
    return {"rank": r, "mass": history, "fit": fit, "w": w, "w_grad": w.grad,
            "top": r.argsort(descending=True)}  # fmt: skip
