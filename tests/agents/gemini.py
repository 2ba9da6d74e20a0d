"""A scripted stand-in for the Gemini API (`generateContent` and `streamGenerateContent`), so
that the real Gemini CLI runs whole turns offline: a turn's first call gets a `write_file`
function call, the next a `run_shell_command` call (with `then:NAME`, a third: a `write_file`),
then a final text (see
`standin.turn_script`). A request that asks for JSON matching a schema (the CLI's model router)
gets a value built from that schema. Each request's user texts are logged (`user_texts`), so a
test sees what the model was shown.

Usage: python3 gemini.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json

from standin import PROJECT, log, serve, third, turn_script


def from_schema(schema):
    """Some value that matches a JSON schema (the first choice wherever there is one)."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return from_schema(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    kind = (kind or "object").lower()
    if kind == "object":
        props = schema.get("properties", {})
        return {name: from_schema(sub) for name, sub in props.items()}
    if kind == "array":
        return [from_schema(schema.get("items", {}))]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    return "flash"


def user_texts(body):
    return [part["text"] for content in body.get("contents", []) or []
            if content.get("role") == "user" for part in content.get("parts", []) or []
            if isinstance(part.get("text"), str)]


def current_turn(body):
    """The prompt of the turn under way and how many function responses came after it."""
    prompt, responses = "", 0
    for content in body.get("contents", []) or []:
        parts = content.get("parts", []) or []
        if any("functionResponse" in part for part in parts):
            responses += sum(1 for part in parts if "functionResponse" in part)
        elif content.get("role") == "user":
            texts = [p["text"] for p in parts if isinstance(p.get("text"), str)
                     and not p["text"].startswith("<session_context>")]
            if texts:
                prompt, responses = "\n".join(texts), 0
    return prompt, responses


def declared_tools(body):
    names = set()
    for tool in body.get("tools", []) or []:
        for decl in tool.get("functionDeclarations", []) or []:
            names.add(decl.get("name"))
    return names


def function_results(body):
    """The text of every function response the request carries."""
    return [json.dumps(part["functionResponse"]) for content in body.get("contents", []) or []
            for part in content.get("parts", []) or [] if "functionResponse" in part]


def turn_parts(body):
    if "write_file" not in declared_tools(body):
        return [{"text": "ok"}]
    prompt, step = current_turn(body)
    if "use-mcp" in prompt:
        # ckpt's MCP tool, under whatever name the CLI declared it.
        tool = next((n for n in declared_tools(body) if n and n.endswith("list_checkpoints")), None)
        if step == 0 and tool:
            return [{"functionCall": {"name": tool, "args": {"limit": 10, "prompts_only": True}}}]
        return [{"text": "Done."}]
    written, content, command = turn_script(prompt)
    if step == 0:
        return [{"functionCall": {"name": "write_file", "args": {
            "file_path": PROJECT + "/" + written, "content": content}}}]
    if step == 1:
        return [{"functionCall": {"name": "run_shell_command", "args": {
            "command": command, "description": "edit files"}}}]
    if step == 2 and third(prompt):
        name, text = third(prompt)
        return [{"functionCall": {"name": "write_file", "args": {
            "file_path": PROJECT + "/" + name, "content": text}}}]
    return [{"text": "Done."}]


def response(parts):
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": "gemini-standin"}


def answer(path, body):
    config = body.get("generationConfig", {}) or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if ":countTokens" in path:
        return "application/json", json.dumps({"totalTokens": 10})
    if schema is not None:
        parts = [{"text": json.dumps(from_schema(schema))}]
    else:
        parts = turn_parts(body)
    log({"path": path.split("?")[0], "schema": schema is not None,
         "reply": [next(iter(p)) if "text" in p else p["functionCall"]["name"] for p in parts],
         "user_texts": user_texts(body), "tools": sorted(n for n in declared_tools(body) if n),
         "tool_results": function_results(body)})
    if ":streamGenerateContent" in path:
        return "text/event-stream", "data: " + json.dumps(response(parts)) + "\r\n\r\n"
    return "application/json", json.dumps(response(parts))


serve(answer)
