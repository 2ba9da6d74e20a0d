//! `ckpt ui`: the page's server reached with raw HTTP over a real socket (who may use it, bad
//! requests, restore and undo through it), and the page itself in a real browser (Debian's
//! Chromium driven through Selenium, `tests/ui/browser.py`; ignored by default, `.ci/run`
//! installs what it needs and runs it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::*;

/// A running `ckpt ui`: its port and token.
pub(crate) struct Ui {
    pub child: Child,
    pub url: String,
    pub port: u16,
    pub token: String,
}

impl Ui {
    /// `ckpt ui --no-open` in `cwd`.
    pub fn start(env: &TestEnv, cwd: &Path) -> Ui {
        Self::start_with(env, cwd, &["--no-open"], None)
    }

    /// `ckpt ui ARGS` in `cwd`, with `bin` first on `PATH` when given (a stand-in browser).
    pub fn start_with(env: &TestEnv, cwd: &Path, args: &[&str], bin: Option<&Path>) -> Ui {
        let mut cmd = Command::new(ckpt_bin());
        env.env(&mut cmd);
        if let Some(bin) = bin {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![bin.to_path_buf()];
            dirs.extend(std::env::split_paths(&path));
            cmd.env("PATH", std::env::join_paths(dirs).unwrap());
        }
        let mut child = cmd
            .current_dir(cwd)
            .args(["--no-spawn", "ui"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "first line: {url:?}");
        let (address, token) = url.split_once("/#token=").unwrap();
        let port = address.rsplit(':').next().unwrap().parse().unwrap();
        Ui {
            child,
            port,
            token: token.to_string(),
            url,
        }
    }

    /// The header the page's script sends the token in.
    pub fn auth(&self) -> String {
        format!("Authorization: Bearer {}\r\n", self.token)
    }

    /// Sends one request (`Host` is the loopback name unless `extra` names another) and
    /// returns the status, the headers (lowercase) and the body.
    pub fn request(&self, method: &str, target: &str, extra: &str, body: &str) -> Reply {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let host = match extra.to_ascii_lowercase().contains("host:") {
            true => String::new(),
            false => format!("Host: 127.0.0.1:{}\r\n", self.port),
        };
        write!(
            stream,
            "{method} {target} HTTP/1.1\r\n{host}{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8_lossy(&raw).to_string();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        Reply {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_string(),
        }
    }

    pub fn get(&self, target: &str) -> Reply {
        self.request("GET", target, &self.auth(), "")
    }

    pub fn post(&self, target: &str, body: &Value) -> Reply {
        let extra = format!(
            "{}Content-Type: application/json\r\nOrigin: http://127.0.0.1:{}\r\n",
            self.auth(),
            self.port
        );
        self.request("POST", target, &extra, &body.to_string())
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        assert!(self.status == 200, "{self:?}");
        // A server-sent body may be chunked; these replies are sized.
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

pub(crate) fn project_query(p: &Path) -> String {
    format!("project={}", p.display())
}

#[test]
fn nothing_is_served_without_the_token_the_loopback_host_or_from_another_origin() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    env.watch();
    let first = env.checkpoint("the secret plan");
    write(&p, "f.txt", "two\n");
    env.checkpoint("second");
    let ui = Ui::start(&env, &p);
    let list = format!("/api/list?{}", project_query(&p));

    // No token, a wrong one, or the right one where the page never sends it (the URL, a
    // cookie): 401 and nothing of the project.
    for reply in [
        ui.request("GET", &list, "", ""),
        ui.request("GET", &list, "Authorization: Bearer 0000\r\n", ""),
        ui.request("GET", &format!("{list}&token={}", ui.token), "", ""),
        ui.request(
            "GET",
            &list,
            &format!("Cookie: ckpt_ui_{}={}\r\n", ui.port, ui.token),
            "",
        ),
        ui.request(
            "GET",
            &list,
            &format!("Authorization: Bearer {}x\r\n", ui.token),
            "",
        ),
        ui.request("GET", "/api/events", "", ""),
    ] {
        assert_eq!(reply.status, 401, "{reply:?}");
        assert!(!reply.body.contains("secret plan") && !reply.body.contains("f.txt"));
    }
    // A name rebound to 127.0.0.1 (DNS rebinding) is not the page's, token or not.
    let rebound = ui.request(
        "GET",
        &list,
        &format!("Host: attacker.example:{}\r\n{}", ui.port, ui.auth()),
        "",
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");
    assert!(!rebound.body.contains("secret plan"));

    // Requests that would change files: from another origin, as a form, or cross-site.
    let restore = json!({ "project": p, "id": first }).to_string();
    for extra in [
        format!(
            "{}Content-Type: application/json\r\nOrigin: http://attacker.example\r\n",
            ui.auth()
        ),
        format!(
            "{}Content-Type: text/plain\r\nOrigin: http://127.0.0.1:{}\r\n",
            ui.auth(),
            ui.port
        ),
        format!(
            "{}Content-Type: application/x-www-form-urlencoded\r\n",
            ui.auth()
        ),
        format!(
            "{}Content-Type: application/json\r\nSec-Fetch-Site: cross-site\r\n",
            ui.auth()
        ),
        // The token does not make another origin's request the page's.
        format!(
            "{}Content-Type: application/json\r\nOrigin: http://localhost.attacker.example:{}\r\n",
            ui.auth(),
            ui.port
        ),
    ] {
        let reply = ui.request("POST", "/api/restore", &extra, &restore);
        assert_eq!(reply.status, 403, "{extra}: {reply:?}");
        assert_eq!(std::fs::read_to_string(p.join("f.txt")).unwrap(), "two\n");
    }

    // The page's own files hold nothing of the user's: served without the token, with the
    // CSP, and never a cookie.
    for target in ["/", "/app.js", "/app.css"] {
        let reply = ui.request("GET", target, "", "");
        assert_eq!(reply.status, 200, "{reply:?}");
        assert!(!reply.head.contains("set-cookie"), "{reply:?}");
        assert!(!reply.body.contains("secret plan") && !reply.body.contains(&ui.token));
    }
    let page = ui.request("GET", "/", "", "");
    assert!(page
        .head
        .contains("content-security-policy: default-src 'none'; script-src 'self'"));
    assert!(page.body.contains("<script src=\"/app.js\"></script>"));
    assert!(ui.url.ends_with(&ui.token) && ui.token.len() == 48);
    // With the token in its header, the data.
    let listed = ui.get(&list).json();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    env.assert_serving();
}

#[test]
fn the_page_restores_after_a_plan_and_undoes_and_bad_requests_get_clear_errors() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    write(&p, "keep.txt", "same\n");
    env.watch();
    let first = env.checkpoint("first");
    write(&p, "f.txt", "two\n");
    write(&p, "new.txt", "new\n");
    env.checkpoint("second");
    let ui = Ui::start(&env, &p);

    let projects = ui.get("/api/projects").json();
    assert_eq!(projects["projects"][0]["root"], json!(p));
    assert_eq!(projects["start"], json!(p));
    let list = ui.get(&format!("/api/list?{}", project_query(&p))).json();
    let labels: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["second", "first"]);
    let diff = ui
        .get(&format!(
            "/api/diff?{}&from={first}&to={}&offset=0",
            project_query(&p),
            list[0]["id"].as_str().unwrap()
        ))
        .json();
    let patch = diff["patch"].as_str().unwrap();
    assert!(patch.contains("-one") && patch.contains("+two") && patch.contains("+new"));

    // The plan changes nothing.
    let plan = ui
        .post(
            "/api/restore",
            &json!({ "project": p, "id": first, "dry_run": true }),
        )
        .json();
    assert_eq!(plan["written"], json!(["f.txt"]));
    assert_eq!(plan["deleted"], json!(["new.txt"]));
    assert_eq!(std::fs::read_to_string(p.join("f.txt")).unwrap(), "two\n");
    assert!(p.join("new.txt").exists());
    // Confirmed, it restores exactly; the undo brings the files back.
    let before = tree_state(&p);
    let done = ui
        .post("/api/restore", &json!({ "project": p, "id": first }))
        .json();
    assert!(done["undo_checkpoint"].is_string());
    assert_eq!(std::fs::read_to_string(p.join("f.txt")).unwrap(), "one\n");
    assert!(!p.join("new.txt").exists());
    ui.post("/api/undo", &json!({ "project": p })).json();
    assert_eq!(tree_state(&p), before);

    // Bad requests: each a clear error, and both the page's server and the daemon go on.
    let outside = env.home.join("home");
    for (reply, says) in [
        (
            ui.get(&format!("/api/list?project={}", outside.display())),
            "not inside a watched project",
        ),
        (
            ui.post(
                "/api/restore",
                &json!({ "project": p, "id": "0000000", "dry_run": true }),
            ),
            "0000000",
        ),
        (ui.get("/api/list"), "project"),
        (
            ui.post(
                "/api/restore",
                &json!({ "project": p, "id": first, "x": 1 }),
            ),
            "unknown field",
        ),
        (ui.get("/api/nothing-here"), "no such page"),
    ] {
        assert!(
            (400..500).contains(&reply.status),
            "expected a 4xx: {reply:?}"
        );
        assert!(reply.body.contains(says), "{says:?} not in {reply:?}");
    }
    let broken = ui.request(
        "POST",
        "/api/restore",
        &format!(
            "{}Content-Type: application/json\r\nOrigin: http://127.0.0.1:{}\r\n",
            ui.auth(),
            ui.port
        ),
        "{not json",
    );
    assert!((400..500).contains(&broken.status), "{broken:?}");
    assert_eq!(tree_state(&p), before);
    assert_eq!(ui.get("/api/projects").status, 200);
    env.assert_serving();
    env.fsck();
}

/// A prompt of a real Claude Code session (the fixture) rewound from the page: the plan says the
/// conversation can be forked and changes nothing; the rewind forks it beside the original
/// (left byte for byte) and restores the files; a prompt without a session rewinds files only.
#[test]
fn the_page_rewinds_a_prompt_with_its_conversation() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "a.txt", "one\n");
    let folder = env.home.join("home/.claude/projects/-proj");
    std::fs::create_dir_all(&folder).unwrap();
    let session_id = "193241d3-a622-4f2c-a4b6-ad4873cf4d61";
    let transcript = folder.join(format!("{session_id}.jsonl"));
    let session = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/claude-code.jsonl"),
    )
    .unwrap();
    std::fs::write(&transcript, &session).unwrap();
    hook_with(
        &env,
        &p,
        "turn B",
        json!({ "session_id": session_id, "transcript_path": transcript,
            "prompt_id": "5f04f98c-11b6-41f5-b3f1-b7385b164174" }),
    );
    write(&p, "a.txt", "two\n");
    let id = env.json(&["list"])[0]["id"].as_str().unwrap().to_string();
    let ui = Ui::start(&env, &p);
    let sessions = || std::fs::read_dir(&folder).unwrap().count();

    let plan = ui
        .post(
            "/api/rewind",
            &json!({ "project": p, "id": id, "dry_run": true }),
        )
        .json();
    assert_eq!(plan["conversation"]["agent"], "claude-code", "{plan}");
    assert_eq!(plan["written"], json!(["a.txt"]));
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "two\n");
    assert_eq!(sessions(), 1);

    let done = ui
        .post("/api/rewind", &json!({ "project": p, "id": id }))
        .json();
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "one\n");
    let fork = done["conversation"]["session_id"].as_str().unwrap();
    assert_eq!(
        done["conversation"]["resume"],
        json!(["claude", "--resume", fork])
    );
    let forked = std::fs::read_to_string(folder.join(format!("{fork}.jsonl"))).unwrap();
    assert!(forked.contains("turn A") && !forked.contains("\"turn B\""));
    assert_eq!(std::fs::read(&transcript).unwrap(), session);
    ui.post("/api/undo", &json!({ "project": p })).json();
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "two\n");

    // A prompt whose agent session cannot be found: the files only, and why.
    hook(&env, &p, "no session here");
    write(&p, "a.txt", "three\n");
    let id = env.json(&["list"])[0]["id"].as_str().unwrap().to_string();
    let plan = ui
        .post(
            "/api/rewind",
            &json!({ "project": p, "id": id, "dry_run": true }),
        )
        .json();
    assert!(plan["conversation"].is_null(), "{plan}");
    assert!(plan["conversation_skipped"].is_string(), "{plan}");
    // Not a checkpoint: the command's own error, as the page's.
    let bad = ui.post(
        "/api/rewind",
        &json!({ "project": p, "id": "--help", "dry_run": true }),
    );
    assert_eq!(bad.status, 400, "{bad:?}");
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "three\n");
    env.assert_serving();
}

