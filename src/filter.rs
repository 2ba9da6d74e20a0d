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

use gix::bstr::{BStr, BString, ByteSlice};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

use crate::config::ExclusionConfig;
use crate::safe_io::read_small;

/// Whether `name` is a temporary file (or sync cookie) of a ckptd that no longer runs: the
/// names carry the writer's pid, and that process is gone or is not a ckptd.
pub fn is_litter(name: &[u8]) -> bool {
    let Some(rest) = name.strip_prefix(TEMP_PREFIX.as_bytes()) else {
        return false;
    };
    let rest = rest.strip_prefix(b"cookie-").unwrap_or(rest);
    let Some(pid) = rest
        .split(|b| *b == b'-')
        .next()
        .and_then(|p| std::str::from_utf8(p).ok())
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    if pid == std::process::id() {
        return false;
    }
    match std::fs::read(format!("/proc/{pid}/comm")) {
        Ok(comm) => comm.trim_ascii() != b"ckptd",
        Err(_) => true,
    }
}

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
    pub file_type: FileType,
    pub stat: Stat,
}

/// What `stat` said about a file when it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub mode: u32,
}

impl Stat {
    pub fn of(meta: &Metadata) -> Stat {
        use std::os::unix::fs::MetadataExt;
        Stat {
            size: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            ctime_ns: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128,
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }
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

    /// Lists every non-excluded file, symlink and folder below the root. Symlinks are never
    /// followed.
    pub fn walk(&self) -> WalkResult {
        self.walk_from(BString::default(), self.root_rules(), &mut |_| {})
    }

    /// The rules in force at the root.
    pub fn root_rules(&self) -> IgnoreRules {
        IgnoreRules::for_repository_root(&self.root)
    }

    /// Walks the subtree at `start` (a folder known to be included), whose rules are `rules`.
    /// `on_dir` sees each included folder before it is listed (the watcher places its watch
    /// there, so that nothing created in it afterwards goes unnoticed).
    pub fn walk_from(
        &self,
        start: BString,
        rules: IgnoreRules,
        on_dir: &mut dyn FnMut(&Path),
    ) -> WalkResult {
        let mut result = WalkResult::default();
        let start_abs = if start.is_empty() {
            self.root.clone()
        } else {
            rel_to_abs(&self.root, &start)
        };
        let mut stack = vec![(start_abs, start, rules)];
        while let Some((dir, rel_dir, rules)) = stack.pop() {
            on_dir(&dir);
            let read = match std::fs::read_dir(&dir) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    result.skips.push(WalkSkip {
                        rel: rel_dir.clone(),
                        reason: format!("cannot read directory: {e}"),
                    });
                    continue;
                }
            };
            if dir.join(".git").symlink_metadata().is_ok() {
                result.repos.push(rel_dir.clone());
            }
            result.dirs.push(rel_dir.clone());
            for item in read {
                let item = match item {
                    Ok(i) => i,
                    Err(e) => {
                        result.skips.push(WalkSkip {
                            rel: rel_dir.clone(),
                            reason: format!("cannot list directory: {e}"),
                        });
                        continue;
                    }
                };
                let name = item.file_name();
                let abs = item.path();
                let rel = join_rel(&rel_dir, name.as_bytes());
                // Stats relative to the open folder (fstatat), never through a symlink.
                let metadata = match item.metadata() {
                    Ok(m) => m,
                    // Vanished between listing and stat: it is simply not there any more.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        result.skips.push(WalkSkip {
                            rel,
                            reason: format!("cannot stat: {e}"),
                        });
                        continue;
                    }
                };
                let file_type = metadata.file_type();
                let is_dir = file_type.is_dir();
                if !is_dir && is_litter(name.as_bytes()) {
                    result.litter.push(rel);
                    continue;
                }
                if self.is_excluded(&abs, name.as_bytes(), is_dir, &rules) {
                    continue;
                }
                if is_dir {
                    let child_rules = rules.enter(&abs);
                    stack.push((abs, rel, child_rules));
                } else {
                    result.files.push(WalkEntry {
                        rel,
                        file_type,
                        stat: Stat::of(&metadata),
                    });
                }
            }
        }
        result
    }

    /// The rules in force inside folder `rel`, or None when the folder (or one of its parents)
    /// is excluded. Answers exactly as [`Filter::walk`] would, memoised in `cache`.
    pub fn rules_for_dir(&self, cache: &mut RulesCache, rel: &BStr) -> Option<IgnoreRules> {
        if let Some(found) = cache.map.get(rel) {
            return found.clone();
        }
        let rules = if rel.is_empty() {
            Some(self.root_rules())
        } else {
            let (parent, name) = split_parent(rel);
            let abs = rel_to_abs(&self.root, rel);
            self.rules_for_dir(cache, parent).and_then(|parent_rules| {
                let is_dir = std::fs::symlink_metadata(&abs)
                    .map(|m| m.is_dir())
                    .unwrap_or(false);
                (is_dir && !self.is_excluded(&abs, name, true, &parent_rules))
                    .then(|| parent_rules.enter(&abs))
            })
        };
        cache.map.insert(rel.to_owned(), rules.clone());
        rules
    }

    /// Whether the file or symlink at `rel` would be excluded if every folder's `.gitignore`
    /// were what `gitignore_at(folder)` returns (the content in a checkpoint's tree, say);
    /// nested repositories, `info/exclude` and the global rules are as on disk. A restore asks
    /// this about what it would delete: a path ignored under the restored rules is left alone.
    pub fn excludes_file_with(
        &self,
        rel: &BStr,
        gitignore_at: &mut dyn FnMut(&BStr) -> Option<Vec<u8>>,
    ) -> bool {
        let (parent, name) = split_parent(rel);
        let mut rules =
            IgnoreRules::for_repository_root_with(&self.root, gitignore_at(b"".as_bstr()));
        let mut dir = BString::default();
        if !parent.is_empty() {
            for comp in parent.split(|b| *b == b'/') {
                dir = join_rel(&dir, comp);
                let abs = rel_to_abs(&self.root, &dir);
                if self.is_excluded(&abs, comp, true, &rules) {
                    return true;
                }
                rules = rules.enter_with(&abs, gitignore_at(dir.as_bstr()));
            }
        }
        self.is_excluded(&rel_to_abs(&self.root, rel), name, false, &rules)
    }

    /// Whether the file or symlink at `rel` belongs in a checkpoint.
    pub fn includes_file(&self, cache: &mut RulesCache, rel: &BStr) -> bool {
        let (parent, name) = split_parent(rel);
        match self.rules_for_dir(cache, parent) {
            Some(rules) => !self.is_excluded(&rel_to_abs(&self.root, rel), name, false, &rules),
            None => false,
        }
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

    /// Files outside the project's folders whose change alters the rules: the global excludes
    /// file and git config, and `info/exclude` of every repository met so far. Their stats
    /// are compared at each checkpoint.
    pub fn rule_files(&self, repo_roots: &[BString]) -> Vec<PathBuf> {
        let mut files = global_rule_files();
        for r in repo_roots {
            if let Some(g) = git_dir(&rel_to_abs(&self.root, r)) {
                files.push(g.join("info").join("exclude"));
            }
        }
        files
    }
}

