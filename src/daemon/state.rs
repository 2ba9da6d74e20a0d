//! The daemon's state shared by every connection (its configuration, paths and the owners of
//! its projects), and the helpers every part of the daemon uses on it.

use crate::config::{Config, Paths};
use crate::engine::registry::load_registry;
use crate::protocol::results::Reloaded;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::RwLock;

use super::owner::Owner;

/// State shared by every connection.
pub struct Daemon {
    config: parking_lot::RwLock<Config>,
    /// The file the configuration was read from (None: the default location).
    config_file: Option<PathBuf>,
    pub(crate) paths: Paths,
    pub(crate) projects: RwLock<BTreeMap<PathBuf, Arc<Owner>>>,
    /// Serialises changes to the registry file.
    pub(crate) registry_lock: tokio::sync::Mutex<()>,
    pub(crate) started: Instant,
    pub(crate) uid: u32,
}

impl Daemon {
    /// Loads the registered projects (their stores open lazily, on first use).
    pub fn new(config: Config, paths: Paths) -> Daemon {
        let _ = *crate::engine::project::DAEMON_STARTED;
        // Installs from before stores were private: tighten what is there.
        for dir in [paths.data_dir.clone(), paths.data_dir.join("projects")] {
            crate::fs::make_private(&dir, false);
        }
        for file in ["projects.json", "ckptd.log"] {
            crate::fs::make_private(&paths.data_dir.join(file), false);
        }
        let roots = load_registry(&paths.registry_file());
        let projects = roots
            .into_iter()
            .map(|root| {
                let p = Owner::new(root.clone(), &config, &paths);
                (root, Arc::new(p))
            })
            .collect();
        Daemon {
            config: parking_lot::RwLock::new(config),
            config_file: None,
            paths,
            projects: RwLock::new(projects),
            registry_lock: tokio::sync::Mutex::new(()),
            started: Instant::now(),
            uid: rustix::process::geteuid().as_raw(),
        }
    }

    /// Names the configuration file a reload reads (the `--config` ckptd was started with).
    pub fn with_config_file(mut self, file: Option<PathBuf>) -> Daemon {
        self.config_file = file;
        self
    }

    /// The configuration in effect.
    pub fn config(&self) -> Config {
        self.config.read().clone()
    }

    /// Re-reads the configuration file (SIGHUP, `ckpt reload`). An invalid file is an error and
    /// the configuration in effect stays. `socket`, `data_dir` and `log_level` apply at the
    /// next start; everything else at once (see the README).
    pub async fn reload(&self) -> Result<Reloaded, crate::engine::Error> {
        let file = self.config_file.clone();
        let new = tokio::task::spawn_blocking(move || Config::load(file.as_deref()))
            .await
            .map_err(|e| crate::engine::Error::Internal(e.to_string()))?
            .map_err(|e| crate::engine::Error::Config(e.to_string()))?;
        let old = self.config();
        let mut restart_needed = Vec::new();
        if new.socket != old.socket {
            restart_needed.push("socket".to_string());
        }
        if new.data_dir != old.data_dir {
            restart_needed.push("data_dir".to_string());
        }
        if new.log_level != old.log_level {
            restart_needed.push("log_level".to_string());
        }
        *self.config.write() = new.clone();
        let projects: Vec<Arc<Owner>> = self.projects.read().await.values().cloned().collect();
        for project in projects {
            if let Err(e) = project.reconfigure(new.clone()).await {
                tracing::warn!(root = %project.root.display(), error = %e, "cannot apply the new configuration");
            }
        }
        tracing::info!(?restart_needed, "configuration reloaded");
        Ok(Reloaded { restart_needed })
    }

    /// The registered project whose root contains `path`.
    pub(crate) async fn project_for(&self, path: &Path) -> Option<Arc<Owner>> {
        let projects = self.projects.read().await;
        projects
            .iter()
            .filter(|(root, _)| path.starts_with(root))
            .max_by_key(|(root, _)| root.as_os_str().len())
            .map(|(_, p)| p.clone())
    }
}

/// Whether test-only behaviour is on (`CKPTD_TEST_HOOKS=1` in ckptd's environment): the
/// [`PANIC_METHOD`] method. Read once.
pub(crate) fn test_hooks() -> bool {
    static ON: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var_os("CKPTD_TEST_HOOKS").is_some_and(|v| v == "1"));
    *ON
}

/// Runs filesystem work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, crate::protocol::RpcError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        crate::protocol::RpcError::new(
            crate::protocol::ErrorCode::Internal,
            format!("blocking task failed: {e}"),
        )
    })
}

/// Raises the soft limit on open files to the hard one (systemd's default soft limit is 1,024,
/// its hard one 524,288): every connection, event stream, watch folder and store pack holds a
/// descriptor, and running out makes every checkpoint of every project fail. Returns the limit
/// in effect.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    // The kernel's own ceiling (`fs.nr_open`) is 1,048,576 unless raised.
    const CEILING: u64 = 1 << 20;
    let limit = getrlimit(Resource::Nofile);
    let want = limit.maximum.unwrap_or(CEILING).min(CEILING);
    if limit.current.is_some_and(|soft| soft < want) {
        let raised = Rlimit {
            current: Some(want),
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, "cannot raise the limit on open files");
        }
    }
    getrlimit(Resource::Nofile).current
}
