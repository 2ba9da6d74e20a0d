//! What each checkpoint's pack holds: every new object once, nothing the store holds already
//! (a first checkpoint's contents, the trees of folders that did not change), read back with
//! the real `git verify-pack`.

use std::collections::BTreeSet;

use crate::harness::*;

/// The store's packs (their `.idx` paths).
fn all_packs(env: &TestEnv) -> BTreeSet<std::path::PathBuf> {
    std::fs::read_dir(env.store().join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect()
}

/// The ids of the objects of `kind` the packs `idx` hold (an object in two packs: twice).
fn objects_in_packs(env: &TestEnv, idx: &BTreeSet<std::path::PathBuf>, kind: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for path in idx {
        let listed = std::process::Command::new("git")
            .arg("verify-pack")
            .arg("-v")
            .arg(path)
            .output()
            .unwrap();
        assert!(listed.status.success(), "{}", stderr(&listed));
        for line in stdout(&listed).lines() {
            let mut words = line.split_whitespace();
            if let (Some(id), Some(k)) = (words.next(), words.next()) {
                if k == kind {
                    ids.push(id.to_string());
                }
            }
        }
    }
    let _ = env;
    ids
}

/// The trees a checkpoint holds at `folders` (`""`: its root).
fn trees_of(env: &TestEnv, id: &str, folders: &[&str]) -> BTreeSet<String> {
    folders
        .iter()
        .map(|f| {
            env.git(&["rev-parse", &format!("{id}:{f}")])
                .trim()
                .to_string()
        })
        .collect()
}

/// A project's first checkpoint (an empty store: objects are not looked up in it) writes each
/// distinct content once however many files hold it, every file is in it, and the next
/// checkpoint (a store holding objects) writes none of the contents it already has.
#[test]
fn a_first_checkpoint_writes_each_content_once() {
    let env = TestEnv::new();
    let root = env.proj();
    for i in 0..300 {
        write(
            &root,
            &format!("d{}/f{i}.txt", i % 7),
            &format!("content {}\n", i % 100),
        );
    }
    env.watch();
    let first = env.checkpoint("first");
    assert_eq!(env.ls_tree(&first).len(), 300);
    let blobs_in_packs = || objects_in_packs(&env, &all_packs(&env), "blob").len();
    assert_eq!(blobs_in_packs(), 100);
    // 50 files copied from others, one new content: one more blob.
    for i in 300..350 {
        write(
            &root,
            &format!("e/f{i}.txt"),
            &format!("content {}\n", i % 100),
        );
    }
    write(&root, "e/new.txt", "new\n");
    let second = env.checkpoint("second");
    assert_eq!(env.ls_tree(&second).len(), 351);
    assert_eq!(blobs_in_packs(), 101);
    assert_eq!(
        env.git(&["show", &format!("{second}:e/f342.txt")]),
        "content 42\n"
    );
    env.fsck();
}

/// A checkpoint writes the trees of the folders that changed and nothing else: a changed
/// folder's new tree goes straight into the new pack, unchanged folders are not written again,
/// a folder changed back to an earlier state gives a checkpoint equal to that state (its trees
/// may be written again: a duplicate, never a loss), after a restart (no tree written before
/// in this daemon) trees the store holds are found and not written again, and a restore's
/// result (an earlier state) writes no tree at all.
#[test]
fn a_checkpoint_writes_the_trees_of_changed_folders_only() {
    let mut env = TestEnv::new();
    let root = env.proj();
    write(&root, "a/x.txt", "x\n");
    write(&root, "a/deep/y.txt", "y\n");
    write(&root, "b/z.txt", "z\n");
    write(&root, "c/w.txt", "w\n");
    env.watch();
    let first = env.checkpoint("first");
    // Each checkpoint's new packs, as `git verify-pack` lists them.
    let mut seen = all_packs(&env);
    let mut new_packs = |env: &TestEnv| {
        let now = all_packs(env);
        let new: BTreeSet<_> = now.difference(&seen).cloned().collect();
        seen = now;
        new
    };

    write(&root, "a/deep/y.txt", "y, changed\n");
    let second = env.checkpoint("second");
    let packs = new_packs(&env);
    let trees: BTreeSet<String> = objects_in_packs(&env, &packs, "tree").into_iter().collect();
    assert_eq!(trees, trees_of(&env, &second, &["", "a", "a/deep"]));
    assert_eq!(
        objects_in_packs(&env, &packs, "tree").len(),
        3,
        "a tree written twice"
    );
    assert_eq!(objects_in_packs(&env, &packs, "blob").len(), 1);
    assert_eq!(
        env.git(&["show", &format!("{second}:a/deep/y.txt")]),
        "y, changed\n"
    );

    // Changed back: the checkpoint is the first one's state exactly.
    write(&root, "a/deep/y.txt", "y\n");
    let third = env.checkpoint("third");
    assert_eq!(
        env.git(&["rev-parse", &format!("{third}^{{tree}}")]),
        env.git(&["rev-parse", &format!("{first}^{{tree}}")])
    );
    let packs = new_packs(&env);
    assert!(objects_in_packs(&env, &packs, "tree").len() <= 3);
    assert!(objects_in_packs(&env, &packs, "blob").is_empty());
    env.fsck();

    // After a restart, unchanged folders' trees are found in the store, not written again.
    env.stop_daemon();
    env.start_daemon();
    write(&root, "b/z.txt", "z, after the restart\n");
    let fourth = env.checkpoint("fourth");
    let packs = new_packs(&env);
    let trees: Vec<String> = objects_in_packs(&env, &packs, "tree");
    assert_eq!(
        trees.iter().cloned().collect::<BTreeSet<_>>(),
        trees_of(&env, &fourth, &["", "b"]),
        "{}",
        env.log()
    );
    assert_eq!(trees.len(), 2);
    assert_eq!(
        tree_state(&root).len(),
        env.ls_tree(&fourth).len(),
        "the checkpoint lists every file"
    );

    // A restore's result is an earlier state: its trees are found in the store, none written
    // again (the undo point is the state just recorded: nothing new either).
    env.json(&["restore", &first, "--yes"]);
    assert_eq!(
        std::fs::read_to_string(root.join("b/z.txt")).unwrap(),
        "z\n"
    );
    let packs = new_packs(&env);
    assert_eq!(objects_in_packs(&env, &packs, "tree"), Vec::<String>::new());
    assert_eq!(objects_in_packs(&env, &packs, "blob"), Vec::<String>::new());
    env.fsck();
}

/// Every file of a first checkpoint large enough to be compressed reads back from the store
/// byte for byte with the real git, whatever its content (text that repeats itself, bytes
/// that do not, runs, the sizes around the small-object limit), and what repeats itself is
/// stored compressed.
#[test]
fn a_first_checkpoint_compresses_what_repeats_and_git_reads_every_file() {
    let env = TestEnv::new();
    let root = env.proj();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut noise = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    };
    let text = |n: usize, len: usize| -> Vec<u8> {
        let mut t = Vec::new();
        while t.len() < len {
            t.extend_from_slice(
                format!("let value_{} = compute({n}, {});\n", t.len(), n * 7).as_bytes(),
            );
        }
        t.truncate(len);
        t
    };
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..200 {
        files.push((format!("src/m{}/f{i}.rs", i % 9), text(i, 500 + i * 37)));
    }
    for (i, len) in [1, 17, 1000, 4096, 20_000, 65_535, 65_536, 65_537, 70_000]
        .iter()
        .enumerate()
    {
        files.push((format!("bin/noise{i}"), noise(*len)));
        files.push((format!("txt/exact{i}.txt"), text(i, *len)));
    }
    let mut runs = vec![b'a'; 30_000];
    runs.extend(noise(300));
    runs.extend(vec![0u8; 40_000]);
    files.push(("runs.bin".into(), runs));
    files.push(("empty".into(), Vec::new()));
    files.push(("large.txt".into(), text(99, 300_000)));
    for (rel, content) in &files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    env.watch();
    let first = env.checkpoint("first");
    assert_eq!(env.ls_tree(&first).len(), files.len());
    let mut batch = std::process::Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .arg("--git-dir")
        .arg(env.store())
        .args(["cat-file", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let names: String = files
        .iter()
        .map(|(rel, _)| format!("{first}:{rel}\n"))
        .collect();
    std::io::Write::write_all(&mut batch.stdin.take().unwrap(), names.as_bytes()).unwrap();
    let out = batch.wait_with_output().unwrap();
    assert!(out.status.success());
    // Each answer: "<id> blob <size>\n<content>\n".
    let mut rest = out.stdout.as_slice();
    for (rel, content) in &files {
        let eol = rest.iter().position(|&b| b == b'\n').unwrap();
        let header = String::from_utf8_lossy(&rest[..eol]).to_string();
        let size: usize = header.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(size, content.len(), "{rel}: {header}");
        assert!(
            &rest[eol + 1..eol + 1 + size] == content.as_slice(),
            "{rel} differs"
        );
        rest = &rest[eol + 2 + size..];
    }
    // `git verify-pack -v`: id, kind, size, size in the pack, offset.
    let (mut text_size, mut text_packed) = (0u64, 0u64);
    let text_ids: BTreeSet<String> = files
        .iter()
        .filter(|(rel, _)| rel.starts_with("src/") || rel.starts_with("txt/exact8"))
        .map(|(rel, _)| {
            env.git(&["rev-parse", &format!("{first}:{rel}")])
                .trim()
                .to_string()
        })
        .collect();
    for idx in all_packs(&env) {
        let listed = std::process::Command::new("git")
            .arg("verify-pack")
            .arg("-v")
            .arg(&idx)
            .output()
            .unwrap();
        assert!(listed.status.success(), "{}", stderr(&listed));
        for line in stdout(&listed).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() >= 5 && text_ids.contains(words[0]) {
                text_size += words[2].parse::<u64>().unwrap();
                text_packed += words[3].parse::<u64>().unwrap();
            }
        }
    }
    assert!(
        text_size > 0 && text_packed * 3 < text_size,
        "{text_packed} of {text_size}"
    );
    env.fsck();
}

/// Text that deflate cannot shrink much (hex digits of a xorshift stream): `len` bytes.
fn hex_noise(seed: u32, len: usize) -> String {
    let mut x = seed * 2 + 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            char::from(b"0123456789abcdef"[(x & 15) as usize])
        })
        .collect()
}

