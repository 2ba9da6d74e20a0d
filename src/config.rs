//! Configuration (`$XDG_CONFIG_HOME/ckpt/config.toml`) and the XDG paths ckpt uses.
//!
//! Every key is optional and has a default; unknown keys are an error so that a typo never
//! silently changes nothing. The daemon only ever reads this file; its own state (registered
//! projects, stores) lives under the data directory.

mod values;

pub use values::{parse_byte_size, parse_interval, ByteSize, Interval};

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest request line the daemon accepts by default (client metadata may be up to 16 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 20 * 1024 * 1024;
/// Registered projects opened and verified as ckptd starts (see [`Config::warm_up`]).
const DEFAULT_WARM_UP: usize = 8;
/// Files larger than this are skipped (and reported) by default.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 50 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid value for `{key}`: {message}")]
    Value { key: &'static str, message: String },
    #[error("cannot determine a home directory (set HOME or the XDG_* variables)")]
    NoHome,
}

/// The parsed configuration file.
/// The default exclusion list, in gitignore syntax. Directory patterns match at any depth.
pub const BUILT_IN_EXCLUSIONS: &[&str] = &[
    ".git/",
    ".hg/",
    ".svn/",
    ".jj/",
    "node_modules/",
    "venv/",
    ".venv/",
    "__pycache__/",
    "dist/",
    "build/",
    "target/",
    "*.pyc",
    "*.pyo",
    "*.so",
    "*.dylib",
    "*.dll",
    ".env",
    ".env.*",
    "!.env.example",
    "!.env.sample",
    "!.env.template",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
    "*.pem",
    "*.key",
    // The files `ckpt hook install` and `ckpt mcp install` write in a project: they are this
    // machine's wiring (an absolute path to this `ckpt`), not the project's history. A restore
    // of a checkpoint taken before the install would switch recording off, and a teammate's
    // would install their path; kept out, they are never captured, restored or pushed.
    "**/.claude/settings.local.json",
    "**/.codex/hooks.json",
    "**/.gemini/settings.json",
    "**/.cursor/hooks.json",
    "**/.cursor/mcp.json",
    "**/.github/hooks/ckpt.json",
    "**/.qwen/settings.json",
    "**/.opencode/plugin/ckpt.js",
    "**/.kilo/plugin/ckpt.js",
    "**/.clinerules/hooks/TaskStart",
    "**/.clinerules/hooks/TaskComplete",
    "**/.clinerules/hooks/PostToolUse",
];

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Socket path; defaults to `$XDG_RUNTIME_DIR/ckpt/ckptd.sock`.
    pub socket: Option<PathBuf>,
    /// Data directory (stores, registered projects); defaults to `$XDG_DATA_HOME/ckpt`.
    pub data_dir: Option<PathBuf>,
    /// Default tracing filter when neither `RUST_LOG` nor `-v` is given.
    pub log_level: Option<String>,
    /// Files larger than this many bytes are skipped and reported. Accepts `52428800` or "50MiB".
    pub max_file_size: Option<ByteSize>,
    /// Largest accepted request line, in bytes.
    pub max_request_bytes: Option<ByteSize>,
    pub exclusions: ExclusionConfig,
    /// How many checkpoints each dialog keeps (see `ckpt prune`).
    pub retention: RetentionConfig,
    /// Record an `auto` checkpoint once changes have settled this long ("30s", "5m"; off by
    /// default). Applies to every project unless `[projects."<root>"]` says otherwise.
    pub auto_checkpoint: Option<Interval>,
    /// Settings for one project, keyed by its root (as `ckpt projects` prints it).
    pub projects: std::collections::BTreeMap<PathBuf, ProjectConfig>,
    /// How many registered projects, the most recently used first, ckptd opens and verifies as
    /// it starts (default 8; 0: none), so that the first prompt after a login does not wait for it.
    pub warm_up: Option<usize>,
    /// The name `ckpt push` sends checkpoints under, `refs/ckpt/<push_as>/` (default user@host).
    pub push_as: Option<String>,
    /// `ckpt push` also sends the client metadata (as `--with-metadata`). Default false.
    pub push_metadata: Option<bool>,
    /// After each checkpoint, push to every remote of its project in the background
    /// (coalesced; never delays a checkpoint). Default false.
    pub auto_push: Option<bool>,
}

#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Checkpoints kept in a dialog's active session (default 50).
    pub keep: Option<usize>,
    /// Automatic checkpoints kept (default 20).
    pub auto_keep: Option<usize>,
    /// A disk budget for each store: past it, the oldest checkpoints go first (off by default).
    pub max_store_bytes: Option<ByteSize>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProjectConfig {
    pub auto_checkpoint: Option<Interval>,
    pub keep: Option<usize>,
    pub auto_keep: Option<usize>,
    pub max_store_bytes: Option<ByteSize>,
}

