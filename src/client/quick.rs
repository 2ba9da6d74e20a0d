//! The command lines an agent runs on every prompt, parsed without building the whole command
//! tree: `ckpt hook AGENT` and `ckpt checkpoint`, with the simple options they take.
//!
//! Building clap's tree of every command and option costs a process about 0.5 ms and 120 page
//! faults, a quarter of a hook's start: it matters where a prompt waits, nowhere else (a
//! restore the user asked for is parsed by clap, as every other command is). [`parse`] recognises only what it can parse exactly
//! as clap would (a test compares the two on every shape it accepts) and gives up on anything
//! else (`--help`, an unknown or repeated option, a value that starts with `-`, a bundle of
//! short flags, an argument that is not UTF-8): clap then parses the line as always, errors
//! and help included.

use std::ffi::OsString;

use super::agents::agent::ALL as AGENTS;
use super::cli::{Cli, Command, HookArgs};
use super::commands::checkpoint;

/// The command line `args` (without the program name) as clap would parse it, or `None` when
/// it is not one of the simple shapes.
pub fn parse(args: &[OsString]) -> Option<Cli> {
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let mut it = Words::new(&args);
    let mut cli = Cli {
        json: false,
        socket: None,
        no_spawn: false,
        verbose: false,
        quiet: false,
        dir: None,
        // Replaced below: every accepted line names its command.
        command: Command::Projects,
    };
    let mut command = None;
    let mut checkpoint = checkpoint::Args {
        message: None,
        dialog: None,
        message_id: None,
        meta: None,
        prompt: false,
    };
    while let Some(word) = it.next() {
        let (name, attached) = match word.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (word, None),
        };
        // Global options may come before or after the command.
        match name {
            "--json" if attached.is_none() => set_flag(&mut cli.json)?,
            "--no-spawn" if attached.is_none() => set_flag(&mut cli.no_spawn)?,
            "-v" | "--verbose" if attached.is_none() => set_flag(&mut cli.verbose)?,
            "-q" | "--quiet" if attached.is_none() => set_flag(&mut cli.quiet)?,
            "--socket" => set_value(&mut cli.socket, it.value(attached)?.into())?,
            "-C" if attached.is_none() => set_value(&mut cli.dir, it.value(None)?.into())?,
            "-m" | "--message" if command == Some("checkpoint") => {
                set_value(&mut checkpoint.message, it.value(attached)?.into())?
            }
            "--dialog" if command == Some("checkpoint") => {
                set_value(&mut checkpoint.dialog, it.value(attached)?.into())?
            }
            "--message-id" if command == Some("checkpoint") => {
                set_value(&mut checkpoint.message_id, it.value(attached)?.into())?
            }
            "--meta" if command == Some("checkpoint") => {
                set_value(&mut checkpoint.meta, it.value(attached)?.into())?
            }
            "--prompt" if command == Some("checkpoint") && attached.is_none() => {
                set_flag(&mut checkpoint.prompt)?
            }
            "checkpoint" if command.is_none() => command = Some("checkpoint"),
            "hook" if command.is_none() => {
                let agent = it.next()?;
                let agent = AGENTS.into_iter().find(|a| a.name() == agent)?;
                cli.command = Command::Hook(HookArgs {
                    command: None,
                    agent: Some(agent),
                });
                command = Some("hook");
            }
            _ => return None,
        }
    }
    if cli.verbose && cli.quiet {
        return None; // clap's error
    }
    cli.command = match command? {
        "checkpoint" => Command::Checkpoint(checkpoint),
        _ => cli.command,
    };
    Some(cli)
}

/// The words of a command line, one at a time.
struct Words<'a> {
    args: &'a [&'a str],
    at: usize,
}

impl<'a> Words<'a> {
    fn new(args: &'a [&'a str]) -> Self {
        Words { args, at: 0 }
    }

    fn next(&mut self) -> Option<&'a str> {
        let word = self.args.get(self.at)?;
        self.at += 1;
        Some(word)
    }

    /// An option's value: attached (`--opt=value`), else the next word; `None` gives up (no
    /// value, or one clap would take for an option).
    fn value(&mut self, attached: Option<&'a str>) -> Option<&'a str> {
        let value = match attached {
            Some(v) => v,
            None => self.next()?,
        };
        (!value.starts_with('-')).then_some(value)
    }
}

