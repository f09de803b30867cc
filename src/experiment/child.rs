//! One cell's child process: how it is started (own process group, dies
//! with the runner), how its stdout lines become metrics, and how the tail
//! of its stderr is kept in bounded memory.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};

/// A parsed stdout line of a child.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A JSON object: an iteration's metrics. `iteration` is the object's
    /// own `"iteration"` field when it has one.
    Metrics {
        iteration: Option<i64>,
        numbers: Vec<(String, f64)>,
        texts: Vec<(String, String)>,
    },
    /// Anything else; kept with the cell's log, never an error.
    Log(String),
}

/// Parses one stdout line. Every numeric field becomes a metric (booleans
/// as 0/1), strings and arrays are kept as text, nested objects are
/// flattened with `/` (`{"eval": {"win": 1}}` → `eval/win`), `null` is
/// dropped. A line that is not a JSON object, or whose `iteration` is not a
/// non-negative integer, is log.
pub fn parse_line(line: &str) -> Line {
    let trimmed = line.trim();
    if !trimmed.starts_with('{') {
        return Line::Log(line.to_string());
    }
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(trimmed)
    else {
        return Line::Log(line.to_string());
    };
    let mut iteration = None;
    let mut numbers = Vec::with_capacity(map.len());
    let mut texts = Vec::new();
    for (key, value) in map {
        if key == "iteration" {
            match value.as_i64().or_else(|| {
                value
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15)
                    .map(|f| f as i64)
            }) {
                Some(n) if n >= 0 => iteration = Some(n),
                _ => return Line::Log(line.to_string()),
            }
            continue;
        }
        flatten(key, value, &mut numbers, &mut texts);
    }
    Line::Metrics {
        iteration,
        numbers,
        texts,
    }
}

fn flatten(
    key: String,
    value: serde_json::Value,
    numbers: &mut Vec<(String, f64)>,
    texts: &mut Vec<(String, String)>,
) {
    use serde_json::Value;
    match value {
        Value::Null => {}
        Value::Bool(b) => numbers.push((key, if b { 1.0 } else { 0.0 })),
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
                numbers.push((key, f));
            }
        }
        Value::String(s) => texts.push((key, s)),
        Value::Array(_) => texts.push((key, value.to_string())),
        Value::Object(map) => {
            for (k, v) in map {
                flatten(format!("{key}/{k}"), v, numbers, texts);
            }
        }
    }
}

/// The last lines of a stream, bounded in lines and bytes so a chatty child
/// cannot grow the runner's memory.
#[derive(Debug, Default)]
pub struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

/// Most lines kept.
const TAIL_LINES: usize = 40;
/// Most bytes kept (lines are cut to this too).
const TAIL_BYTES: usize = 8 * 1024;
/// Longest single line kept.
const TAIL_LINE: usize = 1024;

impl Tail {
    pub fn push(&mut self, line: &str) {
        let mut line = line.trim_end().to_string();
        if line.len() > TAIL_LINE {
            let mut cut = TAIL_LINE;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || (self.bytes > TAIL_BYTES && self.lines.len() > 1) {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }

    pub fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The last non-empty line (the usual one-line cause of a failure).
    pub fn last_line(&self) -> Option<&str> {
        self.lines
            .iter()
            .rev()
            .map(String::as_str)
            .find(|l| !l.trim().is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// Reads a stream to its end on a thread, keeping only its tail.
pub fn collect_tail<R: Read + Send + 'static>(
    stream: R,
) -> (Arc<Mutex<Tail>>, std::thread::JoinHandle<()>) {
    let tail = Arc::new(Mutex::new(Tail::default()));
    let sink = Arc::clone(&tail);
    let handle = std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&buf);
                    if let Ok(mut t) = sink.lock() {
                        t.push(&text);
                    }
                }
            }
        }
    });
    (tail, handle)
}

/// Describes how a child ended, for the run row.
pub fn describe_exit(status: &std::process::ExitStatus) -> (Option<i64>, Option<i64>, String) {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        (Some(i64::from(code)), None, format!("exit code {code}"))
    } else if let Some(sig) = status.signal() {
        (
            None,
            Some(i64::from(sig)),
            format!("killed by signal {sig} ({})", signal_name(sig)),
        )
    } else {
        (None, None, "ended without exit code or signal".to_string())
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_metrics_texts_and_iteration() {
        let line = r#"{"iteration": 3, "t": 0.5, "mode": "fp32", "ok": true, "n": null,
                       "eval": {"win": 0.25}, "xs": [1, 2]}"#;
        let Line::Metrics {
            iteration,
            mut numbers,
            mut texts,
        } = parse_line(line)
        else {
            panic!("not metrics");
        };
        numbers.sort_by(|a, b| a.0.cmp(&b.0));
        texts.sort();
        assert_eq!(iteration, Some(3));
        assert_eq!(
            numbers,
            vec![
                ("eval/win".to_string(), 0.25),
                ("ok".to_string(), 1.0),
                ("t".to_string(), 0.5)
            ]
        );
        assert_eq!(
            texts,
            vec![
                ("mode".to_string(), "fp32".to_string()),
                ("xs".to_string(), "[1,2]".to_string())
            ]
        );
    }

    #[test]
    fn missing_iteration_is_none_and_float_iteration_is_accepted() {
        assert!(matches!(
            parse_line(r#"{"t": 1}"#),
            Line::Metrics {
                iteration: None,
                ..
            }
        ));
        assert!(matches!(
            parse_line(r#"{"iteration": 2.0, "t": 1}"#),
            Line::Metrics {
                iteration: Some(2),
                ..
            }
        ));
    }

    #[test]
    fn non_objects_and_bad_iterations_are_log() {
        for line in [
            "hello",
            "",
            "[1, 2]",
            "{not json",
            r#"{"iteration": "x", "t": 1}"#,
            r#"{"iteration": -1, "t": 1}"#,
            r#"{"iteration": 1.5}"#,
        ] {
            assert_eq!(parse_line(line), Line::Log(line.to_string()), "{line}");
        }
    }

    #[test]
    fn tail_is_bounded() {
        let mut tail = Tail::default();
        for i in 0..1000 {
            tail.push(&format!("line {i}\n"));
        }
        let text = tail.text();
        assert_eq!(text.lines().count(), TAIL_LINES);
        assert!(text.ends_with("line 999"));
        assert_eq!(tail.last_line(), Some("line 999"));
        let mut big = Tail::default();
        for _ in 0..100 {
            big.push(&"x".repeat(5000));
        }
        assert!(big.text().len() <= TAIL_BYTES + 8);
    }
}
