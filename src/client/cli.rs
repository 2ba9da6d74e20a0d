//! The command line: every command, its arguments and its help (clap). What each does is in
//! `commands`, reached through [`super::dispatch`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::commands as cmd;

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
    /// Take back exactly what one turn changed (ID: its prompt's checkpoint, or a step: what
    /// the turn did after it), line by line on today's files: other sessions' work and your
    /// own edits stay; what changed since is left and named. Undoable.
    Revert(cmd::revert::Args),
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
    Ui(super::ui::Args),
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
        /// Each turn's steps too: after each tool call, the tool and the files it named.
        #[arg(long)]
        steps: bool,
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
