//! The store's error, and how a chain of causes is told in one line. A leaf: every file of the
//! store uses it, it uses none of them.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create store at {path}: {message}")]
    Init { path: PathBuf, message: String },
    #[error("cannot open store at {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("store {what} failed: {}", error_chain(.source.as_ref()))]
    Git {
        what: &'static str,
        /// The gix error, kept whole (its chain names the real cause).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("store I/O on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Concurrent(String),
}

impl StoreError {
    /// A git-level failure of `what`, with the whole chain of causes in the message (gix
    /// wraps the I/O error that names the real cause, e.g. "No space left on device").
    pub(crate) fn git(
        what: &'static str,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Git {
            what,
            source: Box::new(err),
        }
    }
}

/// `err` and its causes, as one line.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
