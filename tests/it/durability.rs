//! Durability at the cost of ckpt's own bytes: a checkpoint's new objects are one pack, made
//! durable with the ref change that names them by one flushed journal record; nothing waits
//! for the whole filesystem (`syncfs`, `sync`), which would make a checkpoint wait for a
//! build's gigabytes next door. Small packs are merged once they accumulate.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::*;

/// The names in `dir`, sorted (none where it cannot be read).
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// With the daemon stopped, puts a symlink to a folder of its own (holding one file) in the
/// place of the store's `folder`, then records a checkpoint of `a.txt` for each of `rounds`:
/// nothing is written into, linked into or removed from where it points, and the checkpoints
/// are whole.
fn assert_symlinked_folder_not_followed(env: &mut TestEnv, folder: &Path, rounds: &[&str]) {
    let p = env.proj();
    env.stop_daemon();
    std::fs::remove_dir_all(folder).unwrap();
    let outside = env.home.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("victim.txt"), "untouched\n").unwrap();
    std::os::unix::fs::symlink(&outside, folder).unwrap();
    env.start_daemon();
    for round in rounds {
        write(&p, "a.txt", &format!("{round}\n"));
        env.checkpoint(round);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(names_in(&outside), vec!["victim.txt".to_string()]);
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.txt")).unwrap(),
        "untouched\n"
    );
    let last = rounds.last().expect("one round at least");
    assert_eq!(
        env.git(&["show", "refs/ckpt/dialogs/default:a.txt"]),
        format!("{last}\n")
    );
    env.fsck();
    env.assert_serving();
}

