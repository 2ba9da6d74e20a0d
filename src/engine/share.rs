//! Sharing through git remotes, the engine's side: a project's remotes, and the two halves of a
//! push and of a fetch around the client's `git` (see [`crate::store::share`]).

use std::collections::BTreeMap;

use super::{Opened, Project, Result};
use crate::protocol::methods::ProjectParams;
use crate::protocol::sharing::{
    FetchReady, Fetched, PushBeginParams, PushEnded, PushReady, RedactionInfo, RemoteAddParams,
    RemoteInfo, RemoteParams, RemoteRemoved, ScratchParams,
};
use crate::store::share::{own_scratch, validate_who, Remote, ShareError};
use crate::store::txn::files::write_atomically;
use crate::store::{Store, StoreError};

/// What a push's scratch repository remembers for `push_end`: this store's refs it sends and who
/// sends them.
const PLAN_FILE: &str = "ckpt-push.json";

fn info(store: &Store, name: &str, remote: Remote) -> Result<RemoteInfo> {
    let repo = store.repo();
    Ok(RemoteInfo {
        name: name.to_string(),
        unpushed: store.unpushed(&repo, &remote)?,
        fetched: store.remote_list(&repo, Some(name))?.len(),
        url: remote.url,
        pushed_at: remote.pushed_at,
        pushed_as: remote.pushed_as,
        fetched_at: remote.fetched_at,
    })
}

pub fn remote_add(_: &Project, o: &mut Opened, params: RemoteAddParams) -> Result<RemoteInfo> {
    o.store.add_remote(&params.name, &params.url)?;
    let remote = o.store.remote(&params.name)?;
    info(&o.store, &params.name, remote)
}

pub fn remote_list(_: &Project, o: &mut Opened, _: ProjectParams) -> Result<Vec<RemoteInfo>> {
    let mut out = Vec::new();
    for (name, remote) in o.store.remotes()? {
        out.push(info(&o.store, &name, remote)?);
    }
    Ok(out)
}

pub fn remote_remove(_: &Project, o: &mut Opened, params: RemoteParams) -> Result<RemoteRemoved> {
    let repo = o.store.repo();
    let refs_removed = o.store.remove_remote(&repo, &params.name)?;
    Ok(RemoteRemoved {
        name: params.name,
        refs_removed,
    })
}

pub fn push_begin(_: &Project, o: &mut Opened, params: PushBeginParams) -> Result<PushReady> {
    validate_who(&params.who)?;
    let remote = o.store.remote(&params.remote)?;
    let repo = o.store.repo();
    let plan = o.store.prepare_push(&repo, params.with_metadata)?;
    let remembered = serde_json::json!({ "who": params.who, "tips": plan.tips });
    let path = plan.git_dir.join(PLAN_FILE);
    if let Err(e) = write_atomically(&path, remembered.to_string().as_bytes()) {
        let _ = std::fs::remove_dir_all(&plan.git_dir);
        return Err(e.into());
    }
    tracing::info!(remote = %params.remote, checkpoints = plan.checkpoints, rewritten = plan.rewritten, "push ready");
    Ok(PushReady {
        remote: params.remote,
        url: remote.url,
        git_dir: plan.git_dir,
        remote_prefix: format!("refs/ckpt/{}/", params.who),
        who: params.who,
        refs: plan.tips.len(),
        checkpoints: plan.checkpoints,
        rewritten: plan.rewritten,
        redactions: plan
            .redactions
            .into_iter()
            .map(|r| RedactionInfo {
                id: r.id,
                dialog: r.dialog,
                seq: r.seq,
                kinds: r.kinds,
            })
            .collect(),
        metadata: plan.metadata,
    })
}

pub fn push_end(_: &Project, o: &mut Opened, params: ScratchParams) -> Result<PushEnded> {
    o.store.remote(&params.remote)?;
    let git_dir = own_scratch(&o.store, &params.git_dir)?;
    let result = (|| -> Result<bool> {
        if !params.succeeded {
            return Ok(false);
        }
        let path = git_dir.join(PLAN_FILE);
        let bytes = std::fs::read(&path).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        #[derive(serde::Deserialize)]
        struct Plan {
            who: String,
            tips: BTreeMap<String, String>,
        }
        let plan: Plan = serde_json::from_slice(&bytes)
            .map_err(|e| ShareError::Scratch(format!("{} is damaged: {e}", path.display())))?;
        o.store.record_push(&params.remote, &plan.who, plan.tips)?;
        Ok(true)
    })();
    let _ = std::fs::remove_dir_all(&git_dir);
    Ok(PushEnded {
        remote: params.remote,
        recorded: result?,
    })
}

pub fn fetch_begin(_: &Project, o: &mut Opened, params: RemoteParams) -> Result<FetchReady> {
    let remote = o.store.remote(&params.name)?;
    Ok(FetchReady {
        git_dir: o.store.prepare_fetch()?,
        remote: params.name,
        url: remote.url,
    })
}

pub fn fetch_end(_: &Project, o: &mut Opened, params: ScratchParams) -> Result<Fetched> {
    if !params.succeeded {
        let _ = std::fs::remove_dir_all(own_scratch(&o.store, &params.git_dir)?);
        return Err(
            ShareError::Scratch("the fetch did not complete; nothing changed".into()).into(),
        );
    }
    let received = o.store.receive_fetch(&params.remote, &params.git_dir)?;
    tracing::info!(remote = %params.remote, objects = received.objects, new = received.new_checkpoints, "fetched");
    Ok(Fetched {
        remote: params.remote,
        objects: received.objects,
        new_checkpoints: received.new_checkpoints,
        people: received.people,
        updated: received.updated,
        removed: received.removed,
        ignored: received.ignored,
    })
}