/// Ctrl-C stops the page's server within its bound even while a page holds the event stream
/// (which never ends by itself).
#[test]
fn ctrl_c_stops_the_page_with_an_event_stream_open() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    env.watch();
    let mut ui = Ui::start(&env, &p);
    let mut stream = TcpStream::connect(("127.0.0.1", ui.port)).unwrap();
    write!(
        stream,
        "GET /api/events?{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{}\r\n",
        project_query(&p),
        ui.port,
        ui.auth()
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    signal(ui.child.id(), "INT");
    let status = wait_timeout(&mut ui.child, Duration::from_secs(5))
        .expect("ckpt ui did not stop on SIGINT with an event stream open");
    assert!(status.success(), "{status:?}");
    env.assert_serving();
}

#[test]
fn ui_json_prints_the_url_as_one_json_document() {
    let env = TestEnv::new();
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let mut child = cmd
        .current_dir(env.proj())
        .args(["--no-spawn", "--json", "ui", "--no-open"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let doc: Value = serde_json::from_str(&first).unwrap();
    let port = doc["port"].as_u64().unwrap();
    let url = doc["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/#token=")),
        "{doc}"
    );
}

#[test]
fn ui_without_a_daemon_says_so_and_does_not_listen() {
    let env = TestEnv::without_daemon("");
    let out = env.ckpt(&["ui", "--no-open"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no ckptd answers"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
}

#[test]
#[ignore = "needs Chromium, ChromeDriver and Selenium: tests/ui/install.sh, then --ignored (.ci/run does both)"]
fn a_real_browser_browses_compares_restores_undoes_and_sees_new_prompts_live() {
    let env = TestEnv::with_config("[retention]\nkeep = 100000\n");
    let p = env.proj();
    write(&p, "app.py", "def main():\n    print('hello')\n");
    env.watch();
    // 2,000 prompts through the hook, each after a change; the last ones named for the test.
    let prompts = 2000;
    let script = format!(
        "for i in $(seq 1 {prompts}); do echo \"line $i\" >> notes.txt; \
         printf '{{\"session_id\":\"s1\",\"cwd\":\"%s\",\"prompt\":\"prompt %s\",\
\"hook_event_name\":\"UserPromptSubmit\"}}' \"$PWD\" \"$i\" | \"$CKPT\" hook claude-code || exit 1; done"
    );
    let mut cmd = Command::new("bash");
    env.env(&mut cmd);
    let status = cmd
        .current_dir(&p)
        .env("CKPT", ckpt_bin())
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    write(&p, "app.py", "def main():\n    print('hello, world')\n");
    hook(&env, &p, "<img src=x onerror=window.__pwned=1>");
    write(&p, "app.py", "def main():\n    print('goodbye')\n");
    write(&p, "extra.txt", "made by the last turn\n");
    hook(&env, &p, "make it say goodbye");
    let list = env.json(&["list"]);
    assert!(
        list.as_array().unwrap().len() > prompts,
        "retention kept them all"
    );

    // A second project: one checkpoint of 100,000 files of three lines each.
    let big = env.home.join("big");
    let made = Command::new("python3")
        .args([
            "-c",
            "import os,sys\nfor i in range(100000):\n d=os.path.join(sys.argv[1],'d%03d'%(i%1000))\n os.makedirs(d,exist_ok=True)\n open(os.path.join(d,'f%05d.txt'%i),'w').write('one\\ntwo\\nthree\\n')",
        ])
        .arg(&big)
        .status()
        .unwrap();
    assert!(made.success());
    let out = env.ckpt_in(&big, &["watch"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = env.ckpt_in(&big, &["checkpoint", "-m", "a hundred thousand files"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let ui = Ui::start(&env, &p);
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-venv/bin/python");
    assert!(
        venv.exists(),
        "{} missing: run tests/ui/install.sh",
        venv.display()
    );
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui");
    std::fs::create_dir_all(&shots).unwrap();
    let mut cmd = Command::new(venv);
    env.env(&mut cmd);
    let out = cmd
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/browser.py"))
        .args([&ui.url, ckpt_bin()])
        .arg(&p)
        .arg(shots.join("timeline.png"))
        .arg(&big)
        .current_dir(&p)
        .output()
        .unwrap();
    println!("{}", stdout(&out));
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    env.fsck();
}

/// Runs `ckpt hook claude-code` for `prompt` in `project`.
fn hook(env: &TestEnv, project: &Path, prompt: &str) {
    claude_prompt(env, project, prompt);
}

/// Runs `ckpt hook claude-code` for `prompt` in `project`, with the hook input's `fields`.
fn hook_with(env: &TestEnv, project: &Path, prompt: &str, fields: Value) {
    let session = fields["session_id"].as_str().unwrap_or("s1").to_string();
    claude_prompt_with(env, project, &session, prompt, fields);
}
