//! Sharing through git remotes: the project's remotes, what was pushed to each, and the
//! checkpoints others pushed, as this store keeps them.
//!
//! On a remote, a person's checkpoints live under `refs/ckpt/<who>/` (one ref per dialog,
//! `dialogs/<dialog>`, and per run kept by retention, `kept/<dialog>/<id>`; with metadata,
//! `meta/<blob>`), never under `refs/heads` or `refs/tags`: a plain clone or fetch of the
//! project never sees them, and pushers never contend for a ref. A fetch keeps them here under
//! `refs/ckpt/remotes/<remote>/<who>/…`, apart from this store's own dialogs, which a fetch never
//! moves. The transport is git's own (see [`publish`] and [`receive`]).

pub mod publish;
pub mod receive;
pub mod secrets;

use std::collections::{BTreeMap, HashSet};

use gix::ObjectId;
use serde::{Deserialize, Serialize};

use super::checkpoint::{validate_dialog, Checkpoint, CheckpointError};
use super::txn::files::write_atomically;
use super::{Store, StoreError};

/// Where a fetch keeps others' refs: `refs/ckpt/remotes/<remote>/<who>/…`.
pub const REMOTE_REFS: &str = "refs/ckpt/remotes/";
/// The file of the project's remotes, beside the store's objects.
const REMOTES_FILE: &str = "ckpt-remotes.json";
/// The folder of the scratch repositories a push or a fetch works in.
pub const SCRATCH_DIR: &str = "ckpt-share";
pub use crate::model::Origin;
use crate::model::{is_valid_who, RESERVED_WHO};

#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    #[error("invalid remote name `{0}`: use 1-100 characters from A-Z a-z 0-9 . _ -, not starting with . or -")]
    BadName(String),
    #[error("invalid remote URL `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("remote `{0}` exists already (remove it first to change its URL)")]
    Exists(String),
    #[error("no remote named `{name}`{}", known_list(.known))]
    Unknown { name: String, known: Vec<String> },
    #[error("invalid name to push as `{0}`: use 1-100 characters from A-Z a-z 0-9 . _ - @, not starting with . - or @, and none of {RESERVED_WHO:?}")]
    BadWho(String),
    #[error("{0}")]
    Scratch(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

fn known_list(known: &[String]) -> String {
    match known.is_empty() {
        true => "; this project has no remotes (add one with `ckpt remote add NAME URL`)".into(),
        false => format!(" (this project's remotes: {})", known.join(", ")),
    }
}

/// One remote of the project, as its file keeps it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Remote {
    pub url: String,
    /// What the last push sent: each of this store's refs it pushed (`dialogs/<d>`,
    /// `kept/<d>/<id>`) and the local checkpoint it named then.
    #[serde(default)]
    pub pushed: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_at: Option<String>,
    /// Who the last push pushed as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_as: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RemotesFile {
    #[serde(default)]
    remotes: BTreeMap<String, Remote>,
}

pub fn validate_remote_name(name: &str) -> Result<(), ShareError> {
    validate_dialog(name).map_err(|_| ShareError::BadName(name.to_string()))
}

/// A name to push as: a ref component (`@` allowed, for user@host) that is none of the store's
/// own names.
pub fn validate_who(who: &str) -> Result<(), ShareError> {
    match is_valid_who(who) {
        true => Ok(()),
        false => Err(ShareError::BadWho(who.to_string())),
    }
}

/// A URL git can use, that git cannot mistake for an option or a second argument.
pub fn validate_url(url: &str) -> Result<(), ShareError> {
    let bad = |reason: &str| ShareError::BadUrl {
        url: url.chars().take(200).collect(),
        reason: reason.into(),
    };
    if url.trim().is_empty() {
        return Err(bad("it is empty"));
    }
    if url.starts_with('-') {
        return Err(bad("it starts with `-`"));
    }
    if url.len() > 4096 {
        return Err(bad("it is longer than 4096 bytes"));
    }
    if url.chars().any(char::is_control) {
        return Err(bad("it holds a control character"));
    }
    if url.starts_with("ext::") || url.starts_with("fd::") {
        return Err(bad(
            "the ext:: and fd:: transports run commands; use ssh, git://, https or a path",
        ));
    }
    Ok(())
}

