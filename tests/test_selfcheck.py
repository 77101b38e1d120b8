"""selfcheck on tiny models: every method that can be built is compared with ar; the rest are named with the reason;
the report says OK only when nothing differs and the target measured bit-exact."""
from __future__ import annotations

import json

from specdec_core.backends import profile as prof
from specdec_core.methods import timing
from specdec_core.methods.registry import REGISTRY
from specdec_core.bench import selfcheck
from specdec_core.bench.prompts import BenchPrompt
from specdec_core.core.config import GenerationConfig
from specdec_core.backends.exact import make_exact, self_check
from specdec_core.backends.models import perturbed_copy, tiny_model
from specdec_core.methods.registry import MethodOptions

from conftest import CharTokenizer  # noqa: E402


def test_selfcheck_report_on_tiny_models():
    target = tiny_model(seed=2)
    make_exact(target)
    target.rounding = self_check(target).logits
    draft = perturbed_copy(target)
    profile = prof.measure(target, timing.drafter_timers(target, draft), "fp32", sorted(REGISTRY), progress=False)
    prompts = [BenchPrompt("a", "def f(x): return x + x + x"), BenchPrompt("b", "abcabcabcabc")]
    report = selfcheck.check(target, draft, CharTokenizer(), profile, GenerationConfig(max_new_tokens=12), MethodOptions(),
                             progress=False, prompts=prompts)
    ran = [m["method"] for m in report["methods"]]
    assert ran[0] == "ar" and {"draft", "lookup", "layerskip"} <= set(ran)
    assert "no Medusa heads" in report["skipped"]["medusa"] and "medusa" not in ran
    assert report["exactness"] == {"compared": 2 * (len(ran) - 1), "mismatches": []}
    assert report["ok"] and report["target_rounding"] == 0.0
    assert json.loads(json.dumps(report))["prompts"] == ["a", "b"]
    text = "\n".join(selfcheck.lines(report))
    assert "| draft |" in text and "OK in" in text and "skipped medusa" in text
    target.rounding = 0.25  # a device that is not bit-exact is never reported OK
    assert not selfcheck.check(target, draft, CharTokenizer(), profile, GenerationConfig(max_new_tokens=4), MethodOptions(),
                               progress=False, prompts=prompts[:1])["ok"]
