//! `ckpt mcp`: an MCP server on stdio (the official SDK, `rmcp`) through which an agent looks at
//! its own timeline — its checkpoints, diffs, blame by prompt, a file as it was — for the project
//! of the folder it is started in. Read-only unless started with `--allow-restore`; even then a
//! restore is only a plan until the call confirms it, names the agent in its checkpoint, and
//! happens at most once per user prompt ([`tools`]).
//!
//! `ckpt mcp install|uninstall AGENT` registers the server in an agent's settings ([`install`]).

pub mod install;
mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

use super::Ctx;
use crate::client::ClientError;

/// What the agent's model is told the server is for.
const INSTRUCTIONS: &str = "ckpt records a checkpoint of the whole project each time the user \
sends a prompt (before you act on it). Use these tools to see what changed since the user's last \
prompt (diff from `@`), which prompt's turn wrote a line (blame), or a file as it was (file_at). \
Checkpoint `@` is the newest; `@~1` the one before.";

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
            .map(|(name, description, schema)| {
                let schema = match schema {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(name, description, Arc::new(schema))
            })
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
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ClientError::Other(format!("MCP: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| ClientError::Other(format!("MCP: {e}")))?;
        Ok(0)
    })
}
