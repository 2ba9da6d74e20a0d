//! What the client says, as a newcomer reads it: errors that name their real cause, exit codes
//! as documented, each error said once, `--help` in groups, man pages that name what options
//! take, and hook files edited without disturbing the user's own formatting.

use std::process::Command;

use crate::harness::*;

/// A broken `config.toml` and no daemon: the command says why the ckptd it started exited (not
/// to drop a --no-spawn it was never given), and exits 78.
#[test]
fn a_daemon_that_cannot_start_says_why() {
    let env = TestEnv::without_daemon("this is = not [toml\n");
    // Without --no-spawn: the command starts a ckptd, which refuses the file.
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let out = cmd.current_dir(env.proj()).arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("exited"), "{err}");
    assert!(err.contains("invalid config file"), "{err}");
    assert!(!err.contains("without --no-spawn"), "{err}");
    env.kill_spawned_daemon();
}

/// `ckpt reload` of an invalid file exits 78, the documented status of a configuration that
/// cannot be used; `config check` shows the `push_as` a push would use.
#[test]
fn reload_of_a_broken_file_exits_78_and_config_check_shows_the_real_push_as() {
    let env = TestEnv::new();
    let config = env.home.join("config/ckpt/config.toml");
    std::fs::write(&config, "keep = [oops\n").unwrap();
    let out = env.ckpt(&["reload"]);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    std::fs::write(&config, "").unwrap();
    let checked = env.json(&["config", "check"]);
    let who = checked["push_as"].as_str().unwrap();
    assert!(who.contains('@') && who != "user@host", "{checked}");
    env.assert_serving();
}

#[test]
fn a_failed_fetch_says_its_error_once() {
    let env = TestEnv::new();
    env.watch();
    let out = env.ckpt(&["remote", "add", "gone", "git://127.0.0.1:1/none.git"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.ckpt(&["fetch", "gone"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).matches("cannot fetch from gone").count(),
        1,
        "{}",
        stderr(&out)
    );
}

/// Prompts not recorded can be dismissed once seen; `forget` says the hooks are still there.
#[test]
fn unrecorded_prompts_are_dismissed_and_forget_names_the_hooks_left() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    // A prompt from the home folder itself, which the hook never makes a project.
    let home = env.home.join("home");
    let input = serde_json::json!({"session_id": "s", "cwd": home, "prompt": "hi",
        "hook_event_name": "UserPromptSubmit"});
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let mut child = cmd
        .current_dir(&home)
        .args(["hook", "claude-code"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.to_string().as_bytes()).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        stderr(&out).contains("ckpt watch --force"),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("pass --force (`force`)"),
        "{}",
        stderr(&out)
    );
    let status = stdout(&env.ckpt(&["status"]));
    assert!(status.contains("1 prompt not recorded"), "{status}");
    assert!(status.contains("--dismiss"), "{status}");
    let out = env.ckpt(&["status", "--dismiss"]);
    assert!(stdout(&out).contains("dismissed 1"), "{}", stdout(&out));
    assert!(!stdout(&env.ckpt(&["status"])).contains("not recorded"));

    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.ckpt_in(&p, &["forget", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("claude-code (the project)"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("still installed"), "{}", stdout(&out));
}

/// `hook uninstall` takes ckpt's entry out and leaves every other byte of the user's file; an
/// install offers to keep the file out of `git status`, and does so when asked.
#[test]
fn hook_files_keep_the_users_formatting_and_can_leave_git_status() {
    let env = TestEnv::new();
    let p = env.proj();
    crate::agents::git_in_worktree(&p, &["init", "-q"]);
    let settings = p.join(".claude/settings.local.json");
    let own = "{\n    \"permissions\" :{ \"allow\": [\"Bash(ls)\"] },\n    \"hooks\": {\n        \"UserPromptSubmit\": [\n            { \"hooks\": [ { \"type\": \"command\", \"command\": \"my-logger\" } ] }\n        ]\n    }\n}\n";
    write(&p, ".claude/settings.local.json", own);
    let out = env.ckpt_in(&p, &["hook", "install", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("--git-exclude"), "{}", stdout(&out));
    let out = env.ckpt_in(&p, &["hook", "uninstall", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = std::fs::read_to_string(&settings).unwrap();
    // Installing rewrote the file; uninstalling takes out ckpt's entry alone.
    let installed = {
        let out = env.ckpt_in(&p, &["hook", "install", "claude-code", "--git-exclude"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(stdout(&out).contains("info/exclude"), "{}", stdout(&out));
        std::fs::read_to_string(&settings).unwrap()
    };
    let out = env.ckpt_in(&p, &["hook", "uninstall", "claude-code"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let uninstalled = std::fs::read_to_string(&settings).unwrap();
    assert!(!uninstalled.contains("ckpt"), "{uninstalled}");
    assert!(after.contains("my-logger") && uninstalled.contains("my-logger"));
    // The lines that were not ckpt's are as the install left them, byte for byte.
    let kept: Vec<&str> = installed.lines().filter(|l| !l.contains("ckpt")).collect();
    for line in uninstalled.lines() {
        assert!(
            kept.contains(&line),
            "a line changed: {line:?}\n{installed}\n{uninstalled}"
        );
    }
    let status = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(&p)
        .output()
        .unwrap();
    assert!(
        !stdout(&status).contains("settings.local.json"),
        "{}",
        stdout(&status)
    );
}

#[test]
fn help_groups_commands_and_man_pages_name_option_values() {
    let env = TestEnv::without_daemon("");
    let help = stdout(&env.ckpt(&["--help"]));
    let everyday = help.find("Every day:").expect("grouped");
    let upkeep = help.find("Upkeep:").expect("grouped");
    assert!(everyday < help.find("  rewind").unwrap(), "{help}");
    assert!(help.find("  gc ").unwrap() > upkeep, "{help}");
    let dir = env.home.join("man");
    let out = env.ckpt(&["man", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(dir.join("ckpt-restore.1")).unwrap();
    let synopsis = page
        .lines()
        .skip_while(|l| *l != ".SH SYNOPSIS")
        .nth(1)
        .unwrap();
    assert!(synopsis.contains(r"\-\-dialog\fR \fID\fR"), "{synopsis}");
    assert!(synopsis.contains(r"\-C\fR \fIDIR\fR"), "{synopsis}");
}
