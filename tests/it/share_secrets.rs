//! A secret in a prompt never reaches a remote, wherever it sits: across the 72nd character
//! (where the commit's subject line cuts the prompt's copy), in the subject, in the body, on a
//! later line, and in the agent's metadata when that is pushed too. Pushed to a real `git
//! daemon`, and every object on the remote grepped.

use std::path::Path;

use crate::harness::*;
use crate::servers::{bare_repo, GitDaemon};

/// Every object of `repo`, contents included.
fn all_objects(repo: &Path) -> String {
    git_in(
        repo,
        &["cat-file", "--batch-all-objects", "--batch", "--unordered"],
    )
}

/// The pieces of `token` that must not appear anywhere: every 12 characters of its body.
fn pieces(token: &str) -> Vec<&str> {
    (4..=token.len() - 12).map(|i| &token[i..i + 12]).collect()
}

#[test]
fn a_secret_is_redacted_at_every_place_in_a_prompt() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let server = GitDaemon::start(base.path());
    let env = TestEnv::with_config("push_as = \"ann\"\n");
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    env.watch();
    let token = format!("ghp_{}", "Zq9x".repeat(9));
    assert_eq!(token.len(), 40);
    let mut prompts = Vec::new();
    // The token starting at every character from 0 to 100 around the subject's cut (72),
    // after a space (a token starts where a word does).
    for at in (0..=30).step_by(10).chain(31..=73).chain([80, 90, 100]) {
        let before = match at {
            0 => String::new(),
            n => format!("{} ", "w".repeat(n - 1)),
        };
        prompts.push(format!("{before}{token} and more words after it"));
    }
    prompts.push(format!("a first line\nthen the key {token} on the second"));
    prompts.push(format!("{token}\n{token}"));
    let meta = env.home.join("meta.json");
    for (i, prompt) in prompts.iter().enumerate() {
        write(&p, "f.txt", &format!("{i}\n"));
        // The metadata as a hook records it: the hook's input, the prompt included.
        let hook_input = serde_json::json!({"session_id": "s1", "prompt": prompt,
            "hook_event_name": "UserPromptSubmit"});
        std::fs::write(&meta, hook_input.to_string()).unwrap();
        let out = env.ckpt(&[
            "checkpoint",
            "-m",
            prompt,
            "--prompt",
            "--dialog",
            "s1",
            "--meta",
            meta.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = env.ckpt(&["remote", "add", "team", &server.url("team.git")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pushed = env.json(&["push", "team", "--with-metadata"]);
    let redactions = pushed["redactions"].as_array().unwrap();
    assert_eq!(redactions.len(), prompts.len(), "{pushed}");
    assert!(pushed["metadata"].as_u64().unwrap() > 0, "{pushed}");
    let objects = all_objects(&remote);
    for piece in pieces(&token) {
        let at = objects.find(piece);
        assert!(
            at.is_none(),
            "`{piece}` of the token reached the remote: …{}…",
            &objects
                [at.unwrap_or(0).saturating_sub(300)..(at.unwrap_or(0) + 100).min(objects.len())]
        );
    }
    // What is left reads as before: the subject from the redacted prompt.
    let log = git_in(&remote, &["log", "--format=%s", "--all"]);
    // The token starting at character 60: the subject shows where it was.
    let at_60 = format!("{} [redacted] a", "w".repeat(59));
    assert!(log.lines().any(|s| s.ends_with(&at_60)), "{log}");
    assert!(objects.contains("then the key [redacted] on the second"));
    git_in(&remote, &["fsck", "--strict", "--no-progress"]);
    env.assert_serving();
}
