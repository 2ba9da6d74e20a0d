//! Argument parsing, and the dispatch to the command files in `commands`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::commands::{self as cmd, Ctx};
use super::output::Out;
use super::ClientError;
use crate::config::{Config, Paths};

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
    /// Print no confirmations of what succeeded (what you asked to see, and errors, still are).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
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
        /// Also watch `/`, a folder of the system, your home folder itself, or a folder that
        /// holds it.
        #[arg(long)]
        force: bool,
        /// Also watch a folder that holds a watched project or lies inside one (each keeps its
        /// own history; a file belongs to the innermost project).
        #[arg(long)]
        nest: bool,
    },
    /// Stop watching a project; its store (its history) stays on disk.
    Unwatch {
        /// The project folder or a folder inside it (default: the current one).
        #[arg(id = "unwatch_dir", value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Delete a project's whole history (its store) and stop watching it; its files are never
    /// touched. Asks first on a terminal; elsewhere needs --yes.
    Forget {
        /// The project folder or a folder inside it, or the root of a project no longer
        /// watched (default: the current one).
        #[arg(id = "forget_dir", value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Do not ask.
        #[arg(short = 'y', long)]
        yes: bool,
        /// Only say what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
    /// List registered projects.
    Projects,
    /// Record a checkpoint of the project now.
    Checkpoint(cmd::checkpoint::Args),
    /// Show the timeline, newest first.
    List(cmd::list::Args),
    /// Export checkpoints as a git bundle (`--bundle FILE`), or one checkpoint's changes as a
    /// patch that `git apply` accepts (`--patch`, on stdout).
    Export(cmd::transfer::ExportArgs),
    /// Add the commits a git bundle names (from `ckpt export --bundle` or `git bundle create`)
    /// as checkpoints of kind `imported`, on dialog `imported` unless --dialog names one.
    Import {
        /// The bundle file to read.
        #[arg(long, value_name = "FILE")]
        bundle: PathBuf,
        /// The dialog to add the checkpoints to (default: `imported`).
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
    },
    /// Name a checkpoint (tagged checkpoints are always kept).
    Tag {
        /// The checkpoint (any name: id, tag, `@`…).
        id: String,
        /// The tag (letters, digits, `.`, `_`, `-`).
        name: String,
    },
    /// Attach a note to a checkpoint (searchable with `list --grep`).
    Note {
        /// The checkpoint (any name: id, tag, `@`…).
        id: String,
        /// The note.
        text: String,
    },
    /// One checkpoint: its counts, changes against its parent, and skipped files.
    Show(cmd::show::Args),
    /// Unified diff from checkpoint ID to ID2, or to the working tree.
    Diff(cmd::diff::Args),
    /// Make the project (or PATHs) equal to checkpoint ID; undoable.
    Restore(cmd::restore::Args),
    /// Undo the last restore (of DIALOG, or of any dialog): restore its undo checkpoint.
    Undo {
        /// Undo the last restore of this dialog (default: of any dialog).
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        #[command(flatten)]
        confirm: cmd::restore::Confirm,
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
        /// The dialog the session belongs to (default: `default`).
        #[arg(long, value_name = "D", global = true)]
        dialog: Option<String>,
    },
    /// Cut old checkpoints out of the timelines (kept: the newest N of each active session,
    /// approved states, tagged and annotated ones, the last restore and its undo).
    Prune(cmd::maintenance::PruneArgs),
    /// Remove objects no checkpoint reaches and pack the rest into one pack.
    Gc,
    /// Stream the project's events, one JSON object a line, until interrupted.
    Events {
        /// Include unified diffs of small text files in `file_changed` events.
        #[arg(long)]
        diffs: bool,
    },
    /// Daemon health and projects, and the prompts a hook could not record.
    Status {
        /// Then clear the list of prompts not recorded (once you have seen why).
        #[arg(long)]
        dismiss: bool,
    },
    /// An agent's prompt hook (reads the hook's JSON on stdin), or manage the agents' hooks.
    Hook(HookArgs),
    /// Undo the agent's last turn (or last N): restore the checkpoint taken when that prompt
    /// arrived; undoable like any restore.
    Rewind(cmd::rewind::Args),
    /// A parallel attempt: a new folder (a git worktree when the project is a repository) with
    /// the files as they were at a checkpoint, and the agent's conversation forked to just
    /// before that prompt.
    Fork(cmd::fork::Args),
    /// An MCP server on stdio for the project of the current folder (agents start it), or
    /// `install|uninstall AGENT` to register it in an agent's configuration.
    Mcp(McpArgs),
    /// A local page to browse the timeline, compare checkpoints, restore and undo: serves it on
    /// 127.0.0.1 (the first line printed is its URL, with a token) and opens the browser.
    Ui(cmd::ui::Args),
    /// Remotes to share checkpoints through: `add NAME URL`, `list`, `remove NAME`.
    #[command(subcommand)]
    Remote(cmd::share::RemoteCommand),
    /// Send your checkpoints to a remote, under `refs/ckpt/<you>/` (never branches or tags);
    /// prompts are scanned for secrets, the agents' metadata stays here unless asked for.
    Push(cmd::share::PushArgs),
    /// Bring others' checkpoints from a remote (every remote when none is named); `ckpt list
    /// --all` shows them, and show, diff and restore take their ids.
    Fetch {
        /// The remote (default: every remote of the project).
        name: Option<String>,
    },
    /// Re-read the daemon's configuration file (as SIGHUP does).
    Reload,
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (ckpt.1 and one per command) into DIR, or print ckpt.1.
    Man { dir: Option<PathBuf> },
    /// The configuration: `check [FILE]` validates it and shows what is in effect.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The prompts recorded, newest first.
    Log {
        /// Only the prompts of this dialog.
        #[arg(long, value_name = "D")]
        dialog: Option<String>,
        /// Show at most N prompts.
        #[arg(short = 'n', long, value_name = "N", default_value_t = 20)]
        limit: usize,
        /// Only the prompts whose turns changed these paths, after `--`.
        #[arg(last = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// One timeline across every watched worktree of this git repository.
        #[arg(long)]
        all_worktrees: bool,
    },
    /// For each line of a file as it is now, the prompt whose turn wrote it.
    Blame(cmd::blame::Args),
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
pub enum ConfigCommand {
    /// Validate FILE (default: the configuration file ckptd reads) and print the settings in
    /// effect; exit 78 when it cannot be used.
    Check { file: Option<PathBuf> },
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HookArgs {
    /// install, uninstall or status.
    #[command(subcommand)]
    pub command: Option<HookCommand>,
    /// Run as AGENT's prompt hook: record the checkpoint of the prompt on stdin.
    #[arg(value_enum)]
    pub agent: Option<cmd::hook::Agent>,
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Add ckpt's hook to AGENT's settings (the project's, or yours with --user).
    Install {
        /// The agent whose settings get the hook.
        #[arg(value_enum)]
        agent: cmd::hook::Agent,
        /// The user-level settings instead of the project's.
        #[arg(long)]
        user: bool,
        /// Also keep the settings file out of `git status` (`.git/info/exclude`): it names
        /// this machine's ckpt.
        #[arg(long, conflicts_with = "user")]
        git_exclude: bool,
    },
    /// Remove ckpt's hook (only ckpt's) from AGENT's settings.
    Uninstall {
        /// The agent whose settings lose ckpt's hook.
        #[arg(value_enum)]
        agent: cmd::hook::Agent,
        /// The user-level settings instead of the project's.
        #[arg(long)]
        user: bool,
    },
    /// Trust ckpt's installed hook in Codex, as Codex's `/hooks` does (Codex runs a hook only
    /// once it is trusted).
    Trust {
        /// The agent (only Codex asks for trust).
        #[arg(value_enum)]
        agent: cmd::hook::Agent,
        /// The hook in the user-level settings instead of the project's.
        #[arg(long)]
        user: bool,
    },
    /// Where a ckpt hook is installed, per agent.
    Status,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// Offer the `restore` tool (a plan until a call confirms it; once per user prompt).
    #[arg(long)]
    pub allow_restore: bool,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Register `ckpt mcp` in AGENT's configuration for this project, as the agent's own
    /// `mcp add` does.
    Install {
        #[arg(value_enum)]
        agent: cmd::hook::Agent,
        /// Let the agent restore files (it gets a plan first; the user confirms).
        #[arg(long)]
        allow_restore: bool,
    },
    /// Remove `ckpt mcp` from AGENT's configuration for this project.
    Uninstall {
        #[arg(value_enum)]
        agent: cmd::hook::Agent,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// The active session, whether files differ from the approved state, the last approval.
    Status,
    /// Record the files as they are now as the approved state and start a new session.
    Approve {
        /// What the approved state is (kept as the checkpoint's label).
        #[arg(short = 'm', long = "message", value_name = "TEXT")]
        message: Option<String>,
    },
    /// Return the files to the approved state (undoable) and start a new session.
    Reset {
        #[command(flatten)]
        confirm: cmd::restore::Confirm,
    },
}

#[derive(Debug, Subcommand)]
pub enum EditCommand {
    /// Save PATHs' current state (content, mode, or absence); prints a token.
    Begin {
        /// Files to save (relative to the current folder).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// The edit succeeded: drop the saved copy.
    Commit {
        /// The token `edit begin` printed.
        token: String,
    },
    /// The edit failed: put the saved paths back exactly.
    Abort {
        /// The token `edit begin` printed.
        token: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DialogCommand {
    /// Start a dialog (NAME, or one made up) with an initial checkpoint of the files as they are.
    New {
        /// The dialog's name (default: one made up from the time).
        name: Option<String>,
        /// A title, kept as the initial checkpoint's label.
        #[arg(short = 'm', long = "title", value_name = "TEXT")]
        title: Option<String>,
    },
    /// Dialogs with their checkpoint counts, last activity and titles.
    List,
    /// Start a dialog whose approved state is checkpoint ID (the files are not touched).
    Fork {
        /// The checkpoint the new dialog starts from (any name: id, tag, `@`…).
        id: String,
        /// The new dialog's name (default: one made up from the time).
        #[arg(long, value_name = "D")]
        name: Option<String>,
    },
    /// Forget a dialog's timeline (content shared with other dialogs stays).
    Rm {
        /// The dialog.
        name: String,
    },
    /// Set how many checkpoints NAME keeps in its active session (`--default`: the config's).
    Keep {
        /// The dialog.
        name: String,
        /// How many checkpoints it keeps in its active session.
        #[arg(required_unless_present = "default")]
        count: Option<usize>,
        /// Go back to the configured number.
        #[arg(long, conflicts_with = "count")]
        default: bool,
    },
}

// A dispatch table: one arm per command, each a call into `commands`.
pub(crate) fn run(cli: Cli) -> Result<i32, ClientError> {
    // `config check` reads the file it is asked about, even when the default one is broken.
    // Every other command needs only to find the daemon: a broken file is a warning.
    let (config, config_problem) = match cli.command {
        Command::Config(_) => (Config::default(), None),
        _ => Config::load_for_client(),
    };
    let config_problem = config_problem.map(|e| {
        // One line: a parse error's excerpt of the file is for `ckpt config check`.
        let e = e.to_string();
        let mut lines = e
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('|'));
        let first = lines.next().unwrap_or_default();
        let what = match lines.next_back() {
            Some(last) => format!("{first}: {last}"),
            None => first.to_string(),
        };
        format!(
            "{what}; a ckptd already running keeps the configuration it loaded, a new one \
             refuses to start (`ckpt config check` says what is wrong, `ckpt reload` applies \
             the fixed file)"
        )
    });
    let hook = matches!(cli.command, Command::Hook(HookArgs { agent: Some(_), .. }));
    if let Some(problem) = config_problem.as_ref().filter(|_| !hook) {
        eprintln!("warning: {problem}");
    }
    let paths = Paths::resolve(&config, cli.socket.as_deref())
        .map_err(|e| ClientError::Usage(e.to_string()))?;
    let cwd = std::env::current_dir()
        .map_err(|e| ClientError::Usage(format!("no current directory: {e}")))?;
    let ctx = Ctx {
        out: Out {
            json: cli.json,
            verbose: cli.verbose,
            quiet: cli.quiet,
        },
        paths,
        base: cli.dir.as_deref().map_or(cwd.clone(), |d| cwd.join(d)),
        // Starting a daemon only to stop it would be silly.
        spawn: !cli.no_spawn && !matches!(cli.command, Command::Shutdown),
        default_socket: cli.socket.is_none() && config.socket.is_none(),
        config_problem,
    };
    let ctx = &ctx;
    match cli.command {
        Command::Watch { dir, force, nest } => cmd::daemon::watch(ctx, dir, force, nest),
        Command::Unwatch { dir } => cmd::daemon::unwatch(ctx, dir),
        Command::Forget { dir, yes, dry_run } => cmd::daemon::forget(ctx, dir, yes, dry_run),
        Command::Projects => cmd::daemon::projects(ctx),
        Command::Status { dismiss } => cmd::daemon::status(ctx, dismiss),
        Command::Shutdown => cmd::daemon::shutdown(ctx),
        Command::Checkpoint(args) => cmd::checkpoint::run(ctx, args),
        Command::List(args) => cmd::list::run(ctx, args),
        Command::Show(args) => cmd::show::run(ctx, args),
        Command::Diff(args) => cmd::diff::run(ctx, args),
        Command::Restore(args) => cmd::restore::restore(ctx, args),
        Command::Undo { dialog, confirm } => cmd::restore::undo(ctx, dialog, confirm),
        Command::Export(args) => cmd::transfer::export(ctx, args),
        Command::Import { bundle, dialog } => cmd::transfer::import(ctx, bundle, dialog),
        Command::Tag { id, name } => cmd::annotate::tag(ctx, id, name),
        Command::Note { id, text } => cmd::annotate::note(ctx, id, text),
        Command::Dialog(DialogCommand::New { name, title }) => cmd::dialog::new(ctx, name, title),
        Command::Dialog(DialogCommand::Fork { id, name }) => cmd::dialog::fork(ctx, id, name),
        Command::Dialog(DialogCommand::List) => cmd::dialog::list(ctx),
        Command::Dialog(DialogCommand::Rm { name }) => cmd::dialog::rm(ctx, name),
        Command::Dialog(DialogCommand::Keep { name, count, .. }) => {
            cmd::dialog::keep(ctx, name, count)
        }
        Command::Session { command, dialog } => match command {
            SessionCommand::Status => cmd::session::status(ctx, dialog),
            SessionCommand::Approve { message } => cmd::session::approve(ctx, dialog, message),
            SessionCommand::Reset { confirm } => cmd::session::reset(ctx, dialog, confirm),
        },
        Command::Edit(EditCommand::Begin { paths }) => cmd::edit::begin(ctx, paths),
        Command::Edit(EditCommand::Commit { token }) => cmd::edit::commit(ctx, token),
        Command::Edit(EditCommand::Abort { token }) => cmd::edit::abort(ctx, token),
        Command::Prune(args) => cmd::maintenance::prune(ctx, args),
        Command::Gc => cmd::maintenance::gc(ctx),
        Command::Verify => cmd::maintenance::verify(ctx),
        Command::Fsck { repair } => cmd::maintenance::fsck(ctx, repair),
        Command::Rescan => cmd::maintenance::rescan(ctx),
        Command::Events { diffs } => cmd::events::run(ctx, diffs),
        Command::Hook(HookArgs {
            command: Some(command),
            ..
        }) => match command {
            HookCommand::Install {
                agent,
                user,
                git_exclude,
            } => cmd::hook::install::install(ctx, agent, user, git_exclude),
            HookCommand::Uninstall { agent, user } => {
                cmd::hook::install::uninstall(ctx, agent, user)
            }
            HookCommand::Trust { agent, user } => cmd::hook::install::trust(ctx, agent, user),
            HookCommand::Status => cmd::hook::install::status(ctx),
        },
        Command::Hook(HookArgs {
            agent: Some(agent), ..
        }) => cmd::hook::run(ctx, agent),
        Command::Hook(_) => Err(ClientError::Usage(
            "name an agent (`ckpt hook claude-code`) or a subcommand (install, uninstall, trust, \
             status)"
                .into(),
        )),
        Command::Rewind(args) => cmd::rewind::rewind(ctx, args),
        Command::Fork(args) => cmd::fork::fork(ctx, args),
        Command::Ui(args) => cmd::ui::run(ctx, args),
        Command::Remote(command) => cmd::share::remote(ctx, command),
        Command::Push(mut args) => {
            args.with_metadata |= config.push_metadata == Some(true);
            cmd::share::push(ctx, args, config.push_as.clone())
        }
        Command::Fetch { name } => cmd::share::fetch(ctx, name),
        Command::Mcp(McpArgs {
            command: None,
            allow_restore,
        }) => cmd::mcp::serve(ctx, allow_restore),
        Command::Mcp(McpArgs {
            command: Some(command),
            ..
        }) => match command {
            McpCommand::Install {
                agent,
                allow_restore,
            } => cmd::mcp::install::install(ctx, agent, allow_restore),
            McpCommand::Uninstall { agent } => cmd::mcp::install::uninstall(ctx, agent),
        },
        Command::Reload => cmd::daemon::reload(ctx),
        Command::Completions { .. } | Command::Man { .. } if ctx.out.json => {
            Err(ClientError::Usage(
                "`completions` and `man` print a script or a man page, not JSON: drop --json"
                    .into(),
            ))
        }
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "ckpt", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
            Ok(0)
        }
        Command::Man { dir } => super::help::man(<Cli as clap::CommandFactory>::command(), dir),
        Command::Config(ConfigCommand::Check { file }) => cmd::config::check(ctx, file),
        Command::Log {
            dialog,
            limit,
            paths,
            all_worktrees,
        } => cmd::log::log(ctx, dialog, limit, paths, all_worktrees),
        Command::Blame(args) => cmd::blame::blame(ctx, args),
    }
}
