//! What belongs in a checkpoint: the built-in exclusions plus every ignore source git honours
//! (nested `.gitignore` files, `.git/info/exclude`, the global excludes file), whether or not the
//! project is a git repository, and the walk that lists the project under those rules.
//!
//! A nested repository is an ordinary folder judged by its own rules, as git would judge it
//! inside that repository: the enclosing project's `.gitignore` files stop at its root. Entries
//! named `.git` are always excluded, whatever the configuration says.

use std::fs::{FileType, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gix::bstr::{BString, ByteSlice};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

use crate::config::ExclusionConfig;

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
];

/// Names the restore machinery uses for its temporary files; never part of a checkpoint.
pub const TEMP_PREFIX: &str = ".ckpt-tmp-";

#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("invalid exclusion pattern {pattern:?}: {message}")]
    Pattern { pattern: String, message: String },
}

/// The exclusion rules of one project.
#[derive(Debug, Clone)]
pub struct Filter {
    root: PathBuf,
    built_in: Gitignore,
    global: Arc<Gitignore>,
    /// Absolute paths that are never part of the project (the store, if it lives inside).
    hard_excluded: Vec<PathBuf>,
}

/// One entry the walk found that belongs in a checkpoint.
#[derive(Debug)]
pub struct WalkEntry {
    /// Path relative to the root, `/`-separated, as stored in git trees.
    pub rel: BString,
    pub abs: PathBuf,
    pub file_type: FileType,
    pub metadata: Metadata,
}

/// Something the walk could not look at (and so could not judge).
#[derive(Debug, Clone)]
pub struct WalkSkip {
    pub rel: BString,
    pub reason: String,
}

impl Filter {
    pub fn new(
        root: &Path,
        config: &ExclusionConfig,
        hard_excluded: Vec<PathBuf>,
    ) -> Result<Filter, FilterError> {
        let mut builder = GitignoreBuilder::new(root);
        let patterns = BUILT_IN_EXCLUSIONS
            .iter()
            .filter(|p| !config.remove.iter().any(|r| r == *p))
            .map(|p| p.to_string())
            .chain(config.add.iter().cloned())
            .chain(
                config
                    .allow
                    .iter()
                    .map(|a| format!("!{}", a.trim_start_matches('!'))),
            );
        for pattern in patterns {
            builder
                .add_line(None, &pattern)
                .map_err(|e| FilterError::Pattern {
                    pattern: pattern.clone(),
                    message: e.to_string(),
                })?;
        }
        let built_in = builder.build().map_err(|e| FilterError::Pattern {
            pattern: "(built-in list)".into(),
            message: e.to_string(),
        })?;
        let (global, err) = Gitignore::global();
        if let Some(err) = err {
            tracing::warn!(error = %err, "global git excludes file has errors; using what parsed");
        }
        Ok(Filter {
            root: root.to_path_buf(),
            built_in,
            global: Arc::new(global),
            hard_excluded,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Lists every non-excluded file and symlink below the root (directories are descended,
    /// not listed). Symlinks are never followed.
    pub fn walk(&self) -> (Vec<WalkEntry>, Vec<WalkSkip>) {
        let mut entries = Vec::new();
        let mut skips = Vec::new();
        let root_rules = IgnoreRules::for_repository_root(&self.root);
        let mut stack = vec![(self.root.clone(), BString::default(), root_rules)];
        while let Some((dir, rel_dir, rules)) = stack.pop() {
            let read = match std::fs::read_dir(&dir) {
                Ok(r) => r,
                Err(e) => {
                    skips.push(WalkSkip {
                        rel: rel_dir.clone(),
                        reason: format!("cannot read directory: {e}"),
                    });
                    continue;
                }
            };
            for item in read {
                let item = match item {
                    Ok(i) => i,
                    Err(e) => {
                        skips.push(WalkSkip {
                            rel: rel_dir.clone(),
                            reason: format!("cannot list directory: {e}"),
                        });
                        continue;
                    }
                };
                let name = item.file_name();
                let abs = item.path();
                let rel = join_rel(&rel_dir, name.as_bytes());
                let metadata = match std::fs::symlink_metadata(&abs) {
                    Ok(m) => m,
                    // Vanished between listing and stat: it is simply not there any more.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        skips.push(WalkSkip {
                            rel,
                            reason: format!("cannot stat: {e}"),
                        });
                        continue;
                    }
                };
                let file_type = metadata.file_type();
                let is_dir = file_type.is_dir();
                if self.is_excluded(&abs, name.as_bytes(), is_dir, &rules) {
                    continue;
                }
                if is_dir {
                    let child_rules = if abs.join(".git").symlink_metadata().is_ok() {
                        IgnoreRules::for_repository_root(&abs)
                    } else {
                        rules.child(&abs)
                    };
                    stack.push((abs, rel, child_rules));
                } else {
                    entries.push(WalkEntry {
                        rel,
                        abs,
                        file_type,
                        metadata,
                    });
                }
            }
        }
        (entries, skips)
    }

    fn is_excluded(&self, abs: &Path, name: &[u8], is_dir: bool, rules: &IgnoreRules) -> bool {
        if name == b".git" || name.starts_with(TEMP_PREFIX.as_bytes()) {
            return true;
        }
        if self.hard_excluded.iter().any(|h| h == abs) {
            return true;
        }
        if self.built_in.matched(abs, is_dir).is_ignore() {
            return true;
        }
        rules.is_ignored(abs, is_dir, &self.global)
    }
}

/// The ignore files in force in one directory: its own `.gitignore` and those of its ancestors
/// up to the repository (or project) root, innermost first, then that root's `info/exclude`.
#[derive(Debug, Clone)]
struct IgnoreRules {
    /// Innermost first.
    gitignores: Vec<Arc<Gitignore>>,
    info_exclude: Option<Arc<Gitignore>>,
}

impl IgnoreRules {
    fn for_repository_root(dir: &Path) -> IgnoreRules {
        let info_exclude = git_dir(dir)
            .map(|g| g.join("info").join("exclude"))
            .filter(|p| p.is_file())
            .map(|p| Arc::new(load_ignore_file(dir, &p)));
        let mut rules = IgnoreRules {
            gitignores: Vec::new(),
            info_exclude,
        };
        rules.push_dir(dir);
        rules
    }

