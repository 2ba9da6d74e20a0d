//! The daemon's side of each method: decode the params, call the engine on the project's
//! owner, encode the result. `hello` and `subscribe` live here too, the registry methods in
//! [`projects`](super::projects); every rule about a project's files lives in the engine.

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::blocking;
use super::owner::Owner;
use super::projects::{forget, projects, status, unwatch, watch};
use super::Daemon;
use crate::engine::{
    self, checkpoint, edit, history, restore, revert, share, step, timeline, transfer, Opened,
    Project,
};
use crate::protocol::events::EventKind;
use crate::protocol::methods::{NoParams, SubscribeParams};
use crate::protocol::results as r;
use crate::protocol::rpc;
use crate::protocol::rpc::Method;
use crate::protocol::{
    decode_request, error_line, notification_line, response_line, ErrorCode, RpcError,
    PROTOCOL_VERSION,
};

/// A result, encoded once, straight from its type (a large one, a diff or a blame, never becomes
/// a tree of JSON values first).
type Reply = Result<Box<RawValue>, RpcError>;

/// Event streams open at once; a `subscribe` past this is refused.
pub const MAX_SUBSCRIBERS: usize = 256;

/// What a request knows of the connection it came on.
pub struct Conn {
    /// Lines to send to the client.
    pub tx: tokio::sync::mpsc::Sender<Vec<u8>>,
    /// Becomes true when the connection is closing (daemon shutdown, framing error).
    pub closed: tokio::sync::watch::Receiver<bool>,
    /// Set once the connection streams events: it is never idle from then on.
    pub subscribed: std::sync::atomic::AtomicBool,
    /// The permits of the daemon's event streams (one per subscription, held while it lasts).
    pub subscribers: Arc<tokio::sync::Semaphore>,
}

/// Handles one request line; returns the reply line (none for notifications) and whether the
/// daemon should shut down.
pub async fn handle_line(
    daemon: &Arc<Daemon>,
    line: &[u8],
    conn: &Conn,
) -> (Option<Vec<u8>>, bool) {
    let request = match decode_request(line) {
        Ok(r) => r,
        Err((id, err)) => return (Some(error_line(&id, &err)), false),
    };
    let id = request.id.clone().unwrap_or(Value::Null);
    let shutdown = request.method == rpc::Shutdown::NAME;
    tracing::debug!(method = %request.method, "request");
    if request.method == rpc::Subscribe::NAME {
        // The subscription sends its own reply, before any event.
        let result = match parse(request.params) {
            Ok(params) => subscribe(daemon, params, id.clone(), conn).await,
            Err(e) => Err(e),
        };
        return match result {
            Ok(()) => (None, false),
            Err(e) => (Some(error_line(&id, &e)), false),
        };
    }
    let result = dispatch(daemon, &request.method, request.params).await;
    if let Err(e) = &result {
        tracing::info!(method = %request.method, code = e.code, error = %e.message, "request failed");
    }
    let reply = match (&request.id, result) {
        (None, _) => None,
        (Some(id), Ok(value)) => Some(response_line(id, &value)),
        (Some(id), Err(err)) => Some(error_line(id, &err)),
    };
    (reply, shutdown)
}

/// An engine operation on one project: runs on the project's owner.
type Op<M> =
    fn(&Project, &mut Opened, <M as Method>::Params) -> engine::Result<<M as Method>::Result>;

/// Params that name the project they are about.
trait OfProject {
    fn project(&self) -> &Path;
}

macro_rules! of_project {
    ($($ty:ident),*) => {$(
        impl OfProject for crate::protocol::methods::$ty {
            fn project(&self) -> &Path {
                &self.project
            }
        }
    )*};
}

of_project!(
    CheckpointParams,
    ListParams,
    LogParams,
    BlameParams,
    FileAtParams,
    ShowParams,
    DiffParams,
    RestoreParams,
    UndoParams,
    TagParams,
    NoteParams,
    ExportPatchParams,
    ExportBundleParams,
    ImportBundleParams,
    ForkParams,
    DialogNewParams,
    ProjectParams,
    DialogParams,
    DialogKeepParams,
    EditBeginParams,
    EditParams,
    SessionParams,
    SessionApproveParams,
    SessionResetParams,
    PruneParams
);

