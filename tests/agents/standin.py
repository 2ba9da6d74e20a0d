"""What the scripted model stand-ins share: a loopback HTTP server that logs each request and
answers POSTs with whatever the stand-in's `answer(path, body)` returns, and the turn's script.

Each turn the stand-ins play is the same: write a file, then run a shell command that appends to
`notes.txt` and removes a file. The user's prompt may name them: `write:NAME` (default
`written-by-agent.txt`) and `delete:NAME` (default `old.txt`); the written file holds the prompt,
so a second turn changes it. `then:NAME` adds a third tool call that writes NAME (see `third`).
`wait:NAME` holds the turn after its write until a file NAME
exists beside the log (see `gate`), so that a test can run another session's turn in between.
"""

import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROJECT, LOG = sys.argv[1], sys.argv[2]


def log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def directive(prompt, key, default):
    found = re.search(key + r":(\S+)", prompt or "")
    return found.group(1) if found else default


def turn_script(prompt):
    """(file to write, its content, shell command) for a turn on `prompt`."""
    written = directive(prompt, "write", "written-by-agent.txt")
    deleted = directive(prompt, "delete", "old.txt")
    content = "the agent wrote this\n" + (prompt or "") + "\n"
    command = f"printf 'shell was here\\n' >> notes.txt && unlink {deleted}"
    return written, content, command


def third(prompt):
    """With `then:NAME` in the prompt: (NAME, its content) for a third tool call, after the
    shell; else None."""
    name = directive(prompt, "then", None)
    return (name, "the third tool\n") if name else None


def gate(prompt):
    """With `wait:NAME` in the prompt: says so in NAME.waiting beside the log, then waits (at most
    120 s) until NAME exists there."""
    name = directive(prompt, "wait", None)
    if name is None:
        return
    folder = os.path.dirname(os.path.abspath(LOG))
    open(os.path.join(folder, name + ".waiting"), "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(folder, name)) and time.monotonic() < deadline:
        time.sleep(0.05)


def serve(answer, get_body="{}"):
    """Serves until killed; prints the port first. `answer(path, body)` returns
    (content type, text)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send(self, content_type, payload):
            data = payload.encode()
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            log({"method": "GET", "path": self.path})
            self.send("application/json", get_body)

        def do_POST(self):
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            self.send(*answer(self.path, body))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
