"""The benchmark's parsing, aggregation and reports (no timing is tested: the numbers here are synthetic)."""
from __future__ import annotations

import json

import pytest

from specdec_core.bench.aggregate import find_mismatches, our_mismatches, peer_mismatches, summarise
from specdec_core.core.metrics import Stats
from specdec_core.core.run import Run
from specdec_core.bench.prompts import parse_jsonl, suite
from specdec_core.bench.report import peer_lines, table, to_json, write_plot
from specdec_core.bench.runner import parse_methods
from specdec_core.core.config import ConfigError
from specdec_core.core.metrics import speedup_bound
from specdec_core.methods.registry import METHODS, REGISTRY


def test_parse_jsonl_reads_prompts_ids_and_chat():
    text = '{"prompt": "def f():", "id": "a"}\n\n{"prompt": "Fix this", "chat": true}\n'
    prompts = parse_jsonl(text)
    assert [(p.id, p.prompt, p.chat) for p in prompts] == [("a", "def f():", False), ("line-3", "Fix this", True)]


@pytest.mark.parametrize("text, reason", [
    ("not json", "not JSON"),
    ('{"id": "x"}', "'prompt'"),
    ('{"prompt": "  "}', "'prompt'"),
    ('["prompt"]', "'prompt'"),
    ('{"prompt": "a", "chat": "yes"}', "'chat'"),
    ('{"prompt": "a", "id": 1}\n{"prompt": "b", "id": 1}', "unique"),
    ("\n\n", "no prompts"),
])
def test_parse_jsonl_rejects_bad_files(text, reason):
    with pytest.raises(ConfigError, match=reason):
        parse_jsonl(text)


def test_suites():
    he = suite("humaneval", limit=3)
    assert [p.id for p in he] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"] and not he[0].chat
    summ = suite("summarise")
    assert len(summ) >= 3 and all(p.chat and len(p.prompt) > 800 for p in summ)
    with pytest.raises(ConfigError, match="unknown suite"):
        suite("mmlu")
    with pytest.raises(ConfigError, match="limit"):
        suite("humaneval", limit=0)


def test_select_skips_samples_categories_and_limits():
    from specdec_core.bench.prompts import select

    chat = suite("chat")
    one_each = select(chat, per_category=1)
    assert len(one_each) == len({p.category for p in chat}) == 7  # chat opens with eight translations
    assert [p.category for p in one_each] == list(dict.fromkeys(p.category for p in chat))
    assert [p.id for p in select(chat, limit=2, skip=3)] == [p.id for p in chat[3:5]]
    assert len(select(chat, per_category=2, limit=5)) == 5
    for kwargs, reason in (({"skip": -1}, "skip"), ({"skip": len(chat)}, "no prompts left"),
                           ({"per_category": 0}, "per-category"), ({"limit": 0}, "limit")):
        with pytest.raises(ConfigError, match=reason):
            select(chat, **kwargs)


def test_parse_methods_puts_the_reference_first():
    assert parse_methods("draft,hf-assisted") == ("ar", "draft", "hf-assisted")
    assert parse_methods("lookup, ar") == ("ar", "lookup")
    with pytest.raises(ConfigError, match="unknown method"):
        parse_methods("draft,beam")
    with pytest.raises(ConfigError, match="twice"):
        parse_methods("draft,draft")


def stats(tokens, rounds, drafted, accepted, draft_s, verify_s):
    """A run's Stats as the bench stores it (to_dict), from the few numbers these tests vary."""
    return {"new_tokens": tokens, "rounds": rounds, "target_forwards": rounds, "drafted": drafted, "accepted": accepted,
            "acceptance_rate": accepted / drafted if drafted else None, "mean_tokens_per_round": tokens / rounds,
            "per_position_acceptance": [], "draft_lengths": {}, "draft_seconds": draft_s, "verify_seconds": verify_s,
            "prefill_seconds": 0.0, "wall_seconds": draft_s + verify_s,
            "tokens_per_second": tokens / (draft_s + verify_s)}


def RunRecord(method, prompt, repeat, tokens, seconds, forward, rss, st=None):
    """A bench Run from the numbers these tests vary (its Stats as the bench's JSON stores them)."""
    return Run(method, [], tokens, seconds, Stats.from_dict(st) if st else None, prompt_id=prompt, repeat=repeat,
               forward_seconds=forward, peak_rss_mb=rss)