/// Changes to the built-in exclusion list (gitignore syntax throughout).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ExclusionConfig {
    /// Patterns excluded in addition to the built-in list.
    pub add: Vec<String>,
    /// Built-in patterns to drop, written exactly as in the built-in list (e.g. "dist/").
    pub remove: Vec<String>,
    /// Patterns that are never excluded by the built-in or added patterns (e.g. ".env.local").
    /// `.gitignore` rules still apply.
    pub allow: Vec<String>,
}

impl Config {
    /// Reads `path`; a missing file at the default location is an empty config.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let (path, explicit) = match path {
            Some(p) => (p.to_path_buf(), true),
            None => (Paths::default_config_file()?, false),
        };
        // Never blocks on a FIFO or reads a device named as the configuration file.
        let text = match crate::fs::read_text(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(Config::default())
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Config::parse(&text).map_err(|message| ConfigError::Parse { path, message })
    }

    /// The configuration a client uses to find the daemon: the file's, or, when it cannot be
    /// used, the defaults with whatever `socket` and `data_dir` it still names (the client
    /// needs nothing else, and the running daemon keeps the configuration it loaded), and the
    /// reason it could not be used.
    pub fn load_for_client() -> (Config, Option<ConfigError>) {
        let error = match Config::load(None) {
            Ok(config) => return (config, None),
            Err(e) => e,
        };
        let mut config = Config::default();
        if let ConfigError::Parse { path, .. } = &error {
            let table = crate::fs::read_text(path)
                .ok()
                .and_then(|text| text.parse::<toml::Table>().ok());
            let path_of = |key: &str| {
                let table = table.as_ref()?;
                table.get(key)?.as_str().map(PathBuf::from)
            };
            config.socket = path_of("socket");
            config.data_dir = path_of("data_dir");
        }
        (config, Some(error))
    }

    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        config.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if let Some(who) = self
            .push_as
            .as_ref()
            .filter(|w| !crate::model::is_valid_who(w))
        {
            return Err(ConfigError::Value {
                key: "push_as",
                message: format!(
                    "`{who}` cannot name you on a remote: use 1-100 characters from A-Z a-z 0-9 \
                     . _ - @, not starting with . - or @"
                ),
            });
        }
        if let Some(level) = &self.log_level {
            if tracing_subscriber::EnvFilter::try_new(level).is_err() {
                return Err(ConfigError::Value {
                    key: "log_level",
                    message: format!(
                        "`{level}` is not a tracing filter (e.g. \"info\", \"ckpt=debug\")"
                    ),
                });
            }
        }
        if self.max_request_bytes.is_some_and(|b| b.0 < 4096) {
            return Err(ConfigError::Value {
                key: "max_request_bytes",
                message: "must be at least 4096".into(),
            });
        }
        for pattern in self.exclusions.add.iter().chain(&self.exclusions.allow) {
            if pattern.trim().is_empty() || pattern.contains('\n') {
                return Err(ConfigError::Value {
                    key: "exclusions",
                    message: format!("pattern {pattern:?} is empty or spans lines"),
                });
            }
        }
        for (root, project) in &self.projects {
            if !root.is_absolute() {
                return Err(ConfigError::Value {
                    key: "projects",
                    message: format!("{} is not an absolute path", root.display()),
                });
            }
            if project.keep == Some(0) {
                return Err(ConfigError::Value {
                    key: "projects.keep",
                    message: "must be at least 1".into(),
                });
            }
        }
        if self.retention.keep == Some(0) {
            return Err(ConfigError::Value {
                key: "retention.keep",
                message: "must be at least 1".into(),
            });
        }
        // Each pattern must compile now, not when a project is first opened.
        for pattern in self.exclusions.add.iter().chain(&self.exclusions.allow) {
            let mut builder = ignore::gitignore::GitignoreBuilder::new("/");
            if let Err(e) = builder
                .add_line(None, pattern)
                .and_then(|b| b.build().map(drop))
            {
                return Err(ConfigError::Value {
                    key: "exclusions",
                    message: format!("pattern {pattern:?} is not valid gitignore syntax: {e}"),
                });
            }
        }
        for pattern in &self.exclusions.remove {
            if !BUILT_IN_EXCLUSIONS.contains(&pattern.as_str()) {
                return Err(ConfigError::Value {
                    key: "exclusions.remove",
                    message: format!(
                        "{pattern:?} is not a built-in pattern; built-ins are: {}",
                        BUILT_IN_EXCLUSIONS.join(" ")
                    ),
                });
            }
        }
        Ok(())
    }

    pub fn max_file_size(&self) -> u64 {
        self.max_file_size.map_or(DEFAULT_MAX_FILE_SIZE, |b| b.0)
    }

    /// The retention of `root`'s dialogs (before any per-dialog `dialog keep`).
    pub fn retention_for(&self, root: &Path) -> crate::model::Retention {
        let project = self.projects.get(root);
        let default = crate::model::Retention::default();
        crate::model::Retention {
            keep: project
                .and_then(|p| p.keep)
                .or(self.retention.keep)
                .unwrap_or(default.keep),
            auto_keep: project
                .and_then(|p| p.auto_keep)
                .or(self.retention.auto_keep)
                .unwrap_or(default.auto_keep),
        }
    }

    /// The disk budget of `root`'s store, if any.
    pub fn max_store_bytes_for(&self, root: &Path) -> Option<u64> {
        self.projects
            .get(root)
            .and_then(|p| p.max_store_bytes)
            .or(self.retention.max_store_bytes)
            .map(|b| b.0)
    }

    /// How long changes in `root` must settle before an automatic checkpoint (None: off).
    pub fn auto_checkpoint_for(&self, root: &Path) -> Option<std::time::Duration> {
        self.projects
            .get(root)
            .and_then(|p| p.auto_checkpoint)
            .or(self.auto_checkpoint)
            .and_then(|i| i.0)
    }

    pub fn warm_up(&self) -> usize {
        self.warm_up.unwrap_or(DEFAULT_WARM_UP)
    }

    pub fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes
            .map_or(DEFAULT_MAX_REQUEST_BYTES, |b| b.0)
    }
}

