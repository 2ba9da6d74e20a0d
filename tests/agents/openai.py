"""A scripted stand-in for the OpenAI Responses API (streamed), so that the real Codex CLI runs a
whole turn offline: its first call gets an `exec_command` function call that writes, edits and
deletes files, the next a final message.

Usage: python3 openai.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROJECT, LOG = sys.argv[1], sys.argv[2]
COMMAND = ("printf 'the agent wrote this\\n' > written-by-agent.txt && "
           "printf 'shell was here\\n' >> notes.txt && mv old.txt renamed.txt")


def log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def item_for(body):
    outputs = sum(1 for item in body.get("input", []) if item.get("type") == "function_call_output")
    tools = {t.get("name") for t in body.get("tools", []) or []}
    if outputs == 0 and "exec_command" in tools:
        return {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command",
                "arguments": json.dumps({"cmd": COMMAND, "workdir": PROJECT})}
    return {"type": "message", "role": "assistant", "id": "msg_1",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}


def stream(item):
    usage = {"input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
             "output_tokens_details": None, "total_tokens": 15}
    events = [
        {"type": "response.created", "response": {"id": "resp_standin"}},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": "resp_standin", "usage": usage}},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, content_type, payload):
        data = payload.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        log({"method": "GET", "path": self.path})
        self.send(200, "application/json", json.dumps({"models": [], "data": []}))

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        item = item_for(body)
        log({"path": self.path, "reply": item.get("name", item["type"])})
        self.send(200, "text/event-stream", stream(item))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