    fn child(&self, dir: &Path) -> IgnoreRules {
        let mut rules = self.clone();
        rules.push_dir(dir);
        rules
    }

    fn push_dir(&mut self, dir: &Path) {
        let file = dir.join(".gitignore");
        if file.is_file() {
            self.gitignores
                .insert(0, Arc::new(load_ignore_file(dir, &file)));
        }
    }

    fn is_ignored(&self, abs: &Path, is_dir: bool, global: &Gitignore) -> bool {
        let sources = self
            .gitignores
            .iter()
            .map(|g| g.as_ref())
            .chain(self.info_exclude.as_deref())
            .chain(std::iter::once(global));
        for gi in sources {
            match gi.matched(abs, is_dir) {
                Match::None => continue,
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
            }
        }
        false
    }
}

fn load_ignore_file(root: &Path, file: &Path) -> Gitignore {
    let mut builder = GitignoreBuilder::new(root);
    if let Some(err) = builder.add(file) {
        tracing::warn!(path = %file.display(), error = %err, "ignore file has errors; using what parsed");
    }
    builder.build().unwrap_or_else(|err| {
        tracing::warn!(path = %file.display(), error = %err, "ignore file unusable; ignoring it");
        Gitignore::empty()
    })
}

/// The git directory of a working tree at `dir`: `.git` itself, or where a `.git` file points.
fn git_dir(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    let meta = dot_git.symlink_metadata().ok()?;
    if meta.is_dir() {
        return Some(dot_git);
    }
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let target = text.strip_prefix("gitdir:")?.trim();
    Some(dir.join(target))
}

pub(crate) fn join_rel(dir: &BString, name: &[u8]) -> BString {
    if dir.is_empty() {
        BString::from(name)
    } else {
        let mut p = dir.clone();
        p.push(b'/');
        p.extend_from_slice(name);
        p
    }
}

/// Converts a tree path to a filesystem path below `root`.
pub fn rel_to_abs(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(std::ffi::OsStr::from_bytes(rel.as_bstr()))
}
