"""
Decoding with a model of model.py: the cache, prefill and decode steps (replayed from a CUDA graph), sampling. Every
layer's forward takes its part of the cache, so prefill and decoding run the model's one forward path (why a step
runs as it does: notes/decode.md; the command line: sample.py).

    out = generate(model, idx, max_new_tokens, temperature=0.8)   # idx [B, T] -> [B, T + max_new_tokens]
    cache = new_cache(model, B)
    logits, cache = prefill(model, idx, cache)                      # the prompt, through the chunked path
    logits, cache = decode_step(model, next_tokens, cache)          # one token per row, one recurrent step
    step = GraphDecoder(model, cache)    # after prefill(model, idx, cache)
    logits = step(next_tokens)           # [B] or [B,1] -> [B,1,vocab]; advances cache['pos'] like decode_step
"""
import math
import warnings

import torch

from model import check_compile, check_kv_room, maybe_compiled


# Argument checks (sample.py states its settings' problems with the same words) --------------------------------
def sampling_problem(temperature, top_k, top_p):
    """What no sampling can use among these settings (a sentence), or None."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature < math.inf:
        return f"temperature must be >= 0 (0: greedy), got {temperature!r}"
    if top_k is not None and (type(top_k) is not int or top_k < 1):
        return f"top_k must be a positive int or None, got {top_k!r}"
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        return f"top_p must be in (0, 1] or None, got {top_p!r}"
    return None


def tokens_problem(idx, vocab_size):
    """What is wrong with a prompt idx [B, T] for a model of vocab_size (a sentence), or None: an id outside the
    vocabulary would index past the embedding (a device-side assert on a GPU)."""
    if not torch.is_tensor(idx) or idx.dim() != 2 or idx.dtype.is_floating_point or idx.dtype.is_complex or \
            idx.dtype == torch.bool:
        what = f"{idx.dim()}-D {idx.dtype}" if torch.is_tensor(idx) else type(idx).__name__
        return f"the prompt must be a 2-D integer tensor [B, T], got a {what}"
    if idx.numel() == 0:
        return f"the prompt is empty (shape {list(idx.shape)}): give at least one token per row"
    if (bad := idx[(idx < 0) | (idx >= vocab_size)]).numel():
        return f"the prompt holds token {int(bad[0])}, outside the model's vocabulary of {vocab_size}"
    return None


def cache_batch(cache):
    return next(iter(cache["layers"][0].values())).shape[0]


def check_step_tokens(idx_next, cache, who):
    if not torch.is_tensor(idx_next) or idx_next.dtype.is_floating_point or idx_next.dtype == torch.bool:
        what = idx_next.dtype if torch.is_tensor(idx_next) else type(idx_next).__name__
        raise ValueError(f"{who}: the tokens must be an integer tensor, got {what}")
    if idx_next.numel() != cache_batch(cache):
        raise ValueError(f"{who}: {idx_next.numel()} tokens for a cache of batch {cache_batch(cache)}")


# The cache and the steps on it --------------------------------------------------------------------------------
def new_cache(model, batch_size, max_len=None, device=None, dtype=None):
    """An empty decoding cache for model, {"pos": tokens consumed so far, "layers": one dict per block}:
        linear layer:    {"conv": [B, la_conv_size-1, 2*H*K + HV*V] the last conv inputs (dtype),
                          "state": [B, HV, K, V] the fp32 recurrent state}      -- constant size
        attention layer: {"k", "v": [B, n_kv_head, max_len, head_dim]}, slots < pos valid (and with
                          attn_conv_size, "conv": [B, attn_conv_size-1, n_embd] the last inputs)
    max_len defaults to block_size, device and dtype to the model's. prefill / decode_step update every tensor in
    place (GraphDecoder relies on it). All rows share pos (left-pad prompts of unequal length yourself)."""
    cfg = model.config
    max_len = cfg.block_size if max_len is None else max_len
    device = model.wte.weight.device if device is None else device
    dtype = model.wte.weight.dtype if dtype is None else dtype
    layers = []
    for b in model.blocks:
        m = b.mixer
        if b.is_attention:
            c = {n: torch.zeros(batch_size, m.nkv, max_len, m.hd, device=device, dtype=dtype) for n in "kv"}
            if cfg.attn_conv_size:
                c["conv"] = torch.zeros(batch_size, cfg.attn_conv_size - 1, cfg.n_embd, device=device, dtype=dtype)
        else:
            c = {"conv": torch.zeros(batch_size, cfg.la_conv_size - 1, m.conv_dim, device=device, dtype=dtype),
                 "state": torch.zeros(batch_size, m.HV, m.K, m.V, device=device, dtype=torch.float32)}
        layers.append(c)
    return {"pos": 0, "layers": layers}


def _cached_blocks(model, idx, cache, pos):
    """The model's blocks on idx after pos cached tokens (pos: an int, or a device tensor for static_decode_step)."""
    x = model.wte(idx)
    for block, c in zip(model.blocks, cache["layers"]):
        x, _ = block(x, c, pos)
    return x