impl OfProject for crate::protocol::turns::StepParams {
    fn project(&self) -> &Path {
        &self.project
    }
}

impl OfProject for crate::protocol::turns::RevertParams {
    fn project(&self) -> &Path {
        &self.project
    }
}

macro_rules! of_project_sharing {
    ($($ty:ident),*) => {$(
        impl OfProject for crate::protocol::sharing::$ty {
            fn project(&self) -> &Path {
                &self.project
            }
        }
    )*};
}

of_project_sharing!(
    RemoteAddParams,
    RemoteParams,
    PushBeginParams,
    ScratchParams
);

/// Decodes `M`'s params, runs `op` on the project they name, and encodes its result. A damaged
/// store is refused before `op` runs.
async fn on_project<M: Method>(daemon: &Arc<Daemon>, params: Option<Value>, op: Op<M>) -> Reply
where
    M::Params: OfProject,
{
    let params: M::Params = parse(params)?;
    let project = find_project(daemon, params.project()).await?;
    let result = project.run(move |p, o| op(p, o, params)).await?;
    Ok(encode::<M>(&result))
}

/// `checkpoint`, then (with `auto_push`) a push of the project in the background.
async fn checkpoint_then_push(daemon: &Arc<Daemon>, params: Option<Value>) -> Reply {
    let params: <rpc::Checkpoint as Method>::Params = parse(params)?;
    let project = find_project(daemon, params.project()).await?;
    let result = project
        .run(move |p, o| checkpoint::checkpoint(p, o, params))
        .await?;
    super::autopush::after_checkpoint(daemon, project);
    Ok(encode::<rpc::Checkpoint>(&result))
}

/// `fsck`: like [`on_project`], also on a damaged store (it reports and repairs the damage).
async fn fsck(daemon: &Arc<Daemon>, params: Option<Value>) -> Reply {
    let params: <rpc::Fsck as Method>::Params = parse(params)?;
    let project = find_project(daemon, &params.project).await?;
    let report = project
        .run_on_damaged(move |p, o| checkpoint::fsck(p, o, params))
        .await?;
    Ok(encode::<rpc::Fsck>(&report))
}

pub(super) fn encode<M: Method>(result: &M::Result) -> Box<RawValue> {
    serde_json::value::to_raw_value(result).expect("results always serialise")
}

