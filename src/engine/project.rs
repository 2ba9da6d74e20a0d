//! One registered project as every operation sees it: its root, its store, its configuration,
//! and what is read without its lock. Plain data: the one owner of its opened state, which
//! serialises operations, is the daemon's (`daemon::owner`).

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use gix::bstr::BString;

use super::events::Events;
use super::{Error, Result};
use crate::config::{Config, Paths};
use crate::index::Progress;
use crate::model::{Retention, WatchMode};
use crate::store::Store;

/// When this process started (first asked for by the daemon, at its start).
pub static DAEMON_STARTED: std::sync::LazyLock<std::time::SystemTime> =
    std::sync::LazyLock::new(std::time::SystemTime::now);

/// What every operation knows of its project: where it is, its configuration, and what is read
/// without its lock (how it finds changes, a long refresh's progress, open edit
/// transactions, live events).
pub struct Project {
    pub root: PathBuf,
    pub store_dir: PathBuf,
    config: parking_lot::RwLock<Config>,
    pub(crate) data_dir: PathBuf,
    /// How changes are found (read without the lock).
    pub mode: parking_lot::Mutex<WatchMode>,
    /// How far a long refresh has come (read without the lock).
    pub progress: Arc<Progress>,
    /// Open edit transactions.
    pub edits: parking_lot::Mutex<super::transactions::Edits>,
    /// Live events for subscribers.
    pub events: Arc<Events>,
    /// The tree of the checkpoint recorded last (by this daemon), if any.
    pub last_recorded: parking_lot::Mutex<Option<gix::ObjectId>>,
    /// When this daemon started: lock files in the store older than that are stale.
    pub(crate) started: std::time::SystemTime,
}

impl Project {
    pub fn new(root: PathBuf, config: &Config, paths: &Paths) -> Project {
        let root_for_events = root.clone();
        Project {
            store_dir: paths.store_dir(&root),
            root,
            config: parking_lot::RwLock::new(config.clone()),
            data_dir: paths.data_dir.clone(),
            mode: parking_lot::Mutex::new(WatchMode::NotOpened),
            progress: Arc::default(),
            edits: parking_lot::Mutex::default(),
            events: Arc::new(Events::new(root_for_events)),
            last_recorded: parking_lot::Mutex::new(None),
            started: *DAEMON_STARTED,
        }
    }

    /// The retention of `dialog`: `dialog keep`, else the project's or the global config.
    pub fn retention(&self, store: &Store, dialog: &str) -> Retention {
        let mut r = self.config().retention_for(&self.root);
        if let Some(keep) = store.dialog_keep(dialog) {
            r.keep = keep;
        }
        r
    }

    /// The store's disk budget, if the configuration sets one.
    pub fn max_store_bytes(&self) -> Option<u64> {
        self.config().max_store_bytes_for(&self.root)
    }

    pub fn max_file_size(&self) -> u64 {
        self.config().max_file_size()
    }

    /// The configuration in effect (replaced by a reload).
    pub fn config(&self) -> Config {
        self.config.read().clone()
    }

    /// Applies a reloaded configuration (retention, the disk budget and `max_file_size` apply
    /// from the next operation); whether the rules of what a checkpoint holds changed (the
    /// exclusions or `max_file_size`): then the opened state must follow them
    /// ([`Opened::follow_rules`](super::Opened::follow_rules)).
    pub fn set_config(&self, config: Config) -> bool {
        let old = std::mem::replace(&mut *self.config.write(), config.clone());
        old.exclusions != config.exclusions || old.max_file_size() != config.max_file_size()
    }

    /// How the project finds changes now.
    pub fn mode(&self) -> WatchMode {
        self.mode.lock().clone()
    }

    /// Converts request paths (absolute, or relative to the root) into tree paths; a path
    /// outside the project is refused.
    pub fn tree_paths(&self, paths: &[PathBuf]) -> Result<Vec<BString>> {
        paths
            .iter()
            .map(|p| {
                let abs = normalize(&self.root.join(p));
                let rel = abs.strip_prefix(&self.root).map_err(|_| {
                    Error::invalid(format!(
                        "path `{}` is outside the project {}",
                        p.display(),
                        self.root.display()
                    ))
                })?;
                Ok(BString::from(rel.as_os_str().as_bytes()))
            })
            .collect()
    }
}

/// `path` if it is absolute.
pub fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Err(Error::invalid(format!(
            "path `{}` must be absolute",
            path.display()
        )))
    }
}

/// Removes `.` and resolves `..` without touching the filesystem.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

impl Project {
    /// Makes `store` borrow from its worktrees' pool when this project is one of several
    /// registered worktrees of one git repository (see [`crate::store::pool`]); the store
    /// opened again when it joined just now.
    pub(crate) fn join_pool(&self, store: &Store) -> Result<Option<Store>> {
        // Most projects are no worktree's top: no registry to read for them.
        if crate::filter::git_common_dir(&self.root).is_none() {
            return Ok(None);
        }
        let registered = super::registry::load_registry(&self.data_dir.join("projects.json"));
        let Some(pool) = crate::store::pool::pool_for(&self.root, &self.data_dir, &registered)?
        else {
            return Ok(None);
        };
        match Store::join_pool(store.dir(), &pool)? {
            true => Ok(Some(Store::open(store.dir())?)),
            false => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_become_tree_paths() {
        let paths = Paths {
            socket: PathBuf::from("/data/ckptd.sock"),
            data_dir: PathBuf::from("/data"),
        };
        let p = Project::new(PathBuf::from("/p"), &Config::default(), &paths);
        let ok = p
            .tree_paths(&[
                PathBuf::from("/p/src/a.rs"),
                PathBuf::from("docs"),
                PathBuf::from("/p"),
            ])
            .unwrap();
        assert_eq!(
            ok,
            vec![
                BString::from("src/a.rs"),
                BString::from("docs"),
                BString::from("")
            ]
        );
        for bad in ["/etc/passwd", "../x", "/p/../q"] {
            assert!(p.tree_paths(&[PathBuf::from(bad)]).is_err(), "{bad}");
        }
    }
}
