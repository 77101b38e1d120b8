"""specdec web demo: `python app.py` serves it on http://127.0.0.1:7860 (Hugging Face Spaces runs this file)."""
from app.ui import build_demo, launch_kwargs

demo = build_demo()

if __name__ == "__main__":
    demo.queue(default_concurrency_limit=1, max_size=32).launch(**launch_kwargs())
