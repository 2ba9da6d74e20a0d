//! Sharing through git remotes, against real servers on loopback: `git daemon` (git://) and
//! openssh-server (ssh). User A (one data dir) pushes, user B (another data dir, another copy
//! of the project) fetches and restores A's checkpoint byte-exact; the remote stays `git fsck
//! --strict` clean with refs only under `refs/ckpt/`, and no metadata or secret reaches it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;
use crate::servers::{bare_repo, GitDaemon, Silent, Sshd};

/// `ckpt ARGS` in `dir` of `env`, with `extra` variables (e.g. `GIT_SSH_COMMAND`).
fn ckpt_with(env: &TestEnv, dir: &Path, extra: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.current_dir(dir)
        .arg("--no-spawn")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok_json(env: &TestEnv, dir: &Path, extra: &[(&str, &str)], args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = ckpt_with(env, dir, extra, &all);
    assert!(
        out.status.success(),
        "ckpt {args:?}: {}\n{}",
        stderr(&out),
        env.log()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every ref of `repo`.
fn refs(repo: &Path) -> Vec<String> {
    git_in(repo, &["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .map(String::from)
        .collect()
}

/// Every object of `repo`, contents included, as one text (to grep for what must not be there).
fn all_objects(repo: &Path) -> String {
    git_in(
        repo,
        &["cat-file", "--batch-all-objects", "--batch", "--unordered"],
    )
}

fn user(name: &str) -> TestEnv {
    TestEnv::with_config(&format!("push_as = \"{name}\"\n"))
}

/// A's project: files of every kind, a prompt with a secret and agent metadata, then a second
/// prompt and a dialog with nothing to hide. Returns (the first, the second, the plain id).
fn a_history(a: &TestEnv, token: &str) -> (String, String, String) {
    let p = a.proj();
    write(&p, "src/main.rs", "fn main() { println!(\"v1\"); }\n");
    write(&p, "bin/run.sh", "#!/bin/sh\nexec cargo run\n");
    chmod(&p, "bin/run.sh", 0o755);
    symlink(&p, "latest", "src/main.rs");
    a.watch();
    let meta = a.home.join("meta.json");
    std::fs::write(
        &meta,
        r#"{"transcript_path":"/home/ann/.claude/SECRET-TRANSCRIPT.jsonl","model":"MODEL-MARKER"}"#,
    )
    .unwrap();
    let prompt = format!("deploy it with {token} please");
    let meta = meta.to_str().unwrap();
    let first = a.json(&[
        "checkpoint",
        "-m",
        &prompt,
        "--prompt",
        "--meta",
        meta,
        "--dialog",
        "s1",
    ]);
    write(&p, "src/main.rs", "fn main() { println!(\"v2\"); }\n");
    write(&p, "notes/today.md", "# notes\n");
    let second = a.json(&[
        "checkpoint",
        "-m",
        "now add notes",
        "--prompt",
        "--dialog",
        "s1",
    ]);
    write(&p, "plain.txt", "nothing to hide\n");
    let plain = a.json(&["checkpoint", "-m", "plain", "--dialog", "s2"]);
    let id = |v: &Value| v["id"].as_str().unwrap().to_string();
    (id(&first), id(&second), id(&plain))
}

/// What `git ls-tree` says checkpoint `id` holds, as [`tree_state`] describes files.
fn state_of_checkpoint(env: &TestEnv, id: &str) -> std::collections::BTreeMap<String, String> {
    let store = env.store();
    let mut out = std::collections::BTreeMap::new();
    for line in git_in(&store, &["ls-tree", "-r", id]).lines() {
        let (meta, path) = line.split_once('\t').unwrap();
        let parts: Vec<&str> = meta.split(' ').collect();
        let content = git_in(&store, &["cat-file", "blob", parts[2]]);
        let desc = match parts[0] {
            "120000" => format!("link -> {content}"),
            "100755" => format!("file 755 {content}"),
            _ => format!("file 644 {content}"),
        };
        out.insert(path.to_string(), desc);
    }
    out
}

fn share_round_trip(url: &str, remote: &Path, extra: &[(&str, &str)]) {
    let a = user("ann");
    let token = format!("ghp_{}", "Zq9".repeat(12));
    let (_, _, plain) = a_history(&a, &token);
    let state_a = tree_state(&a.proj());
    ok_json(&a, &a.proj(), extra, &["remote", "add", "origin", url]);
    let pushed = ok_json(&a, &a.proj(), extra, &["push"]);
    // Each dialog starts with its `initial` checkpoint.
    let mine = a
        .json(&["list", "--all-sessions"])
        .as_array()
        .unwrap()
        .len();
    assert_eq!(mine, 5);
    assert_eq!(pushed["checkpoints"], mine, "{pushed}");
    assert_eq!(
        pushed["redactions"][0]["kinds"],
        serde_json::json!(["GitHub token"])
    );
    assert_eq!(pushed["metadata"], 0);
    assert_eq!(pushed["remote_prefix"], "refs/ckpt/ann/");
    // Only under refs/ckpt/<who>/, clean, and nothing that must stay here.
    let on_remote = refs(remote);
    assert!(
        on_remote.iter().all(|r| r.starts_with("refs/ckpt/ann/")),
        "{on_remote:?}"
    );
    assert!(on_remote
        .iter()
        .any(|r| r.starts_with("refs/ckpt/ann/dialogs/s1 ")));
    git_in(remote, &["fsck", "--strict", "--no-progress"]);
    let objects = all_objects(remote);
    for secret in [token.as_str(), "SECRET-TRANSCRIPT", "MODEL-MARKER"] {
        assert!(!objects.contains(secret), "{secret} reached the remote");
    }
    assert!(objects.contains("deploy it with [redacted] please"));
    assert_eq!(a.json(&["remote", "list"])[0]["unpushed"], 0);

    // B: another machine, another copy of the project, its own history.
    let b = user("bob");
    write(&b.proj(), "mine.txt", "bob's work\n");
    b.watch();
    let own = b.checkpoint("bob's prompt");
    let own_refs = git_in(&b.store(), &["for-each-ref", "refs/ckpt/dialogs/"]);
    ok_json(&b, &b.proj(), extra, &["remote", "add", "origin", url]);
    let fetched = ok_json(&b, &b.proj(), extra, &["fetch"]);
    assert_eq!(fetched[0]["new_checkpoints"], mine, "{fetched}");
    assert_eq!(fetched[0]["people"]["ann"], 2);
    assert_eq!(
        git_in(&b.store(), &["for-each-ref", "refs/ckpt/dialogs/"]),
        own_refs
    );
    let theirs = b.json(&["list", "--remote", "origin"]);
    let theirs = theirs.as_array().unwrap();
    assert_eq!(theirs.len(), mine);
    assert!(theirs.iter().all(|c| c["origin"]["who"] == "ann"));
    // A checkpoint with nothing to change keeps its id on every machine.
    assert!(
        theirs.iter().any(|c| c["id"] == plain.as_str()),
        "{theirs:?}"
    );
    let all = b.json(&["list", "--all"]);
    let own_count = b.json(&["list"]).as_array().unwrap().len();
    assert_eq!(all.as_array().unwrap().len(), mine + own_count);
    assert!(all
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["id"] == own.as_str()));
    // Restore A's newest: byte-exact, undoable.
    let newest = theirs[0]["id"].as_str().unwrap();
    let before_b = tree_state(&b.proj());
    let restored = b.json(&["restore", &newest[..12], "--yes"]);
    assert!(
        restored["skipped"].as_array().unwrap().is_empty(),
        "{restored}"
    );
    assert_eq!(tree_state(&b.proj()), state_a);
    let shown = b.json(&["show", &newest[..12]]);
    assert_eq!(shown["origin"]["who"], "ann", "{shown}");
    // Blame along A's timeline: the line came in the turn of the prompt with the secret.
    let notes = theirs
        .iter()
        .find(|c| c["label"] == "now add notes")
        .unwrap();
    let blamed = b.json(&[
        "blame",
        "src/main.rs",
        "--at",
        notes["id"].as_str().unwrap(),
    ]);
    let line = blamed["lines"][0].to_string();
    assert!(line.contains("deploy it with [redacted]"), "{blamed}");
    b.json(&["undo", "--yes"]);
    assert_eq!(tree_state(&b.proj()), before_b);
    // Rewind to A's first prompt: the files as they were when it arrived (the code only: its
    // conversation is on A's machine).
    let prompt = theirs
        .iter()
        .find(|c| c["label"].as_str().unwrap().starts_with("deploy it"))
        .unwrap()["id"]
        .as_str()
        .unwrap();
    b.json(&["rewind", prompt, "--code", "--yes"]);
    assert_eq!(b.json(&["show", "@"])["kind"], "restore");
    let first_state = state_of_checkpoint(&b, prompt);
    assert_eq!(tree_state(&b.proj()), first_state);
    b.json(&["undo", "--yes"]);
    assert_eq!(tree_state(&b.proj()), before_b);
    b.fsck();
    a.fsck();
    // A second fetch brings nothing new.
    let again = ok_json(&b, &b.proj(), extra, &["fetch", "origin"]);
    assert_eq!(again[0]["new_checkpoints"], 0);
    assert_eq!(again[0]["updated"], 0);
    b.assert_serving();
}

#[test]
fn push_fetch_and_restore_through_git_daemon() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let server = GitDaemon::start(base.path());
    share_round_trip(&server.url("team.git"), &remote, &[]);
}

#[test]
fn push_fetch_and_restore_over_ssh() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let Some(sshd) = Sshd::start(base.path()) else {
        return;
    };
    let ssh = [("GIT_SSH_COMMAND", sshd.ssh_command.as_str())];
    share_round_trip(&sshd.url(&remote), &remote, &ssh);
}

/// The bytes of `repo`'s objects folder.
fn objects_bytes(repo: &Path) -> u64 {
    fn walk(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| match e.file_type().unwrap().is_dir() {
                true => walk(&e.path()),
                false => e.metadata().unwrap().len(),
            })
            .sum()
    }
    walk(&repo.join("objects"))
}

#[test]
fn a_push_after_ten_changed_files_sends_a_few_kib() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let a = user("ann");
    let p = a.proj();
    for i in 0..2000 {
        let line = format!("file {i} line with some text {}\n", i * 7919);
        write(&p, &format!("d{}/f{i}.txt", i % 40), &line.repeat(40));
    }
    a.watch();
    a.checkpoint("all of it");
    a.json(&["remote", "add", "origin", remote.to_str().unwrap()]);
    a.json(&["push"]);
    let before = objects_bytes(&remote);
    for i in 0..10 {
        write(
            &p,
            &format!("d{}/f{i}.txt", i % 40),
            &format!("changed {i}\n").repeat(50),
        );
    }
    a.checkpoint("ten changed");
    a.json(&["push"]);
    let sent = objects_bytes(&remote) - before;
    println!("first push: {before} bytes; after 10 changed files: {sent} bytes");
    assert!(before > 100_000, "{before}");
    assert!(
        sent < 32 * 1024,
        "a push of 10 changed files grew the remote by {sent} bytes"
    );
    git_in(&remote, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn two_pushers_at_once_lose_nothing() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let server = GitDaemon::start(base.path());
    let url = server.url("team.git");
    let users = [user("ann"), user("bob")];
    for (n, u) in users.iter().enumerate() {
        write(&u.proj(), "shared.txt", &format!("user {n}\n"));
        u.watch();
        u.json(&["remote", "add", "origin", &url]);
    }
    std::thread::scope(|s| {
        for (n, u) in users.iter().enumerate() {
            s.spawn(move || {
                for round in 0..5 {
                    write(
                        &u.proj(),
                        "shared.txt",
                        &format!("user {n} round {round}\n"),
                    );
                    u.checkpoint(&format!("round {round}"));
                    u.json(&["push"]);
                }
            });
        }
    });
    let on_remote = refs(&remote);
    for (u, who) in users.iter().zip(["ann", "bob"]) {
        let head = u.json(&["list", "-n", "1"])[0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let wanted = format!("refs/ckpt/{who}/dialogs/default {head}");
        assert!(on_remote.contains(&wanted), "{wanted} not in {on_remote:?}");
    }
    git_in(&remote, &["fsck", "--strict", "--no-progress"]);
    let seen = ok_json(&users[0], &users[0].proj(), &[], &["fetch"]);
    assert_eq!(seen[0]["people"]["bob"], 1, "{seen}");
    assert_eq!(
        users[0]
            .json(&["list", "--remote", "origin"])
            .as_array()
            .unwrap()
            .len(),
        10
    );
}

#[test]
fn a_hanging_or_killed_server_fails_the_push_in_time_and_checkpoints_go_on() {
    let a = user("ann");
    write(&a.proj(), "f.txt", "one\n");
    a.watch();
    a.checkpoint("first");
    let silent = Silent::start();
    let url = format!("git://127.0.0.1:{}/team.git", silent.port);
    a.json(&["remote", "add", "hung", &url]);
    let started = Instant::now();
    let (out, checkpoints) = std::thread::scope(|s| {
        let push = s.spawn(|| a.ckpt(&["push", "hung"]));
        // Meanwhile, prompts are recorded as ever.
        let mut slowest = Duration::ZERO;
        for i in 0..5 {
            std::thread::sleep(Duration::from_millis(500));
            write(&a.proj(), "f.txt", &format!("edit {i}\n"));
            let t = Instant::now();
            a.checkpoint(&format!("during the push {i}"));
            slowest = slowest.max(t.elapsed());
        }
        (push.join().unwrap(), slowest)
    });
    let took = started.elapsed();
    assert!(!out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("push to hung") && err.contains("sent nothing"),
        "{err}"
    );
    assert!(
        took < Duration::from_secs(15),
        "the push gave up after {took:?}"
    );
    assert!(
        checkpoints < Duration::from_secs(3),
        "a checkpoint took {checkpoints:?}"
    );
    // Nothing was recorded as pushed, and the scratch repository is gone.
    assert_eq!(a.json(&["remote", "list"])[0]["unpushed"], 6);
    let scratch = a.store().join("ckpt-share");
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);

    // A server that was killed: refused at once.
    let base = tempfile::tempdir().unwrap();
    bare_repo(base.path(), "team.git");
    let mut server = GitDaemon::start(base.path());
    a.json(&["remote", "add", "gone", &server.url("team.git")]);
    server.kill();
    let t = Instant::now();
    let out = a.ckpt(&["fetch", "gone"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("fetch from gone"), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(15));
    a.fsck();
    a.assert_serving();
}

#[test]
fn bad_remotes_and_requests_get_clear_errors_and_change_nothing() {
    let a = user("ann");
    write(&a.proj(), "f.txt", "one\n");
    a.watch();
    let fails = |args: &[&str], wanted: &str| {
        let out = a.ckpt(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(wanted), "{args:?}: {}", stderr(&out));
    };
    fails(&["push"], "has no remotes");
    fails(&["fetch"], "has no remotes");
    fails(&["remote", "add", "-x", "/tmp/r.git"], "");
    fails(
        &["remote", "add", "bad/name", "/tmp/r.git"],
        "invalid remote name",
    );
    fails(
        &["remote", "add", "o", "--", "--upload-pack=touch /tmp/pwned"],
        "starts with `-`",
    );
    fails(
        &["remote", "add", "o", "ext::sh -c touch% /tmp/pwned"],
        "ext::",
    );
    fails(&["remote", "add", "o", "git://h/x\ny"], "control character");
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    a.json(&["remote", "add", "origin", remote.to_str().unwrap()]);
    fails(&["push"], "no checkpoints yet");
    // An empty remote: nothing to fetch, and that is no error.
    assert_eq!(a.json(&["fetch"])[0]["new_checkpoints"], 0);
    a.checkpoint("first");
    fails(
        &["remote", "add", "origin", "/elsewhere.git"],
        "exists already",
    );
    fails(&["push", "upstream"], "no remote named `upstream`");
    fails(
        &["remote", "remove", "upstream"],
        "no remote named `upstream`",
    );
    // A folder that is no repository: git's own words, naming the remote.
    a.json(&["remote", "add", "nowhere", "/nonexistent/repo.git"]);
    fails(&["push", "nowhere"], "push to nowhere");
    fails(&["fetch", "nowhere"], "fetch from nowhere");
    // The scratch-repository calls take only their own scratch repositories.
    let project = a.proj().to_str().unwrap().to_string();
    let store = a.store();
    for git_dir in [
        "/tmp",
        store.to_str().unwrap(),
        &format!("{}/ckpt-share/../..", store.display()),
    ] {
        for method in ["push_end", "fetch_end"] {
            let req = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params":
                {"project": project, "remote": "origin", "git_dir": git_dir, "succeeded": true}});
            let reply = &a.raw(&[req.to_string().as_bytes()])[0];
            let message = reply["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("not a scratch repository"),
                "{method} {git_dir}: {reply}"
            );
        }
    }
    let req = r#"{"jsonrpc":"2.0","id":1,"method":"push_begin","params":{"project":"PROJ","remote":"origin","who":"../heads/main"}}"#;
    let reply = &a.raw(&[req.replace("PROJ", &project).as_bytes()])[0];
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid name to push as"),
        "{reply}"
    );
    assert!(refs(&remote).is_empty());
    assert!(!Path::new("/tmp/pwned").exists());
    // A configuration that cannot be used never pushes under a guessed name.
    std::fs::write(
        a.home.join("config/ckpt/config.toml"),
        "push_as = \"a b\"\n",
    )
    .unwrap();
    fails(&["push", "origin"], "cannot push");
    let check = a.ckpt(&["config", "check"]);
    assert!(!check.status.success(), "{}", stdout(&check));
    assert!(stderr(&check).contains("push_as"), "{}", stderr(&check));
    std::fs::write(
        a.home.join("config/ckpt/config.toml"),
        "auto_push = \"yes\"\n",
    )
    .unwrap();
    let check = a.ckpt(&["config", "check"]);
    assert!(
        !check.status.success() && stderr(&check).contains("auto_push"),
        "{}",
        stderr(&check)
    );
    assert!(refs(&remote).is_empty());
    a.fsck();
    a.assert_serving();
}

