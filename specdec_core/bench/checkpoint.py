"""A bench checkpoint: one JSON line per finished prompt (every method's record), so a long run resumes where it
stopped. The first line names the run (methods, generation config, target, prompts); a file from another run is an
error, never silently mixed in."""
from __future__ import annotations

import json
from pathlib import Path

from specdec_core.core.config import ConfigError
from specdec_core.core.run import Run


class Checkpoint:
    def __init__(self, path: Path, key: dict):
        self.path = Path(path)
        self.key = json.loads(json.dumps(key))  # normalised as it reads back (tuples -> lists)
        self.done: dict[tuple[str, int], list[Run]] = {}
        if self.path.exists() and self.path.stat().st_size:
            self._read()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"run": self.key}) + "\n")

    def _read(self) -> None:
        text = self.path.read_text()
        lines = text.splitlines()
        try:
            head = json.loads(lines[0])["run"]
        except (json.JSONDecodeError, KeyError, TypeError, IndexError):
            raise ConfigError(f"{self.path} is not a bench checkpoint; remove it or choose another --resume file")
        if head != self.key:
            differ = sorted(k for k in set(head) | set(self.key) if head.get(k) != self.key.get(k))
            raise ConfigError(f"{self.path} belongs to another run (it differs in {', '.join(differ)}); "
                              "remove it or choose another --resume file")
        kept = lines[:1]
        for line in lines[1:]:
            try:
                row = json.loads(line)
                records = [Run.from_dict(r) for r in row["records"]]
            except (json.JSONDecodeError, KeyError, TypeError):
                break  # a line cut short when the run was killed: that prompt runs again
            self.done[(row["prompt_id"], row["repeat"])] = records
            kept.append(line)
        if len(kept) < len(lines) or not text.endswith("\n"):
            self.path.write_text("\n".join(kept) + "\n")  # drop the cut line, so appends start on a fresh one

    def records(self, prompt_id: str, repeat: int) -> list[Run] | None:
        return self.done.get((prompt_id, repeat))

    def save(self, prompt_id: str, repeat: int, records: list[Run]) -> None:
        self.done[(prompt_id, repeat)] = records
        row = {"prompt_id": prompt_id, "repeat": repeat, "records": [r.to_dict() for r in records]}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
