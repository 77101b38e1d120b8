"""Drafters: everything that proposes tokens for the target to verify, behind one protocol (base.Drafter)."""
from .base import Draft, DraftContext, Drafter, NoDrafter
from .draft_model import DraftModelDrafter
from .layerskip import LayerSkipDrafter
from .lookup import LookupDrafter

__all__ = ["Draft", "DraftContext", "Drafter", "NoDrafter", "DraftModelDrafter", "LayerSkipDrafter", "LookupDrafter"]
