//! `ckpt import --bundle`: bundles from `ckpt export` and from plain `git bundle create` become
//! checkpoints that restore byte-identically, also after `ckpt gc` and `git gc --prune=now`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::harness::*;

/// A second project of the same daemon, at `<home>/<name>`, watched.
fn other_project(env: &TestEnv, name: &str) -> PathBuf {
    let dir = env.home.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let out = env.ckpt_in(&dir, &["watch"]);
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

/// Runs git in `dir` with a fixed identity, asserting success.
fn git_work(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "A")
        .env("GIT_AUTHOR_EMAIL", "a@example.com")
        .env("GIT_COMMITTER_NAME", "A")
        .env("GIT_COMMITTER_EMAIL", "a@example.com")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    stdout(&out)
}

fn pack_files(store: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(store.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn restore_in(env: &TestEnv, dir: &Path, id: &str) {
    let r = env.json_in(dir, &["restore", id, "--yes"]);
    assert!(r["skipped"].as_array().unwrap().is_empty(), "{r}");
}

#[test]
fn checkpoints_exported_by_one_project_import_into_another() {
    let env = TestEnv::new();
    let a = env.proj();
    write(&a, "src/lib.rs", "pub fn one() {}\n");
    write(&a, "notes.txt", "first\n");
    env.watch();
    let meta = env.home.join("meta.json");
    std::fs::write(&meta, r#"{"messages":["fix the bug"]}"#).unwrap();
    let first = env.json(&[
        "checkpoint",
        "-m",
        "first",
        "--meta",
        meta.to_str().unwrap(),
    ]);
    let mut states = vec![tree_state(&a)];
    write(&a, "src/lib.rs", "pub fn one() {}\npub fn two() {}\n");
    write(&a, "run.sh", "#!/bin/sh\necho hi\n");
    chmod(&a, "run.sh", 0o755);
    let second = env.checkpoint("second");
    states.push(tree_state(&a));
    std::fs::remove_file(a.join("notes.txt")).unwrap();
    symlink(&a, "link", "src/lib.rs");
    let third = env.checkpoint("third");
    states.push(tree_state(&a));
    let originals = [first["id"].as_str().unwrap(), &second, &third];

    let bundle = env.home.join("a.bundle");
    let b = bundle.to_str().unwrap();
    env.json(&["export", &third, originals[0], &second, "--bundle", b]);

    let other = other_project(&env, "other");
    write(&other, "unrelated.txt", "other project\n");
    let result = env.json_in(&other, &["import", "--bundle", b]);
    assert_eq!(result["dialog"], "imported", "{result}");
    let imported = result["imported"].as_array().unwrap();
    assert_eq!(imported.len(), 3, "{result}");
    for (i, c) in imported.iter().enumerate() {
        assert_eq!(c["kind"], "imported");
        assert_eq!(c["dialog"], "imported");
        assert_eq!(c["seq"], i as u64 + 1);
        assert_eq!(c["imported"]["from"], originals[i], "oldest first");
        assert_eq!(c["imported"]["kind"], "manual");
        assert_eq!(c["imported"]["dialog"], "default");
    }
    assert_eq!(imported[1]["label"], "second");
    // The client metadata came along.
    let shown = env.json_in(&other, &["show", imported[0]["id"].as_str().unwrap()]);
    assert_eq!(shown["meta"]["messages"][0], "fix the bug", "{shown}");
    let listed = env.json_in(&other, &["list", "--dialog", "imported"]);
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    let store = env.store_of(&other);
    git_in(&store, &["fsck", "--strict", "--no-progress"]);
    assert!(
        !pack_files(&store).iter().any(|f| f.ends_with(".keep")),
        "{:?}",
        pack_files(&store)
    );

    for (c, state) in imported.iter().zip(&states) {
        restore_in(&env, &other, c["id"].as_str().unwrap());
        assert_eq!(&tree_state(&other), state);
    }

    // Importing again adds nothing; nor does importing into the project it came from.
    let again = env.json_in(&other, &["import", "--bundle", b]);
    assert!(again["imported"].as_array().unwrap().is_empty(), "{again}");
    let reasons: Vec<&str> = again["not_imported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons.len(), 3, "{again}");
    assert!(
        reasons.iter().all(|r| r.starts_with("imported before as")),
        "{again}"
    );
    let home = env.json(&["import", "--bundle", b]);
    assert!(home["imported"].as_array().unwrap().is_empty(), "{home}");
    assert!(
        home["not_imported"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("already a checkpoint"),
        "{home}"
    );
    let text = stdout(&env.ckpt_in(&other, &["import", "--bundle", b]));
    assert!(
        text.contains("imported no checkpoints") && text.contains("imported before"),
        "{text}"
    );

    // Objects survive ckpt gc and git gc: every imported checkpoint still restores exactly.
    env.json_in(&other, &["gc"]);
    git_in(&store, &["fsck", "--strict", "--no-progress"]);
    git_in(&store, &["gc", "--prune=now", "--quiet"]);
    git_in(&store, &["fsck", "--strict", "--no-progress"]);
    for (c, state) in imported.iter().zip(&states).rev() {
        restore_in(&env, &other, c["id"].as_str().unwrap());
        assert_eq!(&tree_state(&other), state);
    }
    let shown = env.json_in(&other, &["show", imported[0]["id"].as_str().unwrap()]);
    assert_eq!(shown["meta"]["messages"][0], "fix the bug");
    env.fsck();
}

#[test]
fn git_bundles_with_deltas_tags_and_prerequisites_import() {
    let env = TestEnv::new();
    let repo = env.home.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_work(&repo, &["init", "-q", "-b", "main"]);
    // A file large enough that git stores later versions as deltas.
    let big: String = (0..2000)
        .map(|i| format!("line {i} of a long file\n"))
        .collect();
    write(&repo, "big.txt", &big);
    write(&repo, "src/a.rs", "fn a() {}\n");
    git_work(&repo, &["add", "-A"]);
    git_work(&repo, &["commit", "-q", "-m", "first commit"]);
    git_work(&repo, &["tag", "-a", "v1", "-m", "version one"]);
    let v1_files = tree_state_without_git(&repo);
    write(
        &repo,
        "big.txt",
        &big.replace("line 1000 of", "LINE 1000 OF"),
    );
    write(&repo, "src/b.rs", "fn b() {}\n");
    git_work(&repo, &["add", "-A"]);
    git_work(
        &repo,
        &["commit", "-q", "-m", "second commit\n\nwith a body"],
    );
    let main_files = tree_state_without_git(&repo);
    let full = env.home.join("full.bundle");
    git_work(
        &repo,
        &["bundle", "create", "-q", full.to_str().unwrap(), "--all"],
    );

    let p = env.proj();
    write(&p, "scratch.txt", "scratch\n");
    env.watch();
    let result = env.json(&[
        "import",
        "--bundle",
        full.to_str().unwrap(),
        "--dialog",
        "upstream",
    ]);
    let imported = result["imported"].as_array().unwrap();
    // HEAD, main and the v1 tag name two commits.
    assert_eq!(imported.len(), 2, "{result}");
    assert_eq!(imported[0]["label"], "first commit");
    assert_eq!(imported[0]["imported"]["kind"], "commit");
    assert_eq!(imported[0]["imported"]["ref_name"], "refs/tags/v1");
    assert_eq!(imported[1]["label"], "second commit\n\nwith a body");
    assert_eq!(imported[1]["imported"]["ref_name"], "refs/heads/main");
    assert_eq!(imported[1]["dialog"], "upstream");
    // The pack was stored with git's deltas and resolved (beside it: the small packs of the
    // checkpoints recorded for it).
    let store = env.store();
    let verify: Vec<String> = pack_files(&store)
        .into_iter()
        .filter(|f| f.ends_with(".idx"))
        .map(|idx| {
            let idx = store.join("objects/pack").join(idx);
            git_in(&store, &["verify-pack", "-v", idx.to_str().unwrap()])
        })
        .collect();
    let verify = verify.join("\n");
    assert!(verify.contains("chain length = 1"), "{verify}");
    env.fsck();

    restore_in(&env, &p, imported[0]["id"].as_str().unwrap());
    assert_eq!(tree_state(&p), v1_files);
    restore_in(&env, &p, imported[1]["id"].as_str().unwrap());
    assert_eq!(tree_state(&p), main_files);

    // An incremental bundle: a thin pack whose deltas refer to objects of its prerequisite.
    write(
        &repo,
        "big.txt",
        &big.replace("line 1500 of", "LINE 1500 OF"),
    );
    git_work(&repo, &["commit", "-q", "-am", "third commit"]);
    let third_files = tree_state_without_git(&repo);
    let inc = env.home.join("inc.bundle");
    git_work(
        &repo,
        &[
            "bundle",
            "create",
            "-q",
            inc.to_str().unwrap(),
            "main~1..main",
        ],
    );

    // A project that lacks the prerequisite gets a clear error and keeps nothing.
    let fresh = other_project(&env, "fresh");
    write(&fresh, "f.txt", "f\n");
    env.json_in(&fresh, &["checkpoint", "-m", "start"]);
    let fresh_store = env.store_of(&fresh);
    let before = pack_files(&fresh_store);
    let out = env.ckpt_in(&fresh, &["import", "--bundle", inc.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("builds on 1 commit") && err.contains("import the bundle it builds on first"),
        "{err}"
    );
    assert_eq!(pack_files(&fresh_store), before);
    git_in(&fresh_store, &["fsck", "--strict", "--no-progress"]);
    env.assert_serving();

    // The project that has it imports the new commit only.
    let result = env.json(&[
        "import",
        "--bundle",
        inc.to_str().unwrap(),
        "--dialog",
        "upstream",
    ]);
    let imported = result["imported"].as_array().unwrap();
    assert_eq!(imported.len(), 1, "{result}");
    assert_eq!(imported[0]["label"], "third commit");
    restore_in(&env, &p, imported[0]["id"].as_str().unwrap());
    assert_eq!(tree_state(&p), third_files);
    env.fsck();
    env.json(&["gc"]);
    env.git(&["gc", "--prune=now", "--quiet"]);
    env.fsck();
    restore_in(&env, &p, result["imported"][0]["id"].as_str().unwrap());
    assert_eq!(tree_state(&p), third_files);
}

/// The files of a git work tree, without `.git`.
fn tree_state_without_git(dir: &Path) -> std::collections::BTreeMap<String, String> {
    let mut state = tree_state(dir);
    state.retain(|path, _| !path.starts_with(".git"));
    state
}

#[test]
fn bad_bundles_are_refused_and_leave_the_store_as_it_was() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a\n");
    env.watch();
    let id = env.checkpoint("one");
    let good = env.home.join("good.bundle");
    env.json(&["export", &id, "--bundle", good.to_str().unwrap()]);
    let bytes = std::fs::read(&good).unwrap();
    let header_end = bytes.windows(5).position(|w| w == b"\nPACK").unwrap() + 1;

    let dir = env.home.join("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases: Vec<(PathBuf, &str)> = Vec::new();
    let mut file = |name: &str, data: &[u8], expect: &'static str| {
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap();
        cases.push((path, expect));
    };
    file("empty.bundle", b"", "the file is empty");
    file("text.bundle", b"hello\nworld\n", "does not start with");
    file(
        "truncated.bundle",
        &bytes[..bytes.len() - 30],
        "pack cannot be read",
    );
    let mut flipped = bytes.clone();
    let middle = header_end + (bytes.len() - header_end) / 2;
    flipped[middle] ^= 0xff;
    file("corrupt.bundle", &flipped, "pack cannot be read");
    let mut no_pack = bytes[..header_end].to_vec();
    no_pack.extend_from_slice(b"not a pack at all");
    file("nopack.bundle", &no_pack, "pack cannot be read");
    let sha256 = format!(
        "# v3 git bundle\n@object-format=sha256\n{} refs/heads/x\n\n",
        "1".repeat(64)
    );
    file("sha256.bundle", sha256.as_bytes(), "sha256");
    file(
        "norefs.bundle",
        &[b"# v2 git bundle\n\n".as_slice(), &bytes[header_end..]].concat(),
        "names no commits",
    );
    cases.push((env.home.join("missing.bundle"), "cannot read"));
    cases.push((dir.clone(), "is a directory"));

    let store = env.store();
    let packs = pack_files(&store);
    for (path, expect) in &cases {
        let out = env.ckpt(&["import", "--bundle", path.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {}",
            path.display(),
            stdout(&out)
        );
        let err = stderr(&out);
        assert!(
            err.contains(expect),
            "{}: expected `{expect}` in: {err}",
            path.display()
        );
        assert_eq!(pack_files(&store), packs, "{} left files", path.display());
    }
    // A bad dialog name and a relative path (over the raw protocol) are refused too.
    let out = env.ckpt(&[
        "import",
        "--bundle",
        good.to_str().unwrap(),
        "--dialog",
        "../x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid dialog name"),
        "{}",
        stderr(&out)
    );
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"import_bundle","params":{{"project":"{}","path":"rel.bundle"}}}}"#,
        p.display()
    );
    let reply = &env.raw(&[request.as_bytes()])[0];
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be absolute"),
        "{reply}"
    );
    env.assert_serving();
    env.fsck();
    let list = env.json(&["list"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}

#[test]
fn a_bundle_of_a_pruned_timeline_imports_without_its_cut_history() {
    let env = TestEnv::new();
    let p = env.proj();
    env.watch();
    let mut last = String::new();
    for i in 0..5 {
        write(&p, "f.txt", &format!("version {i}\n"));
        last = env.checkpoint(&format!("v{i}"));
    }
    env.json(&["prune", "--keep", "1", "--gc"]);
    let bundle = env.home.join("pruned.bundle");
    env.json(&["export", &last, "--bundle", bundle.to_str().unwrap()]);
    // The bundle names the cut parent as a prerequisite nobody else has.
    let head = std::fs::read(&bundle).unwrap();
    assert!(head.starts_with(b"# v2 git bundle\n-"), "no prerequisite");
    let state = tree_state(&p);

    let other = other_project(&env, "other");
    let result = env.json_in(&other, &["import", "--bundle", bundle.to_str().unwrap()]);
    let imported = result["imported"].as_array().unwrap();
    assert_eq!(imported.len(), 1, "{result}");
    assert_eq!(imported[0]["parent"], Value::Null);
    restore_in(&env, &other, imported[0]["id"].as_str().unwrap());
    assert_eq!(tree_state(&other), state);
    git_in(
        &env.store_of(&other),
        &["fsck", "--strict", "--no-progress"],
    );
}

/// Bundles whose trees hold `..`, `.git` in any case, a name with `/`, or a name twice are
/// refused whole at import, naming the path, and leave nothing in the store.
#[test]
fn crafted_bundles_with_unsafe_paths_are_refused_at_import() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("first");
    let packs_before = std::fs::read_dir(env.store().join("objects/pack"))
        .unwrap()
        .count();
    let crafted = env.home.join("crafted.git");
    let git = |args: &[&str], input: &[u8]| -> String {
        let mut child = std::process::Command::new("git")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &crafted)
            .env("GIT_AUTHOR_NAME", "a")
            .env("GIT_AUTHOR_EMAIL", "a@a")
            .env("GIT_COMMITTER_NAME", "a")
            .env("GIT_COMMITTER_EMAIL", "a@a")
            .arg("--git-dir")
            .arg(&crafted)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?}");
        stdout(&out).trim().to_string()
    };
    git(&["init", "--bare", "-q"], b"");
    let blob = git(&["hash-object", "-w", "--stdin"], b"payload\n");
    let tree_of = |entries: &[(&str, &str, &str)]| {
        let mut raw = Vec::new();
        for (mode, name, id) in entries {
            raw.extend(tree_entry(mode, name, id));
        }
        git(
            &["hash-object", "-w", "--literally", "-t", "tree", "--stdin"],
            &raw,
        )
    };
    let inner_dotdot = tree_of(&[("100644", "..", &blob)]);
    let cases: Vec<(&str, String)> = vec![
        ("..", tree_of(&[("100644", "..", &blob)])),
        (
            ".git",
            tree_of(&[("40000", ".git", &tree_of(&[("100644", "config", &blob)]))]),
        ),
        (
            ".GiT",
            tree_of(&[("40000", ".GiT", &tree_of(&[("100644", "hooks", &blob)]))]),
        ),
        ("a/b", tree_of(&[("100644", "a/b", &blob)])),
        (
            "dup",
            tree_of(&[("100644", "dup", &blob), ("100644", "dup", &blob)]),
        ),
        ("sub/..", tree_of(&[("40000", "sub", &inner_dotdot)])),
    ];
    for (name, tree) in cases {
        let commit = git(&["commit-tree", &tree, "-m", name], b"");
        git(&["update-ref", "refs/heads/crafted", &commit], b"");
        let bundle = env.home.join("crafted.bundle");
        let _ = std::fs::remove_file(&bundle);
        git(
            &[
                "bundle",
                "create",
                "-q",
                bundle.to_str().unwrap(),
                "refs/heads/crafted",
            ],
            b"",
        );
        let out = env.ckpt(&["import", "--bundle", bundle.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains("no checkout may write"), "{name}: {err}");
        assert!(err.contains(name), "{name}: {err}");
        let packs = std::fs::read_dir(env.store().join("objects/pack"))
            .unwrap()
            .count();
        assert_eq!(packs, packs_before, "{name}: the refused pack stayed");
    }
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 1);
    env.fsck();
    env.assert_serving();
}

/// A pack entry that declares an enormous object (the fuzzer's find: the reader allocated
/// what the header claimed, ~83 GB, and the daemon died), and a delta whose result declares
/// one, are refused before anything of that size is allocated, and the daemon keeps serving.
#[test]
fn a_bundle_declaring_an_enormous_object_is_refused() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    let header = format!("# v2 git bundle\n{} refs/heads/x\n\n", "1".repeat(40)).into_bytes();
    const HUGE: u64 = 0x13_8000_8000;
    // A blob that declares HUGE bytes and holds none.
    let mut pack = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
    entry_head(&mut pack, 3, HUGE);
    pack.extend_from_slice(&stored_zlib(b""));
    // A blob of one byte, then a delta on it that makes a HUGE object of it.
    let mut delta_pack = b"PACK\0\0\0\x02\0\0\0\x02".to_vec();
    entry_head(&mut delta_pack, 3, 1);
    delta_pack.extend_from_slice(&stored_zlib(b"a"));
    let base_at = 12u64;
    let delta_at = delta_pack.len() as u64;
    let mut delta = Vec::new();
    varint(&mut delta, 1);
    varint(&mut delta, HUGE);
    delta.extend_from_slice(&[0x01, b'x']);
    entry_head(&mut delta_pack, 6, delta.len() as u64);
    delta_pack.push((delta_at - base_at) as u8); // a one-byte offset (< 128)
    delta_pack.extend_from_slice(&stored_zlib(&delta));
    for (name, mut pack) in [("enormous", pack), ("enormous-delta", delta_pack)] {
        pack.extend_from_slice(&sha1(&pack));
        let mut data = header.clone();
        data.extend_from_slice(&pack);
        let bundle = env.home.join(format!("{name}.bundle"));
        std::fs::write(&bundle, data).unwrap();
        let out = env.ckpt(&["import", "--bundle", bundle.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(stderr(&out).contains("pack"), "{name}: {}", stderr(&out));
        env.assert_serving();
    }
    // The daemon never held anything near that size.
    let pid = env.daemon.as_ref().unwrap().id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    assert!(peak_kb < 1 << 20, "peak RSS {peak_kb} kB");
}

/// A pack entry's type-and-size header.
fn entry_head(out: &mut Vec<u8>, kind: u8, mut size: u64) {
    let mut b = (kind << 4) | (size & 0x0f) as u8;
    size >>= 4;
    while size != 0 {
        out.push(b | 0x80);
        b = (size & 0x7f) as u8;
        size >>= 7;
    }
    out.push(b);
}

/// A delta's size: 7 bits at a time, least significant first.
fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// `data` as a zlib stream of one stored block.
fn stored_zlib(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01, 0x01];
    let len = data.len() as u16;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

/// The SHA-1 of `data`, by `sha1sum`.
fn sha1(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("sha1sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    (0..20)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}
