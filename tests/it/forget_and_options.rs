//! What a newcomer runs into: deleting a project's whole history (`ckpt forget`, asked first,
//! nothing outside the store touched), `config check` with no file, options that do not apply
//! (`--json` for completions and man pages, `-q` for reload), and counts in words.

use crate::harness::*;

#[test]
fn forget_deletes_only_the_store_and_asks_first() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    write(&p, "src/b.txt", "two\n");
    env.watch();
    env.checkpoint("first");
    write(&p, "a.txt", "changed\n");
    env.checkpoint("second");
    let store = env.store();
    let files = tree_state(&p);
    // No terminal to ask on: refused without --yes, nothing deleted.
    let out = env.ckpt(&["forget"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert!(store.is_dir());
    let plan = env.json(&["forget", "--dry-run"]);
    assert_eq!(plan["dry_run"], true);
    assert!(plan["store_bytes"].as_u64().unwrap() > 0, "{plan}");
    assert!(store.is_dir());
    // From a folder inside the project, as every command takes it.
    let done = env.json_in(&p.join("src"), &["forget", "--yes"]);
    assert_eq!(done["was_watched"], true, "{done}");
    assert!(!store.exists(), "the store is gone");
    assert_eq!(tree_state(&p), files, "the project's files are untouched");
    assert!(env.json(&["projects"]).as_array().unwrap().is_empty());
    let out = env.ckpt(&["list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let out = env.ckpt(&["--json", "forget", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "nothing left to forget");
    // Watched again: a fresh history.
    env.watch();
    let list = env.json(&["list"]);
    assert!(list.as_array().unwrap().is_empty(), "{list}");
    env.checkpoint("anew");
    // A project no longer watched keeps its store until it is forgotten too.
    env.json(&["unwatch"]);
    assert!(env.data_dir().join("projects").read_dir().unwrap().count() == 1);
    env.json(&["forget", "--yes"]);
    assert_eq!(
        env.data_dir().join("projects").read_dir().unwrap().count(),
        0
    );
    env.assert_serving();
}

#[test]
fn options_that_do_not_apply_are_refused_or_honoured() {
    let env = TestEnv::new();
    let p = env.proj();
    // No configuration file: nothing to check is an error, not "valid".
    std::fs::remove_file(env.home.join("config/ckpt/config.toml")).unwrap();
    let out = env.ckpt(&["config", "check"]);
    assert_eq!(out.status.code(), Some(78), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("no configuration file"),
        "{}",
        stderr(&out)
    );
    for args in [&["--json", "completions", "bash"][..], &["--json", "man"]] {
        let out = env.ckpt(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(err["error"]["message"].as_str().unwrap().contains("--json"));
    }
    let out = env.ckpt(&["-q", "reload"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    // One of a thing is said so.
    write(&p, "a.txt", "one\n");
    env.watch();
    let first = env.checkpoint("first");
    write(&p, "a.txt", "two\n");
    let stat = stdout(&env.ckpt(&["diff", &first, "--stat"]));
    assert!(
        stat.contains(" 1 file changed, 1 insertion(+), 1 deletion(-)"),
        "{stat}"
    );
    let kept = stdout(&env.ckpt(&["dialog", "keep", "default", "1"]));
    assert!(kept.contains("keeps 1 checkpoint\n"), "{kept}");
}
