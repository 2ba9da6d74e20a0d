//! Reading git bundles into the store: the objects of `ckpt export --bundle` or of plain
//! `git bundle create`.
//!
//! A bundle is a short text header (a signature line, optional capabilities, prerequisite
//! commits `-<id>`, then `<id> <ref>` lines, then a blank line) followed by a pack. The pack is
//! indexed into `objects/pack` by gix-pack, which resolves its deltas (including ones against
//! objects this store already has, as `git bundle` writes for incremental bundles) and checks its
//! checksum; a pack that is damaged or that needs objects nobody has leaves nothing behind.
//! Turning the bundle's commits into checkpoints is up to the caller.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::ByteSlice;
use gix::ObjectId;

use super::checkpoint::rfc3339_millis;
use super::error_chain;
use super::{CheckpointError, Imported, Store, StoreError};
use crate::model::SkippedFile;

/// Longest header accepted (git writes a line per ref; this allows ~100,000 refs).
const MAX_HEADER_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a git bundle: {reason}")]
    NotABundle { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Unsupported { path: PathBuf, reason: String },
    #[error("the bundle's pack cannot be read: {0}")]
    Pack(String),
    #[error(
        "the bundle builds on {} commit(s) this store does not have ({}); import the bundle it \
         builds on first: {message}", missing.len(), short_list(missing)
    )]
    MissingPrerequisites {
        missing: Vec<ObjectId>,
        message: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn short_list(ids: &[ObjectId]) -> String {
    let mut out: Vec<String> = ids.iter().take(3).map(|id| id.to_string()).collect();
    if ids.len() > 3 {
        out.push(format!("and {} more", ids.len() - 3));
    }
    out.join(", ")
}

/// The header of a bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleHeader {
    /// Commits the bundle builds on but does not contain.
    pub prerequisites: Vec<ObjectId>,
    /// The bundle's refs, in file order.
    pub refs: Vec<(ObjectId, String)>,
}

/// What [`Store::import_bundle_objects`] brought in.
#[derive(Debug)]
pub struct ImportedObjects {
    pub header: BundleHeader,
    /// Objects in the bundle's pack.
    pub objects: u32,
    /// The `.keep` file that protects the new pack; remove it once refs reach what is needed.
    pub keep: Option<PathBuf>,
}

impl ImportedObjects {
    /// Removes the pack the import wrote (nothing refers to it yet): a refused bundle leaves
    /// nothing behind.
    pub fn discard(&self) {
        if let Some(keep) = &self.keep {
            for ext in ["idx", "pack", "rev", "keep"] {
                let _ = std::fs::remove_file(keep.with_extension(ext));
            }
        }
    }
}