fn packs(store: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(store.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pack"))
        .collect();
    names.sort();
    names
}

fn loose_count(env: &TestEnv) -> String {
    env.git(&["count-objects", "-v"])
        .lines()
        .find(|l| l.starts_with("count: "))
        .unwrap_or_default()
        .to_string()
}

/// Traces the daemon's flush calls while it records, restores and undoes: only fsync of its own
/// files, never a filesystem-wide sync. Needs `strace` (`.ci/run` installs it).
#[test]
fn checkpoints_flush_only_their_own_files() {
    let mut env = TestEnv::without_daemon("");
    let Some(trace) = env.start_daemon_traced("sync,syncfs,fsync,fdatasync") else {
        return;
    };
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    write(&p, "sub/b.txt", "two\n");
    env.watch();
    let first = env.checkpoint("first");
    write(&p, "a.txt", "changed\n");
    write(&p, "sub/c.txt", "new\n");
    env.checkpoint("second");
    let out = env.ckpt(&["restore", &first, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = env.ckpt(&["undo", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    env.fsck();
    let out = env.ckpt(&["shutdown"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut daemon = env.daemon.take().unwrap();
    wait_timeout(&mut daemon, Duration::from_secs(20)).expect("ckptd did not stop");
    let calls = std::fs::read_to_string(&trace).unwrap();
    let wide: Vec<&str> = calls
        .lines()
        .filter(|l| l.contains(" syncfs(") || l.contains(" sync("))
        .collect();
    assert!(wide.is_empty(), "filesystem-wide syncs: {wide:?}");
    let own = calls
        .lines()
        .filter(|l| l.contains(" fsync(") || l.contains(" fdatasync("))
        .count();
    assert!(own >= 6, "every pack, index and ref is flushed:\n{calls}");
    // Each checkpoint (the two, and a restore's undo point and result) is one journal record.
    let journal = calls
        .lines()
        .filter(|l| l.contains(" fdatasync(") && l.contains("ckpt-journal"))
        .count();
    assert!(
        journal >= 4,
        "every checkpoint flushes the journal:\n{calls}"
    );
    // The restored files are flushed before the restore returns.
    assert!(
        calls
            .lines()
            .any(|l| l.contains(" fdatasync(") && l.contains("/proj/")),
        "restored files are flushed:\n{calls}"
    );
}

/// A checkpoint of a small change is one pack (no loose object, no inode per object); past
/// the limit, the small packs are merged in the background, and every checkpoint stays whole.
#[test]
fn each_checkpoint_is_one_pack_and_small_packs_are_merged() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "kept\n");
    env.watch();
    let first = env.checkpoint("first");
    let store = env.store();
    let before = packs(&store).len();
    write(&p, "d/one.txt", "1\n");
    write(&p, "d/e/two.txt", "2\n");
    env.checkpoint("a small change");
    assert_eq!(packs(&store).len(), before + 1, "one pack per checkpoint");
    assert_eq!(loose_count(&env), "count: 0");

    let mut ids = vec![first];
    for i in 0..40 {
        write(&p, &format!("d/f{}.txt", i % 5), &format!("round {i}\n"));
        ids.push(env.checkpoint(&format!("round {i}")));
    }
    // The merge runs after the reply: wait for it (bounded).
    wait_for_merge(&store, 12);
    assert_eq!(loose_count(&env), "count: 0");
    env.fsck();
    for id in &ids {
        assert!(env.ls_tree(id).contains(&"keep.txt".to_string()), "{id}");
    }
    // The merged store still restores and records.
    let out = env.ckpt(&["restore", &ids[0], "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!p.join("d").exists());
    env.checkpoint("after the merge");
    env.fsck();
}

/// Waits (bounded) until the daemon has merged its small packs below `most`.
fn wait_for_merge(store: &Path, most: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while packs(store).len() > most {
        assert!(
            Instant::now() < deadline,
            "small packs were not merged: {:?}",
            packs(store)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Merging waits until the project falls quiet (no operation for a second): checkpoints in a
/// busy spell never wait behind it; once quiet, the packs are merged.
#[test]
fn merges_wait_for_a_quiet_moment() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "kept\n");
    env.watch();
    env.checkpoint("first");
    let store = env.store();
    let before = packs(&store).len();
    let mut rpc = Rpc::connect(&env);
    for i in 0..12 {
        write(&p, "busy.txt", &format!("round {i}\n"));
        rpc.call("checkpoint", serde_json::json!({ "project": p }));
    }
    assert_eq!(
        packs(&store).len(),
        before + 12,
        "a merge ran while checkpoints kept coming"
    );
    wait_for_merge(&store, before + 4);
    env.fsck();
}

/// A merge copies whole objects as they are and rebuilds the deltas of a pack someone else's
/// `git repack` made (a delta names its base by where it was): every checkpoint stays whole
/// and readable, git fsck is clean.
#[test]
fn a_merge_takes_packs_with_deltas_from_git() {
    let env = TestEnv::new();
    let p = env.proj();
    let body: String = (0..200)
        .map(|i| format!("line {i} of a long file\n"))
        .collect();
    write(&p, "big.txt", &body);
    env.watch();
    let mut ids = vec![env.checkpoint("first")];
    for i in 0..4 {
        write(&p, "big.txt", &format!("{body}edit {i}\n"));
        ids.push(env.checkpoint(&format!("edit {i}")));
    }
    let store = env.store();
    env.git(&["repack", "-a", "-d", "-f", "-q", "--depth=10"]);
    let idx = store
        .join("objects/pack")
        .join(packs(&store)[0].replace(".pack", ".idx"));
    let verify = env.git(&["verify-pack", "-v", idx.to_str().unwrap()]);
    assert!(
        verify.contains("chain length"),
        "git made no delta:\n{verify}"
    );
    let from_git = packs(&store)[0].clone();
    for i in 0..12 {
        write(&p, &format!("small{}.txt", i % 3), &format!("round {i}\n"));
        ids.push(env.checkpoint(&format!("round {i}")));
    }
    wait_for_merge(&store, 6);
    assert!(
        !packs(&store).contains(&from_git),
        "git's pack was not merged"
    );
    env.fsck();
    let last = env.git(&["show", &format!("{}:big.txt", ids[4])]);
    assert_eq!(last, format!("{body}edit 3\n"));
    for id in &ids {
        assert!(env.ls_tree(id).contains(&"big.txt".to_string()), "{id}");
    }
    let out = env.ckpt(&["restore", &ids[1], "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join("big.txt")).unwrap(),
        format!("{body}edit 0\n")
    );
}

/// The size in its pack of each object `git verify-pack -v` lists in the store's packs.
fn sizes_in_packs(env: &TestEnv) -> Vec<(String, u64, u64)> {
    let store = env.store();
    let mut sizes = Vec::new();
    for pack in packs(&store) {
        let idx = store
            .join("objects/pack")
            .join(pack.replace(".pack", ".idx"));
        // `<id> <type> <size> <size in pack> <offset>`
        for line in env
            .git(&["verify-pack", "-v", idx.to_str().unwrap()])
            .lines()
        {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() >= 5 && fields[0].len() == 40 {
                sizes.push((
                    fields[0].to_string(),
                    fields[2].parse().unwrap(),
                    fields[3].parse().unwrap(),
                ));
            }
        }
    }
    sizes
}

/// A checkpoint's pack holds its objects uncompressed (nothing to set up per object on the
/// way to the prompt); merging small packs compresses them, and git reads both.
#[test]
fn a_checkpoints_objects_are_stored_uncompressed_until_a_merge_compresses_them() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "keep.txt", "kept\n");
    env.watch();
    env.checkpoint("first");
    let text = "a line that compresses very well\n".repeat(100);
    write(&p, "big.txt", &text);
    let id = env.checkpoint("text");
    let blob = env.git(&["rev-parse", &format!("{id}:big.txt")]);
    let blob = blob.trim();
    let in_pack = |env: &TestEnv| {
        let sizes = sizes_in_packs(env);
        let found: Vec<_> = sizes.iter().filter(|(id, ..)| id == blob).collect();
        assert_eq!(found.len(), 1, "{sizes:?}");
        (found[0].1, found[0].2)
    };
    let (size, stored) = in_pack(&env);
    assert_eq!(size, text.len() as u64);
    assert!(stored > size, "stored uncompressed: {stored} for {size}");
    env.fsck();
    for i in 0..12 {
        write(&p, "small.txt", &format!("round {i}\n"));
        env.checkpoint(&format!("round {i}"));
    }
    wait_for_merge(&env.store(), 6);
    let (_, compressed) = in_pack(&env);
    assert!(
        compressed < size / 4,
        "compressed by the merge: {compressed} for {size}"
    );
    env.fsck();
    assert_eq!(env.git(&["show", &format!("{id}:big.txt")]), text);
}

/// A merge never launders a damaged entry into a fresh pack (whose checksums would all
/// match): an entry that does not match its index's CRC-32 stops the merge, the damaged pack
/// stays for `ckpt fsck` to find, and the daemon keeps recording.
#[test]
fn a_merge_refuses_an_entry_that_does_not_match_its_crc() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", &"some text that compresses\n".repeat(50));
    env.watch();
    env.checkpoint("first");
    let store = env.store();
    let first = packs(&store)[0].clone();
    let path = store.join("objects/pack").join(&first);
    let mut bytes = std::fs::read(&path).unwrap();
    // Inside the first entry's compressed data; the trailer still matches the index.
    bytes[16] ^= 0xff;
    chmod(&store.join("objects/pack"), &first, 0o600);
    std::fs::write(&path, &bytes).unwrap();
    chmod(&store.join("objects/pack"), &first, 0o400);
    for i in 0..12 {
        write(&p, "b.txt", &format!("round {i}\n"));
        env.checkpoint(&format!("round {i}"));
    }
    // Past the merge threshold: the merge was tried (after the reply) and refused.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !env.log().contains("cannot merge small packs") {
        assert!(
            Instant::now() < deadline,
            "no merge was tried:\n{}",
            env.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(env.log().contains("CRC-32"), "{}", env.log());
    assert!(
        packs(&store).contains(&first),
        "the damaged pack was merged away"
    );
    write(&p, "b.txt", "after the refused merge\n");
    let id = env.checkpoint("after");
    assert!(env.ls_tree(&id).contains(&"b.txt".to_string()));
    env.assert_serving();
}

/// Metadata keep-alive refs never move, so they get no reflog (one file fewer per prompt);
/// dialog refs keep theirs. The metadata survives `git gc --prune=now`.
#[test]
fn metadata_refs_have_no_reflog_and_dialogs_do() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    let meta = env.home.join("meta.json");
    std::fs::write(&meta, r#"{"transcript_path":"/tmp/t.jsonl"}"#).unwrap();
    let c = env.json(&[
        "checkpoint",
        "-m",
        "with meta",
        "--meta",
        meta.to_str().unwrap(),
    ]);
    let id = c["id"].as_str().unwrap();
    let store = env.store();
    let meta_refs = env.git(&["for-each-ref", "--format=%(refname)", "refs/ckpt/meta/"]);
    assert_eq!(meta_refs.lines().count(), 1, "{meta_refs}");
    assert!(!store.join("logs").join(meta_refs.trim()).exists());
    assert!(store.join("logs/refs/ckpt/dialogs/default").is_file());
    env.git(&["gc", "--prune=now", "--quiet"]);
    env.fsck();
    assert_eq!(
        env.json(&["show", id])["meta"]["transcript_path"],
        "/tmp/t.jsonl"
    );
}

/// A small pack's index is written without a flush (its pack is flushed): what a power cut can
/// leave of such indices (nothing, a part, stale blocks) is rebuilt from the packs when the
/// daemon opens the store again, byte for byte. Every checkpoint is there and restorable, and
/// `git fsck --strict` passes.
#[test]
fn indices_a_power_cut_left_unfinished_are_rebuilt_from_their_packs() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "zero\n");
    env.watch();
    let mut ids = vec![env.checkpoint("first")];
    for i in 1..4 {
        write(&p, "a.txt", &format!("round {i}\n"));
        write(&p, &format!("new{i}.txt"), "added\n");
        ids.push(env.checkpoint(&format!("round {i}")));
    }
    let store = env.store();
    let dir = store.join("objects/pack");
    let indices: Vec<String> = packs(&store)
        .iter()
        .map(|p| p.replace(".pack", ".idx"))
        .collect();
    assert!(indices.len() >= 4, "{indices:?}");
    env.kill_daemon();
    let mut originals = Vec::new();
    for (n, name) in indices.iter().enumerate() {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).unwrap();
        let left = match n % 3 {
            0 => Vec::new(),
            1 => bytes[..bytes.len() / 2].to_vec(),
            _ => {
                let mut stale = bytes.clone();
                stale[8..1032].fill(0);
                stale
            }
        };
        chmod(&dir, name, 0o600);
        std::fs::write(&path, left).unwrap();
        chmod(&dir, name, 0o400);
        originals.push(bytes);
    }
    env.start_daemon();
    let list = env.json(&["list"]);
    let listed = list.as_array().unwrap().len();
    assert_eq!(listed, ids.len(), "{list}");
    for (name, bytes) in indices.iter().zip(&originals) {
        assert_eq!(&std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
    }
    assert!(
        env.log().contains("rebuilt a pack's index"),
        "{}",
        env.log()
    );
    env.fsck();
    assert!(env.ls_tree(&ids[3]).contains(&"new3.txt".to_string()));
    restores_round_one(&env, &ids[1]);
    env.assert_serving();
}

/// What a power cut can take from a checkpoint that was acknowledged: its pack and the ref's
/// move are written without flushes of their own (one journal record, flushed, holds both), so
/// the pack may be gone or cut short and the ref may hold its old value or nothing. The daemon
/// redoes them from the journal when it opens the store again: every acknowledged checkpoint
/// is there, whole (`git fsck --strict`), and restores.
#[test]
fn a_power_cut_after_the_reply_loses_no_checkpoint() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "zero\n");
    env.watch();
    let store = env.store();
    let dialog = store.join("refs/ckpt/dialogs/default");
    let dir = store.join("objects/pack");
    let mut ids = vec![env.checkpoint("first")];
    // Round 1: the pack and the ref's move are lost. Round 2: the pack is cut short and the
    // ref is left empty. Round 3: the pack is whole but its index never got its name (a
    // `kill -9` between the two renames that publish them) and the ref did not move.
    for round in 1..4 {
        let before_ref = std::fs::read(&dialog).unwrap();
        let before = packs(&store);
        write(&p, "a.txt", &format!("round {round}\n"));
        write(&p, &format!("new{round}.txt"), "added\n");
        ids.push(env.checkpoint(&format!("round {round}")));
        let new: Vec<String> = packs(&store)
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect();
        assert_eq!(new.len(), 1, "{new:?}");
        env.kill_daemon();
        let pack = dir.join(&new[0]);
        let bytes = std::fs::read(&pack).unwrap();
        chmod(&dir, &new[0], 0o600);
        if round == 1 {
            std::fs::remove_file(&pack).unwrap();
            std::fs::remove_file(pack.with_extension("idx")).unwrap();
            std::fs::write(&dialog, &before_ref).unwrap();
        } else if round == 2 {
            std::fs::write(&pack, &bytes[..bytes.len() / 2]).unwrap();
            std::fs::write(&dialog, b"").unwrap();
        } else {
            std::fs::remove_file(pack.with_extension("idx")).unwrap();
            std::fs::write(&dialog, &before_ref).unwrap();
        }
        env.start_daemon();
        let list = env.json(&["list"]);
        let listed: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(listed.len(), ids.len(), "{list}");
        assert!(listed.contains(&ids[round].as_str()), "{list}");
        assert_eq!(
            std::fs::read(&pack).unwrap(),
            bytes,
            "the pack was written again"
        );
        assert!(env.log().contains("redid a ref change"), "{}", env.log());
        env.fsck();
        assert!(env
            .ls_tree(&ids[round])
            .contains(&format!("new{round}.txt")));
    }
    restores_round_one(&env, &ids[1]);
    env.checkpoint("after");
    env.fsck();
    env.assert_serving();
}

/// A power cut while the journal record itself was being flushed: the checkpoint was never
/// acknowledged, and its record does not verify. The store opens as it was before it (the
/// previous checkpoint is the last), passes `git fsck --strict` and records again.
#[test]
fn a_record_cut_short_is_not_redone() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "zero\n");
    env.watch();
    let store = env.store();
    let dialog = store.join("refs/ckpt/dialogs/default");
    let reflog = store.join("logs/refs/ckpt/dialogs/default");
    let first = env.checkpoint("first");
    let before_ref = std::fs::read(&dialog).unwrap();
    let before_log = std::fs::read(&reflog).unwrap();
    let before = packs(&store);
    write(&p, "a.txt", "one\n");
    env.checkpoint("second");
    env.kill_daemon();
    // The pack, the ref and its reflog as if never written (they are written only after the
    // record is flushed), the journal's last record damaged.
    for name in packs(&store).into_iter().filter(|n| !before.contains(n)) {
        let pack = store.join("objects/pack").join(&name);
        std::fs::remove_file(&pack).unwrap();
        std::fs::remove_file(pack.with_extension("idx")).unwrap();
    }
    std::fs::write(&dialog, &before_ref).unwrap();
    std::fs::write(&reflog, &before_log).unwrap();
    let journal = store.join("ckpt-journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    // The last record ends with its 20-byte sum, before the zeros the file grew by.
    let end = bytes.iter().rposition(|&b| b != 0).unwrap();
    bytes[end - 30] ^= 0x55;
    std::fs::write(&journal, &bytes).unwrap();
    env.start_daemon();
    let list = env.json(&["list"]);
    let listed = list.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{list}");
    assert_eq!(listed[0]["id"].as_str().unwrap(), first);
    env.fsck();
    write(&p, "a.txt", "two\n");
    let again = env.checkpoint("again");
    assert_ne!(again, first);
    env.fsck();
    env.assert_serving();
}

/// The journal replaced by a FIFO, then by a symlink to a file elsewhere, while the daemon runs:
/// checkpoints fail with an error naming it (nothing blocks, nothing is written through the
/// link), reads go on, and once it is removed the next checkpoint has every change.
#[test]
fn a_journal_replaced_by_a_fifo_or_a_symlink_is_a_clear_error() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "zero\n");
    env.watch();
    let first = env.checkpoint("first");
    let journal = env.store().join("ckpt-journal");
    let outside = env.home.join("outside.txt");
    std::fs::write(&outside, "untouched\n").unwrap();
    for kind in ["fifo", "symlink"] {
        std::fs::remove_file(&journal).unwrap();
        if kind == "fifo" {
            let made = std::process::Command::new("mkfifo")
                .arg(&journal)
                .status()
                .unwrap();
            assert!(made.success());
        } else {
            std::os::unix::fs::symlink(&outside, &journal).unwrap();
        }
        write(&p, "a.txt", &format!("{kind}\n"));
        let out = env.ckpt(&["checkpoint", "-m", kind]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(stderr(&out).contains("ckpt-journal"), "{}", stderr(&out));
        let list = env.json(&["list"]);
        assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
        assert_eq!(list[0]["id"].as_str().unwrap(), first);
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "untouched\n");
    std::fs::remove_file(&journal).unwrap();
    let c = env.json(&["checkpoint", "-m", "after"]);
    assert_eq!(c["modified"].as_u64(), Some(1), "{c}");
    let id = c["id"].as_str().unwrap();
    assert_eq!(env.git(&["show", &format!("{id}:a.txt")]), "symlink\n");
    env.fsck();
    env.assert_serving();
}

/// Restores `id`, the checkpoint of round 1 in the tests above (`a.txt` "round 1", no
/// `new2.txt`).
fn restores_round_one(env: &TestEnv, id: &str) {
    let p = env.proj();
    let out = env.ckpt(&["restore", id, "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.join("a.txt")).unwrap(),
        "round 1\n"
    );
    assert!(!p.join("new2.txt").exists());
}

/// A clean shutdown settles the journal: the next daemon has nothing to redo, so a ref changed
/// in between (here with git, as an older ckpt or a user would) is not set back.
#[test]
fn a_clean_shutdown_leaves_nothing_to_redo() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    let first = env.checkpoint("first");
    write(&p, "a.txt", "two\n");
    env.checkpoint("second");
    let store = env.store();
    let out = env.ckpt(&["shutdown"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut daemon = env.daemon.take().unwrap();
    wait_timeout(&mut daemon, Duration::from_secs(20)).expect("ckptd did not stop");
    git_in(&store, &["update-ref", "refs/ckpt/dialogs/default", &first]);
    env.start_daemon();
    let list = env.json(&["list"]);
    let listed = list.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{list}");
    assert_eq!(listed[0]["id"].as_str().unwrap(), first);
    assert!(!env.log().contains("redid"), "{}", env.log());
    env.fsck();
    env.assert_serving();
}

/// The journal removed while the daemon runs: the next checkpoint's record goes into a new file,
/// from its start (the old file's records are gone with it, so what they wrote is flushed first).
/// That checkpoint's pack and ref move then lost as in a power cut are redone from the new file.
#[test]
fn a_journal_removed_while_running_still_redoes_the_next_checkpoint() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "zero\n");
    env.watch();
    let store = env.store();
    let dialog = store.join("refs/ckpt/dialogs/default");
    env.checkpoint("first");
    write(&p, "a.txt", "one\n");
    env.checkpoint("second");
    std::fs::remove_file(store.join("ckpt-journal")).unwrap();
    let before_ref = std::fs::read(&dialog).unwrap();
    let before = packs(&store);
    write(&p, "a.txt", "two\n");
    let third = env.checkpoint("third");
    env.kill_daemon();
    for name in packs(&store).into_iter().filter(|n| !before.contains(n)) {
        let pack = store.join("objects/pack").join(&name);
        std::fs::remove_file(&pack).unwrap();
        std::fs::remove_file(pack.with_extension("idx")).unwrap();
    }
    std::fs::write(&dialog, &before_ref).unwrap();
    env.start_daemon();
    let list = env.json(&["list"]);
    assert_eq!(list.as_array().unwrap().len(), 3, "{list}");
    assert_eq!(list[0]["id"].as_str().unwrap(), third);
    env.fsck();
    assert_eq!(env.git(&["show", &format!("{third}:a.txt")]), "two\n");
    env.assert_serving();
}

/// The second names ref files get before a transaction replaces them (`ckpt-trash`) are
/// removed after the reply, and those a crash left are removed at the next open. A symlink in
/// the folder's place is never followed: nothing is linked into or removed from where it
/// points, and checkpoints go on (paying for the rename as before).
#[test]
fn replaced_refs_second_names_are_removed_and_a_symlinked_trash_is_not_followed() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    env.checkpoint("first");
    let store = env.store();
    let trash = store.join("ckpt-trash");
    let emptied = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !names_in(&trash).is_empty() {
            assert!(Instant::now() < deadline, "{what}: {:?}", names_in(&trash));
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    write(&p, "a.txt", "two\n");
    env.checkpoint("second");
    assert!(
        trash.is_dir(),
        "the dialog's ref was replaced through ckpt-trash"
    );
    emptied("after the reply");

    // Left by a crash: removed when the store is opened again.
    env.kill_daemon();
    std::fs::write(trash.join("4242-7"), "left by a crash\n").unwrap();
    env.start_daemon();
    write(&p, "a.txt", "three\n");
    env.checkpoint("third");
    emptied("after a restart");

    // A symlink in its place: never followed.
    assert_symlinked_folder_not_followed(&mut env, &trash, &["four", "five"]);
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 5);
}

