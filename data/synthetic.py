r"""
Synthetic associative-memory tasks, generated in-process from a numpy Generator (no files).

What each task asks of the memory (the tests check every answer against a replay of the stream):
    mqar      store and recall: no binding ever changes.
    reassign  overwrite and remove: a key's value changes (the delta rule's job: a write at the same key), or a
              binding moves to a fresh key with an explicit `k NONE` (its old key must read NONE). move_frac=1
              with num_kv_pairs near the state's key dimension is capacity pressure: the keys ever written
              outnumber the state's dimensions, so stale addresses must be cleared to make room.
    evict     removal at an address the current token does not name: values are unique, and `k' v` gives v a
              new owner k', which implicitly unbinds v's old owner k (k must read NONE). The write goes to k';
              the stale entry sits at k, found only by a lookup (v -> k): the case an erase at its own address
              (e_t, independent of the write key k_t) is made for, and one a single delta write cannot cover.

x: int64 [B, seq_len] inputs; y: int64 [B, seq_len] targets, -1 everywhere except at the answer positions (a
query key's, whose target is the key's current value), where the loss and the accuracy are taken.

Token layout, shared by the tasks (vocab_size V):
    0          filler: every position that is neither a binding nor a query
    1          NONE: the answer for a key that is bound to nothing (reassign only)
    [2, M)     keys,   M = 2 + (V - 2) // 2      \  disjoint halves of the vocabulary (Zoology)
    [M, V)     values                           /
"""
import numpy as np

FILLER, NONE = 0, 1
TASKS = ('mqar', 'reassign', 'evict')  # the dataset names train.py generates here instead of reading token files


def vocab_halves(vocab_size):
    """(keys range, values range) as (lo, hi) pairs: disjoint halves of [2, vocab_size)."""
    if vocab_size < 6:
        raise ValueError(f"synthetic tasks need vocab_size >= 6, got {vocab_size}")
    mid = 2 + (vocab_size - 2) // 2
    return (2, mid), (mid, vocab_size)


def distinct(rng, lo, hi, rows, n):
    """[rows, n] integers from [lo, hi), distinct within each row, each row a uniform draw without replacement
    (in random order). Sparse draws redraw the few rows that repeat a number; dense ones permute."""
    if n > (hi - lo) // 4:
        return lo + np.argsort(rng.random((rows, hi - lo)), axis=1)[:, :n]
    out = rng.integers(lo, hi, size=(rows, n))
    while True:
        s = np.sort(out, axis=1)
        bad = (s[:, 1:] == s[:, :-1]).any(axis=1)
        if not bad.any():
            return out
        out[bad] = rng.integers(lo, hi, size=(int(bad.sum()), n))


def free_key(rng, taken, pool):
    """Per row, an index of [0, pool) drawn uniformly among those not in taken [B, n] (the keys bound now)."""
    score = rng.random((taken.shape[0], pool))
    score[np.arange(taken.shape[0])[:, None], taken] = -1.0
    return score.argmax(axis=1)


def key_budget(task, num_kv_pairs, num_updates, num_keys, vocab_size):
    """The keys a stream may introduce: num_keys, or for None num_kv_pairs + num_updates (a fresh key per update)."""
    (klo, khi), _ = vocab_halves(vocab_size)
    if num_keys is not None and num_keys <= num_kv_pairs:
        raise ValueError(f"{task}: num_keys={num_keys} must exceed num_kv_pairs={num_kv_pairs} (an update needs a "
                         f"free key)")
    budget = num_kv_pairs + num_updates if num_keys is None else num_keys
    if budget > khi - klo:
        raise ValueError(f"{task}: {budget} keys (num_kv_pairs + num_updates, or num_keys) exceed the {khi - klo} "
                         f"keys of vocab_size {vocab_size}")
    return budget


