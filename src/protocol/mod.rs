//! The wire protocol: JSON-RPC 2.0, one UTF-8 message per `\n`-terminated line, over a local
//! socket. Requests may be pipelined; responses carry the request's id and may come back in any
//! order. Lines longer than the daemon's cap are refused before anything is parsed.

pub mod checkpoints;
pub mod endpoint;
pub mod events;
pub mod framing;
pub mod methods;
pub mod results;
pub mod rpc;
pub mod sharing;
pub mod turns;
pub mod upkeep;
pub mod wire_path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use framing::{read_frame, FrameError};

/// Bumped when a method changes incompatibly. `hello` reports it.
pub const PROTOCOL_VERSION: u32 = 1;

/// Stable error codes. The README documents each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    RequestTooLarge,
    NotAProject,
    UnknownCheckpoint,
    AmbiguousCheckpoint,
    ProjectUnavailable,
    StoreError,
    PermissionDenied,
    ShuttingDown,
    ProjectOverlap,
    UnknownDialog,
    DialogExists,
    UnknownEdit,
    TagExists,
    NothingToUndo,
    ConfigError,
    IoError,
}

impl ErrorCode {
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::Internal,
        ErrorCode::RequestTooLarge,
        ErrorCode::NotAProject,
        ErrorCode::UnknownCheckpoint,
        ErrorCode::AmbiguousCheckpoint,
        ErrorCode::ProjectUnavailable,
        ErrorCode::StoreError,
        ErrorCode::PermissionDenied,
        ErrorCode::ShuttingDown,
        ErrorCode::ProjectOverlap,
        ErrorCode::UnknownDialog,
        ErrorCode::DialogExists,
        ErrorCode::UnknownEdit,
        ErrorCode::TagExists,
        ErrorCode::NothingToUndo,
        ErrorCode::ConfigError,
        ErrorCode::IoError,
    ];

    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::Internal => -32603,
            ErrorCode::RequestTooLarge => -32000,
            ErrorCode::NotAProject => -32001,
            ErrorCode::UnknownCheckpoint => -32002,
            ErrorCode::AmbiguousCheckpoint => -32003,
            ErrorCode::ProjectUnavailable => -32004,
            ErrorCode::StoreError => -32005,
            ErrorCode::PermissionDenied => -32006,
            ErrorCode::ShuttingDown => -32007,
            ErrorCode::ProjectOverlap => -32008,
            ErrorCode::UnknownDialog => -32009,
            ErrorCode::DialogExists => -32010,
            ErrorCode::UnknownEdit => -32011,
            ErrorCode::TagExists => -32012,
            ErrorCode::NothingToUndo => -32013,
            ErrorCode::ConfigError => -32014,
            ErrorCode::IoError => -32015,
        }
    }

    /// The name carried in `error.data.kind`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse_error",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::MethodNotFound => "method_not_found",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::Internal => "internal_error",
            ErrorCode::RequestTooLarge => "request_too_large",
            ErrorCode::NotAProject => "not_a_project",
            ErrorCode::UnknownCheckpoint => "unknown_checkpoint",
            ErrorCode::AmbiguousCheckpoint => "ambiguous_checkpoint",
            ErrorCode::ProjectUnavailable => "project_unavailable",
            ErrorCode::StoreError => "store_error",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::ProjectOverlap => "project_overlap",
            ErrorCode::UnknownDialog => "unknown_dialog",
            ErrorCode::DialogExists => "dialog_exists",
            ErrorCode::UnknownEdit => "unknown_edit",
            ErrorCode::TagExists => "tag_exists",
            ErrorCode::NothingToUndo => "nothing_to_undo",
            ErrorCode::ConfigError => "config_error",
            ErrorCode::IoError => "io_error",
        }
    }

    pub fn from_code(code: i64) -> Option<ErrorCode> {
        Self::ALL.iter().copied().find(|c| c.code() == code)
    }
}

/// An error as sent to a client.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code: code.code(),
            message: message.into(),
            data: Some(serde_json::json!({ "kind": code.name() })),
        }
    }

    pub fn kind(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.code)
    }

    /// `invalid_params`: a request that cannot be right.
    pub fn invalid(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::InvalidParams, message)
    }

    /// `not_a_project`: `path` is in no watched project.
    pub fn not_a_project(path: &std::path::Path) -> RpcError {
        RpcError::new(
            ErrorCode::NotAProject,
            format!(
                "{} is not inside a watched project (run `ckpt watch` there first)",
                path.display()
            ),
        )
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RpcError {}

/// A request as received. `params` stays raw until the method is known.
#[derive(Debug, Deserialize)]
pub struct Request {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Option<Value>,
    pub method: String,
    #[serde(default)]
    pub params: Option<Value>,
}

/// Decodes one request line: JSON, a JSON-RPC 2.0 request object. On failure, the error to
/// send and the id to send it with (null when the id could not be read).
#[allow(clippy::result_large_err)] // The error is sent at once; it is never stored or passed on.
pub fn decode_request(line: &[u8]) -> Result<Request, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            RpcError::new(ErrorCode::ParseError, format!("not valid JSON: {e}")),
        )
    })?;
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let request: Request = serde_json::from_value(value).map_err(|e| {
        (
            id.clone(),
            RpcError::new(
                ErrorCode::InvalidRequest,
                format!("not a JSON-RPC 2.0 request: {e}"),
            ),
        )
    })?;
    if request.jsonrpc != "2.0" {
        return Err((
            id,
            RpcError::new(ErrorCode::InvalidRequest, "`jsonrpc` must be \"2.0\""),
        ));
    }
    Ok(request)
}

/// Encodes a success response line (with its trailing newline); the result is already JSON.
pub fn response_line(id: &Value, result: &serde_json::value::RawValue) -> Vec<u8> {
    #[derive(Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: &'a serde_json::value::RawValue,
    }
    let response = Response {
        jsonrpc: "2.0",
        id,
        result,
    };
    let mut bytes = serde_json::to_vec(&response).expect("a response always serialises");
    bytes.push(b'\n');
    bytes
}

/// Encodes an error response line. `id` is null when the request's id could not be read.
pub fn error_line(id: &Value, error: &RpcError) -> Vec<u8> {
    line(&serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error }))
}

/// Encodes a notification line (no id): how events are sent.
pub fn notification_line(method: &str, params: &impl Serialize) -> Vec<u8> {
    line(&serde_json::json!({ "jsonrpc": "2.0", "method": method, "params": params }))
}

/// Encodes a request line.
pub fn request_line(id: u64, method: &str, params: &Value) -> Vec<u8> {
    line(&serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
}

fn line(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).expect("a serde_json::Value always serialises");
    bytes.push(b'\n');
    bytes
}
