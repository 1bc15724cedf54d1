"""Independent NumPy implementations of kvbench's methods, for replay cross-checks.

Written from /work/shared/spec/methods.md and rocketkv-notes.md (the official
algorithms), not from the C code: float64 arithmetic, dense tensors, every
quantity recomputed from scratch at each step, top-k by a full stable sort.
Where the official code leaves a choice open, this follows methods.md and
docs/METHODS.md (ties to the lower index, QUEST's current page always kept,
r clamped to [1, D], ...).

Trace layout (methods.md §9): k, v [L, Hkv, D]; qwin [W, Hq, D] (positions
L-W..L-1); q [N, Hq, D]; knew, vnew [N, Hkv, D] (step i at position L+i);
meta {"max_new": N_new, "S": S}.

run_method(trace, cfg) returns a dict with
  out       [N, Hq, D]     attention outputs
  selected  [N, rows, k]   slot indices into the method's decode cache, ascending, -1 padded
  kept      [rows, T] or None  positions kept by stage 1 (evicting methods)
  budget    dict of the budget parameters
  scores    list over steps of lists over rows of the ranking score per candidate slot
            (for near-tie diagnosis), or None for methods that attend every slot
  kept_scores  list over rows of (n_prefix, pooled scores) or None
"""

import json
import math
import os

import numpy as np

DEFAULT_KERNEL_TABLE = [[2048, 7], [4096, 15], [8192, 31], [2147483647, 63]]


# ---------------------------------------------------------------- traces

def make_trace(rng, L, W, N, Hq, Hkv, D, kind="random", max_new=None, S=None):
    """Random (or structured) trace arrays as float32."""
    k = rng.standard_normal((L, Hkv, D)).astype(np.float32)
    v = rng.standard_normal((L, Hkv, D)).astype(np.float32)
    qwin = (1.5 * rng.standard_normal((W, Hq, D))).astype(np.float32)
    q = (1.5 * rng.standard_normal((N, Hq, D))).astype(np.float32)
    knew = rng.standard_normal((N, Hkv, D)).astype(np.float32)
    vnew = rng.standard_normal((N, Hkv, D)).astype(np.float32)
    G = Hq // Hkv
    if kind == "needle":
        u = rng.standard_normal((Hkv, D))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        qwin += (6 * np.repeat(u, G, axis=0))[None].astype(np.float32)
        q += (6 * np.repeat(u, G, axis=0))[None].astype(np.float32)
        k[L // 3] = (4 * math.sqrt(D) * u).astype(np.float32)
    if kind == "ties":
        grid = lambda shape: (rng.integers(-2, 3, size=shape) * 0.5).astype(np.float32)
        k, v = grid((L, Hkv, D)), grid((L, Hkv, D))
        qwin, q = grid((W, Hq, D)), grid((N, Hq, D))
        knew, vnew = grid((N, Hkv, D)), grid((N, Hkv, D))
        h = L // 2
        k[h:h + h] = k[:h]
    return dict(k=k, v=v, qwin=qwin, q=q, knew=knew, vnew=vnew,
                max_new=N if max_new is None else max_new, S=L + N if S is None else S)


def save_trace(d, t):
    os.makedirs(d, exist_ok=True)
    for name in ("k", "v", "qwin", "q", "knew", "vnew"):
        np.save(os.path.join(d, name + ".npy"), np.ascontiguousarray(t[name], dtype=np.float32))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"max_new": int(t["max_new"]), "S": int(t["S"])}, f)


# ---------------------------------------------------------------- pieces

def topk(score, k):
    """Indices of the k best scores (higher first, ties to the lower index), ascending."""
    n = len(score)
    k = max(0, min(k, n))
    order = np.lexsort((np.arange(n), -np.asarray(score, dtype=np.float64)))
    return np.sort(order[:k])


def attend(q, K, V):
    """softmax(q K^T / sqrt(D)) V for one query row over the rows of K, V."""
    if len(K) == 0:
        return np.zeros(q.shape[-1])
    s = K.astype(np.float64) @ q.astype(np.float64) / math.sqrt(q.shape[-1])
    w = np.exp(s - s.max())
    w /= w.sum()
    return w @ V.astype(np.float64)


