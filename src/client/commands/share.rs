//! `ckpt remote add|list|remove`, `ckpt push` and `ckpt fetch`: sharing checkpoints through
//! any git remote. The daemon makes a scratch repository ready; the `git` run here, with the
//! user's own credentials, sends or receives; the daemon takes the outcome in.

use std::collections::BTreeMap;
use std::ffi::OsString;

use serde::Serialize;

use super::Ctx;
use crate::client::connection::Connection;
use crate::client::git;
use crate::client::output::{plural, relative_time, table};
use crate::client::ClientError;
use crate::model::default_who;
use crate::protocol::methods::ProjectParams;
use crate::protocol::rpc;
use crate::protocol::sharing::{
    FetchReady, Fetched, PushBeginParams, PushReady, RemoteAddParams, RemoteInfo, RemoteParams,
    ScratchParams,
};

#[derive(Debug, clap::Subcommand)]
pub enum RemoteCommand {
    /// Add a remote: any URL git accepts (ssh, git://, https, a path), e.g. the project's own.
    Add { name: String, url: String },
    /// The project's remotes, with what is not pushed yet.
    List,
    /// Forget a remote and the checkpoints fetched from it (what was pushed there stays).
    Remove { name: String },
}

#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The remote (default: the project's only one).
    pub name: Option<String>,
    /// Also delete, on the remote, your dialogs that this store no longer has.
    #[arg(long)]
    pub prune: bool,
    /// Also push the agents' metadata (transcript paths, models, session details).
    #[arg(long)]
    pub with_metadata: bool,
}

pub fn remote(ctx: &Ctx, command: RemoteCommand) -> Result<i32, ClientError> {
    let mut conn = ctx.connect()?;
    match command {
        RemoteCommand::Add { name, url } => {
            let url = local_path_made_absolute(ctx, &url);
            let params = RemoteAddParams {
                project: ctx.project(),
                name,
                url,
            };
            let r = conn.call::<rpc::RemoteAdd>(&params)?;
            ctx.out
                .value_or(&r, &format!("added remote {} ({})", r.name, r.url));
        }
        RemoteCommand::List => {
            let list = conn.call::<rpc::RemoteList>(&ProjectParams {
                project: ctx.project(),
            })?;
            if ctx.out.json(&list) {
                return Ok(0);
            }
            if list.is_empty() {
                outln!("no remotes (add one with `ckpt remote add NAME URL`)");
                return Ok(0);
            }
            let mut rows = vec![["NAME", "URL", "UNPUSHED", "PUSHED", "FETCHED"]
                .map(String::from)
                .to_vec()];
            for r in &list {
                rows.push(vec![
                    r.name.clone(),
                    r.url.clone(),
                    r.unpushed.to_string(),
                    r.pushed_at.as_deref().map_or("never".into(), relative_time),
                    match &r.fetched_at {
                        Some(at) => format!("{} ({})", relative_time(at), r.fetched),
                        None => "never".into(),
                    },
                ]);
            }
            table(&rows);
        }
        RemoteCommand::Remove { name } => {
            let params = RemoteParams {
                project: ctx.project(),
                name,
            };
            let r = conn.call::<rpc::RemoteRemove>(&params)?;
            ctx.out.value_or(
                &r,
                &format!(
                    "removed remote {} ({} of others' dialogs forgotten)",
                    r.name,
                    plural(r.refs_removed, "ref", "refs")
                ),
            );
        }
    }
    Ok(0)
}

