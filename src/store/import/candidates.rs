//! Which commits of a bundle become checkpoints, in which order, and which are refused.

use std::collections::{HashMap, HashSet};

use gix::bstr::ByteSlice;
use gix::ObjectId;

use super::header::BundleHeader;
use crate::model::SkippedFile;
use crate::store::checkpoint::rfc3339_millis;
use crate::store::checkpoint::{CheckpointError, Imported};
use crate::store::error::StoreError;
use crate::store::open::Store;

/// A commit of a bundle that is to become a checkpoint.
#[derive(Debug)]
pub struct Candidate {
    pub commit: ObjectId,
    pub tree: ObjectId,
    pub label: String,
    pub message_id: Option<String>,
    pub meta: Option<serde_json::Value>,
    pub skipped: Vec<SkippedFile>,
    pub imported: Imported,
}

/// A ref of a bundle that will not become a checkpoint, and why.
#[derive(Debug, Clone)]
pub struct NotImported {
    pub from: String,
    pub ref_name: String,
    pub reason: String,
}

impl Store {
    /// The checkpoints that the bundle's refs (whose objects are in the store now) make, oldest
    /// first: one per distinct commit. Another store's checkpoint keeps its label, message id,
    /// client metadata and skipped files; a plain commit is labelled with its message. Commits
    /// that are checkpoints of this store already, or were imported before, are left out.
    // Long by design: one decision per bundle ref (refused, already here, imported before, a
    // checkpoint of another store, a plain commit), read in order.
    pub fn import_candidates(
        &self,
        repo: &gix::Repository,
        header: &BundleHeader,
    ) -> Result<(Vec<Candidate>, Vec<NotImported>), CheckpointError> {
        let mut present = HashSet::new();
        let mut imported_before = HashMap::new();
        for c in self.list(repo, None)? {
            if let Some(i) = &c.imported {
                imported_before.insert(i.from.clone(), c.id);
            }
            present.insert(c.id.to_string());
        }
        // One candidate per commit; HEAD only when nothing else names it.
        let mut refs: Vec<&(ObjectId, String)> =
            header.refs.iter().filter(|(_, n)| n != "HEAD").collect();
        refs.extend(header.refs.iter().filter(|(_, n)| n == "HEAD"));
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut left = Vec::new();
        for (id, ref_name) in refs {
            let skip = |reason: String| NotImported {
                from: id.to_string(),
                ref_name: ref_name.clone(),
                reason,
            };
            let commit = match repo
                .find_object(*id)
                .map_err(|e| StoreError::git("reading an imported object", e))?
                .peel_to_kind(gix::object::Kind::Commit)
            {
                Ok(object) => object.into_commit(),
                Err(_) => {
                    left.push(skip("not a commit".into()));
                    continue;
                }
            };
            let commit_id = commit.id;
            if !seen.insert(commit_id) {
                continue;
            }
            let from = commit_id.to_string();
            if present.contains(&from) {
                left.push(skip("already a checkpoint of this project".into()));
                continue;
            }
            if let Some(existing) = imported_before.get(&from) {
                left.push(skip(format!("imported before as {}", existing.short())));
                continue;
            }
            let tree = commit
                .tree_id()
                .map_err(|e| StoreError::git("reading an imported commit", e))?
                .detach();
            let candidate = match self.checkpoint(repo, commit_id) {
                Ok(mut c) => {
                    if let Err(e) = self.load_meta(repo, &mut c) {
                        tracing::warn!(from = %from, error = %e, "imported checkpoint's metadata is unreadable; left out");
                    }
                    let label = match c.label.is_empty() {
                        true => format!("{} #{} of dialog {}", c.kind, c.seq, c.dialog),
                        false => c.label,
                    };
                    Candidate {
                        commit: commit_id,
                        tree,
                        label,
                        message_id: c.message_id,
                        meta: c.meta,
                        skipped: c.skipped,
                        imported: Imported {
                            from,
                            kind: c.kind.to_string(),
                            created_at: c.created_at,
                            dialog: Some(c.dialog),
                            ref_name: Some(ref_name.clone()),
                        },
                    }
                }
                Err(_) => {
                    let seconds = commit.time().map(|t| t.seconds).unwrap_or(0);
                    let created_at = jiff::Timestamp::from_second(seconds)
                        .map(rfc3339_millis)
                        .unwrap_or_default();
                    let message = commit
                        .message_raw_sloppy()
                        .to_str_lossy()
                        .trim()
                        .to_string();
                    Candidate {
                        commit: commit_id,
                        tree,
                        label: message,
                        message_id: None,
                        meta: None,
                        skipped: Vec::new(),
                        imported: Imported {
                            from,
                            kind: "commit".into(),
                            created_at,
                            dialog: None,
                            ref_name: Some(ref_name.clone()),
                        },
                    }
                }
            };
            out.push(candidate);
        }
        out.sort_by(|a, b| a.imported.created_at.cmp(&b.imported.created_at));
        order_ties(repo, &mut out)?;
        Ok((out, left))
    }
}

/// The deepest a tree may nest folders (git's own `core.maxTreeDepth`): `a/b/c` is 3 deep.
pub const MAX_TREE_DEPTH: usize = 2048;

/// One tree being looked at by [`unsafe_paths`]: its subtrees still to look at, the height of
/// those looked at so far, and how many unsafe paths were known when it was opened.
struct Frame {
    id: ObjectId,
    subtrees: Vec<(String, ObjectId)>,
    height: usize,
    found_before: usize,
}

/// The height remembered for a tree that holds an unsafe path, at any depth.
const UNSAFE: usize = usize::MAX;

