//! `ckpt mcp`: an MCP server on stdio (the official SDK, `rmcp`) through which an agent looks at
//! its own timeline — its checkpoints, diffs, blame by prompt, a file as it was — for the project
//! of the folder it is started in. Read-only unless started with `--allow-restore`; even then a
//! restore is only a plan until the call confirms it, names the agent in its checkpoint, and
//! happens at most once per user prompt ([`tools`]).
//!
//! `ckpt mcp install|uninstall AGENT` registers the server in an agent's settings ([`install`]).

pub mod install;
mod params;
mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

use crate::client::commands::Ctx;
use crate::client::ClientError;

/// What the agent's model is told the server is for.
const INSTRUCTIONS: &str = "ckpt records a checkpoint of the whole project each time the user \
sends a prompt (before you act on it). Use these tools to see what your last turn changed (diff \
with no arguments: what the user means by \"what did you change?\"), what changed during this \
turn so far (diff from `@`), which prompt's turn wrote a line (blame), or a file as it was \
(file_at). Checkpoint `@` is the newest; `@~1` the one before.";

/// The server: the project's context and whether `restore` is offered.
struct Server {
    ctx: Arc<Ctx>,
    allow_restore: bool,
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("ckpt", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = tools::list(self.allow_restore)
            .into_iter()
            .map(|(name, description, schema)| Tool::new(name, description, Arc::new(schema)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (ctx, allow) = (self.ctx.clone(), self.allow_restore);
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        // The daemon is called the way every command calls it: blocking, off the runtime.
        let answer = tokio::task::spawn_blocking(move || tools::call(&ctx, allow, &name, &args))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let result = match answer {
            Ok(value) => {
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(value);
                result
            }
            Err(why) => CallToolResult::error(vec![ContentBlock::text(why)]),
        };
        Ok(result.into())
    }
}

/// Serves MCP on stdin/stdout until the client closes it.
pub fn serve(ctx: &Ctx, allow_restore: bool) -> Result<i32, ClientError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let server = Server {
        ctx: Arc::new(ctx.clone()),
        allow_restore,
    };
    runtime.block_on(async move {
        let (input, output, written) = parse_errors_answered();
        let running = server
            .serve((input, output))
            .await
            .map_err(|e| ClientError::Other(format!("MCP: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| ClientError::Other(format!("MCP: {e}")))?;
        // The server's last answers are on their way to stdout.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), written).await;
        Ok(0)
    })
}

/// The longest line read from the client (a request with a large file's path list fits).
const MAX_LINE: usize = 64 << 20;
/// Unparsable lines answered in a row; past that they are dropped until a line parses (a peer
/// that answered each error with more garbage would never stop otherwise).
const ANSWERED_IN_A_ROW: usize = 10;

/// stdin and stdout for the SDK's server, with a line that is not JSON answered with JSON-RPC's
/// parse error (`-32700`, id null) instead of dropped without a word: lines from stdin that
/// parse go on to the server, the others are answered here, and the server's lines and these
/// answers reach stdout whole, one at a time.
fn parse_errors_answered() -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (to_server, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, from_server) = tokio::io::duplex(1 << 16);
    let (errors_tx, mut errors) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    tokio::spawn(async move {
        let mut to_server = to_server;
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut in_a_row = 0;
        loop {
            let mut line = Vec::new();
            let read = (&mut stdin)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .await;
            let Ok(n) = read else { break };
            if n == 0 {
                break;
            }
            let text = line
                .strip_prefix(b"\xef\xbb\xbf".as_slice())
                .unwrap_or(&line);
            let blank = text.iter().all(u8::is_ascii_whitespace);
            let parses = serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok();
            if blank || (parses && line.len() <= MAX_LINE) {
                in_a_row = 0;
                if to_server.write_all(&line).await.is_err() {
                    break;
                }
                continue;
            }
            if line.len() > MAX_LINE {
                // The rest of the line is dropped with it.
                let mut rest = Vec::new();
                let _ = stdin.read_until(b'\n', &mut rest).await;
            }
            in_a_row += 1;
            if in_a_row <= ANSWERED_IN_A_ROW {
                let error = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
                    "code": -32700, "message": "Parse error: the line is not JSON"}});
                let _ = errors_tx.send(format!("{error}\n").into_bytes()).await;
            }
        }
        let _ = to_server.shutdown().await;
    });
    let written = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut from_server = BufReader::new(from_server);
        let (mut server_open, mut errors_open) = (true, true);
        while server_open || errors_open {
            let mut line = Vec::new();
            tokio::select! {
                read = from_server.read_until(b'\n', &mut line), if server_open => {
                    if !matches!(read, Ok(n) if n > 0) {
                        server_open = false;
                    }
                }
                error = errors.recv(), if errors_open => match error {
                    Some(error) => line = error,
                    None => errors_open = false,
                },
            }
            if !line.is_empty()
                && (stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err())
            {
                break;
            }
        }
    });
    (server_in, server_out, written)
}