/// The inodes of the store's four spare files in `spare`, once they are made (after a reply).
fn spares_ready(spare: &Path, what: &str) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt;
    let deadline = Instant::now() + Duration::from_secs(10);
    while names_in(spare).len() != 4 {
        assert!(Instant::now() < deadline, "{what}: {:?}", names_in(spare));
        std::thread::sleep(Duration::from_millis(20));
    }
    names_in(spare)
        .iter()
        .map(|n| std::fs::metadata(spare.join(n)).unwrap().ino())
        .collect()
}

/// Another handle of a store the daemon opens (a live-events subscriber's, reading a file's
/// checkpointed version for its diff) leaves the project's spare files alone: the next pack is
/// still written into one of them.
#[test]
fn a_second_handle_of_the_store_leaves_the_spare_files_alone() {
    use serde_json::{json, Value};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    env.checkpoint("first");
    let store = env.store();
    let spare = store.join("ckpt-spare");
    let inodes = spares_ready(&spare, "after the first reply");

    let stream = std::os::unix::net::UnixStream::connect(&env.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let request = json!({ "jsonrpc": "2.0", "id": 1, "method": "subscribe",
        "params": { "project": p, "diffs": true } });
    writer.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["id"],
        1,
        "{line}"
    );
    write(&p, "a.txt", "two\n");
    loop {
        line.clear();
        reader
            .read_line(&mut line)
            .expect("the edit's event within 10 s");
        let event: Value = serde_json::from_str(&line).unwrap();
        let params = &event["params"];
        if params["event"] == "file_changed" && params["path"] == "a.txt" {
            let diff = params["diff"]
                .as_str()
                .expect("a diff against the checkpoint");
            assert!(diff.contains("-one") && diff.contains("+two"), "{diff}");
            break;
        }
    }
    assert_eq!(spares_ready(&spare, "after the subscriber's read"), inodes);

    let (second, pack) = checkpoint_into_one_pack(&env, "second");
    assert!(
        inodes.contains(&std::fs::metadata(&pack).unwrap().ino()),
        "the pack went into a spare file"
    );
    assert_eq!(env.git(&["show", &format!("{second}:a.txt")]), "two\n");
    env.fsck();
}

