"""README is for a newcomer: short, the set-up and test commands first, no session narrative, and every file it
points at exists."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_is_short_and_starts_with_the_commands():
    assert len(README.splitlines()) <= 200
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    assert first_block.split("\n")[:2] == ["pip install -r requirements.txt", "python app.py"]
    assert "Test: `pytest`" in README[: README.index("## ")]


def test_readme_names_no_session_or_date():
    assert not re.search(r"\bsession\b|\b20\d\d-\d\d-\d\d\b|latest run|\bolder\b", README, re.I)


def test_every_file_the_readme_names_exists():
    named = set(re.findall(r"\((docs/[^)\s]+)\)", README)) | set(re.findall(r"\b(docs/[\w./-]+\.(?:md|py|sh|png))", README))
    assert named and all((ROOT / p).exists() for p in named), [p for p in named if not (ROOT / p).exists()]
    for folder in re.findall(r"`(specdec_core/\w+/)`", README):
        assert (ROOT / folder).is_dir(), folder
