#!/usr/bin/env python3
"""A private GitHub repository, as far as git can tell: git's smart HTTP protocol over
`git http-backend`, refusing every request (fetch or push) that does not carry the token the
way GitHub's checkout and dagexec send it (`Authorization: basic x-access-token:<token>`).

    git-http-server.py ROOT TOKEN PORTFILE LOG

serves ROOT/<owner>/<repo>.git as http://127.0.0.1:<port>/<owner>/<repo>, writes the port to
PORTFILE once it listens, and logs one line per request (method, path, status) to LOG, so a
test can show that unauthenticated requests were made and refused. Standard library only.
"""

import base64
import http.server
import os
import subprocess
import sys
import threading


def main():
    root, token, portfile, logpath = sys.argv[1:5]
    want = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    lock = threading.Lock()

    def log(line):
        with lock, open(logpath, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet: the LOG file says what happened
            pass

        def refuse(self):
            log(f"{self.command} {self.path} 401")
            body = b"Authentication required (a private repository)\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def serve(self):
            # The scheme is case-insensitive (`AUTHORIZATION: basic …` from an extraheader).
            scheme, _, cred = self.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "basic" or cred.strip() != want:
                self.refuse()
                return
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                # http-backend allows receive-pack only for an authenticated user.
                "REMOTE_USER": "x-access-token",
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_CONFIG_NOSYSTEM": "1",
                "HOME": root,
            }
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            out = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True
            )
            head, _, payload = out.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = out.stdout.partition(b"\n\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").splitlines():
                k, _, v = line.partition(":")
                if k.lower() == "status":
                    status = int(v.strip().split()[0])
                elif k:
                    headers.append((k, v.strip()))
            log(f"{self.command} {self.path} {status}")
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = serve
        do_POST = serve

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = portfile + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, portfile)
    server.serve_forever()


if __name__ == "__main__":
    main()
