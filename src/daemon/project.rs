//! One registered project: its root, its store, and the lock that serialises its work.
//! Also the registry file (`projects.json` in the data dir) that makes registrations survive
//! daemon restarts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::{Config, Paths};
use crate::filter::Filter;
use crate::protocol::{ErrorCode, RpcError};
use crate::store::Store;

/// The opened state of a project; created on first use and kept.
pub struct Opened {
    pub store: Store,
    pub filter: Filter,
}

pub struct Project {
    pub root: PathBuf,
    pub store_dir: PathBuf,
    config: Config,
    data_dir: PathBuf,
    state: Arc<tokio::sync::Mutex<Option<Opened>>>,
}

impl Project {
    pub fn new(root: PathBuf, config: &Config, paths: &Paths) -> Project {
        Project {
            store_dir: paths.store_dir(&root),
            root,
            config: config.clone(),
            data_dir: paths.data_dir.clone(),
            state: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }

    pub fn max_file_size(&self) -> u64 {
        self.config.max_file_size()
    }

    /// Runs `f` on a blocking thread with this project's lock held; different projects never
    /// wait for each other. The store is opened (or created) on first use.
    pub async fn run<T, F>(self: &Arc<Self>, f: F) -> Result<T, RpcError>
    where
        T: Send + 'static,
        F: FnOnce(&Project, &Opened) -> Result<T, RpcError> + Send + 'static,
    {
        let mut guard = self.state.clone().lock_owned().await;
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = std::fs::read_dir(&me.root) {
                return Err(RpcError::new(
                    ErrorCode::ProjectUnavailable,
                    format!(
                        "project directory {} is not accessible: {e}",
                        me.root.display()
                    ),
                ));
            }
            if guard.is_none() {
                *guard = Some(me.open()?);
            }
            f(&me, guard.as_ref().expect("opened just above"))
        })
        .await
        .map_err(|e| RpcError::new(ErrorCode::Internal, format!("project task failed: {e}")))?
    }

    /// Whether the project's lock is free right now (for status reports that must not wait).
    pub fn is_busy(&self) -> bool {
        self.state.try_lock().is_err()
    }

    fn open(&self) -> Result<Opened, RpcError> {
        let store = Store::open_or_init(&self.store_dir, &self.root)
            .map_err(|e| RpcError::new(ErrorCode::StoreError, e.to_string()))?;
        // The data directory is never part of a project, even when it lives inside one.
        let hard = vec![self.data_dir.clone(), self.store_dir.clone()];
        let filter = Filter::new(&self.root, &self.config.exclusions, hard)
            .map_err(|e| RpcError::new(ErrorCode::InvalidParams, e.to_string()))?;
        Ok(Opened { store, filter })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RegistryFile {
    projects: Vec<RegistryEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RegistryEntry {
    root: PathBuf,
}

/// The registered roots; a missing or unreadable file is an empty registry (logged).
pub fn load_registry(path: &Path) -> Vec<PathBuf> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "cannot read the project registry");
            return Vec::new();
        }
    };
    match serde_json::from_str::<RegistryFile>(&text) {
        Ok(file) => file.projects.into_iter().map(|e| e.root).collect(),
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "project registry is corrupt; starting with none");
            Vec::new()
        }
    }
}

/// Writes the registry atomically (temp file + rename).
pub fn save_registry(path: &Path, roots: &[PathBuf]) -> std::io::Result<()> {
    let file = RegistryFile {
        projects: roots
            .iter()
            .map(|r| RegistryEntry { root: r.clone() })
            .collect(),
    };
    let text = serde_json::to_string_pretty(&file).map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)
}
