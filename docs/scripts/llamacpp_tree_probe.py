"""Could llama.cpp verify a token tree bit-exactly? A 4-node tree goes in one batch through sequence ids (each leaf a
sequence, each node tagged with the leaves below it, the prompt copied into every sequence: llama.cpp's own tree
drafting), the branch that plain decoding takes is kept (`seq_keep`, `seq_cp` back to sequence 0, the rest removed),
and decoding goes on one token at a time. Every logit row is compared with plain one-token decoding of the same
tokens, bit for bit: the tree's rows, and the rows decoded after the kept branch (whose cells now sit among the
removed siblings' holes). Needs requirements-llamacpp.txt.

    PYTHONPATH=. python docs/scripts/llamacpp_tree_probe.py"""
import numpy as np

from specdec_core.backends import llamacpp
from specdec_core.backends.llamacpp import L

PROMPT = [(1000 + 37 * i) % 30000 for i in range(40)]
AFTER = 24  # tokens decoded one at a time after the verify


def context(model, sequences: int):
    params = L.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = 1024, 512, 512, sequences
    params.n_threads = params.n_threads_batch = model.threads
    params.flash_attn_type = 1
    params.kv_unified = True  # one cell pool shared by every sequence: a shared prefix is stored once
    return L.llama_init_from_model(model._model, params)


def decode(ctx, tokens, positions, seqs, vocab):
    """One llama_decode; logits of every row ([n, vocab] float32)."""
    batch = L.llama_batch_init(len(tokens), 0, 4)
    batch.n_tokens = len(tokens)
    for i, (t, p, s) in enumerate(zip(tokens, positions, seqs)):
        batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, p, len(s), True
        for j, sid in enumerate(s):
            batch.seq_id[i][j] = sid
    assert L.llama_decode(ctx, batch) == 0
    L.llama_batch_free(batch)
    return np.stack([np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(vocab,)).copy()
                     for i in range(len(tokens))])


def main() -> None:
    model = llamacpp.LlamaCppModel(llamacpp.gguf_file("qwen2.5-coder-1.5b"), "target", 2)
    vocab, n = model.vocab_size, len(PROMPT)
    # plain decoding, one token at a time: the reference rows
    plain = context(model, 1)
    decode(plain, PROMPT[:-1], range(n - 1), [[0]] * (n - 1), vocab)
    tokens, rows = [PROMPT[-1]], []
    for i in range(2 + AFTER):
        rows.append(decode(plain, [tokens[-1]], [n - 1 + i], [[0]], vocab)[0])
        tokens.append(int(rows[-1].argmax()))
    # the tree (3 nodes: within the 3 rows a repacked build verifies exactly): the last prompt token t0 at position
    # n - 1, a wrong child x and the right child t1 at n; leaves x (sequence 1) and t1 (sequence 2), the prompt's cells
    # in sequences 0, 1 and 2. Then the branch t0 -> t1 is kept: x's cell, between t0's and t1's, is a hole.
    # The control does the same with a 3-token chain (t0 t1 t2, sequence 0 only) in the same kind of context.
    results = {}
    for shape in ("chain (control)", "tree"):
        ctx = context(model, 3)
        decode(ctx, PROMPT[:-1], range(n - 1), [[0]] * (n - 1), vocab)
        mem = L.llama_get_memory(ctx)
        t0, t1, t2 = tokens[:3]
        if shape == "tree":
            for s in (1, 2):
                L.llama_memory_seq_cp(mem, 0, s, -1, -1)
            got = decode(ctx, [t0, (t1 + 1) % vocab, t1], [n - 1, n, n], [[1, 2], [1], [2]], vocab)
            same = [np.array_equal(got[0], rows[0]), np.array_equal(got[2], rows[1])]
            L.llama_memory_seq_keep(mem, 2)
            L.llama_memory_seq_cp(mem, 2, 0, -1, -1)
            L.llama_memory_seq_rm(mem, 2, -1, -1)
            start = 2
        else:
            got = decode(ctx, [t0, t1, t2], [n - 1, n, n + 1], [[0]] * 3, vocab)
            same = [np.array_equal(got[i], rows[i]) for i in range(3)]
            start = 3
        after = [float(np.abs(decode(ctx, [tokens[i]], [n - 1 + i], [[0]], vocab)[0] - rows[i]).max())
                 for i in range(start, 2 + AFTER)]
        results[shape] = (same, after)
        L.llama_free(ctx)
    print(f"llama.cpp {llamacpp.version()} ({llamacpp.build()}), weights {'repacked' if model.repacked else 'as stored'}"
          f", 2 threads, flash attention on")
    for shape, (same, after) in results.items():
        print(f"{shape}: verify rows bitwise equal to one-token decoding: {same}; then {len(after)} one-token steps: "
              f"{sum(d == 0.0 for d in after)} bitwise equal, max |Δlogit| {max(after):.4g}")
    L.llama_free(plain)


if __name__ == "__main__":
    main()
