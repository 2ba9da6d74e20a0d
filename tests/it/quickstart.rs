//! The README's quick start, run as written from a fresh `HOME`: its own install script, the
//! real Claude Code (offline, against the stand-in model), and `rewind` and `undo` on a terminal
//! that answers their question. Ignored by default (it builds the release binaries and needs
//! the agents); `.ci/run` runs it after the packages are built.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::harness::*;

/// The commands of the README's quick start block, comments left out.
fn quick_start() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let block = readme
        .split("<!-- quick start")
        .nth(1)
        .and_then(|rest| rest.split("<!-- end of quick start -->").next())
        .expect("the README has a quick start block");
    block
        .lines()
        .skip_while(|l| !l.starts_with("```sh"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(|l| l.split("  #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
#[ignore = "builds the release binaries and needs the agents (tests/agents/install.sh); .ci/run runs it"]
fn the_readmes_quick_start_works_as_written() {
    let lines = quick_start();
    assert!(lines.len() >= 5, "{lines:?}");
    let env = TestEnv::without_daemon("");
    let home = env.home.join("home");
    let bin = env.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // The agent as a user has it: their `claude`, here the pinned one talking to the stand-in.
    let project = home.join("code/your-project");
    std::fs::create_dir_all(&project).unwrap();
    crate::agents::git_in_worktree(&project, &["init", "-q"]);
    write(&project, "old.txt", "to be deleted by the agent\n");
    write(&project, "notes.txt", "notes\n");
    // The tools the user let the agent use without asking.
    write(
        &project,
        ".claude/settings.json",
        r#"{"permissions": {"defaultMode": "acceptEdits", "allow": ["Bash"]}}"#,
    );
    let log = env.home.join("model.log");
    let (mut server, port) = crate::agents::model("anthropic.py", &project, &log);
    let claude = crate::agents::agent_bin("claude", "claude");
    std::fs::write(
        bin.join("claude"),
        format!(
            "#!/bin/sh\nexport ANTHROPIC_BASE_URL=http://127.0.0.1:{port} ANTHROPIC_API_KEY=sk-ant-offline \
             DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\nexec {} \"$@\"\n",
            claude.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("claude"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());
    let run = |cwd: &Path, line: &str, answer: bool| {
        let mut cmd = match answer {
            // On a terminal, answering the question asked.
            true => {
                let mut c = Command::new("script");
                c.args(["-qec", line, "/dev/null"]);
                c
            }
            false => {
                let mut c = Command::new("bash");
                c.args(["-ec", line]);
                c
            }
        };
        env.env(&mut cmd);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![bin.clone()];
        dirs.extend(std::env::split_paths(&path));
        let out = cmd
            .current_dir(cwd)
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .env(
                "CARGO_HOME",
                std::env::var_os("CARGO_HOME").unwrap_or(real_home.join(".cargo").into()),
            )
            .env(
                "RUSTUP_HOME",
                std::env::var_os("RUSTUP_HOME").unwrap_or(real_home.join(".rustup").into()),
            )
            .env("CKPT_BIN_DIR", &bin)
            .stdin(match answer {
                true => Stdio::piped(),
                false => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = std::io::Write::write_all(&mut stdin, b"y\n");
                }
                child.wait_with_output()
            })
            .unwrap();
        assert!(
            out.status.success(),
            "`{line}` failed: {}\n{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    };
    let mut cwd = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut said = Vec::new();
    for line in &lines {
        if let Some(dir) = line.strip_prefix("cd ") {
            cwd = PathBuf::from(dir.replacen('~', home.to_str().unwrap(), 1));
            continue;
        }
        let asks = line.starts_with("ckpt rewind") || line.starts_with("ckpt undo");
        said.push((line.clone(), run(&cwd, line, asks)));
        if line.starts_with("claude") {
            assert!(
                project.join("written-by-agent.txt").exists(),
                "the agent's turn did nothing: {said:?}\nmodel: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if line.starts_with("ckpt rewind") {
            assert!(!project.join("written-by-agent.txt").exists(), "{said:?}");
            assert!(project.join("old.txt").exists(), "{said:?}");
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(cwd, project, "the quick start works in the project");
    let text = |start: &str| {
        said.iter()
            .find(|(l, _)| l.starts_with(start))
            .map(|(_, out)| out.clone())
            .unwrap_or_default()
    };
    assert!(
        text("ckpt log").contains("add a cache to the parser"),
        "{said:?}"
    );
    // The first prompt of a session: nothing came before it, so the rewind says how to start anew.
    assert!(
        text("ckpt rewind").contains("rewinding past: add a cache to the parser"),
        "{said:?}"
    );
    assert!(text("ckpt undo").contains("claude --resume"), "{said:?}");
    // The undo brought the agent's turn back.
    assert!(project.join("written-by-agent.txt").exists(), "{said:?}");
    env.kill_spawned_daemon();
}
