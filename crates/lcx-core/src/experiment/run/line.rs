//! One stdout line of a cell, parsed: an iteration's metrics, a line that
//! meant to be metrics and could not be taken, or log text. The one place
//! where what a child prints is validated.

use crate::store::NonFinite;

/// A parsed stdout line of a child.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A JSON object: an iteration's metrics. `iteration` is the object's
    /// own `"iteration"` field when it has one.
    Metrics {
        iteration: Option<i64>,
        numbers: Vec<(String, f64)>,
        texts: Vec<(String, String)>,
        /// Numeric fields that are NaN, ±Infinity or out of `f64`'s range.
        nonfinite: Vec<(String, NonFinite)>,
    },
    /// Starts like a JSON object (`{`) but is not a usable one: the child
    /// meant to report metrics and the runner could not take them.
    Malformed { line: String, reason: String },
    /// Anything else; kept with the cell's log, never an error.
    Log(String),
}

/// Parses one stdout line. Every numeric field becomes a metric (booleans
/// as 0/1), strings and arrays are kept as text, nested objects are
/// flattened with `/` (`{"eval": {"win": 1}}` → `eval/win`), `null` is
/// dropped. The bare `NaN`, `Infinity` and `-Infinity` that Python's `json`
/// writes, and numbers beyond `f64`'s range, are kept as non-finite values.
/// A line that does not start with `{` is log; one that does but is no JSON
/// object, or whose `iteration` is not a non-negative integer, is malformed.
pub fn parse_line(line: &str) -> Line {
    let trimmed = line.trim();
    if !trimmed.starts_with('{') {
        return Line::Log(line.to_string());
    }
    let malformed = |reason: String| Line::Malformed {
        line: line.trim_end().to_string(),
        reason,
    };
    let map = match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(serde_json::Value::Object(map)) => map,
        Ok(_) => return malformed("not a JSON object".into()),
        Err(first) => match mark_nonfinite(trimmed)
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        {
            Some(serde_json::Value::Object(map)) => map,
            _ => return malformed(format!("not valid JSON: {first}")),
        },
    };
    let mut iteration = None;
    let mut numbers = Vec::with_capacity(map.len());
    let mut texts = Vec::new();
    let mut nonfinite = Vec::new();
    for (key, value) in map {
        if key == "iteration" {
            match value.as_i64().or_else(|| {
                value
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15)
                    .map(|f| f as i64)
            }) {
                Some(n) if n >= 0 => iteration = Some(n),
                _ => {
                    return malformed(format!(
                        "`iteration` must be a non-negative integer, found {}",
                        shown_value(&value)
                    ))
                }
            }
            continue;
        }
        flatten(key, value, &mut numbers, &mut texts, &mut nonfinite);
    }
    Line::Metrics {
        iteration,
        numbers,
        texts,
        nonfinite,
    }
}

fn shown_value(value: &serde_json::Value) -> String {
    match value.as_str().and_then(sentinel_value) {
        Some(v) => v.as_str().to_string(),
        None => value.to_string(),
    }
}

/// Marks a string that stands for a non-finite number after
/// [`mark_nonfinite`]. A NUL cannot appear in a JSON string unescaped,
/// and no trainer writes `\u0000lcx-nonfinite:` on purpose.
const SENTINEL: &str = "\u{0}lcx-nonfinite:";

fn sentinel_value(s: &str) -> Option<NonFinite> {
    match s.strip_prefix(SENTINEL)? {
        "NaN" => Some(NonFinite::NaN),
        "Infinity" => Some(NonFinite::Infinity),
        "-Infinity" => Some(NonFinite::NegInfinity),
        _ => None,
    }
}

