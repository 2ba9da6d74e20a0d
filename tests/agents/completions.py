"""A scripted stand-in for the OpenAI Chat Completions API (streamed or not), so that the real
GitHub Copilot CLI, Qwen Code, OpenCode, Kilo CLI and Cline CLI run whole turns offline with a custom provider: a turn's first
call gets a write tool call (Copilot's `create`, Qwen's `write_file`), the next a shell tool call
(`bash`, `run_shell_command`), then a final text (see `standin.turn_script`). Calls without
those tools, and Qwen's memory-extraction side requests, get a short text. Each request's user
texts are logged.

Usage: python3 completions.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json

from standin import PROJECT, gate, log, serve, turn_script


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def current_turn(body):
    """The prompt of the turn under way and how many tool results came after it."""
    prompt, results = "", 0
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            results += 1
        elif message.get("role") == "user":
            prompt, results = text_of(message.get("content")), 0
    return prompt, results


def tool_names(body):
    return {t.get("function", {}).get("name") for t in body.get("tools", []) or []}


def schema(body, name):
    for t in body.get("tools", []) or []:
        if t.get("function", {}).get("name") == name:
            return t["function"].get("parameters", {})
    return {}


# Each agent's write tool (its path and content fields) and shell tool.
WRITES = {"create": ("path", "file_text"), "write_file": ("file_path", "content"),
          "write": ("filePath", "content"), "editor": ("path", "new_text"),
          "apply_patch": (None, "input")}
SHELLS = ["bash", "run_shell_command", "run_commands"]


def system_text(body):
    return "".join(text_of(m.get("content")) for m in body.get("messages", [])
                   if m.get("role") == "system")


def reply_for(body):
    """(assistant message, finish reason)."""
    names = tool_names(body)
    prompt, step = current_turn(body)
    write = next((w for w in WRITES if w in names), None)
    shell = next((s for s in SHELLS if s in names), None)
    if write is None or shell is None or "memory extraction" in system_text(body):
        return {"role": "assistant", "content": "ok"}, "stop"
    written, content, command = turn_script(prompt)
    n = len(body.get("messages", []))
    # A name is under the project unless absolute (a turn in another folder, a worktree).
    target = written if written.startswith("/") else PROJECT + "/" + written
    if step == 0:
        path_key, content_key = WRITES[write]
        if path_key is None:  # a patch that adds the file (Cline over ACP)
            lines = "".join("+" + line + "\n" for line in content.splitlines())
            patch = f"*** Begin Patch\n*** Add File: {target}\n{lines}*** End Patch\n"
            call = (write, {content_key: patch})
        else:
            call = (write, {path_key: target, content_key: content})
    elif step == 1:
        gate(prompt)
        arguments = {"command": command, "description": "edit files"}
        if shell == "run_commands":  # Cline's: a list of commands
            arguments = {"commands": [command]}
        # Whatever else the shell tool requires, with the first value its schema allows.
        props = schema(body, shell).get("properties", {})
        for key in schema(body, shell).get("required", []):
            if key not in arguments:
                spec = props.get(key, {})
                arguments[key] = (spec.get("enum") or [None])[0] if "enum" in spec else {
                    "boolean": False, "integer": 30, "number": 30}.get(spec.get("type"), "")
        call = (shell, arguments)
    else:
        return {"role": "assistant", "content": "Done."}, "stop"
    tool_call = {"id": f"call_{call[0]}_{n}", "type": "function",
                 "function": {"name": call[0], "arguments": json.dumps(call[1])}}
    return {"role": "assistant", "content": None, "tool_calls": [tool_call]}, "tool_calls"


def chunks(message, finish):
    base = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0,
            "model": "fake-model"}
    delta = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(message["tool_calls"])]
    events = [dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
              dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                   usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def answer(path, body):
    message, finish = reply_for(body)
    log({"path": path, "stream": bool(body.get("stream")), "tools": sorted(filter(None, tool_names(body))),
         "reply": [c["function"]["name"] for c in message.get("tool_calls") or []] or ["text"],
         "user_texts": [text_of(m.get("content")) for m in body.get("messages", [])
                        if m.get("role") == "user"],
         "bash_schema": schema(body, "bash"), "patch_schema": schema(body, "apply_patch")})
    if body.get("stream"):
        return "text/event-stream", chunks(message, finish)
    return "application/json", json.dumps({
        "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


serve(answer, get_body=json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}))