async fn dispatch(daemon: &Arc<Daemon>, method: &str, params: Option<Value>) -> Reply {
    use rpc::*;
    let d = daemon;
    match method {
        Hello::NAME => Ok(encode::<Hello>(&hello(parse(params)?))),
        Status::NAME => Ok(encode::<Status>(&status(d, parse(params)?).await?)),
        Watch::NAME => Ok(encode::<Watch>(&watch(d, parse(params)?).await?)),
        Unwatch::NAME => Ok(encode::<Unwatch>(&unwatch(d, parse(params)?).await?)),
        Forget::NAME => Ok(encode::<Forget>(&forget(d, parse(params)?).await?)),
        Projects::NAME => Ok(encode::<Projects>(&projects(d, parse(params)?).await?)),
        Reload::NAME => {
            parse::<NoParams>(params)?;
            Ok(encode::<Reload>(&daemon.reload().await?))
        }
        Shutdown::NAME => {
            parse::<NoParams>(params)?;
            Ok(encode::<Shutdown>(&r::Stopping { stopping: true }))
        }
        Checkpoint::NAME => checkpoint_then_push(d, params).await,
        List::NAME => on_project::<List>(d, params, checkpoint::list).await,
        Log::NAME => on_project::<Log>(d, params, history::log).await,
        Blame::NAME => on_project::<Blame>(d, params, history::blame).await,
        FileAt::NAME => on_project::<FileAt>(d, params, checkpoint::file_at).await,
        Show::NAME => on_project::<Show>(d, params, checkpoint::show).await,
        Diff::NAME => on_project::<Diff>(d, params, checkpoint::diff_checkpoints).await,
        Step::NAME => on_project::<Step>(d, params, step::step).await,
        Revert::NAME => on_project::<Revert>(d, params, revert::revert).await,
        Restore::NAME => on_project::<Restore>(d, params, restore::restore).await,
        Undo::NAME => on_project::<Undo>(d, params, restore::undo).await,
        Tag::NAME => on_project::<Tag>(d, params, checkpoint::tag).await,
        Note::NAME => on_project::<Note>(d, params, checkpoint::note).await,
        ExportPatch::NAME => on_project::<ExportPatch>(d, params, transfer::export_patch).await,
        ExportBundle::NAME => on_project::<ExportBundle>(d, params, transfer::export_bundle).await,
        ImportBundle::NAME => on_project::<ImportBundle>(d, params, transfer::import_bundle).await,
        DialogFork::NAME => on_project::<DialogFork>(d, params, timeline::dialog_fork).await,
        DialogNew::NAME => on_project::<DialogNew>(d, params, timeline::dialog_new).await,
        DialogList::NAME => on_project::<DialogList>(d, params, timeline::dialog_list).await,
        DialogRm::NAME => on_project::<DialogRm>(d, params, timeline::dialog_rm).await,
        DialogKeep::NAME => on_project::<DialogKeep>(d, params, timeline::dialog_keep).await,
        EditBegin::NAME => on_project::<EditBegin>(d, params, edit::edit_begin).await,
        EditCommit::NAME => on_project::<EditCommit>(d, params, edit::edit_commit).await,
        EditAbort::NAME => on_project::<EditAbort>(d, params, edit::edit_abort).await,
        SessionStatus::NAME => {
            on_project::<SessionStatus>(d, params, timeline::session_status).await
        }
        SessionApprove::NAME => {
            on_project::<SessionApprove>(d, params, timeline::session_approve).await
        }
        SessionReset::NAME => on_project::<SessionReset>(d, params, timeline::session_reset).await,
        Prune::NAME => on_project::<Prune>(d, params, timeline::prune).await,
        Gc::NAME => on_project::<Gc>(d, params, timeline::gc).await,
        Verify::NAME => on_project::<Verify>(d, params, checkpoint::verify).await,
        Fsck::NAME => fsck(d, params).await,
        Rescan::NAME => on_project::<Rescan>(d, params, checkpoint::rescan).await,
        RemoteAdd::NAME => on_project::<RemoteAdd>(d, params, share::remote_add).await,
        RemoteList::NAME => on_project::<RemoteList>(d, params, share::remote_list).await,
        RemoteRemove::NAME => on_project::<RemoteRemove>(d, params, share::remote_remove).await,
        PushBegin::NAME => on_project::<PushBegin>(d, params, share::push_begin).await,
        PushEnd::NAME => on_project::<PushEnd>(d, params, share::push_end).await,
        FetchBegin::NAME => on_project::<FetchBegin>(d, params, share::fetch_begin).await,
        FetchEnd::NAME => on_project::<FetchEnd>(d, params, share::fetch_end).await,
        PANIC_METHOD if super::test_hooks() => panic!("`{PANIC_METHOD}` was asked for"),
        other => Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!("unknown method `{other}`"),
        )),
    }
}

/// A method that panics, served only with test hooks on (`CKPTD_TEST_HOOKS=1`): how the tests
/// show that a request whose handler panics gets an `internal_error` reply.
pub const PANIC_METHOD: &str = "test_panic";

/// Decodes `params` as `method`'s parameters, as the dispatch does: what the request fuzz
/// target drives with arbitrary input.
pub fn check_params(method: &str, params: Option<Value>) -> Result<(), RpcError> {
    // The same object check as `parse`, then the method's own params type.
    parse::<serde_json::Map<String, Value>>(params.clone())?;
    let params = params.filter(|p| !p.is_null()).unwrap_or_else(|| json!({}));
    match crate::protocol::rpc::decode_params(method, params) {
        Some(decoded) => decoded
            .map_err(|e| RpcError::new(ErrorCode::InvalidParams, format!("invalid params: {e}"))),
        None => Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!("unknown method `{method}`"),
        )),
    }
}

fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let params = match params {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "params must be an object",
            ))
        }
    };
    serde_json::from_value(params)
        .map_err(|e| RpcError::new(ErrorCode::InvalidParams, format!("invalid params: {e}")))
}

fn hello(params: crate::protocol::methods::HelloParams) -> r::Hello {
    if let Some(client) = &params.client {
        tracing::debug!(client = %client, protocol = ?params.protocol, "hello");
    }
    r::Hello {
        protocol: PROTOCOL_VERSION,
        daemon: format!("ckptd {}", env!("CARGO_PKG_VERSION")),
        pid: std::process::id(),
    }
}

