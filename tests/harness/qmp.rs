//! QEMU's machine protocol (QMP) over a Unix socket the harness listens on, and the
//! sockets QEMU connects to: what saving a machine's state and waiting for a
//! restored one to run take.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;

/// A listening Unix socket in the temporary directory, removed when dropped.
pub(crate) struct Listener {
    listener: UnixListener,
    path: PathBuf,
}

/// Numbers sockets apart within one test process.
static NEXT_SOCKET: AtomicU64 = AtomicU64::new(0);

impl Listener {
    /// Binds a fresh socket whose name says what it is for.
    pub(crate) fn bind(what: &str) -> Self {
        let unique = NEXT_SOCKET.fetch_add(1, Relaxed);
        let name = format!("e2e-{what}-{}-{unique}.sock", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).expect("a Unix socket in the temporary directory");
        Self { listener, path }
    }

    /// Where QEMU connects.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The first connection, within `timeout`; its reads time out after `timeout` too.
    pub(crate) fn accept(&self, timeout: Duration) -> UnixStream {
        let listener = self.listener.try_clone().expect("the listening socket");
        let (sent, received) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(listener.accept().map(|(stream, _)| stream));
        });
        let stream = received
            .recv_timeout(timeout)
            .unwrap_or_else(|_| {
                panic!("QEMU did not connect to {} in {timeout:?}", self.path.display())
            })
            .expect("accepting QEMU's connection");
        stream.set_read_timeout(Some(timeout)).expect("a read timeout");
        stream
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A QMP session, capabilities negotiated.
pub(crate) struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Events read while waiting for a command's answer, oldest first.
    events: VecDeque<Value>,
}

impl Qmp {
    /// Opens the session on `stream`: QEMU's greeting, then `qmp_capabilities`.
    pub(crate) fn new(stream: UnixStream) -> Self {
        let writer = stream.try_clone().expect("the QMP socket");
        let mut qmp = Self { reader: BufReader::new(stream), writer, events: VecDeque::new() };
        let greeting = qmp.message();
        assert!(greeting.get("QMP").is_some(), "not QMP's greeting: {greeting}");
        qmp.execute("qmp_capabilities", json!({}));
        qmp
    }

    /// Runs `command` and returns its answer; panics with QEMU's error.
    pub(crate) fn execute(&mut self, command: &str, arguments: Value) -> Value {
        let line = json!({ "execute": command, "arguments": arguments });
        writeln!(self.writer, "{line}").expect("writing to QMP");
        loop {
            let message = self.message();
            if let Some(answer) = message.get("return") {
                return answer.clone();
            }
            if let Some(error) = message.get("error") {
                panic!("QMP {command}: {error}");
            }
            self.events.push_back(message);
        }
    }

    /// Waits for an event named `name` whose data `matches`; returns that data.
    pub(crate) fn event(&mut self, name: &str, matches: impl Fn(&Value) -> bool) -> Value {
        loop {
            let event = match self.events.pop_front() {
                Some(event) => event,
                None => self.message(),
            };
            let data = event.get("data").cloned().unwrap_or(Value::Null);
            if event.get("event").and_then(Value::as_str) == Some(name) && matches(&data) {
                return data;
            }
        }
    }

    /// The next message QEMU sends; panics if none comes within the read timeout.
    fn message(&mut self) -> Value {
        let mut line = String::new();
        let read = self.reader.read_line(&mut line).expect("reading from QMP");
        assert!(read > 0, "QEMU closed its QMP connection");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("QMP sent {line:?}: {e}"))
    }
}
