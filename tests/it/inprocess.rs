//! The daemon run in the test's own process (`daemon::run` on a listener the test binds, with
//! a shutdown future the test controls), driven by the client library over the real socket;
//! and a handler that panics, on the real binary.

use std::process::{Command, Stdio};
use std::sync::Arc;

use ckpt::client::Connection;
use ckpt::config::{Config, Paths};
use ckpt::daemon::{self, Daemon};
use ckpt::model::Kind;
use ckpt::protocol::methods::{CheckpointParams, RestoreParams};
use ckpt::protocol::rpc;
use serde_json::json;

use crate::harness::*;

#[test]
fn daemon_run_in_process_serves_and_stops_on_its_shutdown_future() {
    let env = TestEnv::without_daemon("");
    let p = env.proj();
    write(&p, "a.txt", "one");
    let paths = Paths {
        socket: env.home.join("run/inproc.sock"),
        data_dir: env.home.join("data/inproc"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let socket = paths.socket.clone();
    let server = runtime.spawn(async move {
        let (listener, _guard) = daemon::bind(&paths.socket).expect("bind");
        let daemon = Arc::new(Daemon::new(Config::default(), paths));
        daemon::run(daemon, listener, async {
            let _ = stop_rx.await;
        })
        .await;
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut conn = loop {
        match Connection::connect(&socket) {
            Ok(c) => break c,
            Err(e) => {
                assert!(std::time::Instant::now() < deadline, "no daemon: {e}");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    };
    // Untyped, as a script would, and typed, as the client does.
    let watched = conn.call_value("watch", json!({ "path": p })).unwrap();
    assert_eq!(watched["root"], json!(p));
    let c = conn
        .call::<rpc::Checkpoint>(&CheckpointParams {
            project: p.clone(),
            label: Some("in process".into()),
            dialog: None,
            message_id: None,
            kind: None,
            meta: None,
        })
        .unwrap();
    assert_eq!((c.seq, c.kind, c.files), (1, Kind::Message, 1));
    write(&p, "a.txt", "two");
    let restored = conn
        .call::<rpc::Restore>(&RestoreParams {
            project: p.clone(),
            id: c.id.to_string(),
            paths: vec![],
            dry_run: false,
            dialog: None,
            by: None,
        })
        .unwrap();
    assert_eq!(restored.written, vec!["a.txt".to_string()]);
    assert_eq!(restored.restored_to, c.id);
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "one");
    let store = env.home.join("data/inproc/projects");
    let store = std::fs::read_dir(&store)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    git_in(&store, &["fsck", "--strict"]);
    // The shutdown future ends the server, which removes its socket.
    drop(conn);
    stop_tx.send(()).unwrap();
    runtime
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(30), server).await })
        .expect("run ends after its shutdown future")
        .unwrap();
    assert!(!socket.exists(), "the socket is removed at shutdown");
}

#[test]
fn a_panicking_handler_gets_an_internal_error_and_the_daemon_keeps_serving() {
    let mut env = TestEnv::without_daemon("");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(env.home.join("ckptd.log"))
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ckptd"));
    env.env(&mut cmd);
    cmd.env("CKPTD_TEST_HOOKS", "1");
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
    env.daemon = Some(cmd.spawn().unwrap());
    env.wait_for_socket();
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"{}"}}"#,
        daemon::PANIC_METHOD
    );
    let replies = env.raw(&[
        line.as_bytes(),
        br#"{"jsonrpc":"2.0","id":8,"method":"hello"}"#,
    ]);
    assert_eq!(replies[0]["id"], 7, "{}", replies[0]);
    assert_eq!(replies[0]["error"]["code"], -32603, "{}", replies[0]);
    assert_eq!(replies[0]["error"]["data"]["kind"], "internal_error");
    // The same connection goes on.
    assert_eq!(replies[1]["result"]["protocol"], 1, "{}", replies[1]);
    env.assert_serving();
    assert!(
        env.log().contains("a request handler panicked"),
        "{}",
        env.log()
    );
    // Without the hooks the method does not exist.
    let mut plain = TestEnv::new();
    let reply = &plain.raw(&[line.as_bytes()])[0];
    assert_eq!(
        reply["error"]["data"]["kind"], "method_not_found",
        "{reply}"
    );
    plain.kill_daemon();
}
