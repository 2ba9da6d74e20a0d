"""A minimal Agent Client Protocol client (JSON-RPC over the agent's stdio), so that a test can
send a prompt to an existing session of an agent that resumes sessions headless only over ACP
(Cline CLI: `cline --acp`). Permission requests are answered with the first option offered.

Usage: python3 acp.py CWD SESSION_ID|new PROMPT -- AGENT_COMMAND...
Prints the session id, then exits 0 once the prompt's turn ended (non-zero on an error).
"""

import json
import subprocess
import sys
import threading

cwd, session, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
command = sys.argv[sys.argv.index("--") + 1:]
agent = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, bufsize=1)
timer = threading.Timer(180, agent.kill)
timer.daemon = True
timer.start()
next_id = [0]


def send(method, params):
    next_id[0] += 1
    agent.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method,
                                  "params": params}) + "\n")
    agent.stdin.flush()
    return next_id[0]


def wait(request):
    for line in agent.stdout:
        message = json.loads(line)
        if message.get("method") == "session/request_permission":
            options = message["params"].get("options", [])
            outcome = {"outcome": "selected", "optionId": options[0]["optionId"]} if options \
                else {"outcome": "cancelled"}
            agent.stdin.write(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                          "result": {"outcome": outcome}}) + "\n")
            agent.stdin.flush()
        elif message.get("id") == request and "method" not in message:
            if "error" in message:
                sys.exit(f"{command[0]}: {message['error']}")
            return message.get("result") or {}
    sys.exit(f"{command[0]} ended before answering")


wait(send("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
if session == "new":
    session = wait(send("session/new", {"cwd": cwd, "mcpServers": []}))["sessionId"]
else:
    wait(send("session/load", {"sessionId": session, "cwd": cwd, "mcpServers": []}))
print(session, flush=True)
result = wait(send("session/prompt", {"sessionId": session,
                                      "prompt": [{"type": "text", "text": prompt}]}))
agent.stdin.close()
try:
    agent.wait(timeout=30)
except subprocess.TimeoutExpired:
    agent.kill()
sys.exit(0 if result.get("stopReason") else f"no stopReason: {result}")