def rocket_split(S, B, N_new, D, alpha=None):
    """methods.md §1.1 (the released compress()), r clamped to [1, D]."""
    c = max(1.0, S / B)
    a = min(0.2 + 0.06 * math.log2(c), 0.8) if alpha is None else alpha
    T = int(S / c ** a)
    T = max(T, min(2 * N_new, S))
    c2 = max(1.0, T / B)
    p = math.ceil(math.sqrt(c2))
    if p > c2:
        p = 1
    r = min(D, max(1, int(D * p / c2)))
    return dict(c=c, alpha=a, T=T, prompt_budget=T - N_new, c2=c2, p=p, r=r, k=B // 2)


def pool(x, K, mode):
    n = len(x)
    h = K // 2
    out = np.empty(n)
    for j in range(n):
        win = x[max(0, j - h):min(n, j + h + 1)]
        out[j] = win.max() if mode == "max" else win.sum() / K
    return out


def snap_keep(K, pos, Qw, qpos, budget, W, kernel, pooling, agg):
    """SnapKV stage 1 on one row. K [n, D] keys (chronological), pos [n] their
    positions, Qw [Wq, nh, D] window queries of the row's heads at qpos [Wq].
    Returns (kept slot indices ascending with the window last, n_prefix, pooled)."""
    n = len(K)
    if n <= budget:
        return np.arange(n), 0, None
    Wo = min(W, len(Qw), n, budget)
    Qw, qpos = Qw[-Wo:], qpos[-Wo:]
    npre = n - Wo
    D = K.shape[1]
    acc = np.zeros(npre)
    for a in range(Qw.shape[1]):
        for i in range(Wo):
            s = K.astype(np.float64) @ Qw[i, a].astype(np.float64) / math.sqrt(D)
            vis = pos <= qpos[i]
            if not vis.any():
                continue
            s = np.where(vis, s, -np.inf)
            w = np.exp(s - s[vis].max())
            w /= w.sum()
            acc += w[:npre]
    if agg == "group_mean":
        acc /= Qw.shape[1]
    pooled = pool(acc, kernel, pooling)
    sel = topk(pooled, budget - Wo)
    return np.concatenate([sel, np.arange(npre, n)]), npre, pooled


def hybrid_scores(K, Qg, p, r):
    """methods.md §4 steps 1-7 in the released code's form: K*sign pooled by
    page max, the signed query, top-r dims of mean |q|, SparQ temperature,
    softmax over slots, mean over heads. K [n, D], Qg [nh, D].
    Returns (group score per slot [n], per-head softmax [nh, n])."""
    n, D = K.shape
    Q = Qg.astype(np.float64)
    sign = np.where(Q.sum(axis=0) > 0, 1.0, -1.0)
    Ks = K.astype(np.float64) * sign
    npg = -(-n // p)
    pad = np.full((npg * p - n, D), -np.inf)
    kmax = np.concatenate([Ks, pad]).reshape(npg, p, D).max(axis=1)
    dims = topk(np.abs(Q).mean(axis=0), r)
    Qs = Q * sign
    page = Qs[:, dims] @ kmax[:, dims].T  # [nh, npg]
    slot = np.repeat(page, p, axis=1)[:, :n]
    num = np.abs(Q[:, dims]).sum(axis=1)
    den = np.abs(Q).sum(axis=1)
    tau = np.where((num > 0) & (den > 0), np.sqrt(D * num / np.where(den > 0, den, 1)), 1.0)
    z = slot / tau[:, None]
    w = np.exp(z - z.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return w.mean(axis=0), w


def quest_scores(K, Qg, P, agg):
    n, D = K.shape
    npg = -(-n // P)
    kmax = np.array([K[i * P:(i + 1) * P].max(axis=0) for i in range(npg)], dtype=np.float64)
    kmin = np.array([K[i * P:(i + 1) * P].min(axis=0) for i in range(npg)], dtype=np.float64)
    Q = Qg.astype(np.float64)
    b = np.maximum(Q[:, None, :] * kmax[None], Q[:, None, :] * kmin[None]).sum(axis=2)  # [nh, npg]
    s = b.sum(axis=0)
    if agg == "group_mean":
        s /= len(Q)
    return s


# ---------------------------------------------------------------- methods

def defaults(cfg):
    m = cfg["method"]
    c = dict(cfg)
    c.setdefault("budget_mode", "traffic")
    if m in ("snapkv", "snapkvpp", "rocketkv", "rocketkv_mt"):
        c.setdefault("window", 32)
        c.setdefault("pooling", "max")
        c.setdefault("kernel", 7 if m == "snapkv" else 63)
    if m == "snapkv":
        c.setdefault("gqa", "per_head")
    if m == "snapkvpp":
        c.setdefault("gqa", "group_sum")
    if m in ("exact_topk", "quest"):
        c.setdefault("gqa", "per_head")
    if m in ("sparq", "hybrid"):
        c.setdefault("gqa", "group_mean")
    return c


def kernel_for(c, L):
    k = c.get("kernel")
    if k == "adaptive" or "kernel_by_length" in c:
        table = c.get("kernel_by_length", DEFAULT_KERNEL_TABLE)
        for ml, K in table:
            if L <= ml:
                return K
        return table[-1][1]
    return k


def run_method(t, cfg):
    c = defaults(cfg)
    m = c["method"]
    k_, v_, qwin, q, knew, vnew = (t[x] for x in ("k", "v", "qwin", "q", "knew", "vnew"))
    L, Hkv, D = k_.shape
    W, Hq = qwin.shape[0], qwin.shape[1]
    N = q.shape[0]
    G = Hq // Hkv
    S, N_new = t["S"], t["max_new"]
    B = c.get("budget")
    topk_mode = c["budget_mode"] == "topk"
    qpos = np.arange(L - W, L)
    per_head = c.get("gqa") == "per_head"
    bud = {}

    # the decode cache: per storage row, a list of (position, k, v)
    def fresh_rows(nrows):
        return [dict(pos=np.arange(L), K=k_[:, (r // G if nrows == Hq else r)].astype(np.float64),
                     V=v_[:, (r // G if nrows == Hq else r)].astype(np.float64)) for r in range(nrows)]

    kept = None
    kept_scores = None
    if m in ("snapkv", "snapkvpp", "rocketkv", "rocketkv_mt"):
        if m in ("rocketkv", "rocketkv_mt"):
            a = c.get("alpha", "auto")
            bud = rocket_split(S, B, N_new, D, None if a == "auto" else float(a))
            if c.get("page_size"):
                bud["p"] = c["page_size"]
                bud["r"] = min(D, max(1, int(D * bud["p"] / bud["c2"])))
            if c.get("r"):
                bud["r"] = c["r"]
            if topk_mode:
                bud["k"] = B
            pb, agg, nrows = bud["prompt_budget"], "group_sum", Hkv
        else:
            pb, agg = B, c["gqa"]
            nrows = Hq if per_head else Hkv
            bud = dict(B=B, T=B, prompt_budget=B)
        rows = fresh_rows(nrows)
        kernel = kernel_for(c, L)
        kept_scores = []
        for r in range(nrows):
            heads = [r] if nrows == Hq else list(range(r * G, r * G + G))
            idx, npre, pooled = snap_keep(rows[r]["K"], rows[r]["pos"], qwin[:, heads], qpos, pb,
                                          c["window"], kernel, c["pooling"], agg)
            kept_scores.append((npre, pooled))
            rows[r] = dict(pos=rows[r]["pos"][idx], K=rows[r]["K"][idx], V=rows[r]["V"][idx])
        T = max(len(rw["pos"]) for rw in rows)
        kept = np.full((nrows, T), -1, dtype=np.int32)
        for r, rw in enumerate(rows):
            kept[r, :len(rw["pos"])] = rw["pos"]
    else:
        rows = fresh_rows(Hkv)

    if m == "hybrid":
        c2 = max(1.0, S / B)
        p = math.ceil(math.sqrt(c2))
        p = 1 if p > c2 else p
        if c.get("page_size"):
            p = c["page_size"]
        r = min(D, max(1, int(D * p / c2)))
        if c.get("r"):
            r = c["r"]
        bud = dict(T=S, c2=c2, p=p, r=r, k=B if topk_mode else B // 2)
    if m == "sparq":
        c2 = max(1.0, S / B)
        if topk_mode:
            r = c.get("r") or D // 4
        else:
            r = c.get("r") or int(D * 1 / c2)
        bud = dict(p=1, r=min(D, max(1, r)), k=B if topk_mode else B // 2, c2=c2)
    if m == "quest":
        if topk_mode:
            P, npages = 16, max(1, B // 16)
        else:
            need = -(-2 * L // B)
            P = max(16, 1 << max(0, (need - 1).bit_length()))
            npages = max(1, (B // 2) // P)
        if c.get("page_size"):
            P = c["page_size"]
            npages = max(1, (B if topk_mode else B // 2) // P)
        bud = dict(P=P, n_pages=npages)

    out = np.zeros((N, Hq, D))
    sels, scores = [], []
    for i in range(N):
        for r, rw in enumerate(rows):
            g = r // G if len(rows) == Hq else r
            rw["pos"] = np.append(rw["pos"], L + i)
            rw["K"] = np.vstack([rw["K"], knew[i, g].astype(np.float64)])
            rw["V"] = np.vstack([rw["V"], vnew[i, g].astype(np.float64)])
        step_sel, step_sc = [], []
        if m in ("full", "snapkv", "snapkvpp"):
            for r, rw in enumerate(rows):
                heads = [r] if len(rows) == Hq else range(r * G, r * G + G)
                for h in heads:
                    out[i, h] = attend(q[i, h], rw["K"], rw["V"])
                step_sel.append(np.arange(len(rw["pos"])))
            sels.append(step_sel)
            scores.append(None)
            continue
        sel_rows = Hq if per_head and m in ("exact_topk", "quest", "sparq", "hybrid") else Hkv
        for sr in range(sel_rows):
            g = sr // G if sel_rows == Hq else sr
            heads = [sr] if sel_rows == Hq else list(range(g * G, g * G + G))
            rw = rows[g]
            K, V = rw["K"], rw["V"]
            n = len(K)
            Qg = q[i, heads]
            hw = None
            if m == "exact_topk":
                lg = K @ Qg.astype(np.float64).T / math.sqrt(D)  # [n, nh]
                if sel_rows == Hq:
                    score = lg[:, 0]
                else:
                    pr = np.exp(lg - lg.max(axis=0))
                    pr /= pr.sum(axis=0)
                    score = pr.sum(axis=1) / (len(heads) if c["gqa"] == "group_mean" else 1)
                sel = topk(score, B)
            elif m == "quest":
                P, npages = bud["P"], bud["n_pages"]
                ps = quest_scores(K, Qg, P, c["gqa"])
                ps[-1] = np.inf  # the current token's page
                pages = topk(ps, npages)
                sel = np.array([j for pg in pages for j in range(pg * P, min(n, pg * P + P))], dtype=np.int64)
                score = np.repeat(ps, P)[:n]
            else:
                score, hw = hybrid_scores(K, Qg, bud["p"], bud["r"])
                kk = min(bud["k"], n)
                forced = min(c.get("local_window", 0), kk)
                if forced:
                    score = score.copy()
                    score[n - forced:] = np.inf
                sel = topk(score, kk)
            for a, h in enumerate(heads):
                o = attend(q[i, h], K[sel], V[sel])
                if c.get("reallocate_mean_v"):
                    alpha = hw[a][sel].sum()
                    o = alpha * o + (1 - alpha) * V.mean(axis=0)
                out[i, h] = o
            step_sel.append(sel)
            step_sc.append(score)
        sels.append(step_sel)
        scores.append(step_sc)

    kmax = max([len(s) for st in sels for s in st] + [0])
    nr = len(sels[0]) if sels else 0
    selected = np.full((N, nr, kmax), -1, dtype=np.int32)
    for i, st in enumerate(sels):
        for r, s in enumerate(st):
            selected[i, r, :len(s)] = s
    return dict(out=out, selected=selected, kept=kept, budget=bud, scores=scores, kept_scores=kept_scores)


def sets_match(a, b, score, tol=1e-5):
    """Implementation set a vs reference set b (slot indices). 'exact', 'near'
    (differences only at the reference's k-th score within tol, never on an
    exact tie), or '' (mismatch)."""
    a, b = set(int(x) for x in a), set(int(x) for x in b)
    if a == b:
        return "exact"
    if len(a) != len(b) or score is None:
        return ""
    kth = min(score[j] for j in b)
    finite = np.abs(np.asarray(score, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    top = max(1.0, float(finite.max()) if len(finite) else 1.0)
    # relative slack at the boundary plus values f32 cannot tell from 0
    slack = tol * abs(kth) + 1e-30 * top
    ia, ib = a - b, b - a
    if any(not (score[j] >= kth - slack) for j in ia) or any(not (score[j] <= kth + slack) for j in ib):
        return ""
    if any(score[x] == score[y] for x in ia for y in ib):
        return ""
    return "near"
