"""A scripted stand-in for the OpenAI Responses API (streamed), so that the real Codex CLI runs a
whole turn offline: its first call gets an `exec_command` function call that writes, edits and
deletes files, the next a final message.

Usage: python3 openai.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json

from standin import PROJECT, log, serve

COMMAND = ("printf 'the agent wrote this\\n' > written-by-agent.txt && "
           "printf 'shell was here\\n' >> notes.txt && mv old.txt renamed.txt")


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


def answer(path, body):
    item = item_for(body)
    log({"path": path, "reply": item.get("name", item["type"])})
    return "text/event-stream", stream(item)


serve(answer, get_body=json.dumps({"models": [], "data": []}))
