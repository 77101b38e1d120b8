"""The Gradio demo: layout and wiring (ui.py), handlers, token rendering and Plotly figures (pure functions)."""
