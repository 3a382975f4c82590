"""A stand-alone fake inference server (standard library only): run as `vllm serve M --port P` by any user.

The hostile-input tests start it under a second, unprivileged user, who can run the system python but
cannot read the test's virtual environment. It serves the exposition in $FAKE_EXPOSITION (written by the
test with prometheus_client, exactly as the real server builds it) at /metrics and appends the
Authorization header of every request it gets to $FAKE_SEEN. FAKE_LISTEN=0: it only claims the port on its
command line and sleeps, listening nowhere.
"""

import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    argv = sys.argv[1:]
    port = int(argv[argv.index("--port") + 1])
    if os.environ.get("FAKE_LISTEN", "1") == "0":
        while True:
            time.sleep(60)
    with open(os.environ["FAKE_EXPOSITION"], "rb") as fh:
        body = fh.read()
    seen = os.environ["FAKE_SEEN"]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            with open(seen, "a") as out:
                out.write(f"{self.path} {self.headers.get('Authorization')}\n")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
