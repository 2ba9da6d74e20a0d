//! One file per command (or per family of small ones). Each builds its method's typed params
//! from the command line, calls the daemon, renders the typed result, and returns the exit
//! status: 0 ok, 1 error, 2 a change that completed but skipped files.

pub mod annotate;
pub mod blame;
pub mod checkpoint;
pub mod config;
pub mod daemon;
pub mod dialog;
pub mod diff;
pub mod edit;
pub mod events;
pub mod fork;
pub mod hook;
pub mod json_text;
pub mod list;
pub mod log;
pub mod maintenance;
pub mod prompts;
pub mod restore;
pub mod revert;
pub mod rewind;
pub mod session;
pub mod settings;
pub mod share;
pub mod show;
pub mod transfer;

use std::io::IsTerminal;
use std::path::{Component, Path, PathBuf};

use super::connection::Connection;
use super::output::Out;
use super::ClientError;
use crate::config::Paths;
use crate::model::CheckpointId;
use crate::protocol::methods::ProjectParams;

/// What every command knows: how to reach the daemon, where it runs, how to print.
#[derive(Clone)]
pub struct Ctx {
    pub out: Out,
    pub paths: Paths,
    /// The directory the command is about (the current one, or `-C DIR`).
    pub base: PathBuf,
    /// Start ckptd when none answers.
    pub spawn: bool,
    /// The socket is only the default one (not named by --socket or the configuration).
    pub default_socket: bool,
    /// Why the configuration file could not be used (the command goes on without it).
    pub config_problem: Option<String>,
}

impl Ctx {
    pub fn connect(&self) -> Result<Connection, ClientError> {
        Connection::connect_or_spawn(
            &self.paths.socket,
            self.spawn,
            &self.paths.data_dir,
            self.default_socket,
            false,
        )
    }

    /// Like [`Ctx::connect`], the protocol checked by the first call: for a checkpoint only
    /// (see [`Connection::connect_pipelined`]).
    pub fn connect_for_checkpoint(&self) -> Result<Connection, ClientError> {
        Connection::connect_or_spawn(
            &self.paths.socket,
            self.spawn,
            &self.paths.data_dir,
            self.default_socket,
            true,
        )
    }

    /// The project the command is about, as the protocol names it.
    pub fn project(&self) -> PathBuf {
        self.base.clone()
    }

    pub fn project_params(&self) -> ProjectParams {
        ProjectParams {
            project: self.project(),
        }
    }

    /// Whether to ask before changing files: a person at a terminal, no --yes, no --json.
    pub fn should_confirm(&self, yes: bool, dry_run: bool) -> bool {
        !yes && !dry_run && !self.out.json && std::io::stdin().is_terminal()
    }

    /// Runs `call`; if it takes longer than a second and stderr is a terminal, shows the
    /// daemon's progress for this project (polled on a second connection) meanwhile.
    pub fn with_progress<T>(&self, call: impl FnOnce() -> T) -> T {
        if self.out.json || !std::io::stderr().is_terminal() {
            return call();
        }
        progress::around(&self.paths.socket, &self.base, call)
    }

    /// Tells a person which checkpoint a name (`@~1`, a tag, `#4`) stood for, on stderr; a
    /// hex prefix of the id needs no telling, and `--json` carries the full id anyway.
    pub fn say_resolved(&self, name: &str, id: &CheckpointId) {
        let id = id.to_string();
        if self.out.json || id.starts_with(&name.trim().to_ascii_lowercase()) {
            return;
        }
        eprintln!("{name} is {}", &id[..12]);
    }
}

/// Exit status of a change that completed but left files alone.
pub const EXIT_SKIPPED: i32 = 2;

/// 0, or [`EXIT_SKIPPED`] when anything was skipped.
pub fn skipped_status<T>(skipped: &[T]) -> i32 {
    if skipped.is_empty() {
        0
    } else {
        EXIT_SKIPPED
    }
}

mod progress {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use crate::client::connection::Connection;
    use crate::protocol::methods::NoParams;
    use crate::protocol::rpc;

    pub fn around<T>(socket: &Path, base: &Path, call: impl FnOnce() -> T) -> T {
        let finished = Arc::new(AtomicBool::new(false));
        let watcher = {
            let finished = finished.clone();
            let (socket, base) = (socket.to_path_buf(), base.to_path_buf());
            std::thread::spawn(move || show(&finished, &socket, &base))
        };
        let result = call();
        finished.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        result
    }

    /// After a second, polls `status` and draws the project's progress until `finished`.
    fn show(finished: &AtomicBool, socket: &Path, base: &Path) {
        let wait = |ms: u64| {
            for _ in 0..ms / 20 {
                if finished.load(Ordering::Relaxed) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            !finished.load(Ordering::Relaxed)
        };
        if !wait(1000) {
            return;
        }
        let Ok(mut conn) = Connection::connect(socket) else {
            return;
        };
        let mut drew = false;
        loop {
            if let Ok(status) = conn.call::<rpc::Status>(&NoParams {}) {
                let progress = status
                    .projects
                    .iter()
                    .find(|p| base.starts_with(&p.project.root))
                    .and_then(|p| p.progress.as_ref());
                if let Some(pr) = progress {
                    let line = match pr.phase.as_str() {
                        "reading" => format!("reading files {}/{}", pr.done, pr.total),
                        phase => format!("{phase} folders: {}", pr.done),
                    };
                    eprint!("\r\x1b[K{line}");
                    drew = true;
                }
            }
            if !wait(200) {
                break;
            }
        }
        if drew {
            eprint!("\r\x1b[K");
        }
    }
}

/// `paths` made absolute against `base`. The protocol carries them exactly, as text or, for a
/// name that is not UTF-8, as bytes (`protocol::wire_path`).
pub fn wire_all(base: &Path, paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().map(|p| base.join(p)).collect()
}

/// `dir` (or `base` itself) made absolute against `base`.
pub fn resolve(base: &Path, dir: Option<PathBuf>) -> PathBuf {
    match dir {
        Some(d) => base.join(d),
        None => base.to_path_buf(),
    }
}

/// `file` made absolute against `base`, with its folders resolved (`..`, symlinks) as far as
/// they exist and `..` taken lexically beyond, so the daemon, the messages and whatever is
/// created see one clean path.
pub fn file_path(base: &Path, file: &Path) -> PathBuf {
    let joined = base.join(file);
    let components: Vec<Component<'_>> = joined.components().collect();
    // Each folder as the kernel takes it: a symlink that exists is followed, and `..` goes up
    // from where the path got to (so `new/../new2` names `new2` alone, never `new`). The last
    // component is kept as it is.
    let mut out = PathBuf::new();
    for (i, component) in components.iter().enumerate() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => {
                out.push(other);
                let last = i + 1 == components.len();
                let link = || {
                    out.symlink_metadata()
                        .is_ok_and(|m| m.file_type().is_symlink())
                };
                if !last && link() {
                    if let Ok(real) = out.canonicalize() {
                        out = real;
                    }
                }
            }
        }
    }
    out
}
