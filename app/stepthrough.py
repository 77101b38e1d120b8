"""Step-through: one round of a trace at a time, with the real probabilities the verifier used."""
from __future__ import annotations

import html

from specdec_core.core.trace import Round
from specdec_core.core.tree import chain_parents, depths

from . import figures
from .render import message_html


def _fmt(v: float | None, spec: str = "{:.3f}") -> str:
    return "—" if v is None else spec.format(v)


DECISIONS = {  # (outcome, greedy, a tree) -> what the verifier did, in words
    ("unexamined", None, False): "not examined (an earlier token was rejected)",
    ("off-branch", None, True): "not judged (its parent was not accepted, or an earlier sibling was)",
    ("accepted", True, None): "accept: equals the target's argmax",
    ("rejected", True, None): "reject: the target's argmax differs",
}


def _decision(r: Round, i: int, greedy: bool) -> tuple[str, str]:
    """(words, row class) for node i, read from the trace's recorded outcome."""
    outcome, tree = r.outcomes[i], r.parents is not None
    if outcome in ("unexamined", "off-branch"):
        return DECISIONS[(outcome, None, tree)], "skip"
    cls = "acc" if outcome == "accepted" else "rej"
    if greedy:
        return DECISIONS[(outcome, True, None)], cls
    u, p, q = r.node_uniforms[i], r.judged_p[i], r.q_draft[i]
    if tree:  # one-hot candidates tried in order against what remains of p
        return f"{outcome[:6]}: u={_fmt(u)} {'<' if cls == 'acc' else '≥'} r(x)={_fmt(p)} (p with refused siblings removed)", cls
    bound = min(1.0, p / q) if q else p
    return f"{outcome[:6]}: u={_fmt(u)} {'<' if cls == 'acc' else '≥'} min(1, p/q)={_fmt(bound)}", cls


def round_table_html(r: Round, label, greedy: bool) -> str:
    rows = []
    parents = r.parents if r.parents is not None else chain_parents(len(r.drafted))
    level = depths(parents)
    for i, token in enumerate(r.drafted):
        q, p = r.q_draft[i], r.judged_p[i]
        ratio = None if q is None or q == 0 or p is None else p / q
        decision, cls = _decision(r, i, greedy)
        indent = "↳ " * (level[i] - 1) if r.parents is not None else ""
        rows.append(f"<tr class='{cls}'><td>{i + 1}</td><td>{indent}<code>{html.escape(repr(label(token)))}</code></td>"
                    f"<td>{_fmt(q) if q is not None else '1 (deterministic)'}</td><td>{_fmt(p)}</td>"
                    f"<td>{_fmt(ratio, '{:.2f}')}</td><td>{html.escape(decision)}</td></tr>")
    if not r.drafted:
        rows.append("<tr><td colspan=6>Nothing drafted this round: one plain decoding step.</td></tr>")
    kind = {"correction": "correction, sampled from the residual normalise(max(0, p − q))" if r.residual_drawn
            else "correction: the target's own argmax",
            "bonus": "bonus token from the target (" + ("the accepted branch reached a leaf of the tree)"
                                                        if r.parents is not None else "every draft token was accepted)"),
            "plain": "the target's own token (nothing drafted)"}
    final = (f"<p class='final'>Then: <code>{html.escape(repr(label(r.next_token)))}</code> — {kind[r.next_kind]}, "
             f"p = {_fmt(r.next_p)}. Round {r.index}: {r.num_accepted} of {len(r.drafted)} accepted, "
             f"{len(r.emitted)} tokens committed with one target forward; draft {r.draft_seconds * 1000:.0f} ms, "
             f"verify {r.verify_seconds * 1000:.0f} ms.</p>")
    head = ("<tr><th>#</th><th>draft token</th><th>q_draft</th><th>p the verifier used</th><th>p/q</th>"
            "<th>decision</th></tr>")
    return f"<table class='steps'>{head}{''.join(rows)}</table>{final}"


def step_view(rounds: list[Round], index: int, label, greedy: bool):
    """(html, p-vs-q figure, residual/bonus figure, index) for round `index` (clamped)."""
    if not rounds:
        empty = figures.distribution_figure("Run a race first (or a fresh sampled run)", [], label)
        return message_html("No trace yet: run a race, or press “Fresh sampled run”."), empty, empty, 0
    index = max(0, min(int(index), len(rounds) - 1))
    r = rounds[index]
    pos = min(r.num_accepted, len(r.drafted))  # the decisive position: first rejection, or the bonus slot
    if r.drafted and pos < len(r.draft_top):
        left = figures.distribution_figure(
            f"Position {pos + 1}: target p vs draft q (top tokens)",
            [("p_target", r.target_top[pos], figures.COLORS["p"]), ("q_draft", r.draft_top[pos], figures.COLORS["q"])],
            label)
    else:
        left = figures.distribution_figure(
            f"Position {pos + 1}: target p (top tokens)", [("p_target", r.target_top[pos], figures.COLORS["p"])], label)
    if r.residual_top is not None:
        right = figures.distribution_figure("Residual normalise(max(0, p − q)): the correction is drawn from this",
                                            [("residual", r.residual_top, figures.COLORS["residual"])], label)
    else:
        what = {"bonus": "bonus", "correction": "correction (greedy: argmax)", "plain": "plain"}[r.next_kind]
        right = figures.distribution_figure(f"Target p for the {what} token",
                                            [("p_target", r.target_top[pos], figures.COLORS["p"])], label)
    head = (f"<h3>Round {index + 1} of {len(rounds)}</h3>")
    return head + round_table_html(r, label, greedy), left, right, index