/// A URL that names a folder here (not `scheme://`, not ssh's `host:path`) as an absolute
/// path: the daemon runs elsewhere, and the remote must not change with the current folder.
fn local_path_made_absolute(ctx: &Ctx, url: &str) -> String {
    let scp_like = url
        .split_once(':')
        .is_some_and(|(host, _)| !host.contains('/'));
    if url.contains("://") || scp_like || url.starts_with('-') {
        return url.to_string();
    }
    let path = ctx.base.join(url);
    path.canonicalize()
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The remote a command names, or the project's only one.
fn chosen(
    ctx: &Ctx,
    conn: &mut Connection,
    name: Option<String>,
) -> Result<Vec<RemoteInfo>, ClientError> {
    let list = conn.call::<rpc::RemoteList>(&ProjectParams {
        project: ctx.project(),
    })?;
    let names = || {
        list.iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match name {
        Some(n) => match list.iter().find(|r| r.name == n) {
            Some(r) => Ok(vec![r.clone()]),
            None if list.is_empty() => Err(ClientError::Usage(format!(
                "no remote named `{n}`; this project has none (add one with `ckpt remote add NAME URL`)"
            ))),
            None => Err(ClientError::Usage(format!(
                "no remote named `{n}` (this project's remotes: {})",
                names()
            ))),
        },
        None if list.is_empty() => Err(ClientError::Usage(
            "this project has no remotes (add one with `ckpt remote add NAME URL`)".into(),
        )),
        None => Ok(list),
    }
}

/// The name pushes go under: `push_as` from the configuration, else user@host.
pub fn who(configured: Option<String>) -> String {
    configured.unwrap_or_else(|| {
        let uid = rustix::process::getuid().as_raw();
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .filter(|u| !u.is_empty())
            .or_else(|| user_of(uid))
            .unwrap_or_else(|| uid.to_string());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        default_who(&user, &host)
    })
}

/// The name `/etc/passwd` gives user `uid`.
fn user_of(uid: u32) -> Option<String> {
    let text = crate::fs::read_small(std::path::Path::new("/etc/passwd"), 1 << 20)?;
    String::from_utf8_lossy(&text).lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() > 2 && fields[2] == uid.to_string()).then(|| fields[0].to_string())
    })
}

#[derive(Serialize)]
struct Pushed {
    #[serde(flatten)]
    ready: PushReady,
    /// Remote refs git created or moved, and deleted (`--prune`).
    refs_updated: usize,
    refs_deleted: usize,
}

pub fn push(ctx: &Ctx, args: PushArgs, push_as: Option<String>) -> Result<i32, ClientError> {
    if let Some(problem) = &ctx.config_problem {
        // `push_as` names you on the remote: never guessed past a broken file.
        return Err(ClientError::Config(format!("cannot push: {problem}")));
    }
    let mut conn = ctx.connect()?;
    let remotes = chosen(ctx, &mut conn, args.name.clone())?;
    if remotes.len() > 1 {
        let names: Vec<&str> = remotes.iter().map(|r| r.name.as_str()).collect();
        return Err(ClientError::Usage(format!(
            "this project has several remotes ({}); name the one to push to",
            names.join(", ")
        )));
    }
    let params = PushBeginParams {
        project: ctx.project(),
        remote: remotes[0].name.clone(),
        who: who(push_as),
        with_metadata: args.with_metadata,
    };
    let ready = conn.call::<rpc::PushBegin>(&params)?;
    if ready.refs == 0 {
        conn.call::<rpc::PushEnd>(&ScratchParams {
            project: ctx.project(),
            remote: ready.remote.clone(),
            git_dir: ready.git_dir.clone(),
            succeeded: false,
        })?;
        return Err(ClientError::Other(format!(
            "nothing to push to {}: this project has no checkpoints yet",
            ready.remote
        )));
    }
    let mut command: Vec<OsString> = vec!["--git-dir".into(), ready.git_dir.clone().into()];
    command.extend(["push", "--porcelain", "--progress", "--no-verify"].map(OsString::from));
    if args.prune {
        command.push("--prune".into());
    }
    command.push(ready.url.clone().into());
    command.push(format!("+refs/ckpt/*:{}*", ready.remote_prefix).into());
    let what = format!("push to {} ({})", ready.remote, ready.url);
    let outcome = git::run(&command, &what);
    let end = ScratchParams {
        project: ctx.project(),
        remote: ready.remote.clone(),
        git_dir: ready.git_dir.clone(),
        succeeded: outcome.is_ok(),
    };
    conn.call::<rpc::PushEnd>(&end)?;
    let output = outcome?;
    // `--porcelain`: one line a ref, `<flag>\t<from>:<to>\t<summary>`.
    let flags: Vec<char> = output
        .stdout
        .lines()
        .filter_map(|l| {
            l.strip_prefix(['*', '+', ' ', '-', '=', '!'])
                .map(|_| l.chars().next())
        })
        .flatten()
        .collect();
    let count = |wanted: &[char]| flags.iter().filter(|f| wanted.contains(f)).count();
    let pushed = Pushed {
        refs_updated: count(&['*', '+', ' ']),
        refs_deleted: count(&['-']),
        ready,
    };
    if ctx.out.json(&pushed) || ctx.out.quiet {
        return Ok(0);
    }
    let r = &pushed.ready;
    outln!(
        "{} has your {} ({}) under {} ({} updated{})",
        r.remote,
        plural(r.checkpoints, "checkpoint", "checkpoints"),
        plural(r.refs, "timeline", "timelines"),
        r.remote_prefix,
        plural(pushed.refs_updated, "ref", "refs"),
        match pushed.refs_deleted {
            0 => String::new(),
            n => format!(", {n} deleted"),
        }
    );
    for red in &r.redactions {
        outln!(
            "redacted in the prompt of {} (#{} {}): {}; sent with another id",
            red.id.short(),
            red.seq,
            red.dialog,
            summarise(&red.kinds)
        );
    }
    match r.metadata {
        0 if !args.with_metadata => {
            outln!("not pushed: the agents' metadata (transcript paths, models); --with-metadata sends it")
        }
        0 => {}
        n => outln!(
            "pushed {} with them",
            plural(n, "metadata document", "metadata documents")
        ),
    }
    Ok(0)
}

