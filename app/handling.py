"""Handler plumbing shared by the tabs: the models or a message, a token labeller, ZeroGPU, and `bind` (handlers return
dicts keyed by output name; the tab maps names to its components)."""
from __future__ import annotations

import functools
import inspect

import gradio as gr

from .resources import NotReady, store


def gpu(fn):
    """On a ZeroGPU Space, run generation under spaces.GPU; elsewhere unchanged."""
    try:
        import spaces  # type: ignore
    except ImportError:
        return fn
    return spaces.GPU(duration=180)(fn)


def models(backend: str | None = None):
    """The loaded models for `backend` (None or auto: the page's default), or a message for the user."""
    try:
        return store(backend).get()
    except ValueError as e:
        raise gr.Error(str(e)) from None
    except NotReady as e:
        raise gr.Error(str(e)) from None


def token_label():
    tok = models().tokenizer
    return lambda t: tok.decode([int(t)])


def bind(handler, outputs: dict):
    """(fn, output list) for Gradio from a handler returning, or yielding, {output name: value}; names it leaves out
    keep their value."""
    if inspect.isgeneratorfunction(inspect.unwrap(handler)):
        @functools.wraps(handler)
        def run(*args):
            for values in handler(*args):
                yield {outputs[k]: v for k, v in values.items()}
    else:
        @functools.wraps(handler)
        def run(*args):
            return {outputs[k]: v for k, v in handler(*args).items()}
    return run, list(outputs.values())
