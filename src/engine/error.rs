//! The engine's errors, with their context kept (the path, what was being done, the gix error
//! as a source), and their one mapping to the wire's error codes.

use std::path::PathBuf;

use crate::protocol::{ErrorCode, RpcError};
use crate::store::import::ImportError;
use crate::store::{CheckpointError, SnapshotError, StoreError};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A request that names or asks for something impossible.
    #[error("{0}")]
    InvalidParams(String),
    #[error("cannot import {path}: {source}")]
    Import {
        path: PathBuf,
        #[source]
        source: ImportError,
    },
    #[error("cannot write the bundle: {0}")]
    BundleWrite(#[source] StoreError),
    #[error("project directory {} is not accessible: {source}", root.display())]
    Unavailable {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "project directory {} was replaced by a symlink; it is not followed (move the project \
         back, or watch its new place)", root.display()
    )]
    RootReplaced { root: PathBuf },
    #[error(
        "the store at {} is damaged: {}; `ckpt fsck` lists what is affected, `ckpt fsck \
         --repair` sets the damage aside (see the README)", store.display(), damage.join("; ")
    )]
    Damaged { store: PathBuf, damage: Vec<String> },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("dialog `{0}` exists already")]
    DialogExists(String),
    #[error("there is no restore to undo")]
    NothingToUndo,
    #[error("no open edit transaction `{0}` (committed, aborted or expired)")]
    UnknownEdit(String),
    #[error(transparent)]
    Share(crate::store::share::ShareError),
    #[error("{0}")]
    Internal(String),
}

impl From<crate::store::share::ShareError> for Error {
    fn from(e: crate::store::share::ShareError) -> Error {
        use crate::store::share::ShareError as S;
        match e {
            S::Store(e) => Error::Store(e),
            S::Checkpoint(e) => Error::Checkpoint(e),
            other => Error::Share(other),
        }
    }
}

impl Error {
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidParams(message.into())
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Checkpoint(e) => checkpoint_code(e),
            Error::Store(_) | Error::Damaged { .. } => ErrorCode::StoreError,
            Error::Snapshot(SnapshotError::Root { .. }) => ErrorCode::ProjectUnavailable,
            Error::Snapshot(SnapshotError::Store(_)) => ErrorCode::StoreError,
            Error::InvalidParams(_) => ErrorCode::InvalidParams,
            Error::Import { source, .. } => match source {
                ImportError::Store(_) => ErrorCode::StoreError,
                ImportError::Read { .. } => ErrorCode::IoError,
                _ => ErrorCode::InvalidParams,
            },
            Error::BundleWrite(_) => ErrorCode::IoError,
            Error::Unavailable { .. } | Error::RootReplaced { .. } => ErrorCode::ProjectUnavailable,
            Error::Config(_) => ErrorCode::ConfigError,
            Error::DialogExists(_) => ErrorCode::DialogExists,
            Error::NothingToUndo => ErrorCode::NothingToUndo,
            Error::UnknownEdit(_) => ErrorCode::UnknownEdit,
            Error::Share(_) => ErrorCode::InvalidParams,
            Error::Internal(_) => ErrorCode::Internal,
        }
    }
}

fn checkpoint_code(e: &CheckpointError) -> ErrorCode {
    match e {
        CheckpointError::Unknown(_) | CheckpointError::NotACheckpoint { .. } => {
            ErrorCode::UnknownCheckpoint
        }
        CheckpointError::Ambiguous { .. } => ErrorCode::AmbiguousCheckpoint,
        CheckpointError::UnknownDialog(_) => ErrorCode::UnknownDialog,
        CheckpointError::TagExists(_) => ErrorCode::TagExists,
        CheckpointError::BadId(_)
        | CheckpointError::BadTag(_)
        | CheckpointError::BadDialog(_)
        | CheckpointError::MetaTooLarge { .. } => ErrorCode::InvalidParams,
        CheckpointError::Store(_) => ErrorCode::StoreError,
    }
}

impl From<Error> for RpcError {
    fn from(e: Error) -> RpcError {
        RpcError::new(e.code(), e.to_string())
    }
}

impl From<crate::filter::FilterError> for Error {
    fn from(e: crate::filter::FilterError) -> Error {
        Error::Config(e.to_string())
    }
}
