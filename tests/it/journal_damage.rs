//! A damaged journal record is damage, not a power cut: after a crash that left five records
//! unsettled, a byte flipped in any one of them never moves a ref backwards, the log calls it
//! damage, and `ckpt fsck` reports it (exit 1) until `ckpt fsck --repair` sets it aside.

use std::path::Path;

use crate::harness::*;

/// The offset and length of each record of the journal's current epoch (the epoch's empty
/// marker included): a 20-byte head (magic, epoch, payload length), the payload, a 20-byte sum.
fn records(journal: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut epoch = None;
    while at + 20 <= journal.len() && &journal[at..at + 8] == b"ckptjrn2" {
        let this = &journal[at + 8..at + 16];
        if epoch.is_some_and(|e| e != this) {
            break;
        }
        epoch = Some(this);
        let len = u32::from_le_bytes(journal[at + 16..at + 20].try_into().unwrap()) as usize;
        out.push((at, 20 + len + 20));
        at += 20 + len + 20;
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_damaged_journal_record_never_moves_a_ref_back_and_is_reported() {
    let mut env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "zero\n");
    env.watch();
    let store = env.store();
    let dialog = store.join("refs/ckpt/dialogs/default");
    let mut ids = Vec::new();
    for n in 1..=5 {
        write(&p, "a.txt", &format!("version {n}\n{}", "x".repeat(300)));
        ids.push(env.checkpoint(&format!("C{n}")));
    }
    // A crash: the five records are not settled yet.
    env.kill_daemon();
    let journal = std::fs::read(store.join("ckpt-journal")).unwrap();
    let found: Vec<(usize, usize)> = records(&journal)
        .into_iter()
        .filter(|(_, len)| *len > 20 + 8 + 20)
        .collect();
    assert!(
        found.len() >= 5,
        "five checkpoints, five records: {found:?}"
    );
    let pristine = env.home.join("pristine-store");
    copy_dir(&store, &pristine);
    let last = ids.last().unwrap().clone();
    for (k, (at, len)) in found.iter().enumerate() {
        copy_dir(&pristine, &store);
        let mut bytes = journal.clone();
        // A byte in the middle of the record (in its pack's bytes, or its refs).
        bytes[at + len / 2] ^= 0x20;
        std::fs::write(store.join("ckpt-journal"), &bytes).unwrap();
        let log_before = env.log().len();
        env.start_daemon();
        let listed = env.json(&["list"]);
        assert_eq!(
            listed.as_array().unwrap().len(),
            ids.len(),
            "record {k}: {listed}"
        );
        assert_eq!(
            std::fs::read_to_string(&dialog).unwrap().trim(),
            last,
            "record {k} damaged: the dialog's ref moved backwards"
        );
        let log = env.log()[log_before..].to_string();
        assert!(log.contains("damage"), "record {k}: {log}");
        assert!(!log.contains("redid a ref change"), "record {k}: {log}");
        // fsck: the damage, exit 1; --repair sets it aside; then clean.
        let out = env.ckpt(&["--json", "fsck"]);
        assert_eq!(out.status.code(), Some(1), "record {k}: {}", stdout(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let damage = report["journal_damage"].as_array().unwrap();
        assert_eq!(damage.len(), 1, "record {k}: {report}");
        assert!(
            damage[0].as_str().unwrap().contains("not a power cut")
                || damage[0].as_str().unwrap().contains("damaged since"),
            "{report}"
        );
        let out = env.ckpt(&["fsck"]);
        assert!(
            stdout(&out).contains("damaged  journal"),
            "{}",
            stdout(&out)
        );
        let out = env.ckpt(&["fsck", "--repair"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let out = env.ckpt(&["--json", "fsck"]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert!(std::fs::read_dir(store.join("damaged"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("journal-")));
        env.fsck();
        // Checkpointing goes on.
        write(&p, "a.txt", &format!("after {k}\n"));
        env.checkpoint("after");
        env.assert_serving();
        env.kill_daemon();
    }
}
