"""Start app.py (from the project root) on a free local port for a measurement script: `with app_server() as url:`
waits until the page answers, exits with the log's tail if the app dies first, and stops the app at the end; and
the two helpers the scripts read the API's answers with."""
import contextlib
import json
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


def summary_of(out):
    s = out[-1] if isinstance(out, (list, tuple)) else out
    return json.load(open(s)) if isinstance(s, str) and os.path.exists(s) else s


def find(x, key):
    """First value of `key` anywhere in nested dicts/lists."""
    if isinstance(x, dict):
        if key in x:
            return x[key]
        x = list(x.values())
    if isinstance(x, list):
        for y in x:
            v = find(y, key)
            if v is not None:
                return v
    return None


def predict(client, **kwargs):
    """client.predict, retried while the app still loads its models or measures its profile (first start); returns
    (answer, seconds of the call that answered)."""
    for _ in range(240):
        try:
            t = time.time()
            return client.predict(**kwargs), time.time() - t
        except Exception as e:  # noqa: BLE001 - the app says "loading" or "profiling" until it is ready
            if not any(w in str(e).lower() for w in ("loading", "profil")):
                raise
            time.sleep(5)
    raise TimeoutError("the app did not become ready in 20 minutes")
