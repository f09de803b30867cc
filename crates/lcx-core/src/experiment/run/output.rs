//! A cell's output streams in bounded memory: lines read up to a cap (a
//! longer one keeps only its head), and the tail of a stream kept for the
//! cell's record.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};

/// The longest line the runner takes from a child, stdout or stderr. A
/// longer one is counted and only its head kept: without a cap, a child
/// that never prints a newline would grow the runner's memory without bound.
pub const MAX_LINE: usize = 1024 * 1024;

/// How much of an overlong line is kept for the log.
const OVERLONG_HEAD: usize = 512;

/// One read of [`read_line_bounded`].
#[derive(Debug, PartialEq)]
pub enum LineRead {
    /// A whole line (without regard to its newline), at most `MAX_LINE` bytes.
    Line(Vec<u8>),
    /// A line over the cap: its first bytes and its full length.
    Overlong {
        head: Vec<u8>,
        bytes: usize,
    },
    Eof,
}

/// Reads one line of at most `cap` bytes; a longer line is skipped to its
/// newline, keeping its head, so memory stays within `cap`.
pub fn read_line_bounded(reader: &mut impl BufRead, cap: usize) -> std::io::Result<LineRead> {
    let mut line = Vec::new();
    let mut total = 0usize;
    let mut overlong = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let used = chunk.len();
        total += used;
        if !overlong && total > cap {
            overlong = true;
            line.extend_from_slice(chunk);
            line.truncate(OVERLONG_HEAD);
        } else if !overlong {
            line.extend_from_slice(chunk);
        }
        reader.consume(used);
        if done {
            break;
        }
    }
    Ok(if total == 0 {
        LineRead::Eof
    } else if overlong {
        LineRead::Overlong {
            head: line,
            bytes: total,
        }
    } else {
        LineRead::Line(line)
    })
}

/// The last lines of a stream, bounded in lines and bytes so a chatty child
/// cannot grow the runner's memory.
#[derive(Debug, Default)]
pub struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
    /// Lines over the line cap seen on the stream (counted on the cell with
    /// stdout's, `runs.overlong_lines`).
    pub overlong: i64,
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
        loop {
            let text = match read_line_bounded(&mut reader, MAX_LINE) {
                Ok(LineRead::Eof) | Err(_) => break,
                Ok(LineRead::Line(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Ok(LineRead::Overlong { head, bytes }) => {
                    if let Ok(mut t) = sink.lock() {
                        t.overlong += 1;
                    }
                    overlong_note(&head, bytes)
                }
            };
            if let Ok(mut t) = sink.lock() {
                t.push(&text);
            }
        }
    });
    (tail, handle)
}

/// What the log keeps of an overlong line.
pub fn overlong_note(head: &[u8], bytes: usize) -> String {
    format!(
        "{}… [line of {bytes} bytes cut: lines over {} MiB are not read]",
        String::from_utf8_lossy(head).trim_end(),
        MAX_LINE / (1024 * 1024)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_up_to_the_cap_and_longer_ones_cut() {
        let long = "x".repeat(5000);
        let input = format!("short\n{long}\nafter\nno newline at the end");
        let mut reader = std::io::BufReader::with_capacity(64, input.as_bytes());
        let mut reads = Vec::new();
        loop {
            let r = read_line_bounded(&mut reader, 1000).unwrap();
            if r == LineRead::Eof {
                break;
            }
            reads.push(r);
        }
        assert_eq!(reads.len(), 4);
        assert_eq!(reads[0], LineRead::Line(b"short\n".to_vec()));
        match &reads[1] {
            LineRead::Overlong { head, bytes } => {
                assert_eq!(*bytes, 5001);
                assert_eq!(head.len(), OVERLONG_HEAD);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(reads[2], LineRead::Line(b"after\n".to_vec()));
        assert_eq!(reads[3], LineRead::Line(b"no newline at the end".to_vec()));
    }

    /// The README's promise: a stderr line over the cap is counted too.
    #[test]
    fn overlong_stderr_lines_are_counted() {
        let long = "e".repeat(MAX_LINE + 10);
        let input = format!("first\n{long}\nlast\n{long}");
        let (tail, handle) = collect_tail(std::io::Cursor::new(input.into_bytes()));
        handle.join().unwrap();
        let tail = tail.lock().unwrap();
        assert_eq!(tail.overlong, 2);
        assert!(
            tail.text().contains("line of 1048586 bytes cut"),
            "{}",
            tail.text()
        );
        assert_eq!(tail.text().lines().next(), Some("first"));
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
