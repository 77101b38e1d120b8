"""The cost profile (measured on a tiny model: structure and caching, no timing claims) and the one prediction."""
from __future__ import annotations

import json

import pytest

from conftest import PROMPT, make_drafter
from specdec_core.backends import profile as prof
from specdec_core.methods import timing
from specdec_core.methods.lookup import LookupDrafter
from specdec_core.backends.exact import make_exact
from specdec_core.core.metrics import expected_tokens_from_positions, predicted_speedup
from specdec_core.methods.registry import METHODS, REGISTRY
from specdec_core.backends.models import tiny_model


def fake(**kw) -> prof.Profile:
    base = dict(device="cpu (x, 2 threads)", isa="AVX2", torch="2.13.0", model="m", target_repr="int8 weight-only",
                draft_repr="int8 dynamic", methods=["draft"], target_ms={1: 100.0, 2: 120.0, 4: 160.0, 8: 300.0},
                draft_ms={"draft": 20.0},
                prefill_tokens_per_s=50.0, bandwidth_gb_s=10.0, utilization=0.5, target_bytes=500_000_000)
    return prof.Profile(**{**base, **kw})


def test_T_interpolates_and_extrapolates():
    p = fake()
    assert p.T(1) == 100.0 and p.T(3) == pytest.approx(140.0) and p.T(6) == pytest.approx(230.0)
    assert p.T(10) == pytest.approx(370.0)  # past 8: the slope of 4 -> 8


def test_T_grows_with_the_context_along_the_two_measured_lengths():
    p = fake(long_context_ms={1: 124.0, 2: 150.0, 4: 200.0, 8: 380.0})
    span = prof.LONG_CONTEXT - prof.PROMPT_TOKENS
    assert p.T(1, prof.PROMPT_TOKENS) == pytest.approx(100.0) and p.T(1, prof.LONG_CONTEXT) == pytest.approx(124.0)
    assert p.T(2, prof.PROMPT_TOKENS + span * 2) == pytest.approx(120.0 + 2 * 30.0)  # linear past the long one
    assert p.T(16, prof.LONG_CONTEXT) == pytest.approx(p.T(16) + 80.0 * 2)  # past 8: 8's growth, scaled per row
    assert p.T(1) == 100.0 and fake().T(4, 5000) == 160.0  # no context given, or none measured: the short curve
    assert p.T(8, 0) >= 0.6 * 300.0
    cost = timing.cost(p, "draft")
    assert cost.T(2, prof.LONG_CONTEXT) == pytest.approx(150.0) and cost.T(2) == 120.0


def test_the_cost_aware_length_shortens_when_a_long_context_makes_rows_dear():
    """Rows nearly free after a short prompt, dear after a long one: the schedule drafts less there."""
    from specdec_core.core.config import DraftConfig
    from specdec_core.core.schedule import DraftLengthSchedule

    p = fake(target_ms={1: 100.0, 2: 102.0, 4: 106.0, 8: 114.0}, long_context_ms={1: 110.0, 2: 190.0, 4: 350.0, 8: 700.0})
    cost = timing.cost(p, "draft")
    short = DraftLengthSchedule(DraftConfig(5, cost_aware=True), cost, context=prof.PROMPT_TOKENS)
    long = DraftLengthSchedule(DraftConfig(5, cost_aware=True), cost, context=3000)
    assert short.length >= 3 and long.length == 0
    short.update(0, 0, context=3000)
    assert short.length == 0  # the context the engine reports each round moves the costs


def test_prediction_by_hand():
    assert expected_tokens_from_positions([0.8, 0.5], 2) == pytest.approx(1 + 0.8 + 0.4)
    assert expected_tokens_from_positions([0.8], 3) == pytest.approx(1.8)  # unmeasured positions never accepted
    p = fake()
    # E = 2.2 tokens per round; cost = 2 x 20 + T(3) = 40 + 140 = 180 ms per round vs 100 ms per token plain
    assert predicted_speedup([0.8, 0.5], {2: 7}, 20.0, p.T) == pytest.approx(2.2 * 100 / 180)
    assert predicted_speedup([], {0: 5}, 20.0, p.T) == pytest.approx(1.0)  # drafting nothing is plain decoding
    # lookup-like: 3 rounds without a match (1 token, T(1)) and 1 round of 2 drafts: (3 + 2.2) x 100 / (300 + 180)
    assert predicted_speedup([0.8, 0.5], {0: 3, 2: 1}, 20.0, p.T) == pytest.approx(5.2 * 100 / 480)
    # a 4-node tree of depth 2: E from two positions, one forward of 5 (T(5) = 195)
    assert predicted_speedup([0.8, 0.5], {4: 1}, 0.0, p.T, tree=True) == pytest.approx(2.2 * 100 / 195)


