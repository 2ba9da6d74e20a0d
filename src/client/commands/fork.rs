//! `ckpt fork CHECKPOINT --worktree DIR`: a parallel attempt from a prompt. DIR gets the
//! project's files as they were at the checkpoint — a `git worktree` of the project's repository
//! (detached, so no branch of the user's moves and their index is never touched) when the project
//! is one, else a plain folder — is registered as a project of its own, and the agent's
//! conversation is forked to just before that prompt where the agent looks for DIR's sessions.
//!
//! The files travel through the daemon: the checkpoint is exported as a bundle from the project's
//! store, imported into DIR's, and restored there (so DIR's history starts with it, and every file
//! the restore could not write is reported). A fork that fails half-way takes back what it made:
//! DIR, its worktree entry and its registration.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use super::restore::render;
use super::rewind::{point_of, say_forked, select};
use super::{file_path, skipped_status, Ctx};
use crate::client::agents::conversation::{self, Forked, Place};
use crate::client::ClientError;
use crate::model::CheckpointId;
use crate::protocol::methods::{
    ExportBundleParams, ImportBundleParams, NoParams, PathParams, RestoreParams, WatchParams,
};
use crate::protocol::results::Restored;
use crate::protocol::rpc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The checkpoint to start from (an id or prefix, a tag, `@~N`, `#SEQ`; or N prompts back).
    #[arg(value_name = "CHECKPOINT")]
    pub target: String,
    /// The new folder (it must not exist yet).
    #[arg(long, value_name = "DIR")]
    pub worktree: PathBuf,
    /// The dialog in which `@`, `@~N`, `#SEQ` and N count.
    #[arg(long, value_name = "D")]
    pub dialog: Option<String>,
    /// The files only; the conversation is not forked.
    #[arg(long)]
    pub code: bool,
}

/// What `ckpt fork --json` prints.
#[derive(Debug, Serialize)]
struct Report {
    worktree: PathBuf,
    /// Whether DIR is a git worktree of the project's repository (else a plain folder).
    git_worktree: bool,
    /// The checkpoint forked from.
    from: CheckpointId,
    /// The same state in DIR's own history.
    checkpoint: CheckpointId,
    restored: Restored,
    conversation: Option<Forked>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation_skipped: Option<String>,
}

pub fn fork(ctx: &Ctx, args: Args) -> Result<i32, ClientError> {
    let (target, prompts) = select(ctx, &args.target, args.dialog.clone())?;
    let dir = file_path(&ctx.base, &args.worktree);
    let root = project_root(ctx)?;
    if std::fs::symlink_metadata(&dir).is_ok() {
        return Err(ClientError::Usage(format!(
            "{} exists: fork into a new folder",
            dir.display()
        )));
    }
    if dir.starts_with(&root) {
        return Err(ClientError::Usage(format!(
            "{} is inside the project {}: fork into a folder outside it",
            dir.display(),
            root.display()
        )));
    }
    let planned = match args.code {
        true => None,
        false => Some(
            point_of(&target, &prompts)
                .and_then(|p| conversation::plan(&p, &Place::Folder(dir.clone()))),
        ),
    };
    let (fork, mut skipped) = match planned {
        Some(Ok(fork)) => (Some(fork), None),
        Some(Err(why)) => (None, Some(why.0)),
        None => (None, None),
    };
    let mut made = Made::create(&root, &dir)?;
    let filled = made.fill(ctx, &target.id);
    let (checkpoint, restored) = match filled {
        Ok(done) => done,
        Err(e) => {
            made.undo(ctx);
            return Err(e);
        }
    };
    let conversation = match fork.map(|f| f.write()) {
        Some(Ok(f)) => Some(f),
        Some(Err(why)) => {
            skipped = Some(why.0);
            None
        }
        None => None,
    };
    let report = Report {
        worktree: dir,
        git_worktree: made.repo.is_some(),
        from: target.id,
        checkpoint,
        restored,
        conversation,
        conversation_skipped: skipped,
    };
    let status = skipped_status(&report.restored.skipped);
    if ctx.out.json(&report) {
        return Ok(status);
    }
    render(ctx, &report.restored);
    outln!(
        "forked {} into {} ({})",
        report.from.short(),
        report.worktree.display(),
        match &made.repo {
            Some(repo) => format!("a git worktree of {}, detached at its HEAD", repo.display()),
            None => "a folder of its own".into(),
        }
    );
    if let Some(why) = &report.conversation_skipped {
        eprintln!("the conversation is not forked: {why}");
    }
    if let Some(f) = &report.conversation {
        say_forked(f, false);
        outln!(
            "in the new folder:  cd {} && {}",
            report.worktree.display(),
            f.resume.join(" ")
        );
    }
    Ok(status)
}

