#!/usr/bin/env python3
"""The EAGLE head's training curves as one Plotly page: `python docs/scripts/eagle_report.py [REPORT.json] [OUT.html]`
(defaults: assets/eagle/qwen2.5-coder-1.5b.json -> docs/eagle-training.html). Reads the report train_eagle writes."""
import json
import sys
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

src = Path(sys.argv[1] if len(sys.argv) > 1 else "assets/eagle/qwen2.5-coder-1.5b.json")
out = Path(sys.argv[2] if len(sys.argv) > 2 else "docs/eagle-training.html")
r = json.loads(src.read_text())
fig = make_subplots(rows=1, cols=2, subplot_titles=("training loss (SmoothL1 + 0.1 CE per step)",
                                                    "held-out top-1 agreement with the target"))
steps, loss = zip(*r["loss_curve"])
fig.add_scatter(x=steps, y=loss, mode="lines", name="loss", row=1, col=1)
ev = r["evals"]
for key, name in (("first_token", "first drafted token (true features)"), ("own_guess", "later tokens (own guesses)")):
    fig.add_scatter(x=[e["step"] for e in ev], y=[e[key] for e in ev], mode="lines+markers", name=name, row=1, col=2)
fig.update_yaxes(range=[0, 1], row=1, col=2)
fig.update_layout(template="plotly_white", height=460,
                  title=f"EAGLE head for {r['target']} ({r['target_repr']}): {r['train_tokens']} training tokens, "
                        f"{r['steps']} steps, draft vocabulary {r['draft_vocab']}")
out.write_text(fig.to_html(include_plotlyjs="cdn"))
print(f"wrote {out}")
