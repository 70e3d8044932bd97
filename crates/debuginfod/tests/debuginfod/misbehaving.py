#!/usr/bin/env python3
"""A real HTTP server that fails the ways debuginfod servers and proxies fail, by URL prefix:

  /503/...        503 Service Unavailable (an overloaded server or a proxy without upstream)
  /truncated/...  200 announcing 1 MiB, then 1 KiB of an ELF header, then the connection closes
  anything else   the file of that path under the current directory, else 404

usage: misbehaving.py PORT [CERT KEY]   (with CERT and KEY: HTTPS)
"""

import http.server
import ssl
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/503/"):
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/truncated/"):
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 20))
            self.end_headers()
            self.wfile.write(b"\x7fELF\x02\x01\x01" + b"\0" * 1017)
            self.wfile.flush()
        else:
            super().do_GET()

    def log_message(self, *args):
        pass


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    if len(sys.argv) == 4:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


main()