@torch.no_grad()
def prefill(model, idx, cache, all_logits=False, chunk_size=None):
    """Run the prompt idx [B,T] through the chunked path from the cache's state (pos may be > 0), chunk_size tokens
    at a time (None: all T at once), so that a long prompt's activations and attention scores are those of one piece.
    Returns (logits [B,1,vocab] for the last position, or [B,T,vocab] with all_logits, cache)."""
    if chunk_size is not None and (type(chunk_size) is not int or chunk_size < 1):  # a bool is no size
        raise ValueError(f"prefill: chunk_size must be a positive int or None, got {chunk_size!r}")
    if problem := tokens_problem(idx, model.config.vocab_size):
        raise ValueError(f"prefill: {problem}")
    step = idx.shape[1] if chunk_size is None else chunk_size
    outs = []
    for t0 in range(0, idx.shape[1], step):
        piece = idx[:, t0:t0 + step]
        x = _cached_blocks(model, piece, cache, cache["pos"])
        cache["pos"] += piece.shape[1]
        outs.append(x if all_logits else x[:, -1:])
    x = torch.cat(outs, dim=1) if all_logits else outs[-1]
    return model.lm_head(model.norm_f(x)), cache


@torch.no_grad()
def decode_step(model, idx_next, cache):
    """One token per row, idx_next [B] or [B,1]: one recurrent step per linear layer, one KV-cache
    attention step per full layer. Returns (logits [B,1,vocab], cache). (Token ids are not checked against the
    vocabulary here, which would cost a host sync per token: generate's come from the model's own logits.)"""
    check_step_tokens(idx_next, cache, "decode_step")
    x = _cached_blocks(model, idx_next.view(-1, 1), cache, cache["pos"])
    cache["pos"] += 1
    return model.lm_head(model.norm_f(x)), cache


@torch.no_grad()
def static_decode_step(model, idx, cache, pos):
    """decode_step with nothing depending on the position but the contents of pos, a long tensor [1] on the model's
    device equal to cache['pos'] (no shape, Python number or host sync does), so that a CUDA graph can replay it at
    every position (GraphDecoder). idx [B,1]; returns logits [B,1,vocab]; advances pos, not cache['pos']."""
    x = _cached_blocks(model, idx, cache, pos)
    pos.add_(1)
    return model.lm_head(model.norm_f(x))


# CUDA-graph replay of decode steps ----------------------------------------------------------------------------
def cuda_graph_problem(model):
    """Why the model's decode steps cannot be replayed from a CUDA graph (a sentence), or None if they can."""
    if model.config.moe:
        return ("MoE routing reads the tokens per expert on the host (bincount, the dispatch split), which "
                "a graph cannot replay")
    if (dev := model.wte.weight.device).type != "cuda":
        return f"the model is on {dev}, and CUDA graphs need a CUDA device"
    if torch.is_autocast_enabled("cuda"):
        return ("autocast is on: the weight casts it caches would be freed while the graph still reads "
                "them; cast the model instead (model.to(torch.bfloat16))")
    return None


def decode_state_snapshot(model, cache):
    """A copy of what a decode step advances in place (the linear layers' conv tails and states, the attention
    layers' conv tails with attn_conv_size); returns a function that puts it back. (An attention layer's step
    also writes K/V at slot pos, which the next real step at that position rewrites before anything reads it.)"""
    saved = [(c, {n: t.clone() for n, t in c.items() if not (b.is_attention and n in ("k", "v"))})
             for c, b in zip(cache["layers"], model.blocks)]

    def restore():
        for c, s in saved:
            for n, t in s.items():
                c[n].copy_(t)
    return restore