def test_measure_cache_and_reject_foreign_or_corrupt(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    target = tiny_model(seed=2)
    make_exact(target)
    target.representation = "fp32"
    timers = prof.Timers({"lookup": timing.drafter_timer(LookupDrafter(), target)})
    said = []
    first = prof.get(target, timers, "none", ["lookup"], progress=False, say=said.append)
    assert set(first.target_ms) == set(prof.SIZES) and all(v > 0 for v in first.target_ms.values())
    assert first.bandwidth_gb_s > 0 and 0 < first.utilization and "lookup" in first.draft_ms
    assert set(first.kernel_tflops) == set(prof.ROOFLINE_SIZES) and all(v > 0 for v in first.kernel_tflops.values())
    assert first.unverified_ms == {}  # the torch target verifies any number of rows: nothing is timed past it
    assert prof.get(target, timers, "none", ["lookup"], progress=False, say=said.append) == first and not said  # cached
    path = prof.cache_path(prof.machine_key(target, "none", ["lookup"]))
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "torch": "0.0"}))  # another torch version: never used
    assert prof.load_cached(prof.machine_key(target, "none", ["lookup"]), said.append) is None and "another" in said[-1]
    path.write_text("{not json")
    assert prof.load_cached(prof.machine_key(target, "none", ["lookup"]), said.append) is None and "unreadable" in said[-1]
    assert prof.get(target, timers, "none", ["lookup"], progress=False, say=said.append).target_ms  # measured again


def test_cost_aware_length_follows_the_machine():
    from specdec_core.core.config import DraftConfig
    from specdec_core.core.schedule import Cost, DraftLengthSchedule

    auto = DraftConfig(cost_aware=True)
    flat = DraftLengthSchedule(auto, Cost(lambda n: 170.0, 1.0))  # AMX-like: verifying 16 costs what 1 does
    linear = DraftLengthSchedule(auto, Cost(lambda n: 150.0 * n, 60.0))  # emulated bf16: every token costs a step
    assert flat.length >= 4 and linear.length == 0  # every verified token costs a step: not even a perfect draft pays
    assert max(range(17), key=linear.expected_rate) == 0
    for _ in range(20):  # the drafter is always right: drafting longer pays where verification is flat
        flat.update(flat.length, flat.length)
    assert flat.length == auto.max_adaptive_tokens
    lengths = []
    for _ in range(16):
        linear.update(linear.length, 0)
        lengths.append(linear.length)
    assert lengths == [0] * 16  # plain decoding, and no probing (test_no_probe_where_even_a_perfect_draft_cannot_pay)
    assert DraftLengthSchedule(auto, None).length == auto.num_draft_tokens  # no profile: the fixed default


def test_tree_budget_fills_the_rows_that_cost_nothing():
    """A tree verifies as many nodes as ride free on this machine's forward: all its nodes where T(n) is flat, up to
    a step in T (the exact target's row blocks of 16), and only its depth where every row costs."""
    from specdec_core.core.config import DraftConfig
    from specdec_core.core.schedule import Cost, DraftLengthSchedule

    auto = DraftConfig(cost_aware=True)
    stepped = DraftLengthSchedule(auto, Cost(lambda n: 190.0 + (n - 1) + (180.0 if n > 16 else 0.0), 5.0))
    linear = DraftLengthSchedule(auto, Cost(lambda n: 100.0 + 60.0 * n, 5.0))
    assert [stepped.node_budget(d, 64) for d in (0, 1, 4)] == [0, 15, 15]  # 15 nodes + the root: one block
    assert stepped.node_budget(2, 6) == 6  # nor past the room left
    assert [linear.node_budget(d, 64) for d in (1, 3)] == [1, 3]
    assert linear.node_budget(3, 2) == 3  # never below the depth drafted
    assert DraftLengthSchedule(DraftConfig(), None).node_budget(3, 64) is None  # fixed length: the tree's own size


