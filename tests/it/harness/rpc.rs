//! A persistent JSON-RPC connection to the test daemon, for what the client does not expose.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::Value;

use super::TestEnv;

/// A persistent JSON-RPC connection to the test daemon.
pub struct Rpc {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next: u64,
}

impl Rpc {
    pub fn connect(env: &TestEnv) -> Rpc {
        let stream = UnixStream::connect(&env.socket).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Rpc {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
            next: 1,
        }
    }

    /// Calls `method`, panicking on an error reply.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
        let mut reply = String::new();
        self.reader.read_line(&mut reply).unwrap();
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["id"], id);
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }
}
