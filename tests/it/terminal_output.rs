//! What reaches a terminal from outside (a teammate's prompt fetched from a remote, an agent's
//! message id, a note) never carries control sequences: `list --all`, `show` and `log` print
//! them escaped, and `--json` keeps the text exact.

use crate::harness::*;
use crate::servers::{bare_repo, GitDaemon};

/// A prompt that would set the window's title, clear the screen and forge a row of the list.
const HOSTILE: &str = "fix it\u{1b}]0;owned\u{7}\u{1b}[2J\r\nabc123456789  #9  forged row";

#[test]
fn a_teammates_label_is_printed_escaped() {
    let base = tempfile::tempdir().unwrap();
    let _remote = bare_repo(base.path(), "team.git");
    let server = GitDaemon::start(base.path());
    let ann = TestEnv::with_config("push_as = \"ann\"\n");
    let bob = TestEnv::with_config("push_as = \"bob\"\n");
    write(&ann.proj(), "a.txt", "ann\n");
    ann.watch();
    ann.json(&["checkpoint", "-m", HOSTILE, "--prompt", "--dialog", "s1"]);
    let note = ann.ckpt(&["note", "@", "a note\u{1b}[31m in red"]);
    assert!(note.status.success(), "{}", stderr(&note));
    write(&bob.proj(), "b.txt", "bob\n");
    bob.watch();
    for env in [&ann, &bob] {
        let out = env.ckpt(&["remote", "add", "team", &server.url("team.git")]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    ann.json(&["push", "team"]);
    bob.json(&["fetch", "team"]);
    let theirs = bob.json(&["list", "--remote", "team"]);
    let id = theirs[0]["id"].as_str().unwrap().to_string();
    assert_eq!(theirs[0]["label"], HOSTILE, "--json keeps the text exact");
    for (env, args) in [
        (&bob, vec!["list", "--all"]),
        (&bob, vec!["show", &id]),
        (&ann, vec!["show", "@"]),
        (&ann, vec!["log"]),
        (&ann, vec!["list"]),
    ] {
        let out = env.ckpt(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\r'),
            "{args:?} printed a control character: {text:?}"
        );
        assert!(text.contains("fix it\\u{1b}]0;owned"), "{args:?}: {text}");
        assert!(
            !text.lines().any(|l| l.starts_with("abc123456789")),
            "{args:?} printed a forged row: {text}"
        );
    }
    let shown = stdout(&ann.ckpt(&["show", "@"]));
    assert!(shown.contains("a note\\u{1b}[31m in red"), "{shown}");
}