def records():
    out = []
    for prompt in ("p0", "p1"):
        out.append(RunRecord("ar", prompt, 0, [1, 2, 3, 4], 4.0, 3.8, 1000.0, stats(4, 4, 0, 0, 0.0, 3.9)))
        out.append(RunRecord("draft", prompt, 0, [1, 2, 3, 4], 2.0, 1.9, 1200.0, stats(4, 2, 6, 2, 0.6, 1.3)))
        out.append(RunRecord("hf-assisted", prompt, 0, [1, 2, 9, 4] if prompt == "p1" else [1, 2, 3, 4], 2.5, 2.4,
                             1100.0, None))
    return out


def test_summary_aggregates_over_prompts_and_applies_the_bound():
    rows = {r.method: r for r in summarise(records(), greedy=True)}
    ar, draft, hf = rows["ar"], rows["draft"], rows["hf-assisted"]
    assert (ar.tokens, ar.end_to_end_tokens_per_second, ar.end_to_end_speedup, ar.alpha, ar.tau) == (8, 1.0, 1.0, None, 1.0)
    assert draft.end_to_end_tokens_per_second == 2.0 and draft.end_to_end_speedup == 2.0
    assert draft.alpha == pytest.approx(4 / 12) and draft.tau == 2.0
    c = (1.2 / 12) / (2.6 / 4)
    assert draft.cost_ratio == pytest.approx(c)
    assert draft.bound == pytest.approx(speedup_bound(4 / 12, 3.0, c))  # gamma = 12 drafted / 4 rounds
    v = (2.6 / 4) / (7.8 / 8)  # a verify forward vs one plain step
    assert draft.bound_with_verify == pytest.approx((1 - (1 / 3) ** 4) / (1 - 1 / 3) / (3 * c + v))
    assert draft.overhead == pytest.approx(1 - 3.8 / 4.0) and draft.peak_rss_mb == 1200.0
    assert hf.alpha is None and hf.bound is None and hf.end_to_end_speedup == pytest.approx(1.6)
    assert hf.mismatches == ["p1 (repeat 0): differs at token 2 (token id 9, plain decoding 3)"] and draft.mismatches == []
    assert hf.peer and not draft.peer and hf.identical is False and hf.first_difference == 2 and draft.identical
    assert summarise(records(), greedy=False)[2].mismatches == []  # sampled outputs may differ


@pytest.mark.parametrize("method", [m for m in METHODS if m != "ar"])
def test_mismatch_on_length_and_only_chains_get_the_chain_bound(method):
    """Every tree method in the registry (medusa-tree, eagle-tree) gets no chain bound; every chain gets one."""
    recs = records()[:1] + [RunRecord(method, "p0", 0, [1, 2, 3], 1.0, 1.0, 1.0, stats(3, 1, 5, 2, 0.1, 0.9))]
    assert find_mismatches(recs)[method] == ["p0 (repeat 0): differs at token 3 (token id end, plain decoding 4)"]
    row = summarise(recs, greedy=True)[-1]
    assert row.tree == REGISTRY[method].tree and (row.bound is None) == row.tree and row.alpha == pytest.approx(0.4)


def test_a_peer_that_differs_is_a_finding_and_ours_a_failure():
    rows = summarise(records(), greedy=True)
    assert peer_mismatches(rows) == {"hf-assisted": ["p1 (repeat 0): differs at token 2 (token id 9, plain decoding 3)"]} and our_mismatches(rows) == {}
    wrong = records() + [RunRecord("lookup", "p0", 0, [1, 2, 3, 5], 1.0, 1.0, 1.0, stats(4, 2, 2, 1, 0.0, 1.0))]
    assert our_mismatches(summarise(wrong, greedy=True)) == {"lookup": ["p0 (repeat 0): differs at token 3 (token id 5, plain decoding 4)"]}
    assert "differs (peer, not bit-exact) 1 of 2" in table(rows)
    assert to_json({"command": "x"}, rows, records())["peer_mismatches"] == peer_mismatches(rows)


def test_llamacpp_peers_are_compared_only_when_our_target_runs_the_same_gguf():
    runs = records()[:1] + [RunRecord("llamacpp-ar", "p0", 0, [1, 2, 7, 4], 1.0, 1.0, 1.0)]
    other, same = summarise(runs, greedy=True)[-1], summarise(runs, greedy=True, llamacpp_target=True)[-1]
    assert other.compared == 0 and other.mismatches == [] and "other weights" in table([other])
    assert same.compared == 1 and same.peer and same.first_difference == 2 and "differs (peer" in table([same])


def test_reports(tmp_path):
    rows = summarise(records(), greedy=True)
    text = table(rows)
    lines = text.splitlines()
    assert len(lines) == 2 + 3 and lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert "| draft | 8 | 2.00 | 2.00× |" in text and "differs (peer, not bit-exact) 1 of 2" in lines[4]
    assert lines[4].startswith("| hf-assisted (not verified by us) |")  # its drafts pass transformers' own checks
    assert peer_lines(rows) == ["draft vs hf-assisted: 1.25×"]
    data = json.loads(json.dumps(to_json({"command": "x"}, rows, records())))
    assert data["summary"][1]["method"] == "draft" and len(data["runs"]) == 6
    write_plot(tmp_path / "r.html", {"command": "x"}, rows, records())
    html = (tmp_path / "r.html").read_text()
    assert "hf-assisted" in html and "Leviathan" in html