/// The watched project holding the command's folder.
fn project_root(ctx: &Ctx) -> Result<PathBuf, ClientError> {
    let base = std::fs::canonicalize(&ctx.base).unwrap_or_else(|_| ctx.base.clone());
    let projects = ctx.connect()?.call::<rpc::Projects>(&NoParams {})?;
    projects
        .into_iter()
        .map(|p| p.root)
        .filter(|root| base.starts_with(root))
        .max_by_key(|root| root.as_os_str().len())
        .ok_or_else(|| {
            ClientError::Usage(format!("{} is not in a watched project", base.display()))
        })
}

/// The folder a fork made, to fill or to take back.
struct Made {
    dir: PathBuf,
    /// The repository DIR is a worktree of.
    repo: Option<PathBuf>,
    watched: bool,
}

impl Made {
    /// Makes DIR: a detached worktree of `root`'s repository with nothing checked out (the
    /// restore writes the files), or an empty folder when `root` is no git work tree with a
    /// commit, or `git` cannot be run.
    fn create(root: &Path, dir: &Path) -> Result<Made, ClientError> {
        let in_git =
            root.join(".git").exists() && git(root, &["rev-parse", "--verify", "-q", "HEAD"]);
        if in_git {
            let dir_arg = dir.to_string_lossy();
            let args = [
                "worktree",
                "add",
                "-q",
                "--detach",
                "--no-checkout",
                &dir_arg,
                "HEAD",
            ];
            if git(root, &args) {
                return Ok(Made {
                    dir: dir.to_path_buf(),
                    repo: Some(root.to_path_buf()),
                    watched: false,
                });
            }
            eprintln!(
                "`git worktree add` failed: {} gets a plain copy",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| ClientError::Other(format!("cannot create {}: {e}", dir.display())))?;
        Ok(Made {
            dir: dir.to_path_buf(),
            repo: None,
            watched: false,
        })
    }

    /// Registers DIR and brings `from`'s files into it: DIR's checkpoint of them and the
    /// restore's report.
    fn fill(
        &mut self,
        ctx: &Ctx,
        from: &CheckpointId,
    ) -> Result<(CheckpointId, Restored), ClientError> {
        let mut conn = ctx.connect()?;
        let watch = WatchParams {
            path: self.dir.clone(),
            force: false,
            nest: false,
        };
        conn.call::<rpc::Watch>(&watch)?;
        self.watched = true;
        let bundle = ctx.paths.data_dir.join(format!(
            "fork-{}-{}.bundle",
            std::process::id(),
            from.short()
        ));
        let export = ExportBundleParams {
            project: ctx.project(),
            ids: vec![from.to_string()],
            path: bundle.clone(),
            force: true,
        };
        let imported = conn.call::<rpc::ExportBundle>(&export).and_then(|_| {
            let import = ImportBundleParams {
                project: self.dir.clone(),
                path: bundle.clone(),
                dialog: Some(format!("fork-{}", from.short())),
            };
            conn.call::<rpc::ImportBundle>(&import)
        });
        let _ = std::fs::remove_file(&bundle);
        let imported = imported?;
        let checkpoint = imported
            .imported
            .iter()
            .find(|c| {
                c.imported
                    .as_ref()
                    .is_some_and(|i| i.from == from.to_string())
            })
            .map(|c| c.id)
            .ok_or_else(|| {
                ClientError::Other(format!(
                    "the import into {} lost {from}",
                    self.dir.display()
                ))
            })?;
        let restore = RestoreParams {
            project: self.dir.clone(),
            id: checkpoint.to_string(),
            paths: vec![],
            dry_run: false,
            dialog: None,
            by: None,
        };
        let restored = ctx.with_progress(|| conn.call::<rpc::Restore>(&restore))?;
        // The worktree's own index (never the user's) now describes its HEAD, so `git status`
        // there shows how the checkpoint differs from it.
        if self.repo.is_some() && !git(&self.dir, &["reset", "-q"]) {
            eprintln!(
                "`git reset` in {} failed: its index is empty",
                self.dir.display()
            );
        }
        Ok((checkpoint, restored))
    }

    /// Takes back what the fork made.
    fn undo(&self, ctx: &Ctx) {
        if self.watched {
            let params = PathParams {
                path: self.dir.clone(),
            };
            if let Ok(mut conn) = ctx.connect() {
                let _ = conn.call::<rpc::Unwatch>(&params);
            }
        }
        match &self.repo {
            Some(repo) => {
                let dir = self.dir.to_string_lossy();
                if !git(repo, &["worktree", "remove", "--force", &dir]) {
                    let _ = std::fs::remove_dir_all(&self.dir);
                    git(repo, &["worktree", "prune"]);
                }
            }
            None => {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
        }
    }
}

/// Runs `git -C dir ARGS` quietly; whether it succeeded (false when git cannot be run).
fn git(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
