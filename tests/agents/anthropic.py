"""A scripted stand-in for the Anthropic Messages API, so that the real Claude Code binary can
run whole turns offline: a turn's first model call gets a `Write` tool call, the next a `Bash`
tool call (with `then:NAME` in the prompt, a third: a `Write` of NAME), then a final text (see
`standin.turn_script`). Calls without tools (titles, summaries)
get a short text. Each request's user texts are logged (`user_texts`), so a test sees what the
model was shown.

Usage: python3 anthropic.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json

from standin import PROJECT, gate, log, serve, third, turn_script


def blocks(message):
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def user_texts(body):
    return [block.get("text", "") for message in body.get("messages", [])
            if message.get("role") == "user" for block in blocks(message)
            if block.get("type") == "text"]


def current_turn(body):
    """The prompt of the turn under way (the last user message with text but no tool result)
    and how many tool results came after it."""
    prompt, results = "", 0
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        kinds = [block.get("type") for block in blocks(message)]
        if "tool_result" in kinds:
            results += kinds.count("tool_result")
        else:
            texts = [b.get("text", "") for b in blocks(message) if b.get("type") == "text"]
            prompt = "\n".join(t for t in texts if not t.startswith("<system-reminder>"))
            results = 0
    return prompt, results


def tool_results(body):
    """The text of every tool result the request carries."""
    out = []
    for message in body.get("messages", []):
        for block in blocks(message):
            if block.get("type") == "tool_result":
                content = block.get("content")
                if isinstance(content, list):
                    content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
                out.append(str(content))
    return out


def mcp_turn(step, tool="mcp__ckpt__list_checkpoints", arguments=None):
    """A turn that looks at ckpt's timeline through its MCP server: Claude Code defers MCP
    tools, so the model first loads the tool with ToolSearch, then calls it."""
    if arguments is None:
        arguments = {"limit": 10, "prompts_only": True}
    if step == 0:
        return [{"type": "tool_use", "id": "toolu_search", "name": "ToolSearch",
                 "input": {"query": "select:" + tool, "max_results": 5}}], "tool_use"
    if step == 1:
        return [{"type": "tool_use", "id": "toolu_ckpt", "name": tool,
                 "input": arguments}], "tool_use"
    return [{"type": "text", "text": "Done."}], "end_turn"


def reply_for(body):
    """(content blocks, stop reason) for this request."""
    names = {t.get("name") for t in body.get("tools", []) or []}
    if "Write" not in names:
        return [{"type": "text", "text": "ok"}], "end_turn"
    prompt, step = current_turn(body)
    if "what-did-you-change" in prompt:
        # The README's example: asked what it changed, the model calls `diff` as it is.
        return mcp_turn(step, "mcp__ckpt__diff", {})
    if "use-mcp" in prompt:
        return mcp_turn(step)
    written, content, command = turn_script(prompt)
    if step == 0:
        return [{"type": "tool_use", "id": f"toolu_write_{len(body['messages'])}", "name": "Write",
                 "input": {"file_path": PROJECT + "/" + written, "content": content}}], "tool_use"
    if step == 1:
        gate(prompt)
        return [{"type": "tool_use", "id": f"toolu_bash_{len(body['messages'])}", "name": "Bash",
                 "input": {"command": command, "description": "edit files"}}], "tool_use"
    if step == 2 and third(prompt):
        name, text = third(prompt)
        return [{"type": "tool_use", "id": f"toolu_write_{len(body['messages'])}", "name": "Write",
                 "input": {"file_path": PROJECT + "/" + name, "content": text}}], "tool_use"
    return [{"type": "text", "text": "Done."}], "end_turn"


def sse(reply, stop):
    events = [("message_start", {"type": "message_start", "message": {
        "id": "msg_standin", "type": "message", "role": "assistant", "model": "claude-standin",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    for i, block in enumerate(reply):
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
    reply, stop = reply_for(body)
    log({"path": path, "stream": bool(body.get("stream")), "tools": len(body.get("tools") or []),
         "reply": [b.get("name", "text") for b in reply], "user_texts": user_texts(body),
         "tool_results": tool_results(body)})
    if body.get("stream"):
        return "text/event-stream", sse(reply, stop)
    message = {"id": "msg_standin", "type": "message", "role": "assistant",
               "model": "claude-standin", "content": reply, "stop_reason": stop,
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
    return "application/json", json.dumps(message)


serve(answer)