/// A change with more new contents than an operation's pack keeps in memory (a first
/// checkpoint, a large rewrite) publishes its blobs as a pack of their own before the trees
/// are written, and the trees and the commit after them in another: each checkpoint is whole
/// (`git fsck --strict`, every file read back, a restore of the first rebuilds it), no
/// temporary file stays behind, and a restarted daemon finds it all.
#[test]
fn a_large_changes_blobs_are_a_pack_of_their_own() {
    let mut env = TestEnv::new();
    let root = env.proj();
    for i in 0..1500 {
        write(&root, &format!("d{}/f{i}.txt", i % 20), &hex_noise(i, 1500));
    }
    env.watch();
    let first = env.checkpoint("first");
    let first_state = tree_state(&root);
    let packs = all_packs(&env);
    // Which of `ids` each pack holds, by kind.
    let by_pack = |packs: &BTreeSet<std::path::PathBuf>| {
        packs
            .iter()
            .map(|p| {
                let one = BTreeSet::from([p.clone()]);
                let count = |kind| objects_in_packs(&env, &one, kind).len();
                (count("blob"), count("tree"), count("commit"))
            })
            .collect::<BTreeSet<_>>()
    };
    // 1,500 blobs; 21 trees and the commit (and no blob of a file) in the other.
    let kinds = by_pack(&packs);
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(kinds.contains(&(1500, 0, 0)), "{kinds:?}");
    assert!(
        kinds.iter().any(|&(b, t, c)| b < 5 && t == 21 && c >= 1),
        "{kinds:?}"
    );
    assert_eq!(env.ls_tree(&first).len(), 1500);
    assert_eq!(
        env.git(&["show", &format!("{first}:d7/f1227.txt")]),
        hex_noise(1227, 1500)
    );

    // A large rewrite in a store that holds objects: the same.
    for i in 0..1000 {
        write(
            &root,
            &format!("d{}/f{i}.txt", i % 20),
            &hex_noise(i + 7000, 1500),
        );
    }
    let second = env.checkpoint("second");
    let new: BTreeSet<_> = all_packs(&env).difference(&packs).cloned().collect();
    let kinds = by_pack(&new);
    assert!(kinds.contains(&(1000, 0, 0)), "{kinds:?}");
    assert_eq!(
        env.git(&["show", &format!("{second}:d3/f983.txt")]),
        hex_noise(7983, 1500)
    );
    env.fsck();
    let leftovers: Vec<_> = std::fs::read_dir(env.store().join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tmp_"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    env.stop_daemon();
    env.start_daemon();
    env.json(&["restore", &first, "--yes"]);
    assert_eq!(tree_state(&root), first_state);
    let after = env.json(&["checkpoint", "-m", "restored"]);
    assert_eq!(
        env.git(&[
            "rev-parse",
            &format!("{}^{{tree}}", after["id"].as_str().unwrap())
        ]),
        env.git(&["rev-parse", &format!("{first}^{{tree}}")])
    );
    env.fsck();
}
