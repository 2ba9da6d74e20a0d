//! The pool that the stores of one git repository's worktrees share: N worktrees (or the
//! repository and its worktrees) cost about one store on disk.
//!
//! A pool is a bare repository at `<data dir>/shared/<hash of the git common dir>/`, made once
//! two registered projects are worktrees of one repository. Each of their stores borrows its
//! objects (git's `objects/info/alternates`): a file another worktree already captured is never
//! written again. A store's gc first *gives* the pool every object its refs reach that the pool
//! lacks, as one pack named by an anchor commit (`refs/ckpt/pool/<store>`, whose parents are
//! the store's commits and previous anchor and whose tree names its other roots), then keeps
//! only what the pool does not have.
//!
//! The pool only ever grows: an anchor is never moved back or removed, so every object in it
//! is reachable from its refs, and nothing any store relies on can go, whether ckpt collects
//! garbage in a store or someone runs `git gc --prune=now` in a store or in the pool (git's
//! gc never packs or prunes a borrowed object). Commits whose history retention cut are listed
//! in the pool's own `shallow` file. The cost: what was given to the pool stays there until
//! the pool is deleted by hand, after every worktree's store is gone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use sha2::Digest;

use super::gc::{pack_reachable, pack_reachable_beyond};
use super::identity::signature;
use super::pack::writer::PackWriter;
use super::txn::files::{fsync_if_present, write_atomically};
use super::{Store, StoreError};
use crate::filter::git_common_dir;

/// The folder of the pools, in the data directory.
pub const SHARED_DIR: &str = "shared";
/// A store's anchor in its pool: `refs/ckpt/pool/<store folder name>`.
const ANCHOR_REFS: &str = "refs/ckpt/pool/";
/// What a pool records of itself (the repository it serves), beside its objects.
const POOL_FILE: &str = "ckpt-pool.json";
/// A store's note that it has given its objects to its pool at least once.
const GIVEN_FILE: &str = "ckpt-pool-given";
/// Packs a pool may hold before a gift merges them into one (every lookup of every worktree
/// visits each, and a store's handles have room for a bounded number).
const POOL_PACKS: usize = 16;

/// The pool of the repository whose common directory is `common`.
pub fn pool_dir(data_dir: &Path, common: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let hash = sha2::Sha256::digest(common.as_os_str().as_bytes());
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    data_dir.join(SHARED_DIR).join(hex)
}

/// The pool the store of the project at `root` borrows from: its repository's, when that pool
/// exists or another registered project is a worktree of the same repository (the pool is
/// made then). None for a project that is no worktree, or the only one of its repository.
pub fn pool_for(
    root: &Path,
    data_dir: &Path,
    registered: &[PathBuf],
) -> Result<Option<PathBuf>, StoreError> {
    let Some(common) = git_common_dir(root) else {
        return Ok(None);
    };
    let dir = pool_dir(data_dir, &common);
    if dir.join("objects").is_dir() {
        return Ok(Some(dir));
    }
    let sibling = registered
        .iter()
        .filter(|r| r.as_path() != root)
        .any(|r| git_common_dir(r).as_deref() == Some(common.as_path()));
    if !sibling {
        return Ok(None);
    }
    init_pool(&dir, &common)?;
    Ok(Some(dir))
}

