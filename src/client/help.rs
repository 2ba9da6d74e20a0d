//! The command line's own documentation: `ckpt --help` with its commands grouped by what they
//! are for (everyday ones first), and the man pages, whose synopses name each option's value.

use std::path::{Path, PathBuf};

use super::ClientError;

/// The commands by what they are for, in the order `--help` lists them.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "Every day",
        &[
            "log",
            "diff",
            "rewind",
            "undo",
            "restore",
            "list",
            "show",
            "blame",
            "checkpoint",
            "status",
        ],
    ),
    (
        "Setting up",
        &[
            "hook", "mcp", "watch", "unwatch", "projects", "config", "ui",
        ],
    ),
    (
        "Sharing and parallel attempts",
        &["push", "fetch", "remote", "fork", "export", "import"],
    ),
    (
        "Naming and sessions",
        &["tag", "note", "dialog", "session", "edit", "events"],
    ),
    (
        "Upkeep",
        &[
            "prune", "gc", "verify", "fsck", "rescan", "forget", "reload", "shutdown",
        ],
    ),
    ("Shell", &["completions", "man", "help"]),
];

/// `command` (the command line as clap parses it), its help listing the commands by
/// [`GROUPS`].
pub fn grouped(command: clap::Command) -> clap::Command {
    let plain = command.clone();
    let mut command = command;
    command.build();
    let subcommands: Vec<(String, String)> = command
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| {
            let about = s.get_about().map(|a| a.to_string()).unwrap_or_default();
            (s.get_name().to_string(), about)
        })
        .collect();
    let width = subcommands.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let line = |(name, about): &(String, String)| format!("  {name:<width$}  {about}\n");
    let mut listed = String::new();
    for (heading, names) in GROUPS {
        let lines: String = names
            .iter()
            .filter_map(|n| subcommands.iter().find(|(s, _)| s == n))
            .map(line)
            .collect();
        if !lines.is_empty() {
            listed.push_str(&format!("{heading}:\n{lines}\n"));
        }
    }
    let rest: String = subcommands
        .iter()
        .filter(|(n, _)| !GROUPS.iter().any(|(_, names)| names.contains(&n.as_str())))
        .map(line)
        .collect();
    if !rest.is_empty() {
        listed.push_str(&format!("More:\n{rest}\n"));
    }
    let template = format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{listed}Options:\n{{options}}{{after-help}}"
    );
    plain.help_template(template)
}

/// Man pages generated from the argument definitions: one for `ckpt` and one per command,
/// into `dir`, or `ckpt`'s on stdout.
pub fn man(command: clap::Command, dir: Option<PathBuf>) -> Result<i32, ClientError> {
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let Some(dir) = dir else {
        out!("{}", String::from_utf8_lossy(&page(&command)?));
        return Ok(0);
    };
    std::fs::create_dir_all(&dir)?;
    write_pages(&command, &dir)?;
    Ok(0)
}

fn write_pages(command: &clap::Command, dir: &Path) -> Result<(), ClientError> {
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    let name = clap_mangen::Man::new(command.clone()).get_filename();
    std::fs::write(dir.join(name), page(command)?)?;
    Ok(())
}

/// One page, its synopsis naming what each option takes (`--dialog D`, `-C DIR`), which
/// clap_mangen leaves out.
fn page(command: &clap::Command) -> Result<Vec<u8>, ClientError> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut page)?;
    let mut text = String::from_utf8_lossy(&page).into_owned();
    let Some(start) = text.find(".SH SYNOPSIS\n") else {
        return Ok(page);
    };
    let start = start + ".SH SYNOPSIS\n".len();
    let end = text[start..].find('\n').map_or(text.len(), |e| start + e);
    let mut synopsis = text[start..end].to_string();
    for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
        let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
        let Some(value) = arg.get_value_names().and_then(|v| v.first()) else {
            continue;
        };
        if !takes_value {
            continue;
        }
        let value = format!(" \\fI{value}\\fR");
        let spelled = |s: String| s.replace('-', "\\-");
        let (from, to) = match (arg.get_short(), arg.get_long()) {
            (_, Some(long)) => {
                let long = format!("\\fB{}\\fR", spelled(format!("--{long}")));
                (format!("{long}]"), format!("{long}{value}]"))
            }
            (Some(short), None) => (
                format!("\\fB{} \\fR]", spelled(format!("-{short}"))),
                format!("\\fB{}\\fR{value}]", spelled(format!("-{short}"))),
            ),
            (None, None) => continue,
        };
        synopsis = synopsis.replacen(&from, &to, 1);
    }
    text.replace_range(start..end, &synopsis);
    Ok(text.into_bytes())
}