def test_no_probe_where_even_a_perfect_draft_cannot_pay():
    """llama.cpp on a 2-core Zen 4 (profile --backend llamacpp): T(n) 40, 79, 97, 118, 163, 185 ms, a draft token
    23.3 ms. Even an always-right draft loses there, so the schedule never probes (each probe made the draft model
    catch up over the tokens since its last draft: the draft lane ran 0.64-0.76x); the torch int8 target's T(2) of
    1.13 T(1) pays, so there it keeps probing."""
    from specdec_core.core.config import DraftConfig
    from specdec_core.core.schedule import PROBE_EVERY, Cost, DraftLengthSchedule

    llama = dict(zip((1, 2, 3, 4, 5, 6, 7), (40.0, 79.0, 97.0, 118.0, 140.0, 163.0, 185.0)))
    auto = DraftConfig(cost_aware=True, max_adaptive_tokens=6)
    steep = DraftLengthSchedule(auto, Cost(lambda n: llama[min(n, 7)], 23.3, prior=(0.95,)))
    flat = DraftLengthSchedule(auto, Cost(lambda n: 99.5 + 13.3 * (n - 1), 40.0, prior=(0.1,)))
    assert not steep.could_pay() and flat.could_pay()
    lengths = {"steep": [], "flat": []}
    for _ in range(3 * PROBE_EVERY):
        for name, schedule in (("steep", steep), ("flat", flat)):
            lengths[name].append(schedule.length)
            schedule.update(schedule.length, 0)
    assert set(lengths["steep"]) == {0} and max(lengths["flat"]) == 1  # the flat one still probes now and then


def test_no_probe_makes_a_drafter_catch_up_over_a_long_context():
    """A drafter with its own cache (draft model, layer skip, EAGLE) first forwards every token since its last draft:
    on a 1 335-token prompt layer skip's probes cost it 0.29x in decode (Zen 4, torch int8). So a probe waits until
    such a drafter is within PROBE_BEHIND tokens; one without a cache (prompt lookup) probes as before, and a drafter
    that drafts every round stays synced and probes too."""
    from specdec_core.core.config import DraftConfig
    from specdec_core.core.schedule import PROBE_BEHIND, PROBE_EVERY, Cost, DraftLengthSchedule

    auto = DraftConfig(cost_aware=True, max_adaptive_tokens=6)
    costs = dict(target_ms=lambda n: 99.5 + 13.3 * (n - 1), draft_ms=40.0, prior=(0.1,))  # plain decoding pays best
    lengths = {}
    for name, catches_up, prompt in (("long", True, 1335), ("short", True, PROBE_BEHIND), ("lookup", False, 1335)):
        schedule = DraftLengthSchedule(auto, Cost(**costs, catches_up=catches_up), context=prompt)
        lengths[name] = []
        for _ in range(2 * PROBE_EVERY):
            lengths[name].append(schedule.length)
            schedule.update(schedule.length, 0, (schedule.context or 0) + 1)
    assert set(lengths["long"]) == {0}
    assert lengths["short"][0] == 1 and lengths["lookup"][0] == lengths["lookup"][PROBE_EVERY] == 1
    eager = DraftLengthSchedule(auto, Cost(**{**costs, "prior": (0.95,)}, catches_up=True), context=1335)
    assert eager.length >= 1  # a length that pays is drafted whatever the catch-up: it is paid once


def test_a_drafter_far_behind_drafts_only_where_the_rest_of_the_answer_repays_its_catch_up():
    """A draft model behind a 1 335-token prompt spent 3.9 s catching up to save about 3.1 s over a 64-token answer
    (0.91x in decode, Zen 4, torch int8). The cost-aware length weighs the catch-up (tokens behind x the profile's ms
    per token) against what drafting saves over the tokens still to generate."""
    from specdec_core.core.config import DraftConfig
    from specdec_core.core.schedule import Cost, DraftLengthSchedule

    auto = DraftConfig(cost_aware=True, max_adaptive_tokens=6)
    costs = dict(target_ms=lambda n: 100.0 + 15.0 * (n - 1), draft_ms=30.0, prior=(0.8, 0.7, 0.6), catches_up=True,
                 catch_up_ms=3.0)
    length = lambda context, remaining, **kw: DraftLengthSchedule(  # noqa: E731
        auto, Cost(**{**costs, **kw}), context=context, remaining=remaining).length
    assert length(1335, 64) == 0  # saves ~20 ms a token x 64 < 1 335 x 3 ms
    assert length(1335, 1024) >= 1 and length(20, 64) >= 1  # a long answer repays it; a short prompt has none
    assert length(1335, 64, catch_up_ms=0.0) >= 1 and length(1335, 64, catches_up=False) >= 1  # nothing to weigh
    schedule = DraftLengthSchedule(auto, Cost(**costs), context=1335, remaining=1024)
    schedule.update(schedule.length, schedule.length, 1335 + schedule.length + 1, 900)  # drafted: synced now
    assert schedule.synced == schedule.context and schedule.length >= 1