/// Makes the pool's bare repository, beside its final place and renamed (never half a pool).
fn init_pool(dir: &Path, common: &Path) -> Result<(), StoreError> {
    let io = |path: &Path, source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let parent = dir.parent().expect("a pool has a parent");
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    crate::fs::make_private(parent, false);
    let tmp = parent.join(format!(".init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for sub in ["objects/pack", "objects/info", "refs"] {
        std::fs::create_dir_all(tmp.join(sub)).map_err(|e| io(&tmp, e))?;
    }
    let files = [
        ("HEAD", "ref: refs/heads/main\n".to_string()),
        (
            "config",
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n[gc]\n\tauto = 0\n".into(),
        ),
        (
            POOL_FILE,
            serde_json::json!({ "git_common_dir": common }).to_string(),
        ),
    ];
    for (name, text) in files {
        std::fs::write(tmp.join(name), text).map_err(|e| io(&tmp, e))?;
    }
    crate::fs::make_private(&tmp, true);
    match std::fs::rename(&tmp, dir) {
        Ok(()) => {}
        // Made meanwhile by another: that one is the pool.
        Err(_) if dir.join("objects").is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => return Err(io(dir, e)),
    }
    fsync_if_present(parent)
}

/// A handle on the pool's objects.
fn open_pool(dir: &Path) -> Result<gix::Repository, StoreError> {
    gix::open_opts(dir, gix::open::Options::isolated()).map_err(|e| StoreError::Open {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })
}

/// Serialises a pool's changes in this process (two stores giving at once).
static GIVING: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

impl Store {
    /// The pool this store borrows from (its alternates' first entry inside a pool folder).
    pub fn pool(&self) -> Option<PathBuf> {
        let text = std::fs::read_to_string(self.dir().join("objects/info/alternates")).ok()?;
        let objects = PathBuf::from(text.lines().next()?.trim());
        let dir = objects.parent()?.to_path_buf();
        let shared = dir.parent()?.file_name()? == SHARED_DIR;
        (shared && objects.ends_with("objects")).then_some(dir)
    }

    /// Makes the store at `dir` borrow from `pool`; whether it did not already (then the store
    /// must be opened again to see the pool).
    pub fn join_pool(dir: &Path, pool: &Path) -> Result<bool, StoreError> {
        let path = dir.join("objects/info/alternates");
        let line = format!("{}\n", pool.join("objects").display());
        if std::fs::read_to_string(&path).is_ok_and(|t| t == line) {
            return Ok(false);
        }
        std::fs::create_dir_all(dir.join("objects/info")).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        write_atomically(&path, line.as_bytes())?;
        tracing::info!(store = %dir.display(), pool = %pool.display(), "the store borrows from its worktrees' pool");
        Ok(true)
    }

    /// Whether this store has given its objects to its pool yet.
    pub fn given_to_pool(&self) -> bool {
        self.dir().join(GIVEN_FILE).exists()
    }

    /// Gives `pool` every object `roots` reach that it lacks, as one pack, then moves this
    /// store's anchor there to a new commit reaching `roots` and the previous anchor; returns a
    /// handle on the pool that sees it all.
    pub(crate) fn donate(
        &self,
        repo: &gix::Repository,
        pool: &Path,
        roots: &[ObjectId],
        shallow: &HashSet<ObjectId>,
    ) -> Result<gix::Repository, StoreError> {
        let _giving = GIVING.lock();
        merge_pool_packs(pool)?;
        let pool_repo = open_pool(pool)?;
        let in_pool = |id: &ObjectId| pool_repo.has_object(id);
        let pack = PackWriter::new(pool)?;
        let mut cut = Vec::new();
        pack_reachable_beyond(
            repo,
            roots,
            shallow,
            &pack,
            |id| {
                if shallow.contains(&id) {
                    cut.push(id);
                }
            },
            &in_pool,
        )?;
        let given = self.dir().join(GIVEN_FILE);
        if pack.first_id().is_none() {
            // The pool has everything the roots reach, so an anchor reaches it already: no
            // anchor and no pack (each would be one more file for every lookup).
            pack.discard();
            write_atomically(&given, pool.display().to_string().as_bytes())?;
            return open_pool(pool);
        }
        let name = self.dir().file_name().expect("a store has a name");
        let anchor_ref = format!("{ANCHOR_REFS}{}", name.to_string_lossy());
        let previous = std::fs::read_to_string(pool.join(&anchor_ref))
            .ok()
            .and_then(|t| ObjectId::from_hex(t.trim().as_bytes()).ok());
        let anchor = anchor_objects(repo, roots, previous, &pack)?;
        let (objects, written) = pack.finish_named()?;
        // Kept through any gc until the anchor names it.
        let keep = written
            .as_ref()
            .map(|name| pool.join("objects/pack").join(format!("{name}.keep")));
        if let Some(keep) = &keep {
            write_atomically(keep, b"ckpt: being anchored\n")?;
        }
        if !cut.is_empty() {
            let path = pool.join("shallow");
            let mut all: HashSet<String> = std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .map(String::from)
                .collect();
            all.extend(cut.iter().map(ToString::to_string));
            let mut lines: Vec<String> = all.into_iter().collect();
            lines.sort();
            write_atomically(&path, format!("{}\n", lines.join("\n")).as_bytes())?;
        }
        let path = pool.join(&anchor_ref);
        std::fs::create_dir_all(path.parent().expect("a ref has a folder")).map_err(|source| {
            StoreError::Io {
                path: path.clone(),
                source,
            }
        })?;
        write_atomically(&path, format!("{anchor}\n").as_bytes())?;
        fsync_if_present(path.parent().expect("a ref has a folder"))?;
        if let Some(keep) = keep {
            let _ = std::fs::remove_file(keep);
        }
        write_atomically(&given, pool.display().to_string().as_bytes())?;
        tracing::info!(store = %self.dir().display(), objects, "gave objects to the worktrees' pool");
        open_pool(pool)
    }
}

/// Once the pool holds more than [`POOL_PACKS`] packs, writes everything its anchors reach as one
/// pack, durable, then removes the others (a worktree reading one meanwhile finds the object in
/// the new one: each holds only what the anchors reach, and no gift is under way).
fn merge_pool_packs(pool: &Path) -> Result<(), StoreError> {
    let pack_dir = pool.join("objects/pack");
    let entries = std::fs::read_dir(&pack_dir).map_err(|source| StoreError::Io {
        path: pack_dir.clone(),
        source,
    })?;
    let stems: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".pack").map(String::from)
        })
        .filter(|stem| !pack_dir.join(format!("{stem}.keep")).exists())
        .collect();
    if stems.len() <= POOL_PACKS {
        return Ok(());
    }
    let repo = open_pool(pool)?;
    let platform = repo
        .references()
        .map_err(|e| StoreError::git("listing the pool's anchors", e))?;
    let mut anchors = Vec::new();
    for r in platform
        .prefixed(ANCHOR_REFS)
        .map_err(|e| StoreError::git("listing the pool's anchors", e))?
    {
        let r = r.map_err(|e| StoreError::git("listing the pool's anchors", e))?;
        anchors.extend(r.target().try_id().map(|id| id.to_owned()));
    }
    let shallow: HashSet<ObjectId> = std::fs::read_to_string(pool.join("shallow"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| ObjectId::from_hex(l.trim().as_bytes()).ok())
        .collect();
    let pack = PackWriter::new(pool)?;
    pack_reachable(&repo, &anchors, &shallow, &pack, |_| {})?;
    drop(repo);
    let (objects, merged) = pack.finish_named()?;
    for stem in stems.iter().filter(|s| Some(*s) != merged.as_ref()) {
        // The index first, so that no reader finds an index without its pack.
        for ext in ["idx", "rev", "bitmap", "pack"] {
            let _ = std::fs::remove_file(pack_dir.join(format!("{stem}.{ext}")));
        }
    }
    fsync_if_present(&pack_dir)?;
    tracing::info!(pool = %pool.display(), packs = stems.len(), objects, "merged the pool's packs");
    Ok(())
}