/// Rewrites the tokens that serde_json refuses but trainers print (`NaN`,
/// `Infinity`, `-Infinity`, and numbers that overflow `f64`, such as
/// `1e999`) into sentinel strings, leaving strings untouched. `None` when
/// there was nothing to rewrite (the line is malformed for another reason).
fn mark_nonfinite(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 32);
    let mut changed = false;
    let mut i = 0;
    let mut last = 0;
    let sentinel =
        |v: NonFinite| format!("\"{}{}\"", SENTINEL.replace('\0', "\\u0000"), v.as_str());
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // Skip the string, escapes included.
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'N' if text[i..].starts_with("NaN") => {
                out.push_str(&text[last..i]);
                out.push_str(&sentinel(NonFinite::NaN));
                i += 3;
                last = i;
                changed = true;
            }
            b'I' if text[i..].starts_with("Infinity") => {
                out.push_str(&text[last..i]);
                out.push_str(&sentinel(NonFinite::Infinity));
                i += 8;
                last = i;
                changed = true;
            }
            b'-' if text[i..].starts_with("-Infinity") => {
                out.push_str(&text[last..i]);
                out.push_str(&sentinel(NonFinite::NegInfinity));
                i += 9;
                last = i;
                changed = true;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let token = &text[start..i];
                if let Some(v) = token.parse::<f64>().ok().and_then(NonFinite::of) {
                    out.push_str(&text[last..start]);
                    out.push_str(&sentinel(v));
                    last = i;
                    changed = true;
                }
            }
            _ => i += 1,
        }
    }
    if !changed {
        return None;
    }
    out.push_str(&text[last.min(text.len())..]);
    Some(out)
}

fn flatten(
    key: String,
    value: serde_json::Value,
    numbers: &mut Vec<(String, f64)>,
    texts: &mut Vec<(String, String)>,
    nonfinite: &mut Vec<(String, NonFinite)>,
) {
    use serde_json::Value;
    match value {
        Value::Null => {}
        Value::Bool(b) => numbers.push((key, if b { 1.0 } else { 0.0 })),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => numbers.push((key, f)),
            Some(f) => nonfinite.push((key, NonFinite::of(f).unwrap_or(NonFinite::NaN))),
            None => nonfinite.push((key, NonFinite::NaN)),
        },
        Value::String(s) => match sentinel_value(&s) {
            Some(v) => nonfinite.push((key, v)),
            None => texts.push((key, s)),
        },
        Value::Array(_) => texts.push((key, value.to_string())),
        Value::Object(map) => {
            for (k, v) in map {
                flatten(format!("{key}/{k}"), v, numbers, texts, nonfinite);
            }
        }
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
            nonfinite,
        } = parse_line(line)
        else {
            panic!("not metrics");
        };
        numbers.sort_by(|a, b| a.0.cmp(&b.0));
        texts.sort();
        assert_eq!(iteration, Some(3));
        assert!(nonfinite.is_empty());
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
    fn non_objects_are_log_and_broken_objects_are_malformed() {
        for line in ["hello", "", "[1, 2]", "  42"] {
            assert_eq!(parse_line(line), Line::Log(line.to_string()), "{line}");
        }
        for (line, says) in [
            ("{not json", "not valid JSON"),
            (r#"{"t": 1"#, "not valid JSON"),
            (r#"{"iteration": "x", "t": 1}"#, "found \"x\""),
            (r#"{"iteration": -1, "t": 1}"#, "found -1"),
            (r#"{"iteration": 1.5}"#, "found 1.5"),
            (r#"{"iteration": NaN, "t": 1}"#, "found NaN"),
        ] {
            match parse_line(line) {
                Line::Malformed { line: kept, reason } => {
                    assert_eq!(kept, line);
                    assert!(reason.contains(says), "{line}: {reason}");
                }
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    #[test]
    fn python_style_non_finite_numbers_are_kept_as_such() {
        let line = r#"{"iteration": 2, "a": NaN, "b": Infinity, "c": -Infinity, "d": 1e999,
                       "e": -2e400, "f": 1.5, "s": "NaN and Infinity in a string", "g": {"h": NaN}}"#;
        let Line::Metrics {
            iteration,
            numbers,
            texts,
            mut nonfinite,
        } = parse_line(line)
        else {
            panic!("not metrics: {:?}", parse_line(line));
        };
        nonfinite.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(iteration, Some(2));
        assert_eq!(numbers, vec![("f".to_string(), 1.5)]);
        assert_eq!(
            texts,
            vec![("s".to_string(), "NaN and Infinity in a string".to_string())]
        );
        assert_eq!(
            nonfinite,
            vec![
                ("a".to_string(), NonFinite::NaN),
                ("b".to_string(), NonFinite::Infinity),
                ("c".to_string(), NonFinite::NegInfinity),
                ("d".to_string(), NonFinite::Infinity),
                ("e".to_string(), NonFinite::NegInfinity),
                ("g/h".to_string(), NonFinite::NaN),
            ]
        );
    }
}
