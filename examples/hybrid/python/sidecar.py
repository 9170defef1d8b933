"""The hybrid service's Python side as a separate process on the same host.

GET /preprocess?rows=N&seed=S returns N x 5 float32 features, little endian;
GET /postprocess?explained=F&seed=S returns a checksum. One thread per
request, all behind this process's GIL.
"""

import argparse
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prepost  # noqa: E402


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        try:
            if url.path == "/preprocess":
                features = np.zeros((int(q["rows"]), 5), dtype="<f4")
                prepost.preprocess(features, int(q["seed"]))
                body = features.tobytes()
            elif url.path == "/postprocess":
                body = str(prepost.postprocess(float(q["explained"]), int(q["seed"]))).encode()
            else:
                self.send_error(404)
                return
        except (KeyError, ValueError) as e:
            self.send_error(400, str(e))
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--listen", default="127.0.0.1:8765")
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    print(f"sidecar pid {os.getpid()} on {args.listen}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
