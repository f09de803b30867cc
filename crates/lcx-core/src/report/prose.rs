//! [`Prose`]: a sentence of lcx's about things it did not name. The
//! report's model says why an arm was not judged, what its net result is,
//! what the reader should know; those sentences quote arm names, labels,
//! metric names and a child's stderr. The model keeps each quotation apart
//! from lcx's own words, so that every renderer escapes it for its own
//! reader ([`crate::escape`]) and none has to guess which part is whose.

use serde::{Serialize, Serializer};

use crate::escape;

/// One piece of a [`Prose`].
#[derive(Debug, Clone, PartialEq)]
enum Span {
    /// lcx's own words, which may use markdown of lcx's own (`**`,
    /// backticks around fixed words).
    Ours(String),
    /// Text from outside lcx (a label, a child's stderr), shown as text.
    Text(String),
    /// A name from outside lcx (an arm, a metric), shown as code.
    Name(String),
}

/// lcx's words with quoted names and text; built with the chain
/// `Prose::ours("Arm ").name(arm).ours(" has no data")`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prose(Vec<Span>);

impl Prose {
    /// Prose that starts with lcx's own words.
    pub fn ours(words: impl Into<String>) -> Prose {
        Prose(vec![Span::Ours(words.into())])
    }

    /// Prose that starts with a quoted name.
    pub fn of_name(name: impl Into<String>) -> Prose {
        Prose(vec![Span::Name(name.into())])
    }

    /// Prose that starts with quoted text.
    pub fn of_text(text: impl Into<String>) -> Prose {
        Prose(vec![Span::Text(text.into())])
    }

    /// Appends lcx's own words.
    pub fn and(mut self, words: impl Into<String>) -> Prose {
        self.0.push(Span::Ours(words.into()));
        self
    }

    /// Appends a name from outside lcx, shown as code.
    pub fn name(mut self, name: impl Into<String>) -> Prose {
        self.0.push(Span::Name(name.into()));
        self
    }

    /// Appends text from outside lcx, shown as text.
    pub fn text(mut self, text: impl Into<String>) -> Prose {
        self.0.push(Span::Text(text.into()));
        self
    }

    /// Appends another prose.
    pub fn then(mut self, other: Prose) -> Prose {
        self.0.extend(other.0);
        self
    }

    /// What this prose says of `name` when it starts with that name and
    /// `": "` (`` `amp`: AMP requested, ran fp32 ``): the rest, so that
    /// arms with the same reason can be listed once.
    pub fn about(&self, name: &str) -> Option<Prose> {
        match self.0.as_slice() {
            [Span::Name(n), Span::Ours(sep), rest @ ..] if n == name && sep.starts_with(": ") => {
                let mut spans = Vec::with_capacity(rest.len() + 1);
                let tail = &sep[2..];
                if !tail.is_empty() {
                    spans.push(Span::Ours(tail.to_string()));
                }
                spans.extend(rest.iter().cloned());
                Some(Prose(spans))
            }
            _ => None,
        }
    }

    /// `parts` joined by lcx's `separator`.
    pub fn join(parts: impl IntoIterator<Item = Prose>, separator: &str) -> Prose {
        let mut out = Prose::default();
        for (i, p) in parts.into_iter().enumerate() {
            if i > 0 {
                out.0.push(Span::Ours(separator.to_string()));
            }
            out.0.extend(p.0);
        }
        out
    }

    /// As markdown: lcx's words as written, every quotation escaped by the
    /// markdown rule (names as code spans, text as inline text).
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for s in &self.0 {
            match s {
                Span::Ours(t) => out.push_str(t),
                Span::Text(t) => out.push_str(&escape::md_inline(t)),
                Span::Name(t) => out.push_str(&escape::md_code(t)),
            }
        }
        out
    }

    /// As plain text (JSON, a terminal line after
    /// [`escape::terminal_line`]): quotations as they were, names between
    /// backticks.
    pub fn plain(&self) -> String {
        let mut out = String::new();
        for s in &self.0 {
            match s {
                Span::Ours(t) | Span::Text(t) => out.push_str(t),
                Span::Name(t) => {
                    out.push('`');
                    out.push_str(t);
                    out.push('`');
                }
            }
        }
        out
    }
}

impl std::fmt::Display for Prose {
    /// The plain text ([`Prose::plain`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.plain())
    }
}

/// A report in JSON carries prose as its plain text: a string, as before
/// prose had parts.
impl Serialize for Prose {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.plain())
    }
}

impl From<&str> for Prose {
    fn from(words: &str) -> Prose {
        Prose::ours(words)
    }
}

impl From<String> for Prose {
    fn from(words: String) -> Prose {
        Prose::ours(words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotations_are_escaped_in_markdown_and_plain_in_json() {
        let p = Prose::ours("Arm ")
            .name("a`b")
            .and(" failed: ")
            .text("<script>[x](javascript:1)");
        assert_eq!(
            p.markdown(),
            "Arm ``a`b`` failed: \\<script\\>\\[x\\](javascript:1)"
        );
        assert_eq!(p.plain(), "Arm `a`b` failed: <script>[x](javascript:1)");
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            "\"Arm `a`b` failed: <script>[x](javascript:1)\""
        );
        let joined = Prose::join([Prose::of_name("x"), Prose::of_text("y")], "; ");
        assert_eq!(joined.markdown(), "`x`; y");
    }
}
