"""A scripted stand-in for the Anthropic Messages API, so that the real Claude Code binary can
run a whole turn offline: its first model call gets a `Write` tool call, the next a `Bash` tool
call, then a final text. Calls without tools (titles, summaries) get a short text.

Usage: python3 anthropic.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROJECT, LOG = sys.argv[1], sys.argv[2]


def log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def tool_results(body):
    n = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            n += sum(1 for block in content if block.get("type") == "tool_result")
    return n


def reply_for(body):
    """(content blocks, stop reason) for this request."""
    names = {t.get("name") for t in body.get("tools", []) or []}
    if "Write" not in names:
        return [{"type": "text", "text": "ok"}], "end_turn"
    step = tool_results(body)
    if step == 0:
        return [{"type": "tool_use", "id": "toolu_write", "name": "Write",
                 "input": {"file_path": PROJECT + "/written-by-agent.txt",
                           "content": "the agent wrote this\n"}}], "tool_use"
    if step == 1:
        return [{"type": "tool_use", "id": "toolu_bash", "name": "Bash",
                 "input": {"command": "printf 'bash was here\\n' >> notes.txt && rm -f old.txt",
                           "description": "edit files"}}], "tool_use"
    return [{"type": "text", "text": "Done."}], "end_turn"


def sse(blocks, stop):
    events = [("message_start", {"type": "message_start", "message": {
        "id": "msg_standin", "type": "message", "role": "assistant", "model": "claude-standin",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                           "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                           "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                           "content_block": {"type": "tool_use", "id": block["id"],
                                             "name": block["name"], "input": {}}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                           "delta": {"type": "input_json_delta",
                                     "partial_json": json.dumps(block["input"])}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": 5}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


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
        self.send(200, "application/json", "{}")

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if "count_tokens" in self.path:
            log({"path": self.path})
            return self.send(200, "application/json", json.dumps({"input_tokens": 10}))
        blocks, stop = reply_for(body)
        log({"path": self.path, "stream": bool(body.get("stream")),
             "tools": len(body.get("tools") or []), "reply": [b.get("name", "text") for b in blocks]})
        if body.get("stream"):
            return self.send(200, "text/event-stream", sse(blocks, stop))
        message = {"id": "msg_standin", "type": "message", "role": "assistant",
                   "model": "claude-standin", "content": blocks, "stop_reason": stop,
                   "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
        self.send(200, "application/json", json.dumps(message))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
