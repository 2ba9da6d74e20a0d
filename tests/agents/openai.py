"""A scripted stand-in for the OpenAI Responses API (streamed), so that the real Codex CLI runs
whole turns offline: a turn's first call gets an `exec_command` function call that writes, edits
and deletes files (see `standin.turn_script`; with `then:NAME`, three calls: the write, the
edits, a write of NAME), the next a final message. Each request's user
texts are logged (`user_texts`), so a test sees what the model was shown.

Usage: python3 openai.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json
import shlex

from standin import PROJECT, log, serve, third, turn_script


def user_texts(body):
    return [part.get("text", "") for item in body.get("input", []) or []
            if item.get("type") == "message" and item.get("role") == "user"
            for part in item.get("content", []) or [] if part.get("type") == "input_text"]


def current_turn(body):
    """The prompt of the turn under way and how many tool outputs came after it."""
    prompt, outputs = "", 0
    for item in body.get("input", []) or []:
        if item.get("type") == "function_call_output":
            outputs += 1
        elif item.get("type") == "message" and item.get("role") == "user":
            texts = [p.get("text", "") for p in item.get("content", []) or []
                     if p.get("type") == "input_text"]
            if not any(t.startswith("<") for t in texts):
                prompt, outputs = "\n".join(texts), 0
    return prompt, outputs


def tool_names(body):
    """The function tools the request declares, as (namespace or None, name): Codex declares an
    MCP server's tools in a namespace of their own (`mcp__SERVER`)."""
    names = set()
    for t in body.get("tools", []) or []:
        if t.get("type") == "namespace":
            names.update((t.get("name"), sub.get("name")) for sub in t.get("tools", []) or [])
        else:
            names.add((None, t.get("name")))
    return {(ns, n) for ns, n in names if n}


def tool_outputs(body):
    return [str(item.get("output")) for item in body.get("input", []) or []
            if item.get("type") == "function_call_output"]


def item_for(body):
    prompt, outputs = current_turn(body)
    tools = tool_names(body)
    if "use-mcp" in prompt:
        tool = next((t for t in tools if t == ("mcp__ckpt", "list_checkpoints")), None)
        if outputs == 0 and tool:
            return {"type": "function_call", "id": "fc_mcp", "call_id": f"call_mcp_{len(body['input'])}",
                    "namespace": tool[0], "name": tool[1],
                    "arguments": json.dumps({"limit": 10, "prompts_only": True})}
        return {"type": "message", "role": "assistant", "id": "msg_1",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}
    if (None, "exec_command") in tools:
        written, content, command = turn_script(prompt)
        write = f"printf %s {shlex.quote(content)} > {written}"
        # One call that writes and edits; with `then:NAME`, three: the write, the edits, NAME.
        calls = [f"{write} && {command}"]
        if third(prompt):
            name, text = third(prompt)
            calls = [write, command, f"printf %s {shlex.quote(text)} > {name}"]
        if outputs < len(calls):
            return {"type": "function_call", "id": f"fc_{outputs}",
                    "call_id": f"call_{len(body['input'])}", "name": "exec_command",
                    "arguments": json.dumps({"cmd": calls[outputs], "workdir": PROJECT})}
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
    log({"path": path, "reply": item.get("name", item["type"]), "user_texts": user_texts(body),
         "tools": sorted(f"{ns}.{n}" if ns else n for ns, n in tool_names(body)),
         "tool_results": tool_outputs(body)})
    return "text/event-stream", stream(item)


serve(answer, get_body=json.dumps({"models": [], "data": []}))
