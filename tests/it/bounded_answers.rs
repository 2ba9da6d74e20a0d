//! Bounded answers stand on bounded work: an MCP `diff` page of a 40 MB change is made alone
//! (the daemon's memory stays flat), `ckpt show` of a checkpoint of 20,000 new files lists
//! the first thousand and says how many there are, and `ckpt mcp` answers a line that is not
//! JSON with JSON-RPC's parse error and goes on serving.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::*;

/// `ckpt mcp` in the project, spoken to line by line (each answer waited for a minute at
/// most).
pub(crate) struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Mcp {
    pub fn start(env: &TestEnv) -> Mcp {
        let mut cmd = Command::new(ckpt_bin());
        env.env(&mut cmd);
        let mut child = cmd
            .current_dir(env.proj())
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Mcp {
            stdin: child.stdin.take().unwrap(),
            lines,
            child,
        }
    }

    pub fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
    }

    pub fn read(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("ckpt mcp answered nothing within a minute");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    pub fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}})
            .to_string(),
        );
        let reply = self.read();
        assert_eq!(reply["result"]["serverInfo"]["name"], "ckpt", "{reply}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    pub fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}})
            .to_string(),
        );
        let reply = self.read();
        assert_eq!(reply["id"], id, "{reply}");
        reply["result"]["structuredContent"].clone()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error_and_the_server_goes_on() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "one\n");
    env.watch();
    env.checkpoint("first");
    let mut mcp = Mcp::start(&env);
    mcp.send("this is not json {");
    let error = mcp.read();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(error["id"].is_null(), "{error}");
    mcp.initialize();
    let listed = mcp.call(2, "list_checkpoints", json!({}));
    assert_eq!(listed["total"], 1, "{listed}");
}

/// The daemon's anonymous memory, sampled until `stop`: its highest.
fn peak_anon(pid: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let peak = AtomicU64::new(0);
        while !stop.load(Ordering::Relaxed) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            let kb = status
                .lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0);
            peak.fetch_max(kb, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(5));
        }
        peak.load(Ordering::Relaxed) * 1024
    })
}

#[test]
fn a_page_of_a_huge_diff_is_made_alone() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    let before = env.checkpoint("before");
    let line = "a line of a large generated file, fifty bytes ...\n";
    for i in 0..40 {
        write(&p, &format!("big/{i:02}.txt"), &line.repeat(20_000));
    }
    let after = env.checkpoint("after");
    let mut mcp = Mcp::start(&env);
    mcp.initialize();
    let daemon = env.daemon.as_ref().unwrap().id();
    let anon = |pid: u32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap()
            * 1024
    };
    let base = anon(daemon);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = peak_anon(daemon, stop.clone());
    let first = mcp.call(2, "diff", json!({"from": before, "to": after}));
    let far = mcp.call(
        3,
        "diff",
        json!({"from": before, "to": after, "offset": 30_000_000}),
    );
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();
    let text = first["diff"].as_str().unwrap();
    assert!(
        text.starts_with("diff --git a/big/00.txt"),
        "{}",
        &text[..100]
    );
    assert!(
        text.len() <= 20_000 && text.len() > 19_000,
        "{}",
        text.len()
    );
    assert_eq!(first["next_offset"], text.len(), "{first}");
    assert_eq!(first["truncated"], true);
    let far_text = far["diff"].as_str().unwrap();
    assert!(far_text.contains(line.trim_end()), "{far_text}");
    assert!(far["next_offset"].as_u64().unwrap() > 30_000_000);
    let grew = peak.saturating_sub(base);
    assert!(
        grew < 48 << 20,
        "the daemon's memory grew by {} MiB for two pages of 20 KB",
        grew >> 20
    );
    env.assert_serving();
}

#[test]
fn show_lists_the_first_changes_and_says_how_many_there_are() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    env.watch();
    env.checkpoint("before");
    for i in 0..20_000 {
        write(
            &p,
            &format!("many/{:02}/{i:05}.txt", i % 100),
            "two\nlines\n",
        );
    }
    env.checkpoint("twenty thousand files");
    let shown = env.json(&["show", "@"]);
    assert_eq!(shown["changes"].as_array().unwrap().len(), 1000);
    assert_eq!(shown["changes_total"], 20_000);
    assert_eq!(shown["truncated"], true);
    assert_eq!(shown["changes"][0]["path"], "many/00/00000.txt");
    assert_eq!(
        shown["changes"][0]["lines_added"], 2,
        "{}",
        shown["changes"][0]
    );
    let out = env.ckpt(&["show", "@"]);
    assert!(
        stdout(&out).contains("… and 19000 more"),
        "{}",
        stdout(&out)
    );
    let all = env.json(&["show", "@", "--limit", "0"]);
    assert_eq!(all["changes"].as_array().unwrap().len(), 20_000);
    assert!(all.get("truncated").is_none(), "{}", all["truncated"]);
    env.assert_serving();
}
