//! The exclusion rules of one project ([`Filter`]): the built-in and configured exclusions,
//! the paths that are never part of it (its store), and the ignore rules in force per folder.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gix::bstr::{BStr, BString, ByteSlice};
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::listing::WalkResult;
use super::names::{join_rel, rel_to_abs, split_parent, TEMP_PREFIX};
use super::rules::{git_dir, global_rule_files, IgnoreRules, RulesCache};
use crate::config::ExclusionConfig;

#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("invalid exclusion pattern {pattern:?}: {message}")]
    Pattern { pattern: String, message: String },
}

/// The exclusion rules of one project.
#[derive(Debug, Clone)]
pub struct Filter {
    pub(super) root: PathBuf,
    built_in: Gitignore,
    global: Arc<Gitignore>,
    /// Absolute paths that are never part of the project (the store, if it lives inside), each
    /// with its last name, compared first (the walk asks about every entry it lists).
    hard_excluded: Vec<(PathBuf, Option<Vec<u8>>)>,
}

impl Filter {
    pub fn new(
        root: &Path,
        config: &ExclusionConfig,
        hard_excluded: Vec<PathBuf>,
    ) -> Result<Filter, FilterError> {
        let mut builder = GitignoreBuilder::new(root);
        let patterns = crate::config::BUILT_IN_EXCLUSIONS
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
            hard_excluded: hard_excluded
                .into_iter()
                .map(|h| {
                    let name = h.file_name().map(|n| n.as_bytes().to_vec());
                    (h, name)
                })
                .collect(),
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

    /// Whether `abs`, whose last name is `name`, is left out under `rules`.
    pub(super) fn is_excluded(
        &self,
        abs: &Path,
        name: &[u8],
        is_dir: bool,
        rules: &IgnoreRules,
    ) -> bool {
        if name == b".git" || name.starts_with(TEMP_PREFIX.as_bytes()) {
            return true;
        }
        let hard = |(path, last): &(PathBuf, Option<Vec<u8>>)| {
            last.as_ref().is_none_or(|last| last == name) && path == abs
        };
        if self.hard_excluded.iter().any(hard) {
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