impl Store {
    fn remotes_file(&self) -> Result<RemotesFile, StoreError> {
        let path = self.dir().join(REMOTES_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Io {
                path,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RemotesFile::default()),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    fn save_remotes(&self, file: &RemotesFile) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec_pretty(file).expect("remotes serialise");
        write_atomically(&self.dir().join(REMOTES_FILE), &bytes)
    }

    /// The project's remotes, by name.
    pub fn remotes(&self) -> Result<BTreeMap<String, Remote>, StoreError> {
        Ok(self.remotes_file()?.remotes)
    }

    /// The remote `name`, or an error naming the ones there are.
    pub fn remote(&self, name: &str) -> Result<Remote, ShareError> {
        validate_remote_name(name)?;
        let remotes = self.remotes()?;
        remotes
            .get(name)
            .cloned()
            .ok_or_else(|| ShareError::Unknown {
                name: name.to_string(),
                known: remotes.keys().cloned().collect(),
            })
    }

    pub fn add_remote(&self, name: &str, url: &str) -> Result<(), ShareError> {
        validate_remote_name(name)?;
        validate_url(url)?;
        let mut file = self.remotes_file()?;
        if file.remotes.contains_key(name) {
            return Err(ShareError::Exists(name.to_string()));
        }
        file.remotes.insert(
            name.to_string(),
            Remote {
                url: url.to_string(),
                ..Remote::default()
            },
        );
        Ok(self.save_remotes(&file)?)
    }

    /// Forgets the remote `name` and the checkpoints fetched from it; what was pushed to it
    /// stays there.
    pub fn remove_remote(&self, repo: &gix::Repository, name: &str) -> Result<usize, ShareError> {
        self.remote(name)?;
        let prefix = format!("{REMOTE_REFS}{name}/");
        let refs = self.refs_under(repo, &prefix)?;
        if !refs.is_empty() {
            let mut txn = self.begin();
            for (rest, id) in &refs {
                txn.delete(&format!("{prefix}{rest}"), *id)?;
            }
            txn.commit("removing a remote's")?;
        }
        let mut file = self.remotes_file()?;
        file.remotes.remove(name);
        self.save_remotes(&file)?;
        Ok(refs.len())
    }

    /// Records what a push sent.
    pub fn record_push(
        &self,
        name: &str,
        who: &str,
        pushed: BTreeMap<String, String>,
    ) -> Result<(), ShareError> {
        let mut file = self.remotes_file()?;
        let remote = file
            .remotes
            .get_mut(name)
            .ok_or_else(|| ShareError::Unknown {
                name: name.to_string(),
                known: Vec::new(),
            })?;
        remote.pushed = pushed;
        remote.pushed_at = Some(jiff::Timestamp::now().to_string());
        remote.pushed_as = Some(who.to_string());
        Ok(self.save_remotes(&file)?)
    }

    fn record_fetch(&self, name: &str) -> Result<(), StoreError> {
        let mut file = self.remotes_file()?;
        if let Some(remote) = file.remotes.get_mut(name) {
            remote.fetched_at = Some(jiff::Timestamp::now().to_string());
            self.save_remotes(&file)?;
        }
        Ok(())
    }

    /// How many of this store's checkpoints the last push to `remote` did not send: per
    /// dialog, those after the checkpoint it pushed (all of a dialog it did not push).
    pub fn unpushed(&self, repo: &gix::Repository, remote: &Remote) -> Result<u64, ShareError> {
        let mut count = 0;
        for (dialog, chain) in self.chains(repo, None)? {
            let pushed = remote.pushed.get(&format!("dialogs/{dialog}"));
            count += chain
                .iter()
                .rev()
                .take_while(|c| Some(&c.id.to_string()) != pushed)
                .count() as u64;
        }
        Ok(count)
    }

    /// Others' checkpoints fetched from `remote` (every remote when None), newest first, each
    /// with its origin.
    pub fn remote_list(
        &self,
        repo: &gix::Repository,
        remote: Option<&str>,
    ) -> Result<Vec<Checkpoint>, ShareError> {
        let prefix = match remote {
            Some(name) => {
                self.remote(name)?;
                format!("{REMOTE_REFS}{name}/")
            }
            None => REMOTE_REFS.to_string(),
        };
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (rest, head) in self.refs_under(repo, &prefix)? {
            let full = format!("{}{rest}", &prefix[REMOTE_REFS.len()..]);
            let Some(RemoteRef { remote, who, kind }) = RemoteRef::parse(&full) else {
                continue;
            };
            if kind == RefKind::Meta {
                continue;
            }
            let origin = Origin { remote, who };
            let mut next = Some(head);
            while let Some(id) = next.filter(|id| seen.insert(*id)) {
                let Ok(mut c) = self.checkpoint(repo, id) else {
                    break;
                };
                next = c.parent.as_ref().map(|p| p.object_id());
                c.origin = Some(origin.clone());
                out.push(c);
            }
        }
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at));
        Ok(out)
    }

    /// The checkpoint a fetch brought whose id starts with `hex` (lower case), if exactly one
    /// does; several are an ambiguity.
    pub(crate) fn resolve_remote(
        &self,
        repo: &gix::Repository,
        hex: &str,
        text: &str,
    ) -> Result<Checkpoint, CheckpointError> {
        let list = match self.remote_list(repo, None) {
            Ok(list) => list,
            Err(ShareError::Checkpoint(e)) => return Err(e),
            Err(ShareError::Store(e)) => return Err(e.into()),
            Err(_) => Vec::new(),
        };
        let mut matches: Vec<Checkpoint> = list
            .into_iter()
            .filter(|c| c.id.to_string().starts_with(hex))
            .collect();
        match matches.len() {
            0 => Err(CheckpointError::Unknown(text.to_string())),
            1 => Ok(matches.pop().expect("one match")),
            _ => Err(CheckpointError::Ambiguous {
                prefix: text.to_string(),
                candidates: matches
                    .iter()
                    .map(|c| format!("{} (#{} {} {})", c.id.short(), c.seq, c.dialog, c.kind))
                    .collect(),
            }),
        }
    }
}