/// What a walk found.
#[derive(Debug, Default)]
pub struct WalkResult {
    pub files: Vec<WalkEntry>,
    /// Included folders, the start folder first.
    pub dirs: Vec<BString>,
    /// Included folders that are repository roots (hold a `.git`).
    pub repos: Vec<BString>,
    pub skips: Vec<WalkSkip>,
    /// Temporary files of a ckptd that is gone (killed mid-restore, say): removed by the
    /// caller, since nobody else will.
    pub litter: Vec<BString>,
}

/// Memoised rules per folder (relative path); None for an excluded folder or a non-folder.
#[derive(Debug, Default)]
pub struct RulesCache {
    map: std::collections::BTreeMap<BString, Option<IgnoreRules>>,
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

fn global_rule_files() -> Vec<PathBuf> {
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
    fn for_repository_root(dir: &Path) -> IgnoreRules {
        Self::for_repository_root_with(dir, read_gitignore(dir))
    }

    /// The rules of a repository (or project) root whose `.gitignore` holds `gitignore`.
    fn for_repository_root_with(dir: &Path, gitignore: Option<Vec<u8>>) -> IgnoreRules {
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
    fn enter_with(&self, dir: &Path, gitignore: Option<Vec<u8>>) -> IgnoreRules {
        if dir.join(".git").symlink_metadata().is_ok() {
            return IgnoreRules::for_repository_root_with(dir, gitignore);
        }
        let mut rules = self.clone();
        rules.push_gitignore(dir, gitignore);
        rules
    }

    fn push_gitignore(&mut self, dir: &Path, gitignore: Option<Vec<u8>>) {
        if let Some(data) = gitignore {
            let file = dir.join(".gitignore");
            self.gitignores
                .insert(0, Arc::new(parse_ignore_file(dir, &file, &data)));
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

/// Ignore files larger than this are not read (no real one comes close).
const MAX_IGNORE_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The `.gitignore` of `dir` on disk, if it is a regular file (never a FIFO).
fn read_gitignore(dir: &Path) -> Option<Vec<u8>> {
    read_small(&dir.join(".gitignore"), MAX_IGNORE_FILE_BYTES)
}

/// Parses the content of an ignore file exactly as the `ignore` crate reads one from disk
/// (line by line, a leading BOM dropped, stopping at the first line that is not UTF-8), so
/// rules from a checkpoint's tree and from the disk always agree.
fn parse_ignore_file(root: &Path, file: &Path, data: &[u8]) -> Gitignore {
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
fn git_dir(dir: &Path) -> Option<PathBuf> {
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

pub(crate) fn split_parent(path: &BStr) -> (&BStr, &BStr) {
    match path.rfind_byte(b'/') {
        Some(i) => (path[..i].as_bstr(), path[i + 1..].as_bstr()),
        None => (b"".as_bstr(), path),
    }
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