/// A flag given twice is clap's error.
fn set_flag(flag: &mut bool) -> Option<()> {
    (!std::mem::replace(flag, true)).then_some(())
}

/// An option given twice is clap's error.
fn set_value<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn words(line: &str) -> Vec<OsString> {
        line.split(' ')
            .filter(|w| !w.is_empty())
            .map(OsString::from)
            .collect()
    }

    /// What clap makes of `line`, or its error kind.
    fn by_clap(line: &str) -> Result<String, String> {
        let mut argv = vec![OsString::from("ckpt")];
        argv.extend(words(line));
        Cli::try_parse_from(argv)
            .map(|cli| format!("{cli:?}"))
            .map_err(|e| format!("{:?}", e.kind()))
    }

    #[test]
    fn every_line_it_parses_is_parsed_as_clap_does() {
        let accepted = [
            "hook claude-code",
            "hook gemini",
            "hook codex",
            "hook cursor",
            "hook copilot",
            "--no-spawn --socket /run/s.sock hook claude-code",
            "--socket=/run/s.sock --json hook gemini",
            "hook codex --quiet",
            "-C /tmp/p hook cursor -v",
            "checkpoint",
            "checkpoint -m hello",
            "checkpoint --message=hello --dialog d1 --message-id m-7",
            "checkpoint --meta meta.json -C /tmp/p",
            "--no-spawn --quiet --socket /s checkpoint -C /p",
            "-q checkpoint --dialog=x -m y --json",
            "checkpoint --message= ",
            "checkpoint --prompt -m hi",
            "--json checkpoint -m hi --prompt --dialog s",
        ];
        for line in accepted {
            let ours = parse(&words(line)).unwrap_or_else(|| panic!("not parsed: {line}"));
            assert_eq!(Ok(format!("{ours:?}")), by_clap(line), "{line}");
        }
    }

    #[test]
    fn everything_else_is_left_to_clap() {
        let refused = [
            "",
            "--help",
            "hook --help",
            "checkpoint -h",
            "--version",
            "hook",
            "hook nobody",
            "hook install claude-code",
            "hook claude-code extra",
            "checkpoint -m",
            "checkpoint -m -x",
            "checkpoint -mhello",
            "checkpoint -m a -m b",
            "checkpoint --kind x",
            "checkpoint extra",
            "--json --json hook gemini",
            "-qv hook gemini",
            "-q -v checkpoint",
            "--socket a --socket b checkpoint",
            "--socket hook claude-code",
            "-m x checkpoint",
            "hook claude-code -m x",
            "checkpoint -- -m",
            "checkpoint --prompt --prompt",
            "checkpoint --prompt=yes",
            "list",
            "restore",
            "restore -y",
            "restore a b",
            "restore a -- src/",
            "restore -- a",
            "restore a --yes --yes",
            "restore a -yq",
            "restore a --yes=1",
            "restore a --dialog",
            "restore a --dialog -x",
            "restore a --code",
            "restore a -m x",
            "restore --help",
            "--dialog d restore a",
            "undo a",
            "undo --both",
            "undo -h",
            "rewind 1 2",
            "rewind -1",
            "rewind --code --both",
            "rewind --code --conversation",
            "rewind --conversation --both",
            "rewind --both --both",
            "checkpoint restore",
            "restore a checkpoint",
            "--json=1 checkpoint",
            "-C=/p checkpoint",
            "restore 3f2a9c1b",
            "restore --yes 3f2a9c1b",
            "--no-spawn --quiet --socket /s restore --yes -C /p 3f2a9c1b",
            "restore @~2 -y --dialog=d1",
            "restore #12 --dry-run --json",
            "restore latest --dialog d -q",
            "undo",
            "undo --yes",
            "undo -y --dialog d --dry-run",
            "-C /p undo --json",
            "rewind",
            "rewind 3",
            "rewind --yes",
            "rewind 2 --code -y",
            "rewind --conversation --dialog d",
            "rewind @~1 --both --dry-run",
            "--quiet rewind -y 1",
        ];
        for line in refused {
            assert!(
                parse(&words(line)).is_none(),
                "parsed, but clap should: {line}"
            );
        }
        // Not UTF-8.
        let odd = std::os::unix::ffi::OsStringExt::from_vec(b"\xff".to_vec());
        assert!(parse(&[OsString::from("checkpoint"), OsString::from("-m"), odd]).is_none());
    }
}
