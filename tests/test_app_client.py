"""The stable API: gradio_client drives the running app (tiny model) and gets what the engine computes directly."""
from __future__ import annotations

import time

import pytest

from app.resources import TINY, _load
from specdec_core.core.config import DraftConfig, GenerationConfig
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.methods.registry import build_drafter
from specdec_core.core.session import encode_prompt, run

pytestmark = pytest.mark.embedded  # the tiny model borrows the embedded tokenizer


def call_when_ready(client, *args, api_name):
    for _ in range(120):
        try:
            return client.predict(*args, api_name=api_name)
        except Exception as e:  # noqa: BLE001 - the app says "Loading models" until they are in
            if "Loading models" not in str(e):
                raise
            time.sleep(1)
    raise TimeoutError("models did not load")


def test_race_endpoint_matches_the_engine(app_server):
    from gradio_client import Client

    client = Client(app_server, verbose=False)
    prompt = "def fibonacci(n):"
    out = call_when_ready(client, prompt, "lookup", 3, False, 0, 1, 0, 16, False, False, api_name="/race")
    spec_html, ar_html, *_, summary = out
    assert "Identical" in out[7]
    models = _load(TINY, "")
    ids = encode_prompt(models.tokenizer, prompt)
    config = GenerationConfig(max_new_tokens=16, draft=DraftConfig(num_draft_tokens=3))
    direct = run(SpeculativeEngine(models.target, build_drafter("lookup", models.target), models.eos, method="lookup"), "lookup", ids,
                 config)
    spec = summary["speculative"]
    assert spec["token_ids"] == direct.token_ids == summary["autoregressive"]["token_ids"]
    assert spec["sources"] == [s for r in direct.rounds for s in r.sources]
    assert spec["rounds"] == direct.stats.rounds and spec["accepted"] == direct.stats.accepted
    assert spec_html.count('class="tok s-') == 16


def test_bad_input_is_a_message_and_the_app_keeps_serving(app_server):
    from gradio_client import Client

    client = Client(app_server, verbose=False)
    with pytest.raises(Exception, match="enter a prompt"):
        call_when_ready(client, "   ", "draft", 3, False, 0, 1, 0, 8, False, False, api_name="/race")
    with pytest.raises(Exception, match="Max new tokens|greater than maximum value 512"):
        call_when_ready(client, "x", "draft", 3, False, 0, 1, 0, 100000, False, False, api_name="/race")
    out = call_when_ready(client, "hello", "draft", 3, False, 0, 1, 0, 4, False, False, api_name="/race")
    assert out[-1]["speculative"]["new_tokens"] == 4
    step = call_when_ready(client, "hello", "draft", 3, 1.0, 0, False, api_name="/step")
    assert "Round 1 of" in step[0]
