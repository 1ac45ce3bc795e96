"""Serves a Perfetto UI build and one trace file on 127.0.0.1, on a free port.

python serve.py WEB_DIST TRACE: the UI's files at /, the trace at /trace/NAME (NAME the
file's own name); prints the port on its first line, then serves until killed. Every
answer carries `Access-Control-Allow-Origin: *`, as the UI's `?url=` loading wants.
"""

import functools
import http.server
import os
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    trace = None

    def translate_path(self, path):
        name = "/trace/" + os.path.basename(self.trace)
        if path.split("?", 1)[0] == name:
            return self.trace
        return super().translate_path(path)

    def end_headers(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def main():
    web_dist, trace = sys.argv[1], os.path.abspath(sys.argv[2])
    Handler.trace = trace
    handler = functools.partial(Handler, directory=web_dist)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
