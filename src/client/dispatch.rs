//! From a parsed command line to the command file that runs it: the configuration loaded (a
//! broken file is a warning, except for `config check`), the context made, one arm per command.

use super::cli::{
    Cli, Command, ConfigCommand, DialogCommand, EditCommand, HookArgs, HookCommand, McpArgs,
    McpCommand, SessionCommand,
};
use super::commands::{self as cmd, Ctx};
use super::output::Out;
use super::ClientError;
use crate::config::{Config, Paths};

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
        Command::Revert(args) => cmd::revert::revert(ctx, args),
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
            } => super::agents::install::install(ctx, agent, user, git_exclude),
            HookCommand::Uninstall { agent, user } => {
                super::agents::install::uninstall(ctx, agent, user)
            }
            HookCommand::Trust { agent, user } => {
                super::agents::codex_hooks::trust(ctx, agent, user)
            }
            HookCommand::Status => super::agents::install::status(ctx),
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
        Command::Ui(args) => super::ui::run(ctx, args),
        Command::Remote(command) => cmd::share::remote(ctx, command),
        Command::Push(mut args) => {
            args.with_metadata |= config.push_metadata == Some(true);
            cmd::share::push(ctx, args, config.push_as.clone())
        }
        Command::Fetch { name } => cmd::share::fetch(ctx, name),
        Command::Mcp(McpArgs {
            command: None,
            allow_restore,
        }) => super::mcp::serve(ctx, allow_restore),
        Command::Mcp(McpArgs {
            command: Some(command),
            ..
        }) => match command {
            McpCommand::Install {
                agent,
                allow_restore,
            } => super::mcp::install::install(ctx, agent, allow_restore),
            McpCommand::Uninstall { agent } => super::mcp::install::uninstall(ctx, agent),
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
            steps,
        } => cmd::log::log(ctx, dialog, limit, paths, all_worktrees, steps),
        Command::Blame(args) => cmd::blame::blame(ctx, args),
    }
}