/// `["GitHub token", "GitHub token", "private key"]` as "2 GitHub tokens, 1 private key".
fn summarise(kinds: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for k in kinds {
        *counts.entry(k).or_default() += 1;
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|(k, n)| match n {
            1 => k.to_string(),
            n => format!("{k} ×{n}"),
        })
        .collect();
    parts.join(", ")
}

pub fn fetch(ctx: &Ctx, name: Option<String>) -> Result<i32, ClientError> {
    let mut conn = ctx.connect()?;
    let remotes = chosen(ctx, &mut conn, name)?;
    let mut results: Vec<Fetched> = Vec::new();
    let mut failed = None;
    for remote in remotes {
        let params = RemoteParams {
            project: ctx.project(),
            name: remote.name.clone(),
        };
        let ready: FetchReady = conn.call::<rpc::FetchBegin>(&params)?;
        let command: Vec<OsString> = [
            "--git-dir".into(),
            ready.git_dir.clone().into_os_string(),
            // Whatever arrives is kept as a pack (the store takes packs in whole) and checked.
            "-c".into(),
            "fetch.unpackLimit=1".into(),
            "-c".into(),
            "transfer.unpackLimit=1".into(),
            "-c".into(),
            "transfer.fsckObjects=true".into(),
            "fetch".into(),
            "--no-tags".into(),
            "--no-write-fetch-head".into(),
            "--progress".into(),
            ready.url.clone().into(),
            "+refs/ckpt/*:refs/ckpt/*".into(),
        ]
        .into();
        let what = format!("fetch from {} ({})", ready.remote, ready.url);
        let outcome = git::run(&command, &what);
        let end = ScratchParams {
            project: ctx.project(),
            remote: ready.remote.clone(),
            git_dir: ready.git_dir.clone(),
            succeeded: outcome.is_ok(),
        };
        match outcome {
            Ok(_) => results.push(conn.call::<rpc::FetchEnd>(&end)?),
            Err(e) => {
                let _ = conn.call::<rpc::FetchEnd>(&end);
                // The last failure is the command's error (said once, by it); earlier ones here.
                if let Some(earlier) = failed.replace(e) {
                    eprintln!("error: {earlier}");
                }
            }
        }
    }
    if !ctx.out.json(&results) && !ctx.out.quiet {
        for f in &results {
            let people: Vec<String> = f
                .people
                .iter()
                .map(|(who, n)| format!("{who} ({})", plural(*n, "dialog", "dialogs")))
                .collect();
            outln!(
                "fetched {} from {} ({}); on it: {}",
                plural(f.new_checkpoints, "new checkpoint", "new checkpoints"),
                f.remote,
                plural(f.objects, "object", "objects"),
                match people.is_empty() {
                    true => "nobody's checkpoints yet".into(),
                    false => people.join(", "),
                }
            );
            if !f.ignored.is_empty() {
                outln!("ignored (not checkpoints): {}", f.ignored.join(", "));
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(0),
    }
}
