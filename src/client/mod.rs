//! The `ckpt` command line: a thin JSON-RPC client of `ckptd`.
//!
//! [`Connection`] speaks the line protocol over the local socket (typed: [`Connection::call`]
//! takes a method's params and returns its result, the same types the daemon encodes) and can
//! start a daemon in the background when none answers. [`cli`] parses arguments; each command
//! lives in a file of `commands` and renders typed values through `output`, for people
//! (compact, aligned) or for scripts (`--json`).

/// `print!` for the client's standard output: a reader that went away (`ckpt diff | head`,
/// quitting a pager) ends the client quietly, as git does, instead of a panic.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::client::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` for the client's standard output; see [`out!`].
macro_rules! outln {
    () => {
        $crate::client::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::client::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub mod agents;
pub mod cli;
mod commands;
pub(crate) mod connection;
mod dispatch;
mod error;
mod git;
mod help;
pub mod mcp;
mod output;
mod quick;
pub mod ui;
pub mod unrecorded;

/// Writes to standard output; exits quietly (status 0) when the reader has gone away.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// Runs the command line and returns the process exit code: 0 ok, 1 error, 2 a restore that
/// completed but skipped files, 64 a usage error.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let parsed = match quick::parse(&args) {
        Some(cli) => Ok(cli),
        None => help::grouped(<cli::Cli as clap::CommandFactory>::command())
            .try_get_matches()
            .and_then(|m| <cli::Cli as clap::FromArgMatches>::from_arg_matches(&m)),
    };
    let cli = match parsed {
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
            return EXIT_USAGE;
        }
    };
    let json = cli.json;
    let hook = match &cli.command {
        cli::Command::Hook(cli::HookArgs {
            agent: Some(agent),
            command: None,
        }) => Some(*agent),
        _ => None,
    };
    let code = match dispatch::run(cli) {
        Ok(code) => code,
        // A hook never fails the agent's turn, whatever went wrong (a broken config file).
        Err(err) if hook.is_some() => {
            let agent = hook.expect("checked by the guard");
            eprintln!("ckpt hook {}: {err}", agent.name());
            commands::hook::answer(agent);
            0
        }
        Err(err) => {
            output::error(&err, json);
            err.exit_code()
        }
    };
    let _ = std::io::Write::flush(&mut std::io::stdout());
    output::finish_pager();
    code
}

pub use connection::{Closer, Connection, HANDSHAKE_TIMEOUT};
pub use error::{ClientError, EXIT_CONFIG, EXIT_USAGE};