#[test]
fn junk_on_the_remote_is_ignored_and_prune_and_metadata_do_what_they_say() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let url = remote.to_str().unwrap();
    let a = user("ann");
    write(&a.proj(), "f.txt", "one\n");
    a.watch();
    let meta = a.home.join("meta.json");
    std::fs::write(&meta, r#"{"model":"MODEL-MARKER"}"#).unwrap();
    let meta = meta.to_str().unwrap();
    a.json(&[
        "checkpoint",
        "-m",
        "kept",
        "--dialog",
        "keep",
        "--meta",
        meta,
    ]);
    a.json(&["checkpoint", "-m", "gone soon", "--dialog", "gone"]);
    a.json(&["remote", "add", "origin", url]);
    a.json(&["push"]);
    assert!(refs(&remote)
        .iter()
        .any(|r| r.starts_with("refs/ckpt/ann/dialogs/gone ")));
    // Someone else's junk: a plain commit where a dialog would be, a branch-like ref.
    let work = base.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(&work)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &work)
            .env("GIT_AUTHOR_NAME", "E")
            .env("GIT_AUTHOR_EMAIL", "e@example.com")
            .env("GIT_COMMITTER_NAME", "E")
            .env("GIT_COMMITTER_EMAIL", "e@example.com")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    git(&["init", "-q"]);
    write(&work, "x.txt", "x\n");
    git(&["add", "."]);
    git(&["commit", "-qm", "not a checkpoint"]);
    git(&[
        "push",
        "-q",
        url,
        "HEAD:refs/ckpt/eve/dialogs/main",
        "HEAD:refs/ckpt/eve/heads/x",
    ]);
    let b = user("bob");
    b.watch();
    b.json(&["remote", "add", "origin", url]);
    let fetched = b.json(&["fetch"]);
    let ignored = fetched[0]["ignored"].to_string();
    assert!(ignored.contains("refs/ckpt/eve/heads/x"), "{fetched}");
    assert!(ignored.contains("refs/ckpt/eve/dialogs/main"), "{fetched}");
    assert_eq!(fetched[0]["people"], serde_json::json!({"ann": 2}));
    let theirs = b.json(&["list", "--remote", "origin"]);
    let kept = theirs
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "kept")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Without --with-metadata, none of it; the checkpoint still shows.
    let shown = b.json(&["show", &kept]);
    assert!(
        shown["meta"].is_null() && shown["label"] == "kept",
        "{shown}"
    );
    a.json(&["dialog", "rm", "gone"]);
    let pruned = a.json(&["push", "--prune", "--with-metadata"]);
    assert_eq!(pruned["refs_deleted"], 1, "{pruned}");
    assert_eq!(pruned["metadata"], 1, "{pruned}");
    let on_remote = refs(&remote);
    assert!(!on_remote
        .iter()
        .any(|r| r.starts_with("refs/ckpt/ann/dialogs/gone ")));
    assert!(on_remote
        .iter()
        .any(|r| r.starts_with("refs/ckpt/ann/meta/")));
    assert!(
        on_remote.iter().any(|r| r.starts_with("refs/ckpt/eve/")),
        "others' refs stay"
    );
    let fetched = b.json(&["fetch"]);
    assert_eq!(fetched[0]["removed"], 1, "{fetched}");
    let shown = b.json(&["show", &kept]);
    assert_eq!(shown["meta"]["model"], "MODEL-MARKER", "{shown}");
    // Forgetting the remote forgets what came from it, and nothing of B's own.
    let removed = b.json(&["remote", "remove", "origin"]);
    assert!(removed["refs_removed"].as_u64().unwrap() >= 2, "{removed}");
    assert!(git_in(&b.store(), &["for-each-ref", "refs/ckpt/remotes/"]).is_empty());
    let out = b.ckpt(&["show", &kept]);
    assert!(!out.status.success());
    b.fsck();
    git_in(&remote, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn auto_push_sends_checkpoints_in_the_background_and_status_says_what_is_left() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let a = TestEnv::with_config("push_as = \"ann\"\nauto_push = true\n");
    write(&a.proj(), "f.txt", "one\n");
    a.watch();
    a.json(&["remote", "add", "origin", remote.to_str().unwrap()]);
    let mut last = String::new();
    for i in 0..4 {
        write(&a.proj(), "f.txt", &format!("edit {i}\n"));
        let t = Instant::now();
        last = a.checkpoint(&format!("prompt {i}"));
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "a checkpoint waited for a push"
        );
    }
    let wanted = format!("refs/ckpt/ann/dialogs/default {last}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !refs(&remote).contains(&wanted) {
        assert!(
            Instant::now() < deadline,
            "not pushed: {:?}\n{}",
            refs(&remote),
            a.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The push is recorded once git is done: status catches up.
    let status = loop {
        let status = a.json(&["status"]);
        if status["remotes"][0]["unpushed"] == 0 || Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["remotes"][0]["name"], "origin", "{status}");
    assert_eq!(status["remotes"][0]["unpushed"], 0, "{status}");
    let out = a.ckpt(&["status"]);
    assert!(
        stdout(&out).contains("origin: 0 checkpoints not pushed yet"),
        "{}",
        stdout(&out)
    );
    git_in(&remote, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn a_history_cut_by_retention_is_pushed_whole_and_the_remote_follows_it() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let a = user("ann");
    a.watch();
    for i in 0..6 {
        write(&a.proj(), "f.txt", &format!("version {i}\n"));
        a.checkpoint(&format!("prompt {i}"));
    }
    a.json(&["remote", "add", "origin", remote.to_str().unwrap()]);
    a.json(&["push"]);
    a.json(&["prune", "--keep", "2", "--gc"]);
    assert!(
        a.store().join("shallow").exists(),
        "retention cut the timeline"
    );
    let pushed = a.json(&["push"]);
    assert!(pushed["rewritten"].as_u64().unwrap() >= 1, "{pushed}");
    git_in(&remote, &["gc", "--prune=now", "--quiet"]);
    git_in(&remote, &["fsck", "--strict", "--no-progress"]);
    // The remote holds what the store keeps, no more: the cut checkpoints are gone there too.
    let mut on_remote: Vec<String> = git_in(&remote, &["log", "--format=%b", "--all"])
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    on_remote.sort();
    let mut kept: Vec<String> = a
        .json(&["list", "--all-sessions"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap().to_string())
        .collect();
    kept.sort();
    assert!(kept.len() < 6, "{kept:?}");
    assert_eq!(on_remote, kept);
    // Pushing again sends the same commits (nothing moves).
    let again = a.json(&["push"]);
    assert_eq!(again["refs_updated"], 0, "{again}");
    // A store whose history was cut fetches too (git must not walk past the cut).
    let fetched = a.json(&["fetch"]);
    assert_eq!(fetched[0]["people"]["ann"], 1, "{fetched}");
    a.fsck();
    let b = user("bob");
    b.watch();
    b.json(&["remote", "add", "origin", remote.to_str().unwrap()]);
    b.json(&["fetch"]);
    let theirs = b.json(&["list", "--remote", "origin"]);
    let newest = theirs[0]["id"].as_str().unwrap();
    assert_eq!(theirs[0]["label"], "prompt 5");
    b.json(&["restore", newest, "--yes"]);
    assert_eq!(
        std::fs::read_to_string(b.proj().join("f.txt")).unwrap(),
        "version 5\n"
    );
    b.fsck();
}