def test_measured_prior_sets_the_first_rounds_length():
    """Before its own rounds, the cost-aware length trusts the bench's acceptance for this method and kind of prompt:
    a method that was rarely right on chat does not draft its first rounds there (EAGLE on chat once ran 0.91x)."""
    from specdec_core.core.config import DraftConfig
    from specdec_core.methods.recommend import prior
    from specdec_core.core.schedule import PRIOR_RATE, Cost, DraftLengthSchedule

    auto = DraftConfig(cost_aware=True)
    costs = dict(target_ms=lambda n: 100.0 + 20.0 * n, draft_ms=5.0)  # verifying grows with its rows, as int8 here
    flat = DraftLengthSchedule(auto, Cost(**costs))
    good = DraftLengthSchedule(auto, Cost(**costs, prior=(0.95, 0.9)))
    poor = DraftLengthSchedule(auto, Cost(**costs, prior=(0.1,)))
    assert poor.length == 1 and max(range(17), key=poor.expected_rate) == 0  # plain decoding; this round probes
    assert good.length > flat.length >= 1
    assert Cost(**costs, prior=(0.5, 0.25)).prior_rate(7) == 0.25 and Cost(**costs).prior_rate(3) == PRIOR_RATE
    for _ in range(40):  # its own rounds outweigh the prior: the poor prior's method turns out always right
        poor.update(poor.length, poor.length)
    assert poor.length >= 2
    assert prior("draft", "code") and prior("no-such-method", "prose") == ()
    with pytest.raises(ValueError, match="kind"):
        prior("draft", "poetry")
    p = fake(draft_ms={"draft": 20.0})
    assert timing.cost(p, "draft", "code").prior == prior("draft", "code") and timing.cost(p, "draft").prior == ()


@pytest.mark.parametrize("name", ["draft", "lookup", "always-right", "right-for-1", "tree-right-second"])
def test_cost_aware_greedy_equals_plain_greedy(name, target, draft_model):
    from conftest import PROMPT, make_drafter

    from specdec_core.core.config import DraftConfig, GenerationConfig
    from specdec_core.core.engine import SpeculativeEngine
    from specdec_core.core.schedule import Cost
    from specdec_core.core.session import run

    config = GenerationConfig(max_new_tokens=40, draft=DraftConfig(cost_aware=True))
    reference = run(SpeculativeEngine(target), "ar", PROMPT, config).token_ids
    engine = SpeculativeEngine(target, make_drafter(name, target, draft_model), cost=Cost(lambda n: 100 + 5 * n, 10.0), method=name)
    result = run(engine, name, PROMPT, config)
    assert result.token_ids == reference
    assert len({r.num_draft_requested for r in result.rounds}) > 1 or name == "lookup"  # the length moved


def test_recommendation_picks_the_fastest_that_pays_or_says_none_does():
    from specdec_core.methods.recommend import PAYS, best_length, load_priors, recommend

    priors = {"kinds": {"code": {"draft": [0.9, 0.9, 0.9], "lookup": [0.3], "medusa-tree": [0.5, 0.5]},
                        "prose": {"draft": [0.2, 0.1], "lookup": [0.05]}}}
    p = fake(draft_ms={"draft": 20.0, "lookup": 0.01, "medusa-tree": 1.0})
    code = recommend(p, "code", priors)
    assert code.best.method == "draft" and code.best.length == 3  # 3 positions measured: longer cannot gain
    assert code.best.speedup == pytest.approx(predicted_speedup([0.9] * 3, {3: 1}, 20.0, p.T))
    assert [x.speedup for x in code.predictions] == sorted((x.speedup for x in code.predictions), reverse=True)
    tree = next(x for x in code.predictions if x.method == "medusa-tree")
    assert tree.length == 1 and tree.speedup == pytest.approx(1.5 * 100 / 121.0)  # the node budget the costs favour
    assert "Predicted fastest here (AVX2 · int8 weight-only) for code prompts: **draft**" in code.text()
    prose = recommend(p, "prose", priors)
    assert prose.best is None and all(x.speedup < PAYS for x in prose.predictions)
    assert "No method is predicted to pay" in prose.text()
    assert best_length("draft", [0.2], 20.0, p.T).length == 0  # plain decoding: what the cost-aware length falls to
    assert recommend(None, "code", priors).text().startswith("No prediction yet")
    shipped = load_priors()  # the file the page reads: every engine method for both kinds
    assert set(shipped["kinds"]) == {"code", "prose"} and "draft" in shipped["kinds"]["code"]