/// Records a checkpoint labelled `label`, which must add exactly one pack to the store; its id
/// and the pack's path.
fn checkpoint_into_one_pack(env: &TestEnv, label: &str) -> (String, std::path::PathBuf) {
    let store = env.store();
    let before = packs(&store);
    let id = env.checkpoint(label);
    let new: Vec<String> = packs(&store)
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    (id, store.join("objects/pack").join(&new[0]))
}

/// An operation's pack and index are written into files made after the previous reply
/// (`ckpt-spare`): the next pack is one of them, git sees nothing extra in the store, files
/// removed from under the daemon only cost it making new ones, a stopped daemon leaves none,
/// those a crash left go at the next open, and a symlink in the folder's place is never
/// followed.
#[test]
fn packs_are_written_into_spare_files_made_after_the_reply() {
    use std::os::unix::fs::MetadataExt;
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    env.checkpoint("first");
    let store = env.store();
    let spare = store.join("ckpt-spare");
    let ready = |what: &str| spares_ready(&spare, what);
    let inodes = ready("after the first reply");
    write(&p, "a.txt", "two\n");
    let (second, pack) = checkpoint_into_one_pack(&env, "second");
    let idx = pack.with_extension("idx");
    for file in [&pack, &idx] {
        let meta = std::fs::metadata(file).unwrap();
        assert!(
            inodes.contains(&meta.ino()),
            "{} is a spare file",
            file.display()
        );
        assert_eq!(meta.mode() & 0o777, 0o400);
    }
    ready("after the second reply");
    assert_eq!(env.git(&["show", &format!("{second}:a.txt")]), "two\n");
    let counted = env.git(&["count-objects", "-v"]);
    assert!(counted.contains("garbage: 0"), "{counted}");
    env.fsck();

    // Removed from under the daemon: the next publish makes its own files.
    for name in names_in(&spare) {
        std::fs::remove_file(spare.join(name)).unwrap();
    }
    write(&p, "a.txt", "three\n");
    let third = env.checkpoint("third");
    assert_eq!(env.git(&["show", &format!("{third}:a.txt")]), "three\n");
    ready("after a publish without spares");

    // A daemon that stops removes its own; those a crash left go at the next open.
    env.stop_daemon();
    assert_eq!(names_in(&spare), Vec::<String>::new());
    env.start_daemon();
    write(&p, "a.txt", "four\n");
    env.checkpoint("four");
    ready("after a restart");
    let made = names_in(&spare);
    env.kill_daemon();
    env.start_daemon();
    write(&p, "a.txt", "five\n");
    env.checkpoint("five");
    ready("after a crash");
    let now = names_in(&spare);
    assert!(
        made.iter().all(|name| !now.contains(name)),
        "the crashed daemon's spare files were removed at the next open: {made:?} {now:?}"
    );

    // A symlink in its place: never followed.
    assert_symlinked_folder_not_followed(&mut env, &spare, &["six", "seven"]);
    assert_eq!(env.json(&["list"]).as_array().unwrap().len(), 7);
}
