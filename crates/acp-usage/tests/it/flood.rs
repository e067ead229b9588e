//! A flood in both directions at once does not wedge the relay: with `cat` as the agent, every
//! line the editor writes comes back while the editor is still writing (the agent's stdout
//! fills while its stdin is being fed, which deadlocked a relay that waited on one side while
//! holding the other).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// 1 KiB lines fill the pipes quickly.
const PAD: &str = concat!(
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
);

fn numbered(n: usize) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"_test/n","params":{{"n":{n},"pad":"{PAD}"}}}}"#)
}

#[test]
fn an_echoing_agent_under_a_flood_gets_everything_back() {
    const LINES: usize = 50_000;
    let mut child = Command::new(env!("CARGO_BIN_EXE_acp-usage"))
        .args(["--", "cat"])
        .env("ACP_USAGE_STATE_DIR", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the relay");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let writer = std::thread::spawn(move || {
        for n in 0..LINES {
            writeln!(stdin, "{}", numbered(n)).unwrap();
        }
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut got = 0;
        for (n, line) in BufReader::new(stdout).lines().enumerate() {
            let line = line.unwrap();
            assert_eq!(line, numbered(n));
            got += 1;
        }
        tx.send(got).unwrap();
    });
    writer.join().unwrap();
    let got = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(got) => got,
        Err(_) => {
            let _ = child.kill();
            panic!("the relay wedged under a flood");
        }
    };
    assert_eq!(got, LINES);
    assert!(child.wait().unwrap().success());
}