/// Paths below tree `id` that no checkout should ever write: entries named `.`, `..`, `.git`
/// in any case, empty, holding `/` or NUL, names that appear twice in one tree, and folders
/// nested deeper than [`MAX_TREE_DEPTH`] (at most `limit` of them). `heights` remembers each
/// tree looked at and how deep it nests, or that it holds an unsafe path (a tree is looked at
/// once, wherever it appears); the walk keeps its own list, so no depth reaches the call stack.
pub fn unsafe_paths(
    repo: &gix::Repository,
    id: ObjectId,
    heights: &mut HashMap<ObjectId, usize>,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let mut found = Vec::new();
    if let Some(&height) = heights.get(&id) {
        if height > MAX_TREE_DEPTH {
            found.push(seen_before("", height));
        }
        return Ok(found);
    }
    let mut stack = vec![look_at(repo, String::new(), id, &mut found)?];
    while let Some(top) = stack.last_mut() {
        if found.len() >= limit {
            break;
        }
        if let Some((path, subtree)) = top.subtrees.pop() {
            if let Some(&height) = heights.get(&subtree) {
                if height == UNSAFE {
                    found.push(seen_before(&path, height));
                }
                top.height = top.height.max(height.saturating_add(1));
            } else if stack.len() >= MAX_TREE_DEPTH {
                found.push(too_deep(&path));
                break;
            } else {
                let frame = look_at(repo, path, subtree, &mut found)?;
                stack.push(frame);
            }
            continue;
        }
        let mut done = stack.pop().expect("the loop looks at the top");
        if found.len() > done.found_before {
            done.height = UNSAFE;
        }
        heights.insert(done.id, done.height);
        if let Some(parent) = stack.last_mut() {
            parent.height = parent.height.max(done.height.saturating_add(1));
        }
    }
    found.truncate(limit);
    Ok(found)
}

fn too_deep(path: &str) -> String {
    let start: String = path.chars().take(40).collect();
    format!("{start}… (folders nested deeper than {MAX_TREE_DEPTH}, git's own limit)")
}

/// A tree looked at before that holds an unsafe path or nests too deep.
fn seen_before(path: &str, height: usize) -> String {
    match height {
        UNSAFE => format!("{path}… (a folder that holds paths no checkout may write)"),
        _ => too_deep(path),
    }
}

/// Reads tree `id` (at `prefix`): its bad names go to `found`, its subtrees into the frame.
fn look_at(
    repo: &gix::Repository,
    prefix: String,
    id: ObjectId,
    found: &mut Vec<String>,
) -> Result<Frame, StoreError> {
    let object = repo
        .find_object(id)
        .map_err(|e| StoreError::git("reading an imported tree", e))?;
    let tree = gix::objs::TreeRef::from_bytes(&object.data, gix::hash::Kind::Sha1)
        .map_err(|e| StoreError::git("decoding an imported tree", e))?;
    let found_before = found.len();
    let mut names = HashSet::new();
    let mut subtrees = Vec::new();
    for entry in &tree.entries {
        let name: &[u8] = entry.filename.as_ref();
        let path = format!("{prefix}{}", name.to_str_lossy());
        let bad = name.is_empty()
            || name == b"."
            || name == b".."
            || name.eq_ignore_ascii_case(b".git")
            || name.contains(&b'/')
            || name.contains(&0);
        if bad || !names.insert(name) {
            found.push(path);
        } else if entry.mode.is_tree() {
            subtrees.push((format!("{path}/"), entry.oid.to_owned()));
        }
    }
    Ok(Frame {
        id,
        subtrees,
        height: 1,
        found_before,
    })
}

/// Puts candidates recorded in the same second (git's clock) in history order: among a run
/// of equal times, one with fewer of the others among its ancestors comes first.
fn order_ties(repo: &gix::Repository, candidates: &mut [Candidate]) -> Result<(), StoreError> {
    let seconds = |c: &Candidate| c.imported.created_at.get(..19).map(str::to_string);
    let mut start = 0;
    while start < candidates.len() {
        let key = seconds(&candidates[start]);
        let end = start
            + candidates[start..]
                .iter()
                .take_while(|c| seconds(c) == key)
                .count();
        if end - start > 1 {
            let run = &mut candidates[start..end];
            let ids: HashSet<ObjectId> = run.iter().map(|c| c.commit).collect();
            let mut counts = HashMap::new();
            for c in run.iter() {
                let since = commit_seconds(repo, c.commit)?;
                let ancestors = ancestors_since(repo, c.commit, since)?;
                counts.insert(c.commit, ancestors.intersection(&ids).count());
            }
            run.sort_by_key(|c| counts[&c.commit]);
        }
        start = end;
    }
    Ok(())
}

fn commit_seconds(repo: &gix::Repository, id: ObjectId) -> Result<i64, StoreError> {
    let commit = repo
        .find_commit(id)
        .map_err(|e| StoreError::git("reading an imported commit", e))?;
    Ok(commit.time().map(|t| t.seconds).unwrap_or(0))
}

/// The ancestors of `id` (not itself) reached through commits made at or after `since`.
fn ancestors_since(
    repo: &gix::Repository,
    id: ObjectId,
    since: i64,
) -> Result<HashSet<ObjectId>, StoreError> {
    let mut seen = HashSet::new();
    let mut todo = vec![id];
    while let Some(next) = todo.pop() {
        let Ok(commit) = repo.find_commit(next) else {
            continue; // history that is not in this store
        };
        for parent in commit.parent_ids() {
            let parent = parent.detach();
            if seen.insert(parent) && commit_seconds(repo, parent).is_ok_and(|t| t >= since) {
                todo.push(parent);
            }
        }
    }
    Ok(seen)
}
