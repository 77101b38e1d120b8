"""Start app.py (from the project root) on a free local port for a measurement script: `with app_server() as url:`
waits until the page answers, exits with the log's tail if the app dies first, and stops the app at the end."""
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


@contextlib.contextmanager
def app_server(timeout_s: int = 900):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1")
    log = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
    app = subprocess.Popen([sys.executable, "app.py"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(timeout_s):
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                if app.poll() is not None:
                    sys.exit(f"app exited: {open(log.name).read()[-300:]}")
                time.sleep(1)
        yield url
    finally:
        app.terminate()
        app.wait(timeout=60)
        os.unlink(log.name)
