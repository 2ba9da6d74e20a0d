//! Argument parsing and the commands. Each command sends one request (restore may send a dry
//! run first to ask for confirmation) and renders the reply.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use serde_json::{json, Value};

use super::output::{self, Out};
use super::{ClientError, Connection};
use crate::config::{Config, Paths};
use crate::protocol::ErrorCode;

#[derive(Debug, Parser)]
#[command(
    name = "ckpt",
    version,
    about = "Checkpoints and undo for whole projects (client of ckptd)"
)]
pub struct Cli {
    /// Machine output: one JSON document on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// The daemon's socket (default: $XDG_RUNTIME_DIR/ckpt/ckptd.sock).
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Fail instead of starting ckptd when none answers.
    #[arg(long, global = true)]
    pub no_spawn: bool,
    /// Print every line of long lists (a restore of thousands of files) on a terminal too.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Act on the project containing DIR instead of the current directory.
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Register a project (DIR or the current directory) and create its store.
    Watch {
        // Its own id: `-C DIR` is global and must not receive this value too.
        #[arg(id = "watch_dir", value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Also watch `/`, your home folder itself, or a folder that holds it.
        #[arg(long)]
        force: bool,
    },
    /// Forget a project; its store stays on disk.
    Unwatch {
        #[arg(id = "unwatch_dir", value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// List registered projects.
    Projects,
    /// Record a checkpoint of the project now.
    Checkpoint {
        /// The label, usually the user's message.
        #[arg(short = 'm', long = "message", value_name = "TEXT")]
        message: Option<String>,
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        #[arg(long, value_name = "M")]
        message_id: Option<String>,
        /// JSON to keep with the checkpoint: a file, or - for stdin.
        #[arg(long, value_name = "FILE|-")]
        meta: Option<String>,
    },
    /// Show the timeline, newest first.
    List {
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        #[arg(short = 'n', long, value_name = "N")]
        limit: Option<usize>,
        /// Also show approved and abandoned sessions.
        #[arg(long)]
        all_sessions: bool,
        /// Only checkpoints whose label, notes, tags or message id contain TEXT.
        #[arg(long, value_name = "TEXT")]
        grep: Option<String>,
        /// Draw every dialog and session (approved, abandoned, active) as a tree.
        #[arg(long)]
        graph: bool,
    },
    /// Export checkpoints as a git bundle (`--bundle FILE`), or one checkpoint's changes as a
    /// patch that `git apply` accepts (`--patch`, on stdout).
    #[command(group = clap::ArgGroup::new("format").required(true).args(["patch", "bundle"]))]
    Export {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
        #[arg(long)]
        patch: bool,
        #[arg(long, value_name = "FILE")]
        bundle: Option<PathBuf>,
        /// With --patch: against this checkpoint instead of the parent.
        #[arg(long, value_name = "ID2")]
        against: Option<String>,
        /// With --bundle: replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Add the commits a git bundle names (from `ckpt export --bundle` or `git bundle create`)
    /// as checkpoints of kind `imported`, on dialog `imported` unless --dialog names one.
    Import {
        #[arg(long, value_name = "FILE")]
        bundle: PathBuf,
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
    },
    /// Name a checkpoint (tagged checkpoints are always kept).
    Tag { id: String, name: String },
    /// Attach a note to a checkpoint (searchable with `list --grep`).
    Note { id: String, text: String },
    /// One checkpoint: its counts, changes against its parent, and skipped files.
    Show {
        /// An id or unique prefix, a tag, `@`/`latest`, `@~N` or `#SEQ`.
        id: String,
        /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        /// Also list every file in the checkpoint.
        #[arg(long)]
        files: bool,
    },
    /// Unified diff from checkpoint ID to ID2, or to the working tree.
    Diff {
        /// An id or unique prefix, a tag, `@`/`latest`, `@~N` or `#SEQ`.
        id: String,
        id2: Option<String>,
        /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        #[arg(long)]
        stat: bool,
        #[arg(long)]
        name_only: bool,
        #[arg(last = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Make the project (or PATHs) equal to checkpoint ID; undoable.
    Restore {
        /// An id or unique prefix, a tag, `@`/`latest`, `@~N` or `#SEQ`.
        id: String,
        /// The dialog in which `@`, `@~N` and `#SEQ` count (default: the newest checkpoint's).
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        /// Only report what would be written and deleted.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation on a terminal.
        #[arg(short = 'y', long)]
        yes: bool,
        #[arg(last = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Undo the last restore (of DIALOG, or of any dialog): restore its undo checkpoint.
    Undo {
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        #[arg(long)]
        dry_run: bool,
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Dialogs: one timeline per agent conversation.
    #[command(subcommand)]
    Dialog(DialogCommand),
    /// Edit transactions for agent tools: save paths, then commit or put them back.
    #[command(subcommand)]
    Edit(EditCommand),
    /// Sessions: the run of checkpoints since the last approval.
    Session {
        #[command(subcommand)]
        command: SessionCommand,
        #[arg(long, value_name = "D", global = true)]
        dialog: Option<String>,
    },
    /// Cut old checkpoints out of the timelines (kept: the newest N of each active session,
    /// approved states, tagged and annotated ones, the last restore and its undo).
    Prune {
        /// Keep this many in each active session (default: the configured retention, 50).
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        /// Also remove the pruned objects from disk (`ckpt gc`).
        #[arg(long)]
        gc: bool,
        /// Only list what would be pruned.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove objects no checkpoint reaches and pack the rest into one pack.
    Gc,
    /// Stream the project's events, one JSON object a line, until interrupted.
    Events {
        /// Include unified diffs of small text files in `file_changed` events.
        #[arg(long)]
        diffs: bool,
    },
    /// Daemon health and projects.
    Status,
    /// Check that the index (what checkpoints record) equals a fresh full scan right now.
    Verify,
    /// Read every object of the store: what is unreadable, and which checkpoints it affects.
    Fsck {
        /// Salvage what can be read from damaged packs and set the damage aside, so that
        /// checkpoints work again (files whose content was lost are read again).
        #[arg(long)]
        repair: bool,
    },
    /// Make the next checkpoint verify every file by stat (as after a watcher overflow).
    Rescan,
    /// Stop the daemon (in-flight work finishes first).
    Shutdown,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// The active session, whether files differ from the approved state, the last approval.
    Status,
    /// Record the files as they are now as the approved state and start a new session.
    Approve {
        #[arg(short = 'm', long = "message", value_name = "TEXT")]
        message: Option<String>,
    },
    /// Return the files to the approved state (undoable) and start a new session.
    Reset {
        #[arg(long)]
        dry_run: bool,
        #[arg(short = 'y', long)]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum EditCommand {
    /// Save PATHs' current state (content, mode, or absence); prints a token.
    Begin {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// The edit succeeded: drop the saved copy.
    Commit { token: String },
    /// The edit failed: put the saved paths back exactly.
    Abort { token: String },
}

#[derive(Debug, Subcommand)]
pub enum DialogCommand {
    /// Start a dialog (NAME, or one made up) with an initial checkpoint of the files as they are.
    New {
        name: Option<String>,
        /// A title, kept as the initial checkpoint's label.
        #[arg(short = 'm', long = "title", value_name = "TEXT")]
        title: Option<String>,
    },
    /// Dialogs with their checkpoint counts, last activity and titles.
    List,
    /// Start a dialog whose approved state is checkpoint ID (the files are not touched).
    Fork {
        id: String,
        #[arg(long, value_name = "D")]
        name: Option<String>,
    },
    /// Forget a dialog's timeline (content shared with other dialogs stays).
    Rm { name: String },
    /// Set how many checkpoints NAME keeps in its active session (`--default`: the config's).
    Keep {
        name: String,
        #[arg(required_unless_present = "default")]
        count: Option<usize>,
        #[arg(long, conflicts_with = "count")]
        default: bool,
    },
}

/// Runs the command line and returns the process exit code: 0 ok, 1 error, 2 a restore that
/// completed but skipped files, 64 a usage error.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            out!("{e}");
            return 0;
        }
        Err(e) => {
            if std::env::args_os().any(|a| a == "--json") {
                let err = ClientError::Usage(e.kind().to_string());
                output::error(&err, true);
            } else {
                let _ = e.print();
            }
            return super::EXIT_USAGE;
        }
    };
    let json = cli.json;
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            output::error(&err, json);
            err.exit_code()
        }
    }
}

fn run(cli: Cli) -> Result<i32, ClientError> {
    let config = Config::load(None).map_err(|e| ClientError::Usage(e.to_string()))?;
    let paths = Paths::resolve(&config, cli.socket.as_deref())
        .map_err(|e| ClientError::Usage(e.to_string()))?;
    let base = base_dir(cli.dir.as_deref())?;
    let out = Out {
        json: cli.json,
        verbose: cli.verbose,
    };
    // Starting a daemon only to stop it would be silly.
    let spawn = !cli.no_spawn && !matches!(cli.command, Command::Shutdown);
    let default_socket = cli.socket.is_none() && config.socket.is_none();
    let connect =
        || Connection::connect_or_spawn(&paths.socket, spawn, &paths.data_dir, default_socket);
    let project = json!(wire(&base)?);
    match cli.command {
        Command::Watch { dir, force } => {
            let params = json!({ "path": wire(&resolve(&base, dir))?, "force": force });
            let result = connect()?.call("watch", params)?;
            out.watched(&result);
        }
        Command::Unwatch { dir } => {
            let result =
                connect()?.call("unwatch", json!({ "path": wire(&resolve(&base, dir))? }))?;
            out.unwatched(&result);
        }
        Command::Projects => out.projects(&connect()?.call("projects", json!({}))?),
        Command::Checkpoint {
            message,
            dialog,
            message_id,
            meta,
        } => {
            let meta = meta.map(|m| read_meta(&m)).transpose()?;
            let params = json!({ "project": project, "label": message, "dialog": dialog,
                "message_id": message_id, "meta": meta });
            let mut conn = connect()?;
            let result = with_progress(&paths.socket, &base, !cli.json, || {
                conn.call("checkpoint", strip_nulls(params))
            })?;
            out.checkpoint(&result);
        }
        Command::List {
            dialog,
            limit,
            all_sessions,
            grep,
            graph,
        } => {
            let params = strip_nulls(
                json!({ "project": project, "dialog": dialog, "limit": limit,
                "all_sessions": all_sessions || graph, "grep": grep }),
            );
            let result = connect()?.call("list", params)?;
            if graph && !cli.json {
                output::graph(&result);
            } else {
                out.list(&result);
            }
        }
        Command::Show { id, dialog, files } => {
            let params = strip_nulls(
                json!({ "project": project, "id": id, "files": files, "dialog": dialog }),
            );
            let shown = connect()?.call("show", params)?;
            say_resolved(out.json, &id, &shown["id"]);
            out.show(&shown);
        }
        Command::Diff {
            id,
            id2,
            dialog,
            stat,
            name_only,
            paths,
        } => {
            let params = strip_nulls(json!({ "project": project, "from": id, "to": id2,
                "paths": wire_all(&base, &paths)?, "dialog": dialog,
                "patch": !stat && !name_only, "counts": !name_only }));
            let diff = connect()?.call("diff", params)?;
            say_resolved(out.json, &id, &diff["from"]);
            if let Some(id2) = &id2 {
                say_resolved(out.json, id2, &diff["to"]);
            }
            out.diff(&diff, stat, name_only);
        }
        Command::Restore {
            id,
            dialog,
            dry_run,
            yes,
            paths: restore_paths,
        } => {
            let socket = paths.socket.clone();
            let paths = wire_all(&base, &restore_paths)?;
            let mut conn = connect()?;
            let ask = !yes && !dry_run && !cli.json && std::io::stdin().is_terminal();
            if ask {
                let plan = conn.call(
                    "restore",
                    strip_nulls(json!({ "project": project, "id": id, "paths": paths,
                        "dry_run": true, "dialog": dialog })),
                )?;
                if !output::confirm_restore(&plan) {
                    eprintln!("restore cancelled; nothing changed");
                    return Ok(1);
                }
                // The daemon closes connections left idle while a person reads the plan.
                conn = connect()?;
            }
            let params = strip_nulls(json!({ "project": project, "id": id, "paths": paths,
                "dry_run": dry_run, "dialog": dialog }));
            let report = with_progress(&socket, &base, !cli.json, || conn.call("restore", params))?;
            say_resolved(out.json, &id, &report["restored_to"]);
            out.restore(&report);
            let skipped = report
                .get("skipped")
                .and_then(Value::as_array)
                .is_some_and(|s| !s.is_empty());
            return Ok(if skipped { 2 } else { 0 });
        }
        Command::Undo {
            dialog,
            dry_run,
            yes,
        } => {
            let socket = paths.socket.clone();
            let mut conn = connect()?;
            let params = |dry: bool| {
                strip_nulls(json!({ "project": project, "dialog": dialog, "dry_run": dry }))
            };
            if !yes && !dry_run && !cli.json && std::io::stdin().is_terminal() {
                let plan = conn.call("undo", params(true))?;
                if !output::confirm_restore(&plan) {
                    eprintln!("undo cancelled; nothing changed");
                    return Ok(1);
                }
                // The daemon closes connections left idle while a person reads the plan.
                conn = connect()?;
            }
            let report = with_progress(&socket, &base, !cli.json, || {
                conn.call("undo", params(dry_run))
            })?;
            out.restore(&report);
            return Ok(
                if report["skipped"].as_array().is_some_and(|s| !s.is_empty()) {
                    2
                } else {
                    0
                },
            );
        }
        Command::Dialog(DialogCommand::New { name, title }) => {
            let params = strip_nulls(json!({ "project": project, "dialog": name, "title": title }));
            out.dialog_new(&connect()?.call("dialog_new", params)?);
        }
        Command::Export {
            ids,
            patch,
            bundle,
            against,
            force,
        } => {
            if let Some(file) = bundle {
                let params = json!({ "project": project, "ids": ids,
                    "path": wire(&file_path(&base, &file))?, "force": force });
                let result = connect()?.call("export_bundle", params)?;
                let path = result["path"].as_str().unwrap_or("").to_string();
                out.value_or(
                    &result,
                    &format!("wrote {path} ({} objects)", result["objects"]),
                );
            } else {
                let [id] = ids.as_slice() else {
                    return Err(ClientError::Usage("--patch exports one checkpoint".into()));
                };
                debug_assert!(patch);
                let params =
                    strip_nulls(json!({ "project": project, "id": id, "against": against }));
                let result = connect()?.call("export_patch", params)?;
                if cli.json {
                    outln!("{result}");
                } else {
                    out!("{}", result["patch"].as_str().unwrap_or(""));
                }
            }
        }
        Command::Import { bundle, dialog } => {
            let params = strip_nulls(
                json!({ "project": project, "path": wire(&file_path(&base, &bundle))?, "dialog": dialog }),
            );
            out.imported(&connect()?.call("import_bundle", params)?);
        }
        Command::Tag { id, name } => {
            let result =
                connect()?.call("tag", json!({ "project": project, "id": id, "name": name }))?;
            out.value_or(
                &result,
                &format!("tagged {} as {name}", result["id"].as_str().unwrap_or("")),
            );
        }
        Command::Note { id, text } => {
            let result = connect()?.call(
                "note",
                json!({ "project": project, "id": id, "text": text }),
            )?;
            out.value_or(&result, result["notes"].as_str().unwrap_or(""));
        }
        Command::Dialog(DialogCommand::Fork { id, name }) => {
            let params = strip_nulls(json!({ "project": project, "id": id, "dialog": name }));
            out.dialog_new(&connect()?.call("dialog_fork", params)?);
        }
        Command::Dialog(DialogCommand::List) => {
            out.dialogs(&connect()?.call("dialog_list", json!({ "project": project }))?);
        }
        Command::Dialog(DialogCommand::Rm { name }) => {
            let result =
                connect()?.call("dialog_rm", json!({ "project": project, "dialog": name }))?;
            out.value_or(
                &result,
                &format!("dialog {name} removed (its content stays until gc)"),
            );
        }
        Command::Session { command, dialog } => {
            let base_params = |extra: Value| {
                let mut p = json!({ "project": project, "dialog": dialog });
                if let (Value::Object(p), Value::Object(e)) = (&mut p, extra) {
                    p.extend(e);
                }
                strip_nulls(p)
            };
            match command {
                SessionCommand::Status => {
                    out.session_status(&connect()?.call("session_status", base_params(json!({})))?);
                }
                SessionCommand::Approve { message } => {
                    let result = connect()?.call(
                        "session_approve",
                        base_params(json!({ "message": message })),
                    )?;
                    out.session_approved(&result);
                }
                SessionCommand::Reset { dry_run, yes } => {
                    let socket = paths.socket.clone();
                    let mut conn = connect()?;
                    if !yes && !dry_run && !cli.json && std::io::stdin().is_terminal() {
                        let plan =
                            conn.call("session_reset", base_params(json!({ "dry_run": true })))?;
                        if !output::confirm_restore(&plan) {
                            eprintln!("reset cancelled; nothing changed");
                            return Ok(1);
                        }
                        // The daemon closes connections left idle while a person reads the plan.
                        conn = connect()?;
                    }
                    let params = base_params(json!({ "dry_run": dry_run }));
                    let report = with_progress(&socket, &base, !cli.json, || {
                        conn.call("session_reset", params)
                    })?;
                    out.restore(&report);
                    return Ok(
                        if report["skipped"].as_array().is_some_and(|s| !s.is_empty()) {
                            2
                        } else {
                            0
                        },
                    );
                }
            }
        }
        Command::Edit(EditCommand::Begin { paths }) => {
            let paths = wire_all(&base, &paths)?;
            let result =
                connect()?.call("edit_begin", json!({ "project": project, "paths": paths }))?;
            out.value_or(&result, result["token"].as_str().unwrap_or(""));
        }
        Command::Edit(EditCommand::Commit { token }) => {
            let result =
                connect()?.call("edit_commit", json!({ "project": project, "token": token }))?;
            out.value_or(&result, "committed");
        }
        Command::Edit(EditCommand::Abort { token }) => {
            let result =
                connect()?.call("edit_abort", json!({ "project": project, "token": token }))?;
            out.edit_aborted(&result);
            return Ok(
                if result["skipped"].as_array().is_some_and(|s| !s.is_empty()) {
                    2
                } else {
                    0
                },
            );
        }
        Command::Dialog(DialogCommand::Keep { name, count, .. }) => {
            let result = connect()?.call(
                "dialog_keep",
                json!({ "project": project, "dialog": name, "keep": count }),
            )?;
            out.value_or(
                &result,
                &format!("dialog {name} keeps {} checkpoints", result["keep"]),
            );
        }
        Command::Prune {
            keep,
            dialog,
            gc,
            dry_run,
        } => {
            let params = strip_nulls(json!({ "project": project, "keep": keep,
                "dialog": dialog, "gc": gc, "dry_run": dry_run }));
            let socket = paths.socket.clone();
            let mut conn = connect()?;
            let result = with_progress(&socket, &base, !cli.json, || conn.call("prune", params))?;
            out.pruned(&result);
        }
        Command::Gc => {
            let socket = paths.socket.clone();
            let mut conn = connect()?;
            let params = json!({ "project": project });
            let result = with_progress(&socket, &base, !cli.json, || conn.call("gc", params))?;
            out.gc(&result);
        }
        Command::Events { diffs } => {
            let mut conn = connect()?;
            conn.call("subscribe", json!({ "project": project, "diffs": diffs }))?;
            let mut stdout = std::io::stdout().lock();
            while let Some(event) = conn.next_notification()? {
                let line = serde_json::to_string(&event).expect("values serialise");
                if writeln!(stdout, "{line}")
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    return Ok(0); // The reader went away (e.g. `| head`).
                }
                if event["event"] == "error" {
                    return Ok(1);
                }
            }
            return Ok(0);
        }
        Command::Status => out.status(&connect()?.call("status", json!({}))?),
        Command::Verify => {
            let result = connect()?.call("verify", json!({ "project": project }))?;
            out.verify(&result);
            return Ok(if result["equal"] == true { 0 } else { 1 });
        }
        Command::Fsck { repair } => {
            let socket = paths.socket.clone();
            let mut conn = connect()?;
            let params = json!({ "project": project, "repair": repair });
            let report = with_progress(&socket, &base, !cli.json, || conn.call("fsck", params))?;
            out.fsck(&report);
            let damaged = report["unreadable_count"].as_u64().unwrap_or(0) > 0
                || report["damaged_packs"]
                    .as_array()
                    .is_some_and(|p| !p.is_empty());
            return Ok(if damaged && !repair { 1 } else { 0 });
        }
        Command::Rescan => {
            let result = connect()?.call("rescan", json!({ "project": project }))?;
            out.value_or(&result, "the next checkpoint verifies every file by stat");
        }
        Command::Shutdown => {
            let result = connect()?.call("shutdown", json!({}))?;
            out.value_or(&result, "ckptd is shutting down");
        }
    }
    Ok(0)
}

/// Runs `call`; if it takes longer than a second and stderr is a terminal, shows the daemon's
/// progress for the project containing `base` (polled on a second connection) meanwhile.
fn with_progress<T>(socket: &Path, base: &Path, enabled: bool, call: impl FnOnce() -> T) -> T {
    use std::sync::atomic::{AtomicBool, Ordering};
    if !enabled || !std::io::stderr().is_terminal() {
        return call();
    }
    let finished = std::sync::Arc::new(AtomicBool::new(false));
    let watcher = {
        let finished = finished.clone();
        let socket = socket.to_path_buf();
        let base = base.to_path_buf();
        std::thread::spawn(move || {
            let wait = |ms: u64| {
                for _ in 0..ms / 20 {
                    if finished.load(Ordering::Relaxed) {
                        return false;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                !finished.load(Ordering::Relaxed)
            };
            if !wait(1000) {
                return;
            }
            let Ok(mut conn) = Connection::connect(&socket) else {
                return;
            };
            let mut drew = false;
            loop {
                if let Ok(status) = conn.call("status", json!({})) {
                    let line = status["projects"].as_array().and_then(|ps| {
                        ps.iter()
                            .find(|p| p["root"].as_str().is_some_and(|r| base.starts_with(r)))
                            .and_then(|p| {
                                let pr = &p["progress"];
                                let (done, total) = (pr["done"].as_u64()?, pr["total"].as_u64()?);
                                Some(match pr["phase"].as_str()? {
                                    "reading" => format!("reading files {done}/{total}"),
                                    phase => format!("{phase} folders: {done}"),
                                })
                            })
                    });
                    if let Some(line) = line {
                        eprint!("\r\x1b[K{line}");
                        drew = true;
                    }
                }
                if !wait(200) {
                    break;
                }
            }
            if drew {
                eprint!("\r\x1b[K");
            }
        })
    };
    let result = call();
    finished.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    result
}

/// Tells a person which checkpoint a name (`@~1`, a tag, `#4`) stood for, on stderr; a hex
/// prefix of the id needs no telling, and `--json` carries the full id anyway.
fn say_resolved(json: bool, name: &str, id: &Value) {
    let Some(id) = id.as_str() else { return };
    if json || id.starts_with(&name.trim().to_ascii_lowercase()) {
        return;
    }
    eprintln!("{name} is {}", &id[..id.len().min(12)]);
}

/// A path as the protocol carries it (JSON text): one that is not UTF-8 is a clear error, never
/// a panic, and never sent mangled (a lossy name could restore or diff the wrong file).
fn wire(path: &Path) -> Result<String, ClientError> {
    path.to_str().map(str::to_string).ok_or_else(|| {
        ClientError::Usage(format!(
            "the path {:?} is not valid UTF-8, which ckpt cannot send to the daemon yet",
            path.as_os_str()
        ))
    })
}

/// `paths` made absolute against `base`, as the protocol carries them.
fn wire_all(base: &Path, paths: &[PathBuf]) -> Result<Vec<String>, ClientError> {
    paths.iter().map(|p| wire(&base.join(p))).collect()
}

fn base_dir(dir: Option<&Path>) -> Result<PathBuf, ClientError> {
    let cwd = std::env::current_dir()
        .map_err(|e| ClientError::Usage(format!("no current directory: {e}")))?;
    Ok(match dir {
        Some(d) => cwd.join(d),
        None => cwd,
    })
}

fn resolve(base: &Path, dir: Option<PathBuf>) -> PathBuf {
    match dir {
        Some(d) => base.join(d),
        None => base.to_path_buf(),
    }
}

/// `file` made absolute against `base`, with its folder resolved (`..`, symlinks) when it
/// exists, so the daemon and the messages see a clean path.
fn file_path(base: &Path, file: &Path) -> PathBuf {
    let joined = base.join(file);
    match (joined.parent(), joined.file_name()) {
        (Some(dir), Some(name)) => match dir.canonicalize() {
            Ok(dir) => dir.join(name),
            Err(_) => joined,
        },
        _ => joined.canonicalize().unwrap_or(joined),
    }
}

fn read_meta(source: &str) -> Result<Value, ClientError> {
    let text = if source == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| ClientError::Usage(format!("cannot read metadata from stdin: {e}")))?;
        s
    } else {
        std::fs::read_to_string(source)
            .map_err(|e| ClientError::Usage(format!("cannot read metadata file {source}: {e}")))?
    };
    serde_json::from_str(&text)
        .map_err(|e| ClientError::Usage(format!("metadata is not valid JSON: {e}")))
}

fn strip_nulls(mut value: Value) -> Value {
    if let Value::Object(map) = &mut value {
        map.retain(|_, v| !v.is_null());
    }
    value
}

/// A hint printed under an error, by error kind.
pub(super) fn hint(err: &ClientError) -> Option<&'static str> {
    match err {
        ClientError::NoDaemon { .. } => Some("start it with `ckptd`, or run without --no-spawn"),
        ClientError::Rpc(e) => match e.kind()? {
            ErrorCode::NotAProject => {
                Some("run `ckpt watch` in the project's root first, or pass -C DIR")
            }
            ErrorCode::UnknownCheckpoint | ErrorCode::AmbiguousCheckpoint => {
                Some("`ckpt list` shows the checkpoint ids")
            }
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn flush() {
    let _ = std::io::stdout().flush();
}