/// Streams the project's events to this connection as `event` notifications, after the reply.
/// The stream ends when the connection does, or with a final `error` event when the client
/// reads too slowly (the daemon never waits for it).
async fn subscribe(
    daemon: &Arc<Daemon>,
    params: SubscribeParams,
    id: Value,
    conn: &Conn,
) -> Result<(), RpcError> {
    let project = find_project(daemon, &params.project).await?;
    let permit = conn.subscribers.clone().try_acquire_owned().map_err(|_| {
        RpcError::new(
            ErrorCode::ShuttingDown,
            format!(
                "ckptd already streams events to {} subscribers; close one (or try again)",
                MAX_SUBSCRIBERS
            ),
        )
    })?;
    // Opening the project starts its watcher and event pump; watches are placed by a walk,
    // so bring the index up to date now rather than at the next checkpoint.
    project.run(|p, o| o.prepare(p).map(drop)).await?;
    let mut sub = project.events.subscribe(params.diffs);
    conn.subscribed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let subscribed = r::Subscribed {
        subscribed: project.root.clone(),
        diffs: params.diffs,
    };
    let reply = response_line(&id, &encode::<rpc::Subscribe>(&subscribed));
    let (tx, mut closed) = (conn.tx.clone(), conn.closed.clone());
    tokio::spawn(async move {
        let _permit = permit;
        let closed_for_send = closed.clone();
        let send = |line: Vec<u8>| {
            let tx = tx.clone();
            let mut closed = closed_for_send.clone();
            async move {
                tokio::select! {
                    _ = closed.wait_for(|c| *c) => false,
                    sent = tx.send(line) => sent.is_ok(),
                }
            }
        };
        if !send(reply).await {
            return;
        }
        loop {
            let event = tokio::select! {
                _ = closed.wait_for(|c| *c) => break,
                event = sub.rx.recv() => event,
            };
            match event {
                Ok(event) => {
                    let mut event = (*event).clone();
                    if let (false, EventKind::FileChanged { diff, .. }) =
                        (sub.diffs, &mut event.what)
                    {
                        *diff = None;
                    }
                    if !send(notification_line("event", &event)).await {
                        break;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "dropping a subscriber that reads too slowly");
                    let event = EventKind::Error {
                        reason: format!(
                            "subscriber too slow: {missed} events were dropped; subscribe again"
                        ),
                    };
                    let _ = send(notification_line("event", &event)).await;
                    break;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    Ok(())
}

pub(super) async fn find_project(
    daemon: &Arc<Daemon>,
    path: &Path,
) -> Result<Arc<Owner>, RpcError> {
    let path = engine::project::absolute(path)?;
    // A project's root named as it was watched (what hooks and the CLI send from the root)
    // needs no look at the disk here: every operation checks the root itself before it runs
    // (gone, or a symlink now: refused), and a hop to a blocking thread costs more than the
    // rest of a checkpoint's bookkeeping.
    if let Some(p) = daemon.projects.read().await.get(&path) {
        return Ok(p.clone());
    }
    let lookup = path.clone();
    match blocking(move || std::fs::canonicalize(&lookup)).await? {
        Ok(real) => daemon
            .project_for(&real)
            .await
            .ok_or_else(|| RpcError::not_a_project(&real)),
        // The directory is gone: if it was (inside) a project, say so precisely.
        Err(source) => match daemon.project_for(&engine::project::normalize(&path)).await {
            Some(p) => Err(engine::Error::Unavailable {
                root: p.root.clone(),
                source,
            }
            .into()),
            None => Err(RpcError::not_a_project(&path)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::rpc::METHOD_NAMES;

    #[test]
    fn every_method_has_its_params_checked() {
        for method in METHOD_NAMES {
            let err = check_params(method, Some(json!({ "no_such_param": 1 }))).unwrap_err();
            assert_eq!(
                err.kind(),
                Some(ErrorCode::InvalidParams),
                "{method}: {err:?}"
            );
        }
        let err = check_params("nope", None).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorCode::MethodNotFound));
        let err = check_params("status", Some(json!([1]))).unwrap_err();
        assert_eq!(err.kind(), Some(ErrorCode::InvalidParams));
        assert!(check_params("status", None).is_ok());
    }
}