/// What a ref under `refs/ckpt/remotes/` names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RefKind {
    Dialog,
    Kept,
    Meta,
}

/// A ref of others' checkpoints, `<remote>/<who>/<dialogs|kept|meta>/…`.
#[derive(Debug)]
pub(crate) struct RemoteRef {
    pub remote: String,
    pub who: String,
    pub kind: RefKind,
}

impl RemoteRef {
    pub(crate) fn parse(name: &str) -> Option<RemoteRef> {
        let mut parts = name.splitn(3, '/');
        let (remote, rest) = (parts.next()?, parts.collect::<Vec<_>>());
        let [who, tail] = <[&str; 2]>::try_from(rest).ok()?;
        Some(RemoteRef {
            remote: remote.to_string(),
            who: who.to_string(),
            kind: pushed_kind(tail)?,
        })
    }
}

/// What a pushed ref below a person's name (`dialogs/<d>`, `kept/<d>/<id>`, `meta/<blob>`)
/// names; None for anything else.
pub(crate) fn pushed_kind(tail: &str) -> Option<RefKind> {
    let parts: Vec<&str> = tail.split('/').collect();
    let hex = |s: &str| s.len() == 40 && ObjectId::from_hex(s.as_bytes()).is_ok();
    match parts.as_slice() {
        ["dialogs", d] if validate_dialog(d).is_ok() => Some(RefKind::Dialog),
        ["kept", d, id] if validate_dialog(d).is_ok() && hex(id) => Some(RefKind::Kept),
        ["meta", blob] if hex(blob) => Some(RefKind::Meta),
        _ => None,
    }
}

/// A fresh scratch repository for one push or fetch, in the store's [`SCRATCH_DIR`]: bare,
/// borrowing the store's objects (git's alternates), so that it can name and send them, and
/// so that a fetch knows what the store has.
pub(crate) fn scratch_repo(store: &Store, what: &str) -> Result<std::path::PathBuf, ShareError> {
    let base = store.dir().join(SCRATCH_DIR);
    std::fs::create_dir_all(&base).map_err(|source| StoreError::Io {
        path: base.clone(),
        source,
    })?;
    sweep_scratch(&base);
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = base.join(format!("{what}-{}-{n}", std::process::id()));
    let io = |path: &std::path::Path, source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["objects/pack", "objects/info", "refs"] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).map_err(|e| io(&path, e))?;
    }
    let objects = store.dir().join("objects");
    let objects = objects.canonicalize().map_err(|e| io(&objects, e))?;
    let files: [(&str, String); 3] = [
        ("HEAD", "ref: refs/heads/main\n".into()),
        (
            "config",
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n[gc]\n\tauto = 0\n".into(),
        ),
        (
            "objects/info/alternates",
            format!("{}\n", objects.display()),
        ),
    ];
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| io(&path, e))?;
    }
    Ok(dir)
}

/// Removes scratch repositories a client left behind (it died mid-push) over an hour ago.
fn sweep_scratch(base: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600);
        if old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The scratch repository `dir` if it is one of this store's (a request names it), else an
/// error; never follows a link out of the store.
pub(crate) fn own_scratch(
    store: &Store,
    dir: &std::path::Path,
) -> Result<std::path::PathBuf, ShareError> {
    let base = store.dir().join(SCRATCH_DIR);
    let bad = || {
        ShareError::Scratch(format!(
            "{} is not a scratch repository of this project's store",
            dir.display()
        ))
    };
    let name = dir.file_name().ok_or_else(bad)?;
    if dir.parent() != Some(base.as_path()) {
        return Err(bad());
    }
    let path = base.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => Ok(path),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_refs() {
        assert!(validate_who("ann@laptop").is_ok());
        for bad in ["", "dialogs", "-x", "@x", "a/b", "a..b", "x.lock", "a b"] {
            assert!(validate_who(bad).is_err(), "{bad}");
        }
        let r = RemoteRef::parse("origin/ann@x/dialogs/s1").unwrap();
        assert_eq!(
            (r.remote.as_str(), r.who.as_str(), r.kind),
            ("origin", "ann@x", RefKind::Dialog)
        );
        assert!(RemoteRef::parse("origin/ann@x/heads/main").is_none());
        assert!(RemoteRef::parse("origin/ann@x/kept/s1/zz").is_none());
        assert!(validate_url("--upload-pack=touch /tmp/x").is_err());
        assert!(validate_url("ext::sh -c touch% /tmp/x").is_err());
        assert!(validate_url("git://127.0.0.1:9418/r.git").is_ok());
    }
}