@pytest.mark.parametrize("name", [m for m in METHODS if m != "ar"])
def test_every_drafter_drafts_in_the_context_it_is_timed_in(name, target, draft_model):
    """A timer of a drafter that proposes nothing measures nothing (EAGLE once showed 0.0 ms for want of features)."""
    drafter = make_drafter(name, target, draft_model)
    assert drafter.propose(drafter.start(), timing.timing_context(target, PROMPT, 3)).tokens
    assert timing.drafter_timer(drafter, target, 3)(PROMPT) > 0  # a round after a synced one (EAGLE once failed here)
    if REGISTRY[name].catches_up:  # its own cache: its catch-up is timed from the same states (runs, never negative)
        assert timing.catch_up_timer(drafter, target, 8)(PROMPT) >= 0.0


def test_auto_times_each_representation_as_the_exact_target_runs_it():
    from specdec_core.backends.representation import choose_cpu, faster

    choice = choose_cpu(tiny_model(seed=2).model)
    assert "1/6/16 rows" in choice.reason and set(choice.ms) == {"bf16", "int8"}
    assert all(len(ms) == 3 and min(ms) > 0 for ms in choice.ms.values())
    assert choice.representation == faster(choice.ms)


@pytest.mark.parametrize("bf16, int8, expected", [
    ([2.30, 2.35, 2.38], [0.71, 2.05, 4.04], "int8"),  # Zen 4, AVX-512 + bf16, no AMX, quiet
    ([2.19, 2.36, 2.30], [0.80, 1.67, 7.74], "int8"),  # the same with a busy core (a sum of ms picked bf16)
    ([0.84, 0.93, 1.01], [0.40, 1.29, 3.80], "bf16"),  # AMX Xeon: bf16 flat in rows
    ([0.84, 6.70, 12.0], [0.49, 2.60, 4.30], "int8"),  # the AVX2 setting: bf16 emulated
])
def test_auto_weighs_each_row_count_alike(bf16, int8, expected):
    """One MLP layer's ms at 1/6/16 rows, measured on the machines named (docs/performance.md)."""
    from specdec_core.backends.representation import faster

    assert faster({"bf16": bf16, "int8": int8}) == expected


def test_priors_pool_the_runs_of_several_bench_files(tmp_path):
    from specdec_core.methods.recommend import priors_from_bench

    def bench(path, method, accepted):  # one run: 4 rounds of 2 drafted tokens, `accepted` tokens accepted in each
        stats = {"new_tokens": 12, "rounds": 4, "target_forwards": 4, "drafted": 8, "accepted": 4 * accepted,
                 "acceptance_rate": accepted / 2, "mean_tokens_per_round": accepted + 1.0,
                 "per_position_acceptance": [1.0, 1.0] if accepted == 2 else [1.0, 0.0] if accepted else [0.0, 0.0],
                 "draft_lengths": {"2": 4}, "draft_seconds": 0.1, "verify_seconds": 0.4, "prefill_seconds": 0.1,
                 "wall_seconds": 0.6, "tokens_per_second": 24.0}
        path.write_text(json.dumps({"runs": [{"method": method, "stats": stats}, {"method": "ar", "stats": None}]}))
        return path

    one = priors_from_bench(bench(tmp_path / "a.json", "draft", 2), bench(tmp_path / "b.json", "eagle", 0))
    assert one == {"draft": [1.0, 1.0], "eagle": [0.0, 0.0]}
    both = priors_from_bench(tmp_path / "a.json", bench(tmp_path / "c.json", "draft", 1))
    assert both["draft"][0] == 1.0 and both["draft"][1] == 0.5  # pooled over the rounds of both files
