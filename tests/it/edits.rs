//! Edit transactions: a failed tool write is put back exactly, including files that did not
//! exist; committed and unknown tokens are errors that change nothing.

use std::os::unix::fs::PermissionsExt;

use crate::harness::*;

#[test]
fn abort_puts_paths_back_exactly() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "src/lib.rs", "fn original() {}\n");
    write(&p, "run.sh", "#!/bin/sh\n");
    chmod(&p, "run.sh", 0o755);
    symlink(&p, "link", "src/lib.rs");
    write(&p, ".env", "SECRET=1\n");
    env.watch();
    let before = tree_state(&p);

    let begun = env.json(&[
        "edit",
        "begin",
        "src/lib.rs",
        "run.sh",
        "link",
        "new/file.rs",
        ".env",
    ]);
    let token = begun["token"].as_str().unwrap().to_string();
    assert!(begun["expires_in_seconds"].as_u64().unwrap() >= 60);
    // The tool writes, breaks things, and fails.
    write(&p, "src/lib.rs", "fn broken( {\n");
    std::fs::remove_file(p.join("run.sh")).unwrap();
    write(&p, "run.sh", "echo replaced\n");
    std::fs::remove_file(p.join("link")).unwrap();
    write(&p, "link", "now a file\n");
    write(&p, "new/file.rs", "created by the tool\n");
    write(&p, ".env", "SECRET=2\n");
    let aborted = env.json(&["edit", "abort", &token]);
    assert_eq!(
        aborted["restored"].as_array().unwrap().len(),
        5,
        "{aborted}"
    );
    let mut after = tree_state(&p);
    after.retain(|k, _| !k.starts_with("new"));
    assert_eq!(
        after, before,
        "abort must restore content, mode, links and absence"
    );
    assert!(!p.join("new/file.rs").exists());
    assert_eq!(
        std::fs::metadata(p.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    // Secrets saved by an edit never reach the store.
    let grep = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(env.store())
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&grep.stdout).contains("SECRET=1"));

    // A token works once.
    let out = env.ckpt(&["--json", "edit", "abort", &token]);
    assert_eq!(out.status.code(), Some(1));
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["data"]["kind"], "unknown_edit");
}

#[test]
fn commit_keeps_the_edit_and_bad_requests_change_nothing() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "v1");
    env.watch();
    let token = env.json(&["edit", "begin", "a.txt"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    write(&p, "a.txt", "v2");
    assert_eq!(env.json(&["edit", "commit", &token])["committed"], true);
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "v2");
    let out = env.ckpt(&["edit", "abort", &token]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "v2");

    for bad in [
        vec!["edit", "begin", "../outside.txt"],
        vec!["edit", "begin", "."],
        vec!["edit", "commit", "edit-nope"],
    ] {
        let mut args = vec!["--json"];
        args.extend(bad.iter());
        let out = env.ckpt(&args);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(err["error"]["code"].as_i64().is_some(), "{bad:?}: {err}");
    }
    // A folder cannot be an edit path.
    std::fs::create_dir_all(p.join("dir")).unwrap();
    let out = env.ckpt(&["edit", "begin", "dir"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a file or symlink"),
        "{}",
        stderr(&out)
    );
    env.assert_serving();
}