class GraphDecoder:
    """decode_step for one cache, captured once as a CUDA graph and replayed per token (why: notes/decode.md): the
    logits returned are overwritten by the next call; the position is re-read from cache['pos'], so prefill or
    decode_step may advance the cache in between. capture=False: the same step without a graph (the CPU tests').
    compile: capture torch.compile(static_decode_step, fullgraph=True) instead (True: Inductor, or a backend name)."""

    @torch.no_grad()
    def __init__(self, model, cache, capture=True, compile=False):
        if capture and (problem := cuda_graph_problem(model)):
            raise ValueError(f"GraphDecoder: cannot replay decode steps from a CUDA graph: {problem}")
        check_compile(compile)
        self.model, self.cache = model, cache
        self.step_fn = maybe_compiled(static_decode_step, compile)  # step_fn(model, tokens, cache, pos)
        dev = model.wte.weight.device
        self.kv = [c for c, b in zip(cache["layers"], model.blocks) if b.is_attention]
        self.tok = torch.zeros(cache_batch(cache), 1, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)
        self.graph, self.pos_is = None, None  # pos_is: the value of self.pos, as last set or advanced (None: unknown)
        if capture:
            self._check_room()
            # Warm up outside the capture (compiling, cuBLAS's workspace: none of it may happen while capturing), on
            # a side stream as torch.cuda.graph asks; the warm-up's real steps at cache['pos'] are undone after.
            restore = decode_state_snapshot(model, cache)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self.pos.fill_(cache["pos"])
                    self.step_fn(model, self.tok, cache, self.pos)
            torch.cuda.current_stream().wait_stream(side)
            restore()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):  # records, runs nothing
                self.logits = self.step_fn(model, self.tok, cache, self.pos)

    def _check_room(self):  # on the host: the graph's index_copy_ cannot check the device-side position
        for c in self.kv:
            check_kv_room(c, self.cache["pos"] + 1)

    @torch.no_grad()
    def __call__(self, idx_next):
        check_step_tokens(idx_next, self.cache, "GraphDecoder")
        self._check_room()
        self.tok.copy_(idx_next.view(-1, 1))
        if self.pos_is != self.cache["pos"]:  # the first step, or the cache was advanced elsewhere
            self.pos.fill_(self.cache["pos"])
        if self.graph is not None:
            self.graph.replay()  # into self.logits
        else:
            self.logits = self.step_fn(self.model, self.tok, self.cache, self.pos)
        self.cache["pos"] += 1
        self.pos_is = self.cache["pos"]
        return self.logits


# Sampling and the decode loop ---------------------------------------------------------------------------------
def sample_next(logits, temperature=1.0, top_k=None, top_p=None):
    """logits [B, vocab] -> next tokens [B, 1]: greedy at temperature 0, else top-k / nucleus sampling."""
    if problem := sampling_problem(temperature, top_k, top_p):
        raise ValueError(f"sample_next: {problem}")
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        drop = probs.cumsum(dim=-1) - probs > top_p  # keep the smallest set whose mass reaches top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return torch.multinomial(logits.softmax(dim=-1), num_samples=1)


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, on_token=None, cuda_graph=None,
             prefill_chunk=None, compile=False, n_vocab=None):
    """Sample max_new_tokens after idx [B,T] (temperature 0: greedy); returns [B, T + max_new_tokens].
    on_token(tokens [B,1]) is called for each new token batch, the first time right after the prefill.
    prefill_chunk: prefill's chunk_size. cuda_graph: replay decode steps from a CUDA graph (GraphDecoder). None:
    on a CUDA device when possible, else a warning says why not; True: a ValueError if not possible; False: plain
    decode_step. compile: GraphDecoder's; needs the graph. n_vocab: sample only ids below it (a padded vocabulary)."""
    problem = tokens_problem(idx, model.config.vocab_size) or sampling_problem(temperature, top_k, top_p)
    if not problem and (type(max_new_tokens) is not int or max_new_tokens < 0):  # a bool is no count
        problem = f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}"
    if problem:
        raise ValueError(f"generate: {problem}")
    B, T = idx.shape
    if T + max_new_tokens > model.config.block_size:
        raise ValueError(f"prompt ({T}) + max_new_tokens ({max_new_tokens}) > block_size ({model.config.block_size})")
    if cuda_graph is not None and not isinstance(cuda_graph, bool):
        raise ValueError(f"cuda_graph must be None, True or False, got {cuda_graph!r}")
    check_compile(compile)
    was_training = model.training
    model.eval()
    # under autocast the cache holds the compute dtype: a float32 cache would be converted back at every step
    dev = model.wte.weight.device.type
    dtype = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else None
    cache = new_cache(model, B, max_len=T + max_new_tokens, dtype=dtype)
    use_graph = max_new_tokens > 1 and cuda_graph is not False
    if use_graph and (problem := cuda_graph_problem(model)):
        use_graph = False
        if cuda_graph:
            raise ValueError(f"generate(cuda_graph=True): {problem}")
        elif compile:
            raise ValueError(f"generate(compile=...) compiles the CUDA-graph decode step, which cannot run: {problem}")
        elif dev == "cuda":
            warnings.warn(f"generate: decoding without a CUDA graph, one launch per operator: {problem}")
    logits, cache = prefill(model, idx, cache, chunk_size=prefill_chunk)
    step, out = None, [idx]
    for i in range(max_new_tokens):
        nxt = sample_next(logits[:, -1, :n_vocab].float(), temperature, top_k, top_p)
        out.append(nxt)
        if on_token is not None:
            on_token(nxt)
        if i + 1 < max_new_tokens:
            if use_graph and step is None:  # captured after the first token is out: its time is the prefill's
                step = GraphDecoder(model, cache, compile=compile)
            logits = step(nxt) if step is not None else decode_step(model, nxt, cache)[0]
    model.train(was_training)
    return torch.cat(out, dim=1)
