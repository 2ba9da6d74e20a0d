//! Git ignore rules as git applies them: per-folder `.gitignore`s (read without following
//! symlinks or blocking on FIFOs), `.git/info/exclude`, the global excludes file, and the
//! repository boundaries where they reset.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gix::bstr::{BStr, BString};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

use crate::fs::read_small;

/// Memoised rules per folder (relative path); None for an excluded folder or a non-folder.
#[derive(Debug, Default)]
pub struct RulesCache {
    pub(super) map: std::collections::BTreeMap<BString, Option<IgnoreRules>>,
}

impl RulesCache {
    /// Forgets what is known about `rel` and everything below it: it changed (its type, or an
    /// ignore file in it), so its folder-ness and rules must be looked at again.
    pub fn invalidate(&mut self, rel: &BStr) {
        if rel.is_empty() {
            self.map.clear();
            return;
        }
        let stale: Vec<BString> = self
            .map
            .range::<BStr, _>((std::ops::Bound::Included(rel), std::ops::Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(rel))
            .filter(|k| k.len() == rel.len() || k[rel.len()] == b'/')
            .cloned()
            .collect();
        for k in stale {
            self.map.remove(&k);
        }
    }

    pub fn clear(&mut self) {
        self.map.clear();
    }
}

pub(super) fn global_rule_files() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut files = Vec::new();
    if let Some(h) = &home {
        files.push(h.join(".gitconfig"));
    }
    if let Some(x) = xdg {
        files.push(x.join("git").join("config"));
        files.push(x.join("git").join("ignore"));
    }
    files
}

/// The ignore files in force in one directory: its own `.gitignore` and those of its ancestors
/// up to the repository (or project) root, innermost first, then that root's `info/exclude`.
#[derive(Debug, Clone)]
pub struct IgnoreRules {
    /// Innermost first.
    gitignores: Vec<Arc<Gitignore>>,
    info_exclude: Option<Arc<Gitignore>>,
}

impl IgnoreRules {
    pub(super) fn for_repository_root(dir: &Path) -> IgnoreRules {
        Self::for_repository_root_with(dir, read_gitignore(dir))
    }

    /// The rules of a repository (or project) root whose `.gitignore` holds `gitignore`.
    pub(super) fn for_repository_root_with(dir: &Path, gitignore: Option<Vec<u8>>) -> IgnoreRules {
        let info_exclude = git_dir(dir).and_then(|g| {
            let path = g.join("info").join("exclude");
            read_small(&path, MAX_IGNORE_FILE_BYTES)
                .map(|data| Arc::new(parse_ignore_file(dir, &path, &data)))
        });
        let mut rules = IgnoreRules {
            gitignores: Vec::new(),
            info_exclude,
        };
        rules.push_gitignore(dir, gitignore);
        rules
    }

    /// The rules inside `dir`, a child folder of the folder these rules belong to: a nested
    /// repository starts afresh, any other folder adds its own `.gitignore`.
    pub fn enter(&self, dir: &Path) -> IgnoreRules {
        self.enter_with(dir, read_gitignore(dir))
    }

    /// Like [`IgnoreRules::enter`], with `gitignore` as the content of the folder's
    /// `.gitignore` (from a checkpoint's tree, say) instead of the file on disk.
    pub(super) fn enter_with(&self, dir: &Path, gitignore: Option<Vec<u8>>) -> IgnoreRules {
        if dir.join(".git").symlink_metadata().is_ok() {
            return IgnoreRules::for_repository_root_with(dir, gitignore);
        }
        let mut rules = self.clone();
        rules.push_gitignore(dir, gitignore);
        rules
    }

    pub(super) fn push_gitignore(&mut self, dir: &Path, gitignore: Option<Vec<u8>>) {
        if let Some(data) = gitignore {
            let file = dir.join(".gitignore");
            self.gitignores
                .insert(0, Arc::new(parse_ignore_file(dir, &file, &data)));
        }
    }

    pub(super) fn is_ignored(&self, abs: &Path, is_dir: bool, global: &Gitignore) -> bool {
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

/// Ignore files larger than this are not read (no real one comes close).
const MAX_IGNORE_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The `.gitignore` of `dir` on disk, if it is a regular file (never a FIFO).
pub(super) fn read_gitignore(dir: &Path) -> Option<Vec<u8>> {
    read_small(&dir.join(".gitignore"), MAX_IGNORE_FILE_BYTES)
}

/// Parses the content of an ignore file exactly as the `ignore` crate reads one from disk
/// (line by line, a leading BOM dropped, stopping at the first line that is not UTF-8), so
/// rules from a checkpoint's tree and from the disk always agree.
pub(super) fn parse_ignore_file(root: &Path, file: &Path, data: &[u8]) -> Gitignore {
    use std::io::BufRead;
    let mut builder = GitignoreBuilder::new(root);
    for (i, line) in std::io::Cursor::new(data).lines().enumerate() {
        let Ok(line) = line else {
            tracing::warn!(path = %file.display(), line = i + 1, "ignore file is not UTF-8 from here on; using what came before");
            break;
        };
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            &line
        };
        if let Err(err) = builder.add_line(Some(file.to_path_buf()), line) {
            tracing::warn!(path = %file.display(), error = %err, "ignore file has errors; using what parsed");
        }
    }
    builder.build().unwrap_or_else(|err| {
        tracing::warn!(path = %file.display(), error = %err, "ignore file unusable; ignoring it");
        Gitignore::empty()
    })
}

/// The git directory of a working tree at `dir`: `.git` itself, or where a `.git` file points.
pub(super) fn git_dir(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    let meta = dot_git.symlink_metadata().ok()?;
    if meta.is_dir() {
        return Some(dot_git);
    }
    let text = read_small(&dot_git, 4096)?;
    let text = String::from_utf8(text).ok()?;
    let target = text.strip_prefix("gitdir:")?.trim();
    Some(dir.join(target))
}

/// The git common directory of the repository whose worktree (or main working folder) is
/// `root` itself; None when `root` is no worktree's top (no `.git` there, a link, unreadable).
pub fn git_common_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    let git_dir = if meta.is_dir() {
        dot_git
    } else if meta.is_file() {
        // A worktree: `gitdir: <path>` (relative to the worktree, or absolute).
        let text = crate::fs::read_small(&dot_git, 4096)?;
        let text = String::from_utf8(text).ok()?;
        let path = text.trim().strip_prefix("gitdir:")?.trim();
        root.join(path)
    } else {
        return None;
    };
    let common = match crate::fs::read_small(&git_dir.join("commondir"), 4096) {
        Some(text) => git_dir.join(String::from_utf8(text).ok()?.trim()),
        None => git_dir,
    };
    let common = common.canonicalize().ok()?;
    common.join("objects").is_dir().then_some(common)
}
