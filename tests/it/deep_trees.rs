//! Trees nested deeper than git allows (5,000 folders), from a bundle and from a remote: refused
//! with a clear reason, nothing kept, and the daemon (whose walks of trees once recursed)
//! keeps serving every project.

use std::path::Path;
use std::process::Command;

use crate::harness::*;
use crate::servers::{bare_repo, GitDaemon};

/// Writes, into the bare repository `git_dir`, a tree of folders `d/d/…/d/f` `depth` deep as
/// loose objects (quicker than a git process per tree) and returns its id.
fn deep_tree(git_dir: &Path, depth: usize) -> String {
    let program = r#"
import hashlib, os, sys, zlib
git_dir, depth = sys.argv[1], int(sys.argv[2])
def write(kind, body):
    data = b"%s %d\0" % (kind, len(body)) + body
    sha = hashlib.sha1(data).hexdigest()
    folder = os.path.join(git_dir, "objects", sha[:2])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, sha[2:])
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(zlib.compress(data))
    return sha
tree = write(b"tree", b"100644 f\0" + bytes.fromhex(write(b"blob", b"deep\n")))
for _ in range(depth - 1):
    tree = write(b"tree", b"40000 d\0" + bytes.fromhex(tree))
print(tree)
"#;
    let out = Command::new("python3")
        .args(["-c", program])
        .arg(git_dir)
        .arg(depth.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

/// `git ARGS` in `git_dir` with a fixed identity and git's own depth limit lifted (to build
/// what an attacker would).
fn git(git_dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", git_dir)
        .env("GIT_AUTHOR_NAME", "m")
        .env("GIT_AUTHOR_EMAIL", "m@m")
        .env("GIT_COMMITTER_NAME", "m")
        .env("GIT_COMMITTER_EMAIL", "m@m")
        .args(["-c", "core.maxTreeDepth=100000", "--git-dir"])
        .arg(git_dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    stdout(&out).trim().to_string()
}

#[test]
fn a_bundle_of_a_tree_5000_folders_deep_is_refused() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("first");
    let crafted = env.home.join("crafted.git");
    git(&crafted, &["init", "--bare", "-q"]);
    let tree = deep_tree(&crafted, 5000);
    let commit = git(&crafted, &["commit-tree", &tree, "-m", "deep"]);
    git(&crafted, &["update-ref", "refs/heads/deep", &commit]);
    let bundle = env.home.join("deep.bundle");
    git(
        &crafted,
        &[
            "bundle",
            "create",
            "-q",
            bundle.to_str().unwrap(),
            "refs/heads/deep",
        ],
    );
    let out = env.ckpt(&["import", "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("deeper than 2048"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 1);
    // A tree at git's limit, 2,048 deep, is taken.
    let tree = deep_tree(&crafted, 2048);
    let commit = git(&crafted, &["commit-tree", &tree, "-m", "deep but allowed"]);
    git(&crafted, &["update-ref", "refs/heads/deep", &commit]);
    std::fs::remove_file(&bundle).unwrap();
    git(
        &crafted,
        &[
            "bundle",
            "create",
            "-q",
            bundle.to_str().unwrap(),
            "refs/heads/deep",
        ],
    );
    let imported = env.json(&["import", "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(
        imported["imported"].as_array().unwrap().len(),
        1,
        "{imported}"
    );
    let id = imported["imported"][0]["id"].as_str().unwrap();
    let shown = env.json(&["show", id]);
    assert_eq!(shown["added"], 1, "{shown}");
    // Restoring it: its file's path is longer than the system opens (4,096 bytes), so it is
    // skipped and said; the walks of a tree that deep all fit, and the daemon goes on.
    let restored = env.ckpt(&["--json", "restore", id, "--yes"]);
    assert_eq!(restored.status.code(), Some(2), "{}", stderr(&restored));
    let report: serde_json::Value = serde_json::from_slice(&restored.stdout).unwrap();
    assert_eq!(report["skipped"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["deleted"], serde_json::json!(["a.txt"]), "{report}");
    env.json(&["undo", "--yes"]);
    assert_eq!(
        std::fs::read_to_string(env.proj().join("a.txt")).unwrap(),
        "a\n"
    );
    env.fsck();
    env.assert_serving();
}

#[test]
fn a_remote_checkpoint_5000_folders_deep_is_ignored_by_fetch() {
    let base = tempfile::tempdir().unwrap();
    let remote = bare_repo(base.path(), "team.git");
    let server = GitDaemon::start(base.path());
    let env = TestEnv::with_config("push_as = \"bob\"\n");
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("mine");
    let out = env.ckpt(&["remote", "add", "team", &server.url("team.git")]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Someone else's checkpoint as ckpt writes them (its header copied from one of ours), with
    // a tree 5,000 folders deep, and an honest one beside it.
    let own = env.json(&["list"]);
    let own_id = own[0]["id"].as_str().unwrap();
    let header = git_in(&env.store(), &["cat-file", "commit", own_id]);
    let ckpt_line = header
        .lines()
        .find(|l| l.starts_with("ckpt "))
        .unwrap_or_else(|| panic!("no ckpt header: {header}"));
    // A server that sends it (git's own would refuse to: a remote that wants to harm lifts it).
    git(&remote, &["config", "core.maxTreeDepth", "100000"]);
    let tree = deep_tree(&remote, 5000);
    let raw = format!(
        "tree {tree}\nauthor m <m@m> 1700000000 +0000\ncommitter m <m@m> 1700000000 +0000\n{ckpt_line}\n\ndeep\n"
    );
    let path = base.path().join("commit.txt");
    std::fs::write(&path, raw).unwrap();
    let evil = git(
        &remote,
        &[
            "hash-object",
            "-w",
            "-t",
            "commit",
            "--literally",
            path.to_str().unwrap(),
        ],
    );
    git(
        &remote,
        &["update-ref", "refs/ckpt/mallory/dialogs/evil", &evil],
    );
    // This machine's git (2.46 and later) refuses such a pack itself: the fetch fails whole.
    let refused = env.ckpt(&["fetch", "team"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains("maximum allowed tree depth"),
        "{}",
        stderr(&refused)
    );
    // An older git takes it in (the limit lifted here, as it was before): ckpt's own check
    // leaves that checkpoint out.
    std::fs::write(
        env.home.join("home/.gitconfig"),
        "[core]\n\tmaxTreeDepth = 100000\n",
    )
    .unwrap();
    let fetched = env.json(&["fetch", "team"]);
    let ignored = fetched[0]["ignored"].to_string();
    assert!(ignored.contains("mallory/dialogs/evil"), "{fetched}");
    assert!(ignored.contains("deeper than 2048"), "{fetched}");
    assert_eq!(fetched[0]["new_checkpoints"], 0, "{fetched}");
    let all = env.json(&["list", "--all"]);
    assert!(all
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["id"] != evil.as_str()));
    env.fsck();
    env.assert_serving();
}
