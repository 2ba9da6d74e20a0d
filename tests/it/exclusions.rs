//! What a checkpoint contains: git's ignore rules (checked against real `git`), the built-in
//! exclusions, nested repositories, secrets and oversized files.

use std::process::Command;

use crate::harness::*;

fn git_init(dir: &std::path::Path) {
    let out = Command::new("git")
        .arg("init")
        .arg("-q")
        .arg(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// What real git would add in `dir`: untracked, not ignored.
fn git_untracked(env: &TestEnv, dir: &std::path::Path) -> Vec<String> {
    let mut cmd = Command::new("git");
    env.env(&mut cmd);
    let out = cmd
        .current_dir(dir)
        .args(["ls-files", "-o", "--exclude-standard", "-z"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut files: Vec<String> = stdout(&out)
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    files.sort();
    files
}

#[test]
fn gitignore_rules_match_real_git() {
    let env = TestEnv::new();
    let p = env.proj();
    git_init(&p);
    write(
        &p,
        ".gitignore",
        "*.log\n!keep.log\n/root_only.txt\nbuild-output/\ndocs/**/*.tmp\n# comment\n\\#hash.txt\n",
    );
    write(&p, "app.log", "x");
    write(&p, "keep.log", "kept by negation");
    write(&p, "root_only.txt", "anchored: ignored at the root");
    write(&p, "other/root_only.txt", "anchored: kept below the root");
    write(&p, "build-output/a.bin", "ignored dir");
    write(&p, "docs/a/b/c.tmp", "ignored by **");
    write(&p, "docs/a/b/c.md", "kept");
    write(&p, "#hash.txt", "escaped hash ignored");
    write(&p, "sub/.gitignore", "*.txt\n!important.txt\n");
    write(&p, "sub/notes.txt", "ignored by nested");
    write(&p, "sub/important.txt", "re-included by nested negation");
    write(
        &p,
        "sub/deeper/x.txt",
        "ignored by parent dir's nested rule",
    );
    write(&p, "sub/deeper/x.rs", "kept");
    write(&p, "sub/app.log", "ignored by root rule");
    write(&p, ".git/info/exclude", "secret-notes.md\n");
    write(&p, "secret-notes.md", "excluded via info/exclude");
    write(&p, "src/main.rs", "fn main() {}");
    env.watch();
    let id = env.checkpoint("ignores");
    let ours = env.ls_tree(&id);
    assert_eq!(
        ours,
        git_untracked(&env, &p),
        "ckpt and git disagree on what is ignored"
    );
    for expected in [
        "keep.log",
        "other/root_only.txt",
        "docs/a/b/c.md",
        "sub/important.txt",
        "sub/deeper/x.rs",
        ".gitignore",
    ] {
        assert!(
            ours.contains(&expected.to_string()),
            "{expected} missing from {ours:?}"
        );
    }
    for absent in [
        "app.log",
        "root_only.txt",
        "docs/a/b/c.tmp",
        "sub/notes.txt",
        "secret-notes.md",
        "#hash.txt",
    ] {
        assert!(
            !ours.contains(&absent.to_string()),
            "{absent} should be ignored: {ours:?}"
        );
    }
}

#[test]
fn global_excludes_file_applies() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&env.home.join("config"), "git/ignore", "*.swp\n");
    write(&p, "file.rs", "x");
    write(&p, "file.rs.swp", "editor junk");
    env.watch();
    let id = env.checkpoint("global");
    assert_eq!(env.ls_tree(&id), vec!["file.rs".to_string()]);
}

#[test]
fn gitignore_applies_without_a_git_repository() {
    let env = TestEnv::new();
    let p = env.proj();
    assert!(!p.join(".git").exists());
    write(&p, ".gitignore", "*.log\ncache/\n");
    write(&p, "a.log", "x");
    write(&p, "cache/c", "x");
    write(&p, "main.py", "print()");
    env.watch();
    let id = env.checkpoint("no git");
    assert_eq!(
        env.ls_tree(&id),
        vec![".gitignore".to_string(), "main.py".to_string()]
    );
}

#[test]
fn built_in_exclusions_and_secrets() {
    let env = TestEnv::new();
    let p = env.proj();
    for dir in [
        ".git",
        ".hg",
        ".svn",
        ".jj",
        "node_modules",
        "venv",
        ".venv",
        "__pycache__",
        "dist",
        "build",
        "target",
    ] {
        write(&p, &format!("{dir}/file"), "excluded");
        write(&p, &format!("nested/{dir}/file"), "excluded at any depth");
    }
    for file in [
        "m.pyc",
        "m.pyo",
        "lib.so",
        "lib.dylib",
        "lib.dll",
        ".env",
        ".env.local",
        ".env.production",
        "sub/.env",
    ] {
        write(&p, file, "excluded");
    }
    for file in [
        ".env.example",
        ".env.sample",
        ".env.template",
        ".github/ci.yml",
        ".editorconfig",
        ".gitignore",
        "dist.rs",
        "src/build.rs",
        "target.txt",
    ] {
        write(&p, file, "kept");
    }
    env.watch();
    let id = env.checkpoint("built-ins");
    let mut expected = vec![
        ".editorconfig",
        ".env.example",
        ".env.sample",
        ".env.template",
        ".github/ci.yml",
        ".gitignore",
        "dist.rs",
        "src/build.rs",
        "target.txt",
    ];
    expected.sort();
    assert_eq!(env.ls_tree(&id), expected);
    // No secret ever reached the store.
    let all_blobs = env.git(&["cat-file", "--batch-all-objects", "--batch-check"]);
    assert!(!all_blobs.is_empty());
    let grep = Command::new("git")
        .arg("--git-dir")
        .arg(env.store())
        .args(["grep", "-I", "excluded", &id])
        .output()
        .unwrap();
    assert!(
        stdout(&grep).is_empty(),
        "excluded content in the store: {}",
        stdout(&grep)
    );
}

#[test]
fn configured_exclusions_add_remove_and_allow() {
    let env = TestEnv::with_config("[exclusions]\nadd = [\"*.bak\", \"coverage/\"]\nremove = [\"dist/\"]\nallow = [\".env.local\"]\n");
    let p = env.proj();
    write(&p, "a.bak", "added exclusion");
    write(&p, "coverage/index.html", "added exclusion");
    write(&p, "dist/bundle.js", "built-in removed: kept");
    write(&p, ".env.local", "allowed");
    write(&p, ".env", "still excluded");
    write(&p, "build/x", "still excluded");
    env.watch();
    let id = env.checkpoint("configured");
    assert_eq!(
        env.ls_tree(&id),
        vec![".env.local".to_string(), "dist/bundle.js".to_string()]
    );
}

#[test]
fn nested_repository_is_a_folder_with_its_own_rules() {
    let env = TestEnv::new();
    let p = env.proj();
    git_init(&p);
    write(&p, ".gitignore", "*.out\n");
    write(&p, "top.out", "ignored by the outer repo");
    let inner = p.join("vendor/lib");
    std::fs::create_dir_all(&inner).unwrap();
    git_init(&inner);
    write(&inner, ".gitignore", "*.tmp\n");
    write(&inner, "code.c", "int x;");
    write(&inner, "scratch.tmp", "ignored by the inner repo");
    write(
        &inner,
        "result.out",
        "outer rules stop at the nested repository",
    );
    write(&inner, ".git/info/exclude", "local.cfg\n");
    write(&inner, "local.cfg", "excluded by the inner info/exclude");
    env.watch();
    let id = env.checkpoint("nested");
    let files = env.ls_tree(&id);
    assert_eq!(
        files,
        vec![
            ".gitignore",
            "vendor/lib/.gitignore",
            "vendor/lib/code.c",
            "vendor/lib/result.out"
        ]
    );
    // Git itself, asked inside the nested repository, agrees.
    let inner_view: Vec<String> = git_untracked(&env, &inner)
        .into_iter()
        .map(|f| format!("vendor/lib/{f}"))
        .collect();
    let ours_inner: Vec<String> = files
        .into_iter()
        .filter(|f| f.starts_with("vendor/lib/"))
        .collect();
    assert_eq!(ours_inner, inner_view);
    env.fsck();
}

#[test]
fn oversized_and_unreadable_files_are_skipped_and_reported() {
    let env = TestEnv::with_config("max_file_size = \"1KiB\"\n");
    let p = env.proj();
    write(&p, "small.txt", "small");
    write(&p, "big.bin", &"x".repeat(2048));
    env.watch();
    let c = env.json(&["checkpoint", "-m", "sizes"]);
    assert_eq!(
        env.ls_tree(c["id"].as_str().unwrap()),
        vec!["small.txt".to_string()]
    );
    let skipped = c["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{c}");
    assert_eq!(skipped[0]["path"], "big.bin");
    assert!(skipped[0]["reason"]
        .as_str()
        .unwrap()
        .contains("max_file_size"));
    assert!(
        env.log().contains("skipped while taking a snapshot"),
        "skips are logged at WARN"
    );
    // `show` reports the skip too, and the human output names it.
    let shown = stdout(&env.ckpt(&["show", c["id"].as_str().unwrap()]));
    assert!(
        shown.contains("big.bin: larger than max_file_size"),
        "{shown}"
    );

    // A restore never deletes what the store could not capture, and says it left it.
    let small_only = env.checkpoint("again");
    std::fs::remove_file(p.join("small.txt")).unwrap();
    let out = env.ckpt(&["--json", "restore", &small_only, "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let left: Vec<&str> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert!(left.contains(&"big.bin"), "{report}");
    assert!(
        p.join("big.bin").exists(),
        "an uncaptured file must survive a restore"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("small.txt")).unwrap(),
        "small"
    );
    assert_eq!(report["deleted"].as_array().unwrap().len(), 0);
}

#[test]
fn bad_config_is_a_clear_error() {
    let mut env = TestEnv::without_daemon("max_file_size = \"lots\"\n");
    let mut cmd = Command::new(CKPTD);
    env.env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("config.toml") && err.contains("max_file_size"),
        "{err}"
    );

    std::fs::write(
        env.home.join("config/ckpt/config.toml"),
        "unknown_key = 1\n",
    )
    .unwrap();
    let mut cmd = Command::new(CKPTD);
    env.env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown field"), "{}", stderr(&out));

    std::fs::write(
        env.home.join("config/ckpt/config.toml"),
        "log_level = \"warn\"\n",
    )
    .unwrap();
    env.start_daemon();
    env.assert_serving();
}

/// Private keys by name are secrets like `.env`: never captured unless allowed (their public
/// halves are).
#[test]
fn private_keys_are_never_captured() {
    let env = TestEnv::new();
    let proj = env.proj();
    for f in [
        "id_rsa",
        "keys/id_ed25519",
        "deploy/id_ecdsa",
        "tls/server.pem",
        "tls/server.key",
    ] {
        write(&proj, f, "PRIVATE\n");
    }
    for f in ["id_rsa.pub", "keys/id_ed25519.pub", "README.md"] {
        write(&proj, f, "public\n");
    }
    env.watch();
    let id = env.checkpoint("keys");
    let mut files = env.ls_tree(&id);
    files.sort();
    assert_eq!(
        files,
        vec!["README.md", "id_rsa.pub", "keys/id_ed25519.pub"]
    );
    let objects = env.git(&["cat-file", "--batch-all-objects", "--batch"]);
    assert!(
        !objects.contains("PRIVATE"),
        "a private key reached the store"
    );
}
