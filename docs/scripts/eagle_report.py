#!/usr/bin/env python3
"""The EAGLE head's training curves as one Plotly page: `python docs/scripts/eagle_report.py [RUN.json ...] [OUT.html]`
(defaults: docs/eagle-runs/*.json in order -> docs/eagle-training.html). Each file is the report one train_eagle run
wrote; a run started with --init goes on from the previous one, so its steps are drawn after it."""
import json
import sys
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

args = [Path(a) for a in sys.argv[1:]]
out = args.pop() if args and args[-1].suffix == ".html" else Path("docs/eagle-training.html")
runs = [json.loads(p.read_text()) for p in (args or sorted(Path("docs/eagle-runs").glob("*.json")))]
fig = make_subplots(rows=1, cols=2, subplot_titles=("training loss per step",
                                                    "held-out top-1 agreement with the target"))
offset = 0
for i, r in enumerate(runs, 1):
    label = f"run {i}: {r['train_tokens']:,} tokens"
    steps, loss = zip(*r["loss_curve"])
    fig.add_scatter(x=[offset + s for s in steps], y=loss, mode="lines", name=f"loss, {label}", row=1, col=1)
    ev = r["evals"]
    for key, name in (("first_token", "first drafted token"), ("own_guess", "later tokens (own guesses)")):
        fig.add_scatter(x=[offset + e["step"] for e in ev], y=[e[key] for e in ev], mode="lines+markers",
                        name=f"{name}, {label} ({ev[-1]['positions']:,} held-out positions)", row=1, col=2)
    if i > 1:
        for col in (1, 2):
            fig.add_vline(x=offset, line_dash="dot", line_color="#888", row=1, col=col)
    offset += r["steps"]
fig.update_yaxes(range=[0, 1], row=1, col=2)
fig.update_xaxes(title_text="step")
last = runs[-1]
fig.update_layout(template="plotly_white", height=520, legend=dict(orientation="h", y=-0.25),
                  title=f"EAGLE head for {last['target']} ({last['target_repr']}): {len(runs)} run(s), "
                        f"{offset} steps, draft vocabulary {last['draft_vocab']}")
out.write_text(fig.to_html(include_plotlyjs="cdn"))
print(f"wrote {out}")