/// Where things live. Resolved once from the config and the XDG environment.
#[derive(Debug, Clone)]
pub struct Paths {
    pub socket: PathBuf,
    pub data_dir: PathBuf,
}

impl Paths {
    pub fn resolve(config: &Config, socket_override: Option<&Path>) -> Result<Paths, ConfigError> {
        let data_dir = match &config.data_dir {
            Some(d) => d.clone(),
            None => Self::project_dirs()?.data_dir().to_path_buf(),
        };
        let socket = match socket_override.or(config.socket.as_deref()) {
            Some(s) => s.to_path_buf(),
            None => Self::default_socket(&data_dir)?,
        };
        Ok(Paths { socket, data_dir })
    }

    /// `$XDG_RUNTIME_DIR/ckpt/ckptd.sock`, or `<data dir>/run/ckptd.sock` when there is no
    /// runtime directory (containers, `su` shells).
    fn default_socket(data_dir: &Path) -> Result<PathBuf, ConfigError> {
        let dirs = Self::project_dirs()?;
        Ok(match dirs.runtime_dir() {
            Some(run) => run.join("ckptd.sock"),
            None => data_dir.join("run").join("ckptd.sock"),
        })
    }

    pub fn default_config_file() -> Result<PathBuf, ConfigError> {
        Ok(Self::project_dirs()?.config_dir().join("config.toml"))
    }

    fn project_dirs() -> Result<directories::ProjectDirs, ConfigError> {
        directories::ProjectDirs::from("", "", "ckpt").ok_or(ConfigError::NoHome)
    }

    /// Where the store of the project rooted at `root` lives.
    pub fn store_dir(&self, root: &Path) -> PathBuf {
        self.data_dir.join("projects").join(store_name(root))
    }

    /// The file listing registered projects.
    pub fn registry_file(&self) -> PathBuf {
        self.data_dir.join("projects.json")
    }
}

/// `<last component>-<16 hex digits of a hash of the root>`: readable and unique per root.
fn store_name(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let digest = gix::objs::compute_hash(
        gix::hash::Kind::Sha1,
        gix::objs::Kind::Blob,
        root.as_os_str().as_bytes(),
    )
    .map(|id| id.to_hex_with_len(16).to_string())
    .unwrap_or_default();
    format!("{name}-{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_rejects_unknown_keys_and_bad_values() {
        assert!(Config::parse("sockett = \"/x\"")
            .unwrap_err()
            .contains("unknown field"));
        assert!(Config::parse("max_file_size = \"lots\"").is_err());
        assert!(Config::parse("[exclusions]\nremove = [\"nope/\"]")
            .unwrap_err()
            .contains("not a built-in"));
        let c = Config::parse("max_file_size = \"1KiB\"\n[exclusions]\nadd = [\"*.log\"]").unwrap();
        assert_eq!(c.max_file_size(), 1024);
        assert_eq!(c.exclusions.add, vec!["*.log".to_string()]);
    }

    #[test]
    fn store_names_differ_per_root() {
        let a = store_name(Path::new("/home/u/app"));
        let b = store_name(Path::new("/srv/app"));
        assert!(a.starts_with("app-") && b.starts_with("app-"));
        assert_ne!(a, b);
    }
}
