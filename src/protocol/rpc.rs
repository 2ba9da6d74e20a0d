//! Every method of the protocol: one type each ([`Method`]: its name on the wire, its
//! parameters from [`super::methods`], its result from [`super::results`]), the list of
//! names, and the decoding of a request's parameters by name.

use serde::Serialize;

use super::methods as p;
use super::results as r;
use super::sharing as share;
use super::turns;

/// A method: its name on the wire, its parameters and its result. The daemon's dispatch and the
/// client's calls both go through these types, so neither side can drift from the other.
pub trait Method {
    const NAME: &'static str;
    type Params: Serialize + serde::de::DeserializeOwned + Send + 'static;
    type Result: Serialize + serde::de::DeserializeOwned + Send + 'static;
}

macro_rules! methods {
    ($($(#[$doc:meta])* $ty:ident = $name:literal, $params:ty => $result:ty;)*) => {
        $(
            $(#[$doc])*
            pub struct $ty;
            impl Method for $ty {
                const NAME: &'static str = $name;
                type Params = $params;
                type Result = $result;
            }
        )*
        /// Every method's name.
        pub const METHOD_NAMES: &[&str] = &[$($name),*];

        /// Decodes `params` (an object) as the params of `method`; None for an unknown method.
        pub fn decode_params(
            method: &str,
            params: serde_json::Value,
        ) -> Option<Result<(), serde_json::Error>> {
            match method {
                $($name => Some(serde_json::from_value::<$params>(params).map(drop)),)*
                _ => None,
            }
        }
    };
}

methods! {
    Hello = "hello", p::HelloParams => r::Hello;
    Status = "status", p::NoParams => r::Status;
    Watch = "watch", p::WatchParams => r::Watched;
    Unwatch = "unwatch", p::PathParams => r::Unwatched;
    /// Deletes a project's whole history (its store); its files are never touched.
    Forget = "forget", p::ForgetParams => r::Forgotten;
    Projects = "projects", p::NoParams => Vec<r::ProjectInfo>;
    Checkpoint = "checkpoint", p::CheckpointParams => r::Checkpoint;
    List = "list", p::ListParams => Vec<r::Checkpoint>;
    /// The prompts, newest first, each with what its turn changed.
    Log = "log", p::LogParams => Vec<r::Turn>;
    /// For each line of a file as it is now, the prompt whose turn wrote it.
    Blame = "blame", p::BlameParams => r::Blamed;
    /// A file's content as a checkpoint holds it (a part of it, bounded).
    FileAt = "file_at", p::FileAtParams => r::FileContent;
    Show = "show", p::ShowParams => r::Shown;
    Diff = "diff", p::DiffParams => r::Diffed;
    /// An agent's after-tool or turn-end hook: a point of the running turn.
    Step = "step", turns::StepParams => turns::Stepped;
    /// Takes back exactly what one turn (or its end after a step) changed.
    Revert = "revert", turns::RevertParams => turns::Reverted;
    Restore = "restore", p::RestoreParams => r::Restored;
    Undo = "undo", p::UndoParams => r::Restored;
    Tag = "tag", p::TagParams => r::Tagged;
    Note = "note", p::NoteParams => r::Noted;
    ExportPatch = "export_patch", p::ExportPatchParams => r::Patch;
    ExportBundle = "export_bundle", p::ExportBundleParams => r::BundleWritten;
    ImportBundle = "import_bundle", p::ImportBundleParams => r::BundleImported;
    DialogFork = "dialog_fork", p::ForkParams => r::DialogStarted;
    DialogNew = "dialog_new", p::DialogNewParams => r::DialogStarted;
    DialogList = "dialog_list", p::ProjectParams => Vec<r::DialogInfo>;
    DialogRm = "dialog_rm", p::DialogParams => r::DialogRemoved;
    DialogKeep = "dialog_keep", p::DialogKeepParams => r::DialogKept;
    EditBegin = "edit_begin", p::EditBeginParams => r::EditBegun;
    EditCommit = "edit_commit", p::EditParams => r::EditCommitted;
    EditAbort = "edit_abort", p::EditParams => r::EditAborted;
    SessionStatus = "session_status", p::SessionParams => r::SessionStatus;
    SessionApprove = "session_approve", p::SessionApproveParams => r::SessionApproved;
    SessionReset = "session_reset", p::SessionResetParams => r::Reset;
    Prune = "prune", p::PruneParams => r::Pruned;
    Gc = "gc", p::ProjectParams => r::GcReport;
    Verify = "verify", p::ProjectParams => r::Verified;
    Fsck = "fsck", p::FsckParams => r::FsckReport;
    Rescan = "rescan", p::ProjectParams => r::Rescan;
    /// Replies once, then streams `event` notifications (see `Event`).
    Subscribe = "subscribe", p::SubscribeParams => r::Subscribed;
    /// Re-reads the configuration file, as SIGHUP does.
    Reload = "reload", p::NoParams => r::Reloaded;
    Shutdown = "shutdown", p::NoParams => r::Stopping;
    RemoteAdd = "remote_add", share::RemoteAddParams => share::RemoteInfo;
    RemoteList = "remote_list", p::ProjectParams => Vec<share::RemoteInfo>;
    RemoteRemove = "remote_remove", share::RemoteParams => share::RemoteRemoved;
    /// Makes a push ready in a scratch repository for the client's `git push`.
    PushBegin = "push_begin", share::PushBeginParams => share::PushReady;
    PushEnd = "push_end", share::ScratchParams => share::PushEnded;
    /// A scratch repository for the client's `git fetch`.
    FetchBegin = "fetch_begin", share::RemoteParams => share::FetchReady;
    FetchEnd = "fetch_end", share::ScratchParams => share::Fetched;
}
