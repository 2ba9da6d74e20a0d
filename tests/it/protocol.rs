//! Bad input over the real socket: each gets a JSON-RPC error with a stable code, nothing
//! changes, and the daemon keeps serving.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use serde_json::{json, Value};

use crate::harness::*;

fn code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {reply}"))
}

fn kind(reply: &Value) -> &str {
    reply["error"]["data"]["kind"].as_str().unwrap_or("")
}

#[test]
fn malformed_requests_get_stable_error_codes() {
    let env = TestEnv::new();
    let proj = env.proj();
    write(&proj, "a.txt", "a");
    env.watch();
    let before = env.json(&["list"]);
    let p = proj.to_str().unwrap();
    let cases: Vec<(Vec<u8>, i64, &str)> = vec![
        (b"this is not json".to_vec(), -32700, "parse_error"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1".to_vec(), -32700, "parse_error"),
        (b"[1,2,3]".to_vec(), -32600, "invalid_request"),
        (br#"{"jsonrpc":"1.0","id":1,"method":"hello"}"#.to_vec(), -32600, "invalid_request"),
        (br#"{"jsonrpc":"2.0","id":1}"#.to_vec(), -32600, "invalid_request"),
        (br#"{"jsonrpc":"2.0","id":1,"method":"frobnicate"}"#.to_vec(), -32601, "method_not_found"),
        (br#"{"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{"project":42}}"#.to_vec(), -32602, "invalid_params"),
        (br#"{"jsonrpc":"2.0","id":1,"method":"checkpoint","params":[1]}"#.to_vec(), -32602, "invalid_params"),
        (br#"{"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{}}"#.to_vec(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{"project":p,"lable":"typo"}}).to_string().into_bytes(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{"project":"relative/path"}}).to_string().into_bytes(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{"project":p,"dialog":"../../etc"}}).to_string().into_bytes(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{"project":p,"kind":"pre-restore"}}).to_string().into_bytes(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"show","params":{"project":p,"id":"deadbeef"}}).to_string().into_bytes(), -32002, "unknown_checkpoint"),
        (json!({"jsonrpc":"2.0","id":1,"method":"show","params":{"project":p,"id":"not-hex!"}}).to_string().into_bytes(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"restore","params":{"project":p,"id":"0000000000000000000000000000000000000000"}}).to_string().into_bytes(), -32002, "unknown_checkpoint"),
        (json!({"jsonrpc":"2.0","id":1,"method":"list","params":{"project":"/"}}).to_string().into_bytes(), -32001, "not_a_project"),
        (json!({"jsonrpc":"2.0","id":1,"method":"list","params":{"project":"/no/such/dir"}}).to_string().into_bytes(), -32001, "not_a_project"),
        (json!({"jsonrpc":"2.0","id":1,"method":"watch","params":{"path":"/no/such/dir"}}).to_string().into_bytes(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"watch","params":{"path":env.data_dir()}}).to_string().into_bytes(), -32602, "invalid_params"),
        (json!({"jsonrpc":"2.0","id":1,"method":"watch","params":{"path":proj.join("..")}}).to_string().into_bytes(), -32008, "project_overlap"),
    ];
    for (line, expected, name) in &cases {
        let reply = &env.raw(&[line])[0];
        assert_eq!(
            code(reply),
            *expected,
            "for {}: {reply}",
            String::from_utf8_lossy(line)
        );
        assert_eq!(kind(reply), *name);
        assert!(!reply["error"]["message"].as_str().unwrap().is_empty());
        env.assert_serving();
    }
    assert_eq!(
        env.json(&["list"]),
        before,
        "bad input changed the timeline"
    );
    env.fsck();
}

#[test]
fn an_ambiguous_prefix_is_an_error() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a");
    env.watch();
    let base = env.checkpoint("base");
    let tree = env.git(&["rev-parse", &format!("{base}^{{tree}}")]);
    // Find two checkpoint commits whose ids share their first 4 hex digits (a birthday search
    // over labels, a few hundred hashes), then store both on their own dialogs.
    let make = |i: u32| {
        let header = format!(
            r#"{{"v":1,"dialog":"amb{i}","seq":1,"kind":"message","created_at":"2026-01-01T00:00:00Z","files":1,"added":1,"modified":0,"deleted":0}}"#
        );
        format!("tree {}\nauthor x <x@x> 0 +0000\ncommitter x <x@x> 0 +0000\nckpt {header}\n\nsubject\n\nlabel {i}\n", tree.trim())
    };
    let mut seen = std::collections::HashMap::new();
    let (a, b) = (0..100_000u32)
        .find_map(|i| {
            let id = gix::objs::compute_hash(
                gix::hash::Kind::Sha1,
                gix::objs::Kind::Commit,
                make(i).as_bytes(),
            )
            .unwrap()
            .to_string();
            seen.insert(id[..4].to_string(), i).map(|j| (j, i))
        })
        .unwrap();
    for i in [a, b] {
        let id = raw_object(&env, "commit", make(i).as_bytes());
        env.git(&["update-ref", &format!("refs/ckpt/dialogs/amb{i}"), &id]);
    }
    let id_a = raw_object(&env, "commit", make(a).as_bytes());
    let out = env.ckpt(&["show", &id_a[..4]]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("ambiguous"), "{}", stderr(&out));
    let reply = &env.raw(&[json!({"jsonrpc":"2.0","id":1,"method":"show","params":{"project":env.proj(),"id":&id_a[..4]}}).to_string().as_bytes()])[0];
    assert_eq!(kind(reply), "ambiguous_checkpoint");
    assert_eq!(code(reply), -32003);
    // The full id still resolves.
    assert_eq!(env.json(&["show", &id_a])["label"], format!("label {a}"));
    // Too short a prefix is refused outright.
    assert_eq!(env.ckpt(&["show", "abc"]).status.code(), Some(1));
}

#[test]
fn an_oversized_line_closes_only_that_connection() {
    let env = TestEnv::with_config("max_request_bytes = 65536\n");
    let mut stream = UnixStream::connect(&env.socket).unwrap();
    let big = vec![b'x'; 200_000];
    // The daemon may close before reading everything; a write error here is fine.
    let _ = stream.write_all(&big);
    let _ = stream.write_all(b"\n");
    let mut reply = String::new();
    BufReader::new(&stream).read_line(&mut reply).unwrap();
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(code(&reply), -32000);
    assert_eq!(kind(&reply), "request_too_large");
    env.assert_serving();
}

#[test]
fn requests_pipeline_on_one_connection() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "a");
    env.watch();
    let stream = UnixStream::connect(&env.socket).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let pdir = p.to_str().unwrap();
    let mut batch = String::new();
    for i in 0..10 {
        batch.push_str(&json!({"jsonrpc":"2.0","id":i,"method":"checkpoint","params":{"project":pdir,"label":format!("p{i}")}}).to_string());
        batch.push('\n');
    }
    batch.push_str(&json!({"jsonrpc":"2.0","id":"h","method":"hello"}).to_string());
    batch.push('\n');
    // A notification (no id) gets no reply.
    batch.push_str(&json!({"jsonrpc":"2.0","method":"hello"}).to_string());
    batch.push('\n');
    writer.write_all(batch.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut ids = Vec::new();
    for _ in 0..11 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert!(reply.get("result").is_some(), "{reply}");
        ids.push(reply["id"].clone());
    }
    for i in 0..10 {
        assert!(ids.contains(&json!(i)));
    }
    assert!(ids.contains(&json!("h")));
    // Ten racing checkpoints on one dialog: a clean chain, seq 1..=10, no lost update.
    let list = env.json(&["list"]);
    let mut seqs: Vec<u64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["seq"].as_u64().unwrap())
        .collect();
    seqs.sort();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    env.fsck();
}

#[test]
fn a_vanished_project_is_reported_and_others_keep_working() {
    let env = TestEnv::new();
    let a = env.proj();
    let b = env.home.join("other");
    write(&a, "a.txt", "a");
    write(&b, "b.txt", "b");
    env.watch();
    env.ckpt_in(&b, &["watch"]);
    env.checkpoint("a1");
    std::fs::remove_dir_all(&a).unwrap();
    let reply = &env.raw(&[
        json!({"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{"project":a}})
            .to_string()
            .as_bytes(),
    ])[0];
    assert_eq!(code(reply), -32004, "{reply}");
    assert_eq!(kind(reply), "project_unavailable");
    let out = env.ckpt_in(&env.home, &["--json", "projects"]);
    let projects: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gone = projects
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["root"] == a.to_str().unwrap())
        .unwrap();
    assert_eq!(gone["available"], false);
    // The other project is unaffected.
    let out = env.ckpt_in(&b, &["--json", "checkpoint", "-m", "b1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    env.assert_serving();
}

#[test]
fn peers_of_another_uid_are_refused() {
    if !is_root() {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let env = TestEnv::new();
    // Open the path up so that only the daemon's own uid check stands in the way.
    std::fs::set_permissions(
        env.socket.parent().unwrap(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(
        env.home.join("run"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(
        env.tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(
        &env.socket,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    // The refusal is sent as soon as the connection is accepted; the peer need not write.
    let script = format!(
        "import socket; s=socket.socket(socket.AF_UNIX); s.connect({:?}); print(s.makefile().readline())",
        env.socket.to_str().unwrap()
    );
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let reply: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(kind(&reply), "permission_denied", "{reply}");
    env.assert_serving();
}

#[test]
fn the_socket_is_private() {
    let env = TestEnv::new();
    use std::os::unix::fs::PermissionsExt;
    let sock_mode = std::fs::metadata(&env.socket).unwrap().permissions().mode() & 0o777;
    let dir_mode = std::fs::metadata(env.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(sock_mode, 0o600);
    assert_eq!(dir_mode, 0o700);
}

/// Runs `ckpt ARGS` and fails the test if it does not finish within `limit`.
fn ckpt_within(env: &TestEnv, args: &[&str], limit: std::time::Duration) -> std::process::Output {
    let mut cmd = std::process::Command::new(ckpt_bin());
    env.env(&mut cmd);
    let mut child = cmd
        .current_dir(env.proj())
        .arg("--no-spawn")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if wait_timeout(&mut child, limit).is_none() {
        let _ = child.kill();
        panic!("ckpt {args:?} did not finish within {limit:?}");
    }
    child.wait_with_output().unwrap()
}

/// Hundreds of idle clients and clients that send half a line and stall never lock out a
/// well-behaved one; a stalled line is cut off with an error.
#[test]
fn idle_and_stalled_clients_never_lock_others_out() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    let mut held = Vec::new();
    for i in 0..600 {
        let mut s = UnixStream::connect(&env.socket).unwrap();
        if i % 2 == 1 {
            s.write_all(br#"{"jsonrpc":"2.0","id":1,"meth"#).unwrap();
        }
        held.push(s);
    }
    let limit = std::time::Duration::from_secs(15);
    let out = ckpt_within(&env, &["status"], limit);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ckpt_within(&env, &["checkpoint", "-m", "still served"], limit);
    assert!(out.status.success(), "{}", stderr(&out));

    // A stalled line is answered with an error and the connection is closed.
    let mut stalled = UnixStream::connect(&env.socket).unwrap();
    stalled
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    stalled.write_all(br#"{"jsonrpc":"2.0","id":7,"#).unwrap();
    let started = std::time::Instant::now();
    let mut reply = String::new();
    stalled.read_to_string(&mut reply).unwrap();
    assert!(reply.contains("not finished within"), "{reply}");
    assert!(started.elapsed() < std::time::Duration::from_secs(25));
    drop(held);
    env.assert_serving();
}

/// Thousands of malformed, truncated, oversized, deeply nested, wrongly typed and invalid
/// UTF-8 requests interleaved with good ones: each bad one gets its error (an oversized one
/// also closes its connection), each good one its result, and the daemon keeps serving.
#[test]
fn a_storm_of_bad_requests_interleaved_with_good_ones() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let env = TestEnv::with_config("max_request_bytes = 4096\n");
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    env.checkpoint("first");
    let project = env.proj().to_str().unwrap().to_string();
    let connect = || {
        let s = UnixStream::connect(&env.socket).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        (s.try_clone().unwrap(), BufReader::new(s))
    };
    let (mut w, mut r) = connect();
    let nested = format!("{}{}", "[".repeat(1500), "]".repeat(1500));
    let mut seed = 0x2545f491u32;
    let (mut good, mut bad) = (0, 0);
    for i in 0..3000u32 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let (line, expect): (Vec<u8>, &str) = match seed % 10 {
            0 => (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth".to_vec(), "parse_error"),
            1 => (vec![0xff, 0xfe, b'{', 0x80], "parse_error"),
            2 => (nested.clone().into_bytes(), "parse_error"),
            3 => (
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"checkpoint","params":{{"project":5}}}}"#).into_bytes(),
                "invalid_params",
            ),
            4 => (
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"no_such_method"}}"#).into_bytes(),
                "method_not_found",
            ),
            5 => (format!(r#"{{"jsonrpc":"1.0","id":{i},"method":"hello"}}"#).into_bytes(), "invalid_request"),
            6 => (format!(r#"[{i}, "not an object"]"#).into_bytes(), "invalid_request"),
            7 => (vec![b'x'; 5000], "request_too_large"),
            8 => (
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"list","params":{{"project":"{project}","limit":1}}}}"#).into_bytes(),
                "",
            ),
            _ => (
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"hello","params":{{"client":"storm"}}}}"#).into_bytes(),
                "",
            ),
        };
        // The daemon closes a connection as soon as a line passes the cap: the rest of an
        // oversized line may meet a closed socket.
        let sent = w.write_all(&line).and_then(|()| w.write_all(b"\n"));
        if expect != "request_too_large" {
            sent.unwrap();
        }
        let mut reply = String::new();
        r.read_line(&mut reply).unwrap();
        let reply: serde_json::Value = serde_json::from_str(&reply)
            .unwrap_or_else(|e| panic!("request {i}: bad reply ({e}): {reply:?}"));
        if expect.is_empty() {
            assert!(reply.get("result").is_some(), "request {i}: {reply}");
            good += 1;
        } else {
            assert_eq!(
                reply["error"]["data"]["kind"], expect,
                "request {i}: {reply}"
            );
            bad += 1;
        }
        if expect == "request_too_large" {
            (w, r) = connect();
        }
    }
    assert!(good > 300 && bad > 2000, "{good} good, {bad} bad");
    env.assert_serving();
    let c = env.json(&["checkpoint", "-m", "after the storm"]);
    assert_eq!(c["seq"], 2);
}

/// Errors carry the code of what went wrong: nothing to undo is not an unknown checkpoint, a
/// bundle that cannot be written is an I/O error, a bad exclusion pattern a config error
/// found when the daemon starts.
#[test]
fn errors_are_filed_under_what_went_wrong() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    let id = env.checkpoint("a");
    let kind = |args: &[&str]| -> String {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = env.ckpt(&all);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["error"]["data"]["kind"].as_str().unwrap().to_string()
    };
    assert_eq!(kind(&["undo", "--yes"]), "nothing_to_undo");
    let nowhere = env.home.join("no/such/folder/x.bundle");
    assert_eq!(
        kind(&["export", &id, "--bundle", nowhere.to_str().unwrap()]),
        "io_error"
    );
    let missing = env.home.join("missing.bundle");
    assert_eq!(
        kind(&["import", "--bundle", missing.to_str().unwrap()]),
        "io_error"
    );

    let bad = TestEnv::without_daemon("[exclusions]\nadd = [\"src/{a,b\"]\n");
    let mut cmd = std::process::Command::new(CKPTD);
    bad.env(&mut cmd);
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let Some(status) = wait_timeout(&mut child, std::time::Duration::from_secs(20)) else {
        let _ = child.kill();
        panic!("ckptd started with an invalid exclusion pattern");
    };
    assert!(!status.success());
    let err = stderr(&child.wait_with_output().unwrap());
    assert!(
        err.contains("exclusions") && err.contains("src/{a,b"),
        "{err}"
    );
}
