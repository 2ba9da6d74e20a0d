"""Drives `ckpt mcp` with the official MCP Python SDK (`mcp` on PyPI) over stdio.

Usage: python client.py CKPT PROJECT CALLS_JSON [SERVER_ARG...]
CALLS_JSON is a list of [tool, arguments]. Prints one JSON object: the server's name, its tools
and each call's result ({is_error, text, structured}).
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main():
    ckpt, project, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    params = StdioServerParameters(command=ckpt, args=["mcp", *sys.argv[4:]], cwd=project,
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            results = []
            for name, arguments in calls:
                r = await session.call_tool(name, arguments)
                text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                results.append({"is_error": bool(r.is_error), "text": text,
                                "structured": r.structured_content})
    print(json.dumps({"server": init.server_info.name, "instructions": init.instructions,
                      "tools": [t.name for t in tools.tools], "results": results}))


asyncio.run(main())