/// Writes (into `pack`) the anchor commit: parents the commits among `roots` and `previous`,
/// tree naming the other roots (trees and blobs) by their ids.
fn anchor_objects(
    repo: &gix::Repository,
    roots: &[ObjectId],
    previous: Option<ObjectId>,
    pack: &PackWriter,
) -> Result<ObjectId, StoreError> {
    let mut parents: Vec<ObjectId> = previous.into_iter().collect();
    let mut entries = Vec::new();
    let mut seen = HashSet::new();
    for id in roots.iter().filter(|id| seen.insert(**id)) {
        let header = repo
            .find_header(*id)
            .map_err(|e| StoreError::git("reading a root's kind", e))?;
        let mode = match header.kind() {
            gix::objs::Kind::Commit => {
                parents.push(*id);
                continue;
            }
            gix::objs::Kind::Tree => gix::objs::tree::EntryKind::Tree,
            _ => gix::objs::tree::EntryKind::Blob,
        };
        entries.push(gix::objs::tree::Entry {
            mode: mode.into(),
            filename: id.to_string().into(),
            oid: *id,
        });
    }
    entries.sort();
    let tree = gix::objs::Tree { entries };
    let tree_id = add(pack, gix::objs::Kind::Tree, &tree)?;
    let commit = gix::objs::Commit {
        tree: tree_id,
        parents: parents.into(),
        author: signature(),
        committer: signature(),
        encoding: None,
        message: "ckpt: what this worktree's store keeps in the pool\n".into(),
        extra_headers: Vec::new(),
    };
    add(pack, gix::objs::Kind::Commit, &commit)
}

fn add(
    pack: &PackWriter,
    kind: gix::objs::Kind,
    object: &impl gix::objs::WriteTo,
) -> Result<ObjectId, StoreError> {
    let mut data = Vec::new();
    object
        .write_to(&mut data)
        .map_err(|e| StoreError::git("encoding an anchor", e))?;
    let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, &data)
        .map_err(|e| StoreError::git("hashing an anchor", e))?;
    pack.add(id, kind, &data)?;
    Ok(id)
}
