//! What can go wrong in the client, as people and scripts see it: [`ClientError`], its exit
//! status and its JSON shape.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::protocol::RpcError;

/// The hint for what a daemon older than the client refuses.
const OLDER_DAEMON: &str = "a ckptd started before ckpt was upgraded refuses what it does not \
know yet: restart it (`ckpt shutdown`, or `systemctl --user restart ckptd`)";

/// Exit status of a usage error.
pub const EXIT_USAGE: i32 = 64;
/// Exit status of a configuration file that cannot be used (sysexits' EX_CONFIG).
pub const EXIT_CONFIG: i32 = 78;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Rpc(#[from] RpcError),
    #[error("no ckptd answers on {socket}{}", .detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    NoDaemon {
        socket: PathBuf,
        detail: Option<String>,
    },
    #[error("ckptd at {socket} accepted the connection but did not answer within {timeout:?}")]
    Unresponsive { socket: PathBuf, timeout: Duration },
    #[error("connection to ckptd failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("unexpected reply from ckptd: {0}")]
    Protocol(String),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Config(String),
    /// Anything else the command could not do (its message says what).
    #[error("{0}")]
    Other(String),
}

impl ClientError {
    /// The process exit status for this error: 64 (sysexits' EX_USAGE) for a command line
    /// that cannot work, 1 for everything else (2 is a restore that skipped files).
    pub fn exit_code(&self) -> i32 {
        match self {
            ClientError::Usage(_) => EXIT_USAGE,
            ClientError::Config(_) => EXIT_CONFIG,
            // The daemon refused a configuration (`reload` of an invalid file).
            ClientError::Rpc(e) if e.kind() == Some(crate::protocol::ErrorCode::ConfigError) => {
                EXIT_CONFIG
            }
            _ => 1,
        }
    }

    /// A hint printed under the error, by its kind.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            ClientError::NoDaemon { .. } => Some(
                "start it with `ckptd` (or let the command start it: without --no-spawn, or \
                 with ckptd.socket enabled)",
            ),
            ClientError::Rpc(e) => match e.kind()? {
                crate::protocol::ErrorCode::NotAProject => {
                    Some("run `ckpt watch` in the project's root first, or pass -C DIR")
                }
                crate::protocol::ErrorCode::UnknownCheckpoint
                | crate::protocol::ErrorCode::AmbiguousCheckpoint => {
                    Some("`ckpt list` shows the checkpoint ids")
                }
                // A daemon started before ckpt was upgraded does not know newer methods and
                // fields; the client never sends what a daemon of its own version refuses.
                crate::protocol::ErrorCode::MethodNotFound => Some(OLDER_DAEMON),
                crate::protocol::ErrorCode::InvalidParams
                    if e.message.contains("unknown field") =>
                {
                    Some(OLDER_DAEMON)
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// The `{code, message, data: {kind}}` object `--json` prints: the daemon's error as it
    /// came, or one of the client's own (codes -32100 and below).
    pub fn to_json(&self) -> Value {
        let (code, kind) = match self {
            ClientError::Rpc(e) => return serde_json::json!(e),
            ClientError::Usage(_) => (-32100, "usage_error"),
            ClientError::Config(_) => (-32014, "config_error"),
            ClientError::NoDaemon { .. } => (-32101, "no_daemon"),
            ClientError::Unresponsive { .. } => (-32102, "daemon_unresponsive"),
            ClientError::Io(_) => (-32103, "connection_error"),
            ClientError::Protocol(_) => (-32104, "protocol_error"),
            ClientError::Other(_) => (-32105, "failed"),
        };
        serde_json::json!({ "code": code, "message": self.to_string(), "data": { "kind": kind } })
    }
}
