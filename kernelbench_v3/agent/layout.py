"""The run folder of `kbv3 agent`: where each of its parts lives.

```
RUN_DIR/
  transcripts/<category>/<problem>.jsonl   # every message and tool result, journaled (transcript)
  workspaces/<category>/<problem>/         # reference.py, solution.py, README.md (rebuilt on resume)
  versions/<category>/<problem>/<sha>.py   # each solution.py a check or a judging evaluated
  solutions/                               # the samples layout: the judged solution per problem
  results.csv                              # the published runs schema, one row per judged episode
  records.jsonl                            # the judging records, with turns, tokens and cost
  prices.json                              # the last prices given, for the cost column
```

The transcripts are the truth; everything else is rebuilt from them (`results`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TRANSCRIPTS, WORKSPACES, VERSIONS, SOLUTIONS = "transcripts", "workspaces", "versions", "solutions"
RESULTS_CSV, RECORDS, PRICES = "results.csv", "records.jsonl", "prices.json"


@dataclass(frozen=True)
class RunLayout:
    root: Path

    def transcript(self, problem_id: str) -> Path:
        return self.root / TRANSCRIPTS / f"{problem_id}.jsonl"

    def workspace(self, problem_id: str) -> Path:
        return self.root / WORKSPACES / problem_id

    def versions(self, problem_id: str) -> Path:
        return self.root / VERSIONS / problem_id

    @property
    def solutions(self) -> Path:
        return self.root / SOLUTIONS

    @property
    def results_csv(self) -> Path:
        return self.root / RESULTS_CSV

    @property
    def records(self) -> Path:
        return self.root / RECORDS

    @property
    def prices(self) -> Path:
        return self.root / PRICES

    def transcripts(self) -> list[Path]:
        return sorted((self.root / TRANSCRIPTS).glob("*/*.jsonl"))

    def problem_of(self, transcript: Path) -> str:
        return transcript.relative_to(self.root / TRANSCRIPTS).with_suffix("").as_posix()
