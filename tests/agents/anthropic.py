"""A scripted stand-in for the Anthropic Messages API, so that the real Claude Code binary can
run a whole turn offline: its first model call gets a `Write` tool call, the next a `Bash` tool
call, then a final text. Calls without tools (titles, summaries) get a short text.

Usage: python3 anthropic.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json

from standin import PROJECT, log, serve


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


def answer(path, body):
    if "count_tokens" in path:
        log({"path": path})
        return "application/json", json.dumps({"input_tokens": 10})
    blocks, stop = reply_for(body)
    log({"path": path, "stream": bool(body.get("stream")),
         "tools": len(body.get("tools") or []), "reply": [b.get("name", "text") for b in blocks]})
    if body.get("stream"):
        return "text/event-stream", sse(blocks, stop)
    message = {"id": "msg_standin", "type": "message", "role": "assistant",
               "model": "claude-standin", "content": blocks, "stop_reason": stop,
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
    return "application/json", json.dumps(message)


serve(answer)