/// Reads a bundle header (v2, or v3 with the sha1 object format) up to the blank line, leaving
/// `r` at the start of the pack.
pub fn read_header(r: &mut impl BufRead, path: &Path) -> Result<BundleHeader, ImportError> {
    let not_bundle = |reason: String| ImportError::NotABundle {
        path: path.to_path_buf(),
        reason,
    };
    let mut header = BundleHeader::default();
    let mut line = Vec::new();
    let mut total = 0usize;
    let mut first = true;
    loop {
        line.clear();
        let n = std::io::Read::take(&mut *r, (MAX_HEADER_BYTES - total + 1) as u64)
            .read_until(b'\n', &mut line)
            .map_err(|source| ImportError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        total += n;
        if total > MAX_HEADER_BYTES {
            return Err(not_bundle(format!(
                "its header is longer than {MAX_HEADER_BYTES} bytes"
            )));
        }
        if n == 0 || line.last() != Some(&b'\n') {
            return Err(not_bundle(match (first, n) {
                (true, 0) => "the file is empty".into(),
                (true, _) => "it does not start with `# v2 git bundle`".into(),
                (false, _) => "the header ends before the pack starts".into(),
            }));
        }
        line.pop();
        let text =
            std::str::from_utf8(&line).map_err(|_| not_bundle("its header is not text".into()))?;
        if first {
            first = false;
            match text {
                "# v2 git bundle" | "# v3 git bundle" => continue,
                _ => {
                    return Err(not_bundle(
                        "it does not start with `# v2 git bundle`".into(),
                    ))
                }
            }
        }
        if text.is_empty() {
            return Ok(header);
        }
        if let Some(capability) = text.strip_prefix('@') {
            match capability.split_once('=') {
                Some(("object-format", "sha1")) => {}
                Some(("object-format", other)) => {
                    return Err(ImportError::Unsupported {
                        path: path.to_path_buf(),
                        reason: format!(
                            "object format {other} is not supported; ckpt stores use sha1"
                        ),
                    })
                }
                // `filter` means a partial pack: objects would be missing.
                _ => {
                    return Err(ImportError::Unsupported {
                        path: path.to_path_buf(),
                        reason: format!("bundle capability `{capability}` is not supported"),
                    })
                }
            }
            continue;
        }
        let (prerequisite, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (hex, name) = rest.split_once(' ').unwrap_or((rest, ""));
        let id = ObjectId::from_hex(hex.as_bytes())
            .map_err(|_| not_bundle(format!("bad header line `{}`", truncate(text))))?;
        if prerequisite {
            header.prerequisites.push(id);
        } else if name.is_empty() {
            return Err(not_bundle(format!(
                "ref line `{}` names no ref",
                truncate(text)
            )));
        } else {
            header.refs.push((id, name.to_string()));
        }
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(100).collect()
}

/// Largest object a bundle may hold (ckpt never captures files larger than `max_file_size`;
/// this leaves room for a larger setting). Anything bigger is refused before it is allocated.
pub const MAX_BUNDLE_OBJECT_BYTES: u64 = 1 << 30;

/// Reads every entry of the pack that starts at `offset` in `path` before gix-pack does:
/// each must declare at most `max` bytes (for a delta, also the object it makes), inflate to
/// exactly what it declares, and there must be as many entries as the pack says, then its
/// checksum. A crafted size can so never make the reader allocate what the file only claims.
pub fn scan_pack(path: &Path, offset: u64, max: u64) -> Result<u32, String> {
    use std::io::{Read, Seek};
    let file = crate::safe_io::open_regular(path).map_err(|e| e.to_string())?;
    let mut r = BufReader::with_capacity(1 << 16, file);
    r.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    r.read_exact(&mut head)
        .map_err(|_| "the pack ends before its header".to_string())?;
    if &head[..4] != b"PACK" || !matches!(u32::from_be_bytes(head[4..8].try_into().unwrap()), 2 | 3)
    {
        return Err("the data after the header is not a version 2 or 3 pack".into());
    }
    let count = u32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
    let byte = |r: &mut BufReader<std::fs::File>| -> Result<u8, String> {
        let mut b = [0u8; 1];
        r.read_exact(&mut b)
            .map_err(|_| "the pack ends in the middle of an entry".to_string())?;
        Ok(b[0])
    };
    let mut out = vec![0u8; 1 << 16];
    for n in 0..count {
        let mut b = byte(&mut r)?;
        let kind = (b >> 4) & 7;
        let mut size = u64::from(b & 0x0f);
        let mut shift = 4;
        while b & 0x80 != 0 {
            b = byte(&mut r)?;
            if shift > 56 {
                return Err(format!("entry {n} declares an impossible size"));
            }
            size |= u64::from(b & 0x7f) << shift;
            shift += 7;
        }
        match kind {
            1..=4 => {}
            6 => loop {
                if byte(&mut r)? & 0x80 == 0 {
                    break;
                }
            },
            7 => {
                let mut base = [0u8; 20];
                r.read_exact(&mut base)
                    .map_err(|_| "the pack ends in the middle of an entry".to_string())?;
            }
            other => return Err(format!("entry {n} has unknown type {other}")),
        }
        if size > max {
            return Err(format!(
                "entry {n} declares {size} bytes; the largest object accepted is {max}"
            ));
        }
        let mut z = gix::zlib::Decompress::new();
        let mut first = Vec::new();
        loop {
            let input = std::io::BufRead::fill_buf(&mut r).map_err(|e| e.to_string())?;
            if input.is_empty() {
                return Err(format!("the pack ends inside entry {n}"));
            }
            let (in_before, out_before) = (z.total_in(), z.total_out());
            let status = z
                .decompress(input, &mut out, gix::zlib::FlushDecompress::None)
                .map_err(|e| format!("entry {n} is not valid zlib data: {e}"))?;
            let consumed = (z.total_in() - in_before) as usize;
            let produced = (z.total_out() - out_before) as usize;
            std::io::BufRead::consume(&mut r, consumed);
            if first.len() < 20 {
                first.extend_from_slice(&out[..produced.min(20 - first.len())]);
            }
            if z.total_out() > size {
                return Err(format!(
                    "entry {n} inflates to more than the {size} bytes it declares"
                ));
            }
            if status == gix::zlib::Status::StreamEnd {
                break;
            }
            if consumed == 0 && produced == 0 {
                return Err(format!("entry {n} does not inflate"));
            }
        }
        if z.total_out() != size {
            return Err(format!(
                "entry {n} inflates to {} bytes, not the {size} it declares",
                z.total_out()
            ));
        }
        if matches!(kind, 6 | 7) {
            // A delta starts with the size of its base and of the object it makes.
            let mut rest = first.as_slice();
            for which in ["base", "result"] {
                let (mut value, mut shift) = (0u64, 0);
                loop {
                    let Some((&b, tail)) = rest.split_first() else {
                        return Err(format!("entry {n} is a delta without its sizes"));
                    };
                    rest = tail;
                    if shift > 56 {
                        return Err(format!("entry {n} is a delta with an impossible size"));
                    }
                    value |= u64::from(b & 0x7f) << shift;
                    shift += 7;
                    if b & 0x80 == 0 {
                        break;
                    }
                }
                if value > max {
                    return Err(format!(
                        "entry {n} is a delta whose {which} is {value} bytes; the largest object accepted is {max}"
                    ));
                }
            }
        }
    }
    let mut trailer = Vec::new();
    r.take(21)
        .read_to_end(&mut trailer)
        .map_err(|e| e.to_string())?;
    if trailer.len() != 20 {
        return Err(format!(
            "the pack's {count} entries are followed by {} bytes, not its 20-byte checksum",
            trailer.len()
        ));
    }
    Ok(count)
}

impl Store {
    /// Indexes the pack of the bundle at `path` into the store and returns the bundle's header.
    /// Objects become durable before this returns; nothing refers to them yet.
    #[tracing::instrument(skip_all, fields(bundle = %path.display()))]
    pub fn import_bundle_objects(&self, path: &Path) -> Result<ImportedObjects, ImportError> {
        let read_err = |source| ImportError::Read {
            path: path.to_path_buf(),
            source,
        };
        // Never blocks on a FIFO; a folder, FIFO or device is refused.
        let file = crate::safe_io::open_regular(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::InvalidInput => ImportError::NotABundle {
                path: path.to_path_buf(),
                reason: if path.is_dir() {
                    "it is a directory".into()
                } else {
                    source.to_string()
                },
            },
            _ => read_err(source),
        })?;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let header = read_header(&mut reader, path)?;
        if header.refs.is_empty() {
            return Err(ImportError::NotABundle {
                path: path.to_path_buf(),
                reason: "it names no commits".into(),
            });
        }
        let offset = std::io::Seek::stream_position(&mut reader).map_err(read_err)?;
        scan_pack(path, offset, MAX_BUNDLE_OBJECT_BYTES).map_err(ImportError::Pack)?;
        let repo = self.repo();
        let missing: Vec<ObjectId> = header
            .prerequisites
            .iter()
            .filter(|id| !repo.has_object(*id))
            .copied()
            .collect();
        let pack_dir = self.dir().join("objects").join("pack");
        std::fs::create_dir_all(&pack_dir).map_err(|source| StoreError::Io {
            path: pack_dir.clone(),
            source,
        })?;
        let options = gix_pack::bundle::write::Options {
            thread_limit: Some(2),
            ..Default::default()
        };
        let outcome = gix_pack::Bundle::write_to_directory(
            &mut reader,
            Some(&pack_dir),
            &mut gix::progress::Discard,
            &AtomicBool::new(false),
            Some(repo.objects.clone()),
            gix::hash::Kind::Sha1,
            options,
        )
        .map_err(|e| {
            let message = error_chain(&e);
            match missing.is_empty() {
                true => ImportError::Pack(message),
                false => ImportError::MissingPrerequisites {
                    missing: missing.clone(),
                    message,
                },
            }
        })?;
        self.sync()?;
        // Refs must name objects the store has now.
        let repo = self.repo();
        let unknown: HashSet<ObjectId> = header
            .refs
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !repo.has_object(*id))
            .collect();
        if !unknown.is_empty() {
            if let Some(keep) = &outcome.keep_path {
                let _ = std::fs::remove_file(keep);
            }
            let unknown: Vec<ObjectId> = unknown.into_iter().collect();
            return Err(ImportError::Pack(format!(
                "it lacks the commits its header names ({})",
                short_list(&unknown)
            )));
        }
        tracing::info!(
            objects = outcome.index.num_objects,
            refs = header.refs.len(),
            "bundle indexed"
        );
        Ok(ImportedObjects {
            header,
            objects: outcome.index.num_objects,
            keep: outcome.keep_path,
        })
    }
}

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
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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

/// Paths below tree `id` that no checkout should ever write: entries named `.`, `..`, `.git`
/// in any case, empty, holding `/` or NUL, and names that appear twice in one tree (at most
/// `limit` of them). Trees already looked at (`seen`) are skipped.
pub fn unsafe_paths(
    repo: &gix::Repository,
    id: ObjectId,
    seen: &mut HashSet<ObjectId>,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let mut found = Vec::new();
    let mut todo = vec![(String::new(), id)];
    while let Some((prefix, tree_id)) = todo.pop() {
        if found.len() >= limit || !seen.insert(tree_id) {
            continue;
        }
        let object = repo
            .find_object(tree_id)
            .map_err(|e| StoreError::git("reading an imported tree", e))?;
        let tree = gix::objs::TreeRef::from_bytes(&object.data, gix::hash::Kind::Sha1)
            .map_err(|e| StoreError::git("decoding an imported tree", e))?;
        let mut names = HashSet::new();
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
                todo.push((format!("{path}/"), entry.oid.to_owned()));
            }
        }
    }
    found.truncate(limit);
    Ok(found)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &[u8]) -> Result<BundleHeader, ImportError> {
        read_header(&mut &text[..], Path::new("b"))
    }

    #[test]
    fn headers_parse() {
        let a = "1".repeat(40);
        let b = "2".repeat(40);
        let text = format!("# v2 git bundle\n-{a} parent\n{b} refs/heads/main\n{b} HEAD\n\nPACK");
        let mut r = text.as_bytes();
        let h = read_header(&mut r, Path::new("b")).unwrap();
        assert_eq!(
            h.prerequisites,
            vec![ObjectId::from_hex(a.as_bytes()).unwrap()]
        );
        assert_eq!(h.refs.len(), 2);
        assert_eq!(h.refs[0].1, "refs/heads/main");
        assert_eq!(r, b"PACK");
        let v3 = format!("# v3 git bundle\n@object-format=sha1\n{b} refs/heads/x\n\n");
        assert_eq!(parse(v3.as_bytes()).unwrap().refs.len(), 1);
    }

    #[test]
    fn bad_headers_are_refused() {
        let b = "2".repeat(40);
        for (text, needle) in [
            ("".to_string(), "empty"),
            ("PACK....".to_string(), "does not start"),
            (
                "# v2 git bundle\nzz refs/heads/x\n\n".to_string(),
                "bad header line",
            ),
            (format!("# v2 git bundle\n{b}\n\n"), "names no ref"),
            (
                format!("# v2 git bundle\n{b} refs/heads/x\n"),
                "ends before",
            ),
            (
                format!("# v3 git bundle\n@object-format=sha256\n{b} x\n\n"),
                "sha256",
            ),
            (
                format!("# v3 git bundle\n@filter=blob:none\n{b} x\n\n"),
                "filter",
            ),
        ] {
            let e = parse(text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