def test_target_forwards_are_summed_only_when_every_run_counted_them():
    import dataclasses

    recs = [dataclasses.replace(r, target_forwards=5) for r in records()]
    rows = {r.method: r for r in summarise(recs, greedy=True)}
    assert rows["ar"].target_forwards == 10 and rows["hf-assisted"].target_forwards == 10
    assert summarise(records()[:1] + recs[1:], greedy=True)[0].target_forwards is None


def test_checkpoint_resumes_and_refuses_another_run(tmp_path):
    from specdec_core.bench.checkpoint import Checkpoint

    path, key = tmp_path / "ck.jsonl", {"methods": ("ar", "draft"), "target_repr": "int8"}
    first = Checkpoint(path, key)
    assert first.records("p0", 0) is None
    first.save("p0", 0, records()[:2])
    with path.open("a") as f:
        f.write('{"prompt_id": "p1", "repeat": 0, "rec')  # killed mid-write
    again = Checkpoint(path, key)
    assert again.records("p0", 0) == records()[:2] and again.records("p1", 0) is None
    again.save("p1", 0, records()[3:5])
    assert Checkpoint(path, key).records("p1", 0) == records()[3:5]  # the cut line was dropped, not glued to
    with pytest.raises(ConfigError, match="another run.*target_repr"):
        Checkpoint(path, {**key, "target_repr": "bf16"})
    (tmp_path / "junk").write_text("hello\n")
    with pytest.raises(ConfigError, match="not a bench checkpoint"):
        Checkpoint(tmp_path / "junk", key)


def test_llamacpp_rows_are_timed_and_labelled_never_compared():
    recs = records()[:2] + [RunRecord("llamacpp-ar", p, 0, [7, 7, 7, 7], 0.5, 0.5, 900.0) for p in ("p0", "p1")]
    rows = {r.method: r for r in summarise(recs, greedy=True)}
    assert rows["llamacpp-ar"].mismatches == [] and rows["llamacpp-ar"].compared == 0
    assert rows["llamacpp-ar"].end_to_end_tokens_per_second == 8.0
    text = table(list(rows.values()))
    assert "| llamacpp-ar | 8 | 8.00 |" in text and "other weights" in text
    assert "ar vs llamacpp-ar: 0.12×" in peer_lines(list(rows.values()))
    assert "llamacpp-ar" in parse_methods("llamacpp-ar,draft")