def at_length(task, seq_len, block_size, num_kv_pairs, num_updates):
    """reassign's or evict's num_updates and num_keys at seq_len for a model trained at block_size with these
    num_kv_pairs and num_updates: the live bindings and the key budget (the keys a training stream can
    introduce) held, the query region as long as training's, and the stream filling the rest with updates. So
    the stale bindings grow with the length, while a state that holds the budget's keys can still answer."""
    if task not in ('reassign', 'evict'):
        raise ValueError(f"at_length: length scaling is for the tasks with stale bindings, reassign and evict, "
                         f"got {task!r}")
    per = 4 if task == 'reassign' else 2  # tokens an update takes at most (a move: two pairs)
    queries = block_size - 2 * num_kv_pairs - per * num_updates  # the query region after training's longest stream
    return dict(num_updates=(seq_len - queries - 2 * num_kv_pairs) // per, num_keys=num_kv_pairs + num_updates)


def place_queries(rng, x, start, keys, answers, counts=None, power_a=0.01):
    """Write queries into x[:, start:] (key tokens); returns y: their answers at the same positions, -1 elsewhere.

    keys, answers: [B, n]; row b queries its first counts[b] keys (default: all n), each once, in random order,
    on even offsets (the slot after a query, where text would hold the answer, stays filler). The slots are drawn
    without replacement with p(slot s) ~ (s + 1)^(power_a - 1), Zoology's power law favouring short gaps, as
    Gumbel-top-k: the largest log p(s) + Gumbel noise, in order, so every row's first counts[b] are a draw too."""
    B, n = keys.shape
    y = np.full(x.shape, -1, dtype=np.int64)
    counts = np.full(B, n) if counts is None else np.asarray(counts)
    n_slots = (x.shape[1] - start) // 2
    if n > n_slots:
        raise ValueError(f"{n} queries need a query region of >= {2 * n} tokens, got {x.shape[1] - start}")
    score = (power_a - 1.0) * np.log1p(np.arange(n_slots)) + rng.gumbel(size=(B, n_slots))
    use = np.arange(n) < counts[:, None]
    slots = np.sort(np.where(use, np.argsort(-score, axis=1)[:, :n], n_slots), axis=1)  # used ones first
    order = np.argsort(np.where(use, rng.random((B, n)), 2.0), axis=1)                  # used keys first
    rows = np.broadcast_to(np.arange(B)[:, None], (B, n))
    pos = start + 2 * slots
    x[rows[use], pos[use]] = keys[rows, order][use]
    y[rows[use], pos[use]] = answers[rows, order][use]
    return y


def mqar(rng, batch_size, seq_len, vocab_size, num_kv_pairs, power_a=0.01):
    """Multi-query associative recall (Zoology recipe): a context of num_kv_pairs bindings `k v` (distinct keys),
    then a query region in which every context key appears once, at power-law gaps, its target that key's value."""
    (klo, khi), (vlo, vhi) = vocab_halves(vocab_size)
    if num_kv_pairs > khi - klo:
        raise ValueError(f"num_kv_pairs={num_kv_pairs} exceeds the {khi - klo} distinct keys of vocab_size {vocab_size}")
    if seq_len < 4 * num_kv_pairs:
        raise ValueError(f"mqar: seq_len={seq_len} < 4 * num_kv_pairs={num_kv_pairs} (context + query region)")
    x = np.full((batch_size, seq_len), FILLER, dtype=np.int64)
    keys = distinct(rng, klo, khi, batch_size, num_kv_pairs)
    values = rng.integers(vlo, vhi, size=(batch_size, num_kv_pairs))
    x[:, 0:2 * num_kv_pairs:2], x[:, 1:2 * num_kv_pairs:2] = keys, values
    return x, place_queries(rng, x, 2 * num_kv_pairs, keys, values, power_a=power_a)


def reassign(rng, batch_size, seq_len, vocab_size, num_kv_pairs, num_updates, move_frac=0.5, power_a=0.01,
             num_keys=None):
    """Associative recall with overwrites and moves: stale entries must be removed.

    Each sequence is a stream of pairs, then a query region:
      1. num_kv_pairs bindings `k v` with distinct keys;
      2. num_updates updates, each on a key bound at that moment, chosen at random, a move with probability
         move_frac, else a reassignment:
         - reassign: `k v'` binds k to a new value v' != its current value;
         - move:     `k NONE` unbinds k, then `k' v` binds a fresh key k' (never seen before) to k's value.
      3. queries: every key that appeared in the stream, once, at power-law gaps.
    Promises: every query's key appeared in the stream, and it answers its final binding: a reassigned key its
    newest value, a moved binding's new key the moved value, a moved key's old address NONE (moves take fresh keys).
    num_keys (key_budget): once the stream has introduced num_keys keys, a move takes a random key that no binding
    holds (one an earlier move left reading NONE). Generated for the whole batch at once, one update at a time."""
    (klo, khi), (vlo, vhi) = vocab_halves(vocab_size)
    if not 0 <= move_frac <= 1:
        raise ValueError(f"reassign: move_frac must be in [0, 1], got {move_frac}")
    if vhi - vlo < 2:
        raise ValueError("reassign needs at least 2 values to reassign to")
    max_keys = key_budget('reassign', num_kv_pairs, num_updates, num_keys, vocab_size)
    max_pairs = num_kv_pairs + 2 * num_updates  # a move is two pairs
    if seq_len < 2 * max_pairs + 2 * max_keys:
        raise ValueError(f"reassign: seq_len={seq_len} too short: the stream takes up to {2 * max_pairs} tokens "
                         f"and the queries up to {2 * max_keys}; need >= {2 * max_pairs + 2 * max_keys}")
    B, n = batch_size, num_kv_pairs
    x = np.full((B, seq_len), FILLER, dtype=np.int64)
    rows = np.arange(B)
    keys = distinct(rng, klo, khi, B, max_keys)       # key i of a row is the i-th key the stream introduces
    value = np.full((B, max_keys), NONE, dtype=np.int64)
    value[:, :n] = rng.integers(vlo, vhi, size=(B, n))
    x[:, 0:2 * n:2], x[:, 1:2 * n:2] = keys[:, :n], value[:, :n]
    live = np.tile(np.arange(n), (B, 1))              # the n bound keys (indices into keys)
    n_keys = np.full(B, n)                            # keys introduced so far
    pos = np.full(B, 2 * n)                           # where the next pair goes
    for _ in range(num_updates):
        slot = rng.integers(n, size=B)
        k = live[rows, slot]
        move = rng.random(B) < move_frac
        new = rng.integers(vlo, vhi - 1, size=B)      # reassign: a new value, never the current one
        new += new >= value[rows, k]
        fresh = n_keys < max_keys                     # move: unbind k, bind a fresh (or free) key to its value
        k2 = n_keys if num_keys is None else np.where(fresh, n_keys, free_key(rng, live, max_keys))
        moved = value[rows, k]
        x[rows, pos] = keys[rows, k]
        x[rows, pos + 1] = np.where(move, NONE, new)
        m = rows[move]
        x[m, pos[m] + 2], x[m, pos[m] + 3] = keys[m, k2[m]], moved[m]
        value[m, k2[m]] = moved[m]
        live[m, slot[m]] = k2[m]
        value[rows, k] = np.where(move, NONE, new)
        n_keys, pos = n_keys + (move & fresh), pos + 2 + 2 * move
    # the query region starts after the longest possible stream: the same layout for every sequence
    return x, place_queries(rng, x, 2 * max_pairs, keys, value, n_keys, power_a)


def evict(rng, batch_size, seq_len, vocab_size, num_kv_pairs, num_updates, power_a=0.01, num_keys=None):
    """Associative recall with unique values: num_kv_pairs bindings `k v` (distinct keys, distinct values), then
    num_updates pairs `k' v` giving a bound value a fresh key k', which unbinds v's previous key, then queries of
    every key that appeared. Each answers its final binding (NONE once its value moved on); no NONE token is
    written. num_keys (key_budget): past num_keys keys, a new owner is a random key that owns no value."""
    (klo, khi), (vlo, vhi) = vocab_halves(vocab_size)
    n_keys = key_budget('evict', num_kv_pairs, num_updates, num_keys, vocab_size)
    n_used = min(n_keys, num_kv_pairs + num_updates)  # the keys the stream introduces, each queried once
    if num_kv_pairs > vhi - vlo:
        raise ValueError(f"evict: num_kv_pairs={num_kv_pairs} exceeds the {vhi - vlo} distinct values of vocab_size {vocab_size}")
    if num_kv_pairs < 1:
        raise ValueError("evict needs num_kv_pairs >= 1")
    if seq_len < 2 * (num_kv_pairs + num_updates + n_used):
        raise ValueError(f"evict: seq_len={seq_len} < {2 * (num_kv_pairs + num_updates + n_used)}: the stream takes "
                         f"{2 * (num_kv_pairs + num_updates)} tokens and the queries {2 * n_used}")
    B, n = batch_size, num_kv_pairs
    x = np.full((B, seq_len), FILLER, dtype=np.int64)
    rows = np.arange(B)
    keys = distinct(rng, klo, khi, B, n_keys)         # key i of a row is the i-th key the stream introduces
    values = distinct(rng, vlo, vhi, B, n)
    answer = np.full((B, n_keys), NONE, dtype=np.int64)
    answer[:, :n] = values
    owner = np.tile(np.arange(n), (B, 1))             # value j's key now (an index into keys)
    x[:, 0:2 * n:2], x[:, 1:2 * n:2] = keys[:, :n], values
    for u in range(num_updates):
        j = rng.integers(n, size=B)                   # the value that gets the fresh key n + u (or a free one)
        k2 = n + u if n + u < n_keys else free_key(rng, owner, n_keys)
        answer[rows, owner[rows, j]] = NONE
        answer[rows, k2] = values[rows, j]
        owner[rows, j] = k2
        x[:, 2 * (n + u)], x[:, 2 * (n + u) + 1] = keys[rows, k2], values[rows, j]
    return x, place_queries(rng, x, 2 * (n + num_updates), keys[:, :n_used], answer[:, :n_used], power_a=power_a)


def accuracy_counts(logits, y):
    """(correct, total, correct where the answer is NONE, answers that are NONE) of the argmax over the answer
    positions (y != -1) of logits [B, T, vocab]. The NONE split tells a model that answers NONE everywhere (the
    reassign and evict tasks' floor) from one that recalls values."""
    mask = y != -1
    hit = logits[mask].argmax(-1) == y[mask]
    none = y[mask] == NONE
    return hit.sum(), mask.sum(), (hit & none).sum(), none.sum()
