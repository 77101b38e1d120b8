"""The method registry is the one list: every front end reads it, every entry builds a drafter whose accepted tokens
carry the method's name, and README's method table is the registry's."""
from __future__ import annotations

from pathlib import Path

import pytest

from specdec_core.core.config import ConfigError, EagleConfig, GenerationConfig, MedusaConfig
from specdec_core.methods.registry import METHODS, REGISTRY, MethodOptions, build_drafter, parse_method, readme_table

from conftest import PROMPT, cached_eagle_head, tiny_medusa_heads  # noqa: E402
from specdec_core.core.engine import SpeculativeEngine
from specdec_core.core.trace import TARGET_KINDS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_method_builds_and_labels_its_tokens_with_its_name(name, target, draft_model, tmp_path):
    heads, head = tmp_path / "heads.safetensors", tmp_path / "eagle.safetensors"
    tiny_medusa_heads(target).save(heads, {"for": "test"})
    cached_eagle_head(target).save(head, {"for": "test"})
    options = MethodOptions(medusa=MedusaConfig(heads=str(heads)), eagle=EagleConfig(heads=str(head)))
    drafter = build_drafter(name, target, draft_model, options)
    rounds = list(SpeculativeEngine(target, drafter, method=name).generate(PROMPT, GenerationConfig(max_new_tokens=12)))
    accepted = [s for r in rounds for s in r.sources[: r.num_accepted]]
    assert all(s == name for s in accepted) and all(r.sources[-1] in TARGET_KINDS for r in rounds if not r.finished)
    assert {s for r in rounds for s in r.sources} <= {name, *TARGET_KINDS}
    spec = REGISTRY[name]
    assert spec.tree == name.endswith("-tree") and spec.colour.startswith("#")


def test_names_are_checked_and_front_ends_read_the_registry():
    assert METHODS == ("ar", *REGISTRY) and parse_method("lookup") == "lookup"
    with pytest.raises(ConfigError, match="choose one of ar, draft"):
        parse_method("beam")
    with pytest.raises(ConfigError, match="needs a draft model"):
        build_drafter("draft", None, None)
    from app.render import LEGEND_ORDER, source_css
    from app.tab_race import METHOD_CHOICES

    assert [v for _, v in METHOD_CHOICES] == list(REGISTRY)
    assert set(REGISTRY) <= set(LEGEND_ORDER)
    assert all(f".s-{name} " in source_css() for name in REGISTRY)
    from specdec_core.bench.runner import ALL_METHODS

    assert set(METHODS) <= set(ALL_METHODS)


def test_readme_method_table_is_the_registry():
    assert readme_table() in (ROOT / "README.md").read_text()
