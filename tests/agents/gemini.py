"""A scripted stand-in for the Gemini API (`generateContent` and `streamGenerateContent`), so
that the real Gemini CLI runs a whole turn offline: its first turn call gets a `write_file`
function call, the next a `run_shell_command` call, then a final text. A request that asks for
JSON matching a schema (the CLI's model router) gets a value built from that schema.

Usage: python3 gemini.py PROJECT_DIR LOG_FILE   (prints the port, then serves)
"""

import json

from standin import PROJECT, log, serve


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


def function_responses(body):
    n = 0
    for content in body.get("contents", []):
        n += sum(1 for part in content.get("parts", []) if "functionResponse" in part)
    return n


def declared_tools(body):
    names = set()
    for tool in body.get("tools", []) or []:
        for decl in tool.get("functionDeclarations", []) or []:
            names.add(decl.get("name"))
    return names


def turn_parts(body):
    if "write_file" not in declared_tools(body):
        return [{"text": "ok"}]
    step = function_responses(body)
    if step == 0:
        return [{"functionCall": {"name": "write_file", "args": {
            "file_path": PROJECT + "/written-by-agent.txt", "content": "the agent wrote this\n"}}}]
    if step == 1:
        return [{"functionCall": {"name": "run_shell_command", "args": {
            "command": "printf 'shell was here\\n' >> notes.txt && rm -f old.txt",
            "description": "edit files"}}}]
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
         "reply": [next(iter(p)) if "text" in p else p["functionCall"]["name"] for p in parts]})
    if ":streamGenerateContent" in path:
        return "text/event-stream", "data: " + json.dumps(response(parts)) + "\r\n\r\n"
    return "application/json", json.dumps(response(parts))


serve(answer)