def test_bench_without_llama_cpp_says_how_to_install_it():
    import subprocess
    import sys

    from specdec_core.bench import llamacpp

    proc = subprocess.run([sys.executable, "-m", "specdec_core", "bench", "--suite", "humaneval", "--methods",
                           "llamacpp-ar", "--limit", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "limit" in proc.stderr
    assert ("pip install -r requirements-llamacpp.txt" in proc.stderr) == (not llamacpp.available())


def test_specbench_lines_categories_and_the_mini_suite():
    text = ('{"question_id": 81, "category": "writing", "turns": ["Write a haiku.", "Now a limerick."]}\n'
            '{"prompt": "x", "id": "a", "category": "qa"}\n')
    conv, plain = parse_jsonl(text)
    assert (conv.id, conv.category, conv.chat, conv.all_turns) == ("81", "writing", True, ("Write a haiku.", "Now a limerick."))
    assert plain.category == "qa" and plain.all_turns == ("x",)
    with pytest.raises(ConfigError, match="'turns' must be"):
        parse_jsonl('{"question_id": 1, "turns": []}')
    mini = suite("specbench-mini")
    cats = {p.category for p in mini}
    assert cats == {"mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"}
    assert all(2 <= sum(p.category == c for p in mini) <= 3 for c in cats)
    assert any(len(p.all_turns) == 2 for p in mini)
    long = suite("longctx")  # the long-context suite: where every verify row's attention reads a long cache
    assert [p.category for p in long] == ["rag"] * 6 + ["summarisation"] * 6 and all(p.chat for p in long)
    assert all(len(p.prompt) > 1400 for p in long) and sum(len(p.prompt) for p in long) > 12 * 4500


def test_results_by_category():
    from specdec_core.bench.aggregate import by_category
    from specdec_core.bench.report import category_table

    recs = records() + [RunRecord(m, "c#2", 0, [1, 2], 1.0, 1.0, 1.0, stats(2, 2 if m == "ar" else 1, 0 if m == "ar"
                                  else 2, 0 if m == "ar" else 1, 0.0 if m == "ar" else 0.1, 1.0)) for m in ("ar", "draft")]
    cats = by_category(recs, {"p0": "code", "p1": "code", "c": "chat"}, greedy=True)
    assert set(cats) == {"code", "chat"}
    chat = {r.method: r for r in cats["chat"]}
    assert chat["draft"].tau == 2.0 and chat["ar"].tau == 1.0 and chat["draft"].alpha == 0.5
    code = {r.method: r for r in cats["code"]}
    assert code["draft"].end_to_end_speedup == 2.0
    text = category_table(cats)
    assert "| chat | draft |" in text and "| code | hf-assisted |" in text
    data = to_json({"command": "x"}, summarise(recs, greedy=True), recs, cats)
    assert data["by_category"]["code"]["draft"]["end_to_end_speedup"] == 2.0 and "tau" in data["by_category"]["chat"]["ar"]


def test_a_conversation_runs_turn_by_turn_after_its_own_answers(target, draft_model):
    from conftest import CharTokenizer
    from specdec_core.bench.prompts import BenchPrompt
    from specdec_core.bench.runner import BenchConfig, PeakMemory, run_turns
    from specdec_core.core.config import GenerationConfig
    from specdec_core.core.session import encode_conversation

    tok = CharTokenizer()
    conv = BenchPrompt("q", "hello there", True, "mt_bench", ("hello there", "and again"))
    config = BenchConfig(("ar", "draft"), GenerationConfig(max_new_tokens=6))
    first = encode_conversation(tok, ["hello there"], [])
    out = {m: run_turns(m, conv, first, tok, target, draft_model, (), config, PeakMemory(target.device), 0)
           for m in ("ar", "draft")}
    assert [r.prompt_id for r in out["ar"]] == ["q#1", "q#2"]
    assert [r.token_ids for r in out["ar"]] == [r.token_ids for r in out["draft"]]  # exact, turn by turn
    second = encode_conversation(tok, ["hello there", "and again"], [tok.decode(out["ar"][0].token_ids)])
    from specdec_core.core.engine import SpeculativeEngine
    from specdec_core.core.session import run

    direct = run(SpeculativeEngine(target), "ar", second, GenerationConfig(max_new_tokens=6)).token_ids
    assert out["ar"][1].token_ids == direct  # turn 2 was asked after turn 1's own answer


def test_the_prediction_counts_a_drafters_one_catch_up_over_the_prompt():
    """A drafter with its own cache first forwards the whole prompt (in its decode time, once per run that drafts):
    the prediction adds prompt tokens x its catch-up ms to the rounds' cost (eagle-tree on 1 000-token prompts was
    predicted 14% too fast without it); a drafter without its own cache, or a run that drafted nothing, pays none."""
    import dataclasses

    from specdec_core.core.run import compare
    from specdec_core.core.schedule import Cost

    st = {**stats(8, 4, 8, 4, 0.1, 0.4), "per_position_acceptance": [0.5, 0.5], "draft_lengths": {"2": 4}}
    runs = [dataclasses.replace(RunRecord("draft", p, 0, [1] * 8, 1.0, 1.0, 1.0, st), prompt_ids=[7] * 1000)
            for p in ("p0", "p1")]
    plain = dataclasses.replace(RunRecord("draft", "p2", 0, [1] * 8, 1.0, 1.0, 1.0, {**st, "drafted": 0,
                                "draft_lengths": {"0": 4}}), prompt_ids=[7] * 1000)
    T = lambda n: 100.0 + 10.0 * n  # noqa: E731
    steady = compare(runs, [], cost=Cost(T, 5.0)).predicted_speedup
    behind = compare(runs, [], cost=Cost(T, 5.0, catches_up=True, catch_up_ms=0.5)).predicted_speedup
    # per run 4 rounds of 2 x 5 ms drafting + T(3) 130 ms, E[tokens] 1.75 a round; behind: + 1000 x 0.5 ms per run
    assert steady == pytest.approx(2 * 4 * 1.75 * 110.0 / (2 * 4 * 140.0))
    assert behind == pytest.approx(2 * 4 * 1.75 * 110.0 / (2 * 4 * 140.0 + 2 * 500.0))
    mixed = compare(runs + [plain], [], cost=Cost(T, 5.0, catches_up=True, catch_up_ms=0.5)).predicted_speedup
    assert mixed == pytest.approx((2 * 4 * 1.75 + 4) * 110.0 / (2 * 4 * 140.0 + 4 * 110.0 + 2 * 500.0))  # no catch-up
