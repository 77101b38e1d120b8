"""Demo pieces without a browser: rendering, figures, request parsing, the race and the exactness lab on tiny models."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from app import exactness, figures, race
from app.render import Piece, round_pieces, tokens_html
from app.resources import Models
from app.stepthrough import step_view
from app.tokens import Detokenizer
from conftest import PROMPT, CharTokenizer
from specdec_core.core.config import ConfigError, GenerationConfig, SamplingConfig
from specdec_core.methods.draft_model import DraftModelDrafter
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.metrics import compute_stats, speedup_bound
from specdec_core.core.session import run
from specdec_core.core.trace import Round
from specdec_core.methods.registry import REGISTRY


@pytest.fixture(scope="module")
def tiny_models(target, draft_model):
    return Models(target, draft_model, CharTokenizer(), (), "tiny test models")


def make_round(**kw) -> Round:
    base = dict(index=0, num_draft_requested=3, drafted=[1, 2, 3], q_draft=[0.9, 0.8, 0.7], p_target=[0.95, 0.1, 0.3],
                uniforms=[], num_accepted=1, next_token=4, next_p=0.6, emitted=[1, 4], sources=["draft", "correction"],
                draft_seconds=0.1, verify_seconds=0.2, outcomes=["accepted", "rejected", "unexamined"],
                judged_p=[0.95, 0.1, None], node_uniforms=[None, None, None], next_kind="correction")
    return Round(**{**base, **kw})


def test_tokens_are_coloured_by_source_escaped_and_rejections_on_demand():
    r = make_round()
    pieces = round_pieces(r, Detokenizer(CharTokenizer()))
    assert [p.source for p in pieces] == ["draft", "rejected", "rejected", "correction"]
    assert pieces[1].p_target == 0.1 and pieces[1].q_draft == 0.8 and pieces[2].p_target is None
    hidden = tokens_html(pieces)
    assert hidden.count('class="tok s-') == 2 and "s-rejected" not in hidden
    shown = tokens_html(pieces, show_rejected=True)
    assert shown.count("s-rejected") == 2 and "p_target 0.950 · q_draft 0.900" in shown
    evil = tokens_html([Piece("<script>x</script>", "ar", 0, None, None)])
    assert "<script>" not in evil and "&lt;script&gt;" in evil


def test_race_figure_counts_every_round_and_prompt_pass():
    rounds = [make_round(index=i, prefill_seconds=0.5 if i == 0 else 0.0) for i in range(4)]
    x, y = figures.progress_points(rounds)
    assert y == [0, 0, 2, 4, 6, 8] and x[1] == 0.5 and x[-1] == pytest.approx(0.5 + 4 * 0.3)
    fig = figures.race_figure(rounds, rounds[:2])
    assert len(fig.data) == 2 and len(fig.data[0].x) == 6 and len(fig.data[1].x) == 4
    hist = figures.accepted_histogram(rounds + [make_round(num_accepted=3, emitted=[1, 2, 3, 9])])
    assert list(hist.data[0].y) == [0, 4, 0, 1]


def test_theory_figure_plots_the_formula_and_the_last_run():
    fig = figures.theory_figure(4, 0.3, {"alpha": 0.8, "gamma": 4, "cost": 0.3, "speedup": 1.5})
    predicted = [t for t in fig.data if t.name == "predicted for last run"][0]
    assert predicted.y[0] == pytest.approx(speedup_bound(0.8, 4, 0.3))
    assert [t for t in fig.data if t.name == "measured last run"][0].y[0] == 1.5


@pytest.mark.parametrize("args, msg", [
    (("", "draft", 5, False, 0, 1, 0, 10, False), "enter a prompt"),
    (("x", "beam", 5, False, 0, 1, 0, 10, False), "unknown method"),
    (("x", "ar", 5, False, 0, 1, 0, 10, False), "speculative method"),
    (("x", "draft", 5, False, 0, 1, 0, 10**6, False), "Max new tokens"),
    (("x", "draft", 0, False, 0, 1, 0, 10, False), "Draft tokens"),
    (("x", "draft", 5, False, -1, 1, 0, 10, False), "temperature"),
    (("x", "draft", 5, False, 0, 1, "abc", 10, False), "Numbers only"),
    (("x", "draft", 5, False, 0, 1, -3, 10, False), "seed"),
])
def test_bad_race_inputs_get_a_clear_message(args, msg):
    with pytest.raises(ConfigError, match=msg):
        race.parse_request(*args)


def test_race_streams_both_runs_and_matches_the_engine(tiny_models, target, draft_model):
    request = race.parse_request("ABCDEFGHABCDE", "draft", 4, False, 0, 1, 0, 24, False)
    stream = race.run_race(tiny_models, request)
    first, status = next(stream)
    assert status == "Prompt pass…" and not first.spec.rounds  # the page draws empty charts before any timing
    updates = [(first, status)] + list(stream)
    record = updates[-1][0]
    assert len(updates) == len(record.spec.rounds) + len(record.ar.rounds) + 2
    direct = run(SpeculativeEngine(target, DraftModelDrafter(draft_model, target.vocab_size), method="draft"), "draft",
                 record.prompt_ids, request.config)
    assert record.spec.token_ids == direct.token_ids == record.ar.token_ids
    summary = record.summary()
    assert summary["identical"] is True and summary["speculative"]["sources"] == [
        s for r in direct.rounds for s in r.sources]
    assert summary["speedup"] == pytest.approx(summary["speculative"]["tokens_per_second"]
                                               / summary["autoregressive"]["tokens_per_second"])
    html_out = race.race_outputs(record, False, "")
    assert {"split_plot", "hist_plot"} <= set(html_out)
    assert not {"split_plot", "hist_plot"} & set(race.race_outputs(record, False, "", per_round=False))
    assert html_out["spec"].count('class="tok s-') == 24
    assert "Identical" in race.verdict_html(record, tiny_models.tokenizer)
    assert "Bit-exact" in race.verdict_html(record, tiny_models.tokenizer)  # the tiny target measured 0.0
    last = record.ar.rounds[-1]  # make the plain run part at its last token: an error, unless that was a near-tie
    flipped = dataclasses.replace(last, emitted=last.emitted[:-1] + [last.emitted[-1] + 1])
    record.ar.rounds[-1] = flipped
    assert "✗ Outputs differ from token 23" in race.verdict_html(record, tiny_models.tokenizer)
    record.ar.rounds[-1] = dataclasses.replace(flipped, near_ties=[len(flipped.emitted) - 1])
    record.rounding = 0.05
    assert "≈ Identical up to rounding" in race.verdict_html(record, tiny_models.tokenizer)
    assert record.summary()["near_ties"] == [23]
    record.ar.rounds[-1] = last
    trace_path, charts_path = race.write_downloads(record)
    assert '"speculative_rounds"' in open(trace_path).read() and "plotly" in open(charts_path).read()


def test_step_view_walks_rounds_and_clamps(tiny_models, target, draft_model):
    config = GenerationConfig(max_new_tokens=12, sampling=SamplingConfig(temperature=1.0))
    rounds = run(SpeculativeEngine(target, DraftModelDrafter(draft_model, target.vocab_size), method="draft"), "draft", PROMPT,
                 config).rounds
    label = tiny_models.tokenizer.decode
    html, left, right, index = step_view(rounds, 99, lambda t: label([t]), greedy=False)
    assert index == len(rounds) - 1 and f"Round {len(rounds)} of {len(rounds)}" in html
    rejected = [i for i, r in enumerate(rounds) if r.num_accepted < len(r.drafted)]
    assert rejected  # a sampled run with this draft always has some rejection
    html, left, right, _ = step_view(rounds, rejected[0], lambda t: label([t]), greedy=False)
    assert "reject: u=" in html and "Residual" in right.layout.title.text
    assert step_view([], 0, str, True)[3] == 0


def test_exactness_lab_recovers_p_and_flags_q():
    p, q, names = exactness.toy_distributions(seed=3)
    counts = exactness.simulate(p, q, 20_000, seed=1)
    assert exactness.chi_square(counts, p)[2] > 1e-3
    q_counts = torch.round(q * 20_000)  # what blindly accepting the draft would produce
    assert exactness.chi_square(q_counts, p)[2] < 1e-6
    text, fig = exactness.lab_view(p, q, names, counts)
    assert "consistent with p" in text and len(fig.data) == 3


def test_exactness_lab_handles_tokens_only_the_draft_proposes():
    """Real contexts: after top-k, q has support where p is zero; those cells must not break the statistic."""
    p = torch.tensor([0.5, 0.3, 0.2, 0.0, 0.0])
    q = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2])
    counts = exactness.simulate(p, q, 10_000, seed=2)
    assert counts[3:].sum() == 0
    stat, dof, pvalue = exactness.chi_square(counts, p)
    assert dof == 2 and pvalue > 1e-3
    assert exactness.chi_square(torch.tensor([10.0, 10, 10, 1, 0]), p)[2] == 0.0


@pytest.mark.embedded
def test_streaming_detokenizer_matches_full_decode_on_multibyte_text():
    from app.resources import _embedded_tokenizer

    tok = _embedded_tokenizer()
    text = "def naïve(x):\n    return '日本語 ✓ 🚀' + x  # café\n"
    ids = tok(text).input_ids
    detok = Detokenizer(tok)
    pieces = [detok.add(i) for i in ids]
    assert "".join(pieces) == tok.decode(ids) == text
    assert "" in pieces  # some tokens carry half a character and wait for the next


def test_exactness_lab_p_is_bitwise_the_same_in_a_verify_forward(draft_model):
    from specdec_core.backends.exact import make_exact
    from specdec_core.backends.models import tiny_model

    target = tiny_model(seed=11)
    make_exact(target)
    models = Models(target, draft_model, CharTokenizer(), (), "tiny exact")
    ids = models.tokenizer("def add(a, b):\n    return").input_ids
    assert exactness.same_p_bits(models, ids, SamplingConfig(temperature=0.8))


def test_cost_curve_figure_shows_measured_T_against_free_verification():
    from specdec_core.backends.profile import Profile

    p = Profile(device="cpu", isa="AVX2", torch="2.13.0", model="m", target_repr="int8 weight-only", draft_repr="x",
                methods=[],
                target_ms={1: 150.0, 2: 175.0, 4: 225.0, 8: 470.0}, draft_ms={}, prefill_tokens_per_s=30.0,
                bandwidth_gb_s=12.0, utilization=0.6, target_bytes=1_700_000_000)
    fig = figures.cost_curve_figure(p)
    measured = next(t for t in fig.data if str(t.name).startswith("measured"))
    assert list(measured.y) == pytest.approx([1.0, 175 / 150, 1.5, 470 / 150])
    assert any(list(t.y) == [1.0] * 4 for t in fig.data)  # the free-verification line


def test_how_it_works_states_what_this_machines_profile_measured(monkeypatch):
    from app import resources, tab_theory
    from specdec_core.backends.profile import Profile

    def profile(target_ms):
        return Profile(device="cpu", isa="AVX2", torch="2.13.0", model="m", target_repr="int8 weight-only",
                       draft_repr="x", methods=[], target_ms=target_ms, draft_ms={}, prefill_tokens_per_s=30.0,
                       bandwidth_gb_s=12.0, utilization=0.6, target_bytes=1_700_000_000)

    monkeypatch.setattr(resources.STORE, "profile", None)
    assert "once the page has measured" in tab_theory.machine_sentence()
    monkeypatch.setattr(resources.STORE, "profile", profile({1: 100.0, 4: 104.0, 6: 106.0}))
    assert "(1.05×): about the same as one" in tab_theory.machine_sentence()
    monkeypatch.setattr(resources.STORE, "profile", profile({1: 40.0, 2: 79.0, 4: 118.0, 6: 163.0}))
    text = tab_theory.machine_sentence()
    assert "140 ms against 40 ms for one (3.51×)" in text and "several times one" in text


@pytest.mark.parametrize("method", ["draft", "layerskip", "lookup"])
def test_two_concurrent_races_share_drafters_not_state(target, draft_model, method):
    """Two races at once (the page serves two) on different prompts, stepped in lockstep from two threads: each equals
    its own plain output, the drafter object is shared and its per-request state is not, and both say so."""
    import threading

    models = Models(target, draft_model, CharTokenizer(), (), "tiny test models")
    requests = [race.parse_request(p, method, 4, False, 0, 1, 0, 24, False) for p in ("ABCDEFGHABCDE", "QWERTYQWERTY")]
    barrier, records, errors = threading.Barrier(2), [None, None], []

    def go(i):
        try:
            for record, _ in race.run_race(models, requests[i]):
                records[i] = record
                try:
                    barrier.wait(timeout=5)  # interleave the two runs round by round
                except threading.BrokenBarrierError:
                    pass  # the other race finished first
        except Exception as e:  # noqa: BLE001 - surfaced below
            errors.append(e)
        finally:
            barrier.abort()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for record in records:
        assert record.spec.token_ids == record.ar.token_ids and len(record.ar.token_ids) == 24
        assert record.shared and record.summary()["shared_machine"]
    assert records[0].spec.token_ids != records[1].spec.token_ids
    assert models.drafter(method) is models.drafter(method)
    alone = list(race.run_race(models, requests[0]))[-1][0]
    assert alone.spec.token_ids == records[0].spec.token_ids and not alone.shared


def test_race_and_bench_compare_through_one_model(tiny_models, target):
    """The race's summary and the bench's row for the same two runs give the same speedup, α, τ, mean γ, c and
    prediction: both format one Row (core/run.compare)."""
    from specdec_core.bench.aggregate import summarise
    from specdec_core.core.run import Run
    from specdec_core.backends.profile import Profile

    profile = Profile(device="cpu", isa="AVX2", torch="x", model="m", target_repr="r", draft_repr="d",
                      methods=["draft"],
                      target_ms={1: 10.0, 2: 11.0, 4: 13.0, 8: 20.0}, draft_ms={"draft": 2.0},
                      prefill_tokens_per_s=100.0, bandwidth_gb_s=10.0, utilization=0.5, target_bytes=1)
    request = race.parse_request("ABCDEFGHABCDE", "draft", 3, False, 0, 1, 0, 20, False)
    record = list(race.run_race(tiny_models, request, profile))[-1][0]
    sm = record.summary()
    runs = [Run.of(m, record.prompt_ids, view.rounds, seconds=1.0, prompt_id="p")
            for m, view in (("ar", record.ar), ("draft", record.spec))]
    row = {r.method: r for r in summarise(runs, greedy=True, profile=profile)}["draft"]
    assert row.decode_speedup == pytest.approx(sm["speedup"]) and row.alpha == sm["speculative"]["acceptance_rate"]
    assert row.tau == pytest.approx(sm["speculative"]["mean_tokens_per_round"])
    assert row.cost_ratio == pytest.approx(sm["cost_ratio"]) and row.predicted_speedup == pytest.approx(
        sm["predicted_speedup"])
    assert sm["mean_draft_tokens"] == pytest.approx(sum(r.num_drafted for r in record.spec.rounds)
                                                    / len(record.spec.rounds))
    assert sm["end_to_end_speedup"] == pytest.approx(record.row().end_to_end_speedup) is not None
    assert sm["row"]["decode_speedup"] == sm["decode_speedup"] == sm["speedup"] and sm["row"]["tree"] is False
    assert sm["num_draft_tokens"] == 3 and sm["draft_length"] == "fixed"


def test_compare_runs_every_method_after_ar_and_survives_a_failing_one(tiny_models):
    from app import compare

    request = race.parse_request("ABCDEFGHABCDE", "draft", 3, False, 0, 1, 0, 16, False)
    methods = compare.parse_methods(["draft", "lookup", "medusa", "layerskip"])
    updates = list(compare.run_compare(tiny_models, request, methods))
    state = updates[-1][0]
    assert [x.method for x in state.lanes] == ["ar", "draft", "lookup", "medusa", "layerskip"]
    medusa = state.lanes[3]
    assert medusa.error and "Medusa heads" in medusa.error and not medusa.rounds  # the tiny target has none
    rows = {r["method"]: r for r in state.summary()["methods"]}
    for m in ("draft", "lookup", "layerskip"):
        assert rows[m]["identical"] is True and rows[m]["decode_speedup"] > 0
    assert rows["ar"]["decode_speedup"] == 1.0 and rows["medusa"]["error"]
    table = compare.table_html(state)
    assert "failed:" in table and table.count("<tr>") == 5  # header + ar + three that ran
    assert compare.outputs_html(state).count("cmp-row") == 5 and len(compare.figure(state).data) == 4
    best = compare.Comparing.fastest(list(rows.values()))
    if best["method"] != "ar" and best["decode_speedup"] > 1.0:  # the verdict names the fastest that matched ar
        assert f"Fastest here: {REGISTRY[best['method']].label}, {best['decode_speedup']:.2f}×" in compare.verdict_html(state)
    else:
        assert "Plain decoding was fastest" in compare.verdict_html(state)
    json_path, html_path = compare.downloads(state)
    assert '"methods"' in open(json_path).read() and "plotly" in open(html_path).read()
    with pytest.raises(ConfigError, match="at least one method"):
        compare.parse_methods([])
    assert compare.category_plot(state) is None and "by_category" not in state.summary()


def test_compare_on_a_suite_runs_each_category_and_pools(tiny_models):
    """A suite: one question per Spec-Bench category, every method on each, per-category and pooled rows."""
    from app import compare

    request = race.parse_request("unused", "draft", 3, False, 0, 1, 0, 6, False)
    choice = next(k for k, v in compare.SUITES.items() if v == "specbench-mini")
    updates = list(compare.run_compare(tiny_models, request, ["draft", "lookup"], None, choice))
    state = updates[-1][0]
    cats = state.by_category()
    assert len(state.items) == len(cats) == 6 and all(it.request.chat for it in state.items)
    assert all(set(rows) == {"ar", "draft", "lookup"} for rows in cats.values())
    for it in state.items:  # each prompt's lanes: ar first, every output identical to it
        assert [x.method for x in it.lanes] == ["ar", "draft", "lookup"] and all(x.done for x in it.lanes)
        assert all(x.token_ids == it.lanes[0].token_ids for x in it.lanes)
    pooled = {r["method"]: r for r in state.summary()["methods"]}
    assert pooled["draft"]["tokens"] == sum(cats[c]["draft"]["tokens"] for c in cats) > 0
    assert pooled["draft"]["identical"] is True and pooled["ar"]["decode_speedup"] == 1.0
    fig = compare.category_plot(state)
    assert [t.name for t in fig.data] == ["draft", "lookup"] and list(fig.data[0].x) == list(cats)
    assert "pooled over 6 prompts" in compare.table_html(state)
    assert '"by_category"' in open(compare.downloads(state)[0]).read()
    with pytest.raises(ConfigError, match="Unknown prompt set"):
        compare.items_for(request, "every prompt ever", ["draft"])


def test_the_page_keeps_one_store_per_backend_and_refuses_unknown_ones(monkeypatch):
    import gradio as gr

    from app import handling, resources

    monkeypatch.setattr(resources, "_STORES", {})
    assert resources.store(None) is resources.STORE and resources.store("auto") is resources.STORE
    other = "llamacpp" if resources.STORE.backend == "torch" else "torch"
    picked = resources.store(other)
    assert picked is resources.store(other) and picked.backend == other and not picked.ready  # loads on first use
    with pytest.raises(ValueError, match="unknown backend 'onnx'"):
        resources.store("onnx")
    with pytest.raises(gr.Error, match="unknown backend"):
        handling.models("onnx")
