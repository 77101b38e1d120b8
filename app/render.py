"""Token rendering: every emitted token coloured by where it came from, rejected drafts struck through on demand,
hover text with round, p_target and q_draft. A small template per token; text is always HTML-escaped."""
from __future__ import annotations

import html
from dataclasses import dataclass

from specdec_core.methods.registry import REGISTRY
from specdec_core.core.trace import TARGET_KINDS, Round

from .tokens import Detokenizer

LABELS = {
    **{name: spec.accepted for name, spec in REGISTRY.items()},
    "correction": "target correction (replaced a rejected draft)",
    "bonus": "bonus (every draft token was accepted)",
    "plain": "plain decoding step (nothing drafted)",
    "rejected": "rejected draft token",
}
LEGEND_ORDER = (*REGISTRY, *TARGET_KINDS, "rejected")


def source_css() -> str:
    """Token colours of every registered method (the target's own sources are styled in assets/style.css)."""
    return "\n".join(f".s-{name} {{ background: {spec.colour}; }}\n"
                     f"body.present .s-{name} {{ background: {spec.strong} !important; }}"
                     for name, spec in REGISTRY.items())


@dataclass(frozen=True)
class Piece:
    text: str
    source: str  # a trace source, or "rejected"
    round: int
    p_target: float | None
    q_draft: float | None
    outcome: str | None = None  # a refused candidate's fate (trace.OUTCOMES)


def round_pieces(r: Round, detok: Detokenizer) -> list[Piece]:
    """Pieces for one round: emitted tokens in order, then (as 'rejected') the draft tokens the target refused."""
    pieces = []
    for i, (token, source) in enumerate(zip(r.emitted, r.sources)):
        node = r.branch[i] if i < r.num_accepted else None
        p = r.judged_p[node] if node is not None else r.next_p  # the numbers the verifier used (trace.Round)
        q = r.q_draft[node] if node is not None else None
        pieces.append(Piece(detok.add(token), source, r.index, p, q))
    n = r.num_accepted
    # Refused candidates: p and q where the verifier judged them; a node never judged shows neither.
    refused = [Piece(detok.piece(r.drafted[i]), "rejected", r.index, r.judged_p[i],
                     r.q_draft[i] if r.outcomes[i] == "rejected" else None, r.outcomes[i])
               for i in r.rejected_nodes]
    pieces[n:n] = refused  # shown where they were proposed, before the correction
    return pieces


def _title(piece: Piece) -> str:
    parts = [f"round {piece.round}", LABELS.get(piece.source, piece.source)]
    if piece.outcome in ("unexamined", "off-branch"):
        parts.append("never judged (" + ("an earlier token was rejected" if piece.outcome == "unexamined"
                                         else "its parent or an earlier sibling was taken or refused") + ")")
    if piece.p_target is not None:
        parts.append(f"p_target {piece.p_target:.3f}")
    if piece.q_draft is not None:
        parts.append(f"q_draft {piece.q_draft:.3f}")
    return " · ".join(parts)


def tokens_html(pieces: list[Piece], show_rejected: bool = False, placeholder: str = "") -> str:
    spans = [
        f'<span class="tok s-{p.source}" title="{html.escape(_title(p))}">{html.escape(p.text)}</span>'
        for p in pieces
        if show_rejected or p.source != "rejected"
    ]
    body = "".join(spans) or f'<span class="placeholder">{html.escape(placeholder)}</span>'
    return f'<div class="tokens">{body}</div>'


def legend_html(sources: tuple[str, ...] = LEGEND_ORDER) -> str:
    items = "".join(f'<span class="tok s-{s}">{html.escape(LABELS[s])}</span>' for s in sources)
    return f'<div class="legend">{items}</div>'


def headline_html(cards: list[tuple[str, str, str]]) -> str:
    """cards: (label, value, note)."""
    out = "".join(
        f'<div class="card"><div class="value">{html.escape(v)}</div><div class="label">{html.escape(k)}</div>'
        f'<div class="note">{html.escape(n)}</div></div>'
        for k, v, n in cards
    )
    return f'<div class="cards">{out}</div>'


def message_html(text: str, kind: str = "info") -> str:
    return f'<div class="msg msg-{kind}">{html.escape(text)}</div>'
