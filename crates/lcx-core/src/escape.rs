//! One escaping rule per reader. Text that comes from outside lcx (an
//! experiment file's names, labels, description and notes, a child's
//! stderr, a metric name a command printed, a database row) is put into
//! an output only through the rule of that output's reader:
//!
//! - a **terminal** sees control characters other than newline and tab,
//!   and the characters that reorder text (bidi controls), as visible
//!   escapes (`\x1b`, `\u{202e}`), never as themselves ([`terminal`]);
//! - **markdown** (the report, the archive, what people paste into pull
//!   requests) gets user text that cannot open HTML, a link, an image, a
//!   code span or emphasis, nor end a table cell or the line, escaped with
//!   backslashes so that the same report still reads in a terminal
//!   ([`md_inline`], [`md_code`], [`md_block`]);
//! - **HTML** escapes text and attributes ([`html`]); a link is live only
//!   for `http:`, `https:`, a relative path or a `#fragment`
//!   ([`safe_href`]); the site's markdown goes through `ammonia` as well
//!   (`publish::html`);
//! - **CSV and JSON** quote by their own rules (`report::words::csv_field`,
//!   serde_json, [`json_visible`]); written to a terminal, CSV also follows
//!   the terminal's rule.
//!
//! The rules live here and are applied by the renderers, never stored in
//! the model: a report holds what was recorded.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` changes what a terminal shows other than by printing itself:
/// C0 controls but newline and tab, DEL, C1 controls (a terminal may read
/// U+009B as CSI), and the bidi controls that reorder the text around them.
pub fn is_hidden_control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// How a hidden control shows: `\x1b` for one byte, `\u{202e}` above.
fn visible(c: char, out: &mut String) {
    let n = c as u32;
    if n < 0x80 {
        let _ = write!(out, "\\x{n:02x}");
    } else {
        let _ = write!(out, "\\u{{{n:x}}}");
    }
}

/// `text` for a terminal: every [`is_hidden_control`] character shown as
/// its escape; newline and tab kept. Borrowed when there is none (lcx's own
/// text), so it costs nothing on the common path.
pub fn terminal(text: &str) -> Cow<'_, str> {
    replace(text, is_hidden_control, visible)
}

/// `text` with every character `hidden` picks written by `show`; borrowed
/// when it has none.
fn replace(
    text: &str,
    hidden: impl Fn(char) -> bool,
    show: impl Fn(char, &mut String),
) -> Cow<'_, str> {
    if !text.chars().any(&hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            show(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The first character of `text` a terminal would obey or that reorders
/// text (a control of any kind, a bidi control), if any.
pub fn first_hidden(text: &str) -> Option<char> {
    text.chars()
        .find(|c| c.is_control() || is_hidden_control(*c))
}

/// The longest run of backticks in `text`: a code span or block around it
/// needs a longer fence.
pub fn longest_backtick_run(text: &str) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// `text` for one line of a terminal: as [`terminal`], and a newline, a
/// carriage return or a tab shown as `\n`, `\r`, `\t` (a progress line or
/// a table cell must stay one line).
pub fn terminal_line(text: &str) -> Cow<'_, str> {
    replace(
        text,
        |c| is_hidden_control(c) || matches!(c, '\n' | '\r' | '\t'),
        |c, out| match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => visible(c, out),
        },
    )
}

/// `text` quoted in an error: by [`terminal_line`], and cut after `max`
/// characters with `…` (a 10 KB value is not shown whole).
pub fn terminal_short(text: &str, max: usize) -> String {
    let line = terminal_line(text);
    let mut chars = line.chars();
    let mut out: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// Whether a `&` at the start of `rest` could begin a character reference
/// (`&amp;`, `&#106;`, `&#x6a;`), which markdown decodes.
fn starts_reference(rest: &str) -> bool {
    let mut chars = rest.chars().skip(1);
    match chars.next() {
        Some('#') => true,
        Some(c) => c.is_ascii_alphanumeric(),
        None => false,
    }
}

/// One markdown character of user text, escaped as the inline rule says;
/// `prev` and `next` are its neighbours in the field (`None` at its ends,
/// where lcx's own text may follow, so an end counts as a boundary); `at`
/// says what came before it in the field, and `tildes` whether the field
/// holds more than one `~`.
fn md_char(c: char, prev: Option<char>, at: Lead, tildes: bool, rest: &str, out: &mut String) {
    let next = rest.chars().nth(1);
    let leading = at == Lead::Start;
    match c {
        // What opens or closes HTML, an autolink, a link or an image, a
        // code span, a character reference, a table cell; the backslash
        // itself, so that the user's cannot undo an escape of ours.
        '\\' | '<' | '>' | '[' | ']' | '`' | '|' | '*' => {
            out.push('\\');
            out.push(c);
        }
        '&' if starts_reference(rest) => out.push_str("\\&"),
        // `_` emphasises, and `~` strikes through, only at a word's edge
        // (a field with two `~` escapes them all: `a~b~c` would strike):
        // `max_rss_bytes` and `main~2` read as themselves.
        '_' | '~'
            if tildes && c == '~'
                || !prev.is_some_and(|p| p.is_alphanumeric())
                || !next.is_some_and(|n| n.is_alphanumeric()) =>
        {
            out.push('\\');
            out.push(c);
        }
        // `2. tiled` at the start of a list item would open a list.
        '.' | ')' if at == Lead::Digits && next.is_none_or(char::is_whitespace) => {
            out.push('\\');
            out.push(c);
        }
        // A field that starts a line (or a list item) must not make it a
        // heading or a list.
        '#' if leading => out.push_str("\\#"),
        '-' | '+' if leading && next.is_none_or(char::is_whitespace) => {
            out.push('\\');
            out.push(c);
        }
        '\n' | '\r' | '\t' => out.push(' '),
        c if is_hidden_control(c) => visible(c, out),
        c => out.push(c),
    }
}

/// User text as one line of markdown, inside a paragraph, a list item or a
/// table cell: it reads as the characters it has and opens nothing.
pub fn md_inline(text: &str) -> String {
    // Leading white space shows nothing in markdown, and after a list
    // marker four of it would open a code block.
    let text = text.trim_start();
    let mut out = String::with_capacity(text.len() + 8);
    let mut prev = None;
    let tildes = text.matches('~').count() > 1;
    let mut lead = Lead::Start;
    for (at, c) in text.char_indices() {
        md_char(c, prev, lead, tildes, &text[at..], &mut out);
        lead = match (lead, c) {
            (Lead::Start | Lead::Digits, c) if c.is_ascii_digit() => Lead::Digits,
            _ => Lead::Past,
        };
        prev = Some(c);
    }
    out
}

/// What came before a character of [`md_inline`]'s field: nothing, only
/// digits, or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    Start,
    Digits,
    Past,
}

/// User text as a markdown code span, outside a table: fenced with more
/// backticks than any run inside it, so it cannot close early; newlines
/// become spaces (a code span is one line here). In a table cell use
/// [`md_inline`]: GitHub splits cells before it reads code spans.
pub fn md_code(text: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(text) + 1);
    let mut body = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => body.push(' '),
            c if is_hidden_control(c) => visible(c, &mut body),
            c => body.push(c),
        }
    }
    // A span that starts or ends with a backtick (or is all spaces) needs
    // a space of padding, which markdown strips again.
    let pad = if body.starts_with('`') || body.ends_with('`') || body.trim().is_empty() {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// Multi-line user text (a description, notes) as markdown paragraphs: the
/// author's lines, emphasis, lists and code spans (of one or two backticks,
/// closed on their line: [`code_span`]; controls in them shown as escapes)
/// are kept, but nothing in it can open
/// HTML, a link, an image or a character reference, no line can start a
/// fenced block or a table that would swallow what follows, and none can
/// be a heading (the report's sections are lcx's).
pub fn md_block(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        // An indented line would be a code block inside the report.
        out.push_str(if indent.is_empty() { "" } else { " " });
        let mut prev = None;
        // Only list markers (`- `, `1. `) before it: a `#` here would still
        // make a heading inside the item.
        let mut marker = true;
        let flat = trimmed.trim_end();
        // Where a code span of the author's, kept whole, ends.
        let mut past = 0;
        for (at, c) in trimmed.char_indices() {
            if at < past {
                continue;
            }
            let in_marker = marker;
            marker = marker && " -*+0123456789.)".contains(c);
            match c {
                '`' => {
                    let rest = &trimmed[at..];
                    let fence = rest.len() - rest.trim_start_matches('`').len();
                    match code_span(rest, fence) {
                        Some(body) => {
                            out.push_str(&rest[..fence]);
                            for c in body.chars() {
                                match c {
                                    '\t' => out.push(' '),
                                    c if is_hidden_control(c) => visible(c, &mut out),
                                    c => out.push(c),
                                }
                            }
                            out.push_str(&rest[..fence]);
                            past = at + 2 * fence + body.len();
                        }
                        None => {
                            out.push_str(&"\\`".repeat(fence));
                            past = at + fence;
                        }
                    }
                    marker = false;
                }
                '\\' | '<' | '>' | '[' | ']' | '|' => {
                    out.push('\\');
                    out.push(c);
                }
                // `~~~` would open a fenced block that swallows the rest.
                '~' if prev.is_none() => out.push_str("\\~"),
                '&' if starts_reference(&trimmed[at..]) => out.push_str("\\&"),
                '\t' => out.push(' '),
                // `=` and `-` lines under a paragraph make it a heading, and
                // so does a `#` that starts a line: the report's headings
                // are lcx's.
                '=' | '-' if prev.is_none() && flat.chars().all(|d| d == c) => {
                    out.push('\\');
                    out.push(c);
                }
                '#' if in_marker => out.push_str("\\#"),
                c if is_hidden_control(c) => visible(c, &mut out),
                c => out.push(c),
            }
            prev = Some(c);
        }
    }
    out
}

/// The body of the code span that `rest`'s opening run of `fence`
/// backticks starts, where [`md_block`] keeps it: one or two backticks
/// (three could open a fenced block) closed on the same line by the next
/// run of exactly as many, as markdown reads it, and no `|` inside (a
/// table splits cells before it reads code spans). `None`: the backticks
/// are escaped as text.
fn code_span(rest: &str, fence: usize) -> Option<&str> {
    if fence > 2 {
        return None;
    }
    let after = &rest[fence..];
    let mut at = 0;
    while let Some(start) = after[at..].find('`').map(|i| at + i) {
        let run = after[start..].len() - after[start..].trim_start_matches('`').len();
        if run == fence {
            let body = &after[..start];
            return (!body.contains('|')).then_some(body);
        }
        at = start + run;
    }
    None
}

/// `text` safe inside an HTML element or a quoted attribute; hidden
/// controls shown as their escapes (a browser would hide or obey them).
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if is_hidden_control(c) => visible(c, &mut out),
            c => out.push(c),
        }
    }
    out
}

/// Whether `url` may be a live link on a page lcx writes: `http:`,
/// `https:`, a relative path or a `#fragment`. The scheme is read as a
/// browser reads it, after removing what a browser ignores (whitespace and
/// controls anywhere, so `java\tscript:` is `javascript:`); a URL that
/// still holds a character reference is refused, since whoever decodes it
/// next could find a scheme in it.
pub fn safe_href(url: &str) -> bool {
    let cleaned: String = url
        .chars()
        .filter(|c| !(c.is_whitespace() || c.is_control()))
        .collect();
    if cleaned.contains('&') || cleaned.contains('\\') {
        return false;
    }
    match cleaned.find([':', '/', '?', '#']) {
        // A scheme ends at the first `:` before any `/`, `?` or `#`.
        Some(at) if cleaned[at..].starts_with(':') => {
            let scheme = cleaned[..at].to_ascii_lowercase();
            scheme == "http" || scheme == "https"
        }
        _ => true,
    }
}

/// JSON text with the characters a terminal would obey written as `\u`
/// escapes (serde_json already escapes C0; C1 controls and bidi
/// controls are valid JSON as themselves). The parsed value is unchanged.
pub fn json_visible(json: &str) -> Cow<'_, str> {
    replace(json, is_hidden_control, |c, out| {
        let _ = write!(out, "\\u{:04x}", c as u32);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pulldown_cmark::{Event, Options, Parser, Tag};

    /// Every event markdown makes of `md`: what a renderer would see.
    fn events(md: &str) -> Vec<Event<'_>> {
        Parser::new_ext(md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).collect()
    }

    /// The text a markdown renderer shows for `md` (one paragraph).
    fn shown(md: &str) -> String {
        events(md)
            .into_iter()
            .filter_map(|e| match e {
                Event::Text(t) | Event::Code(t) => Some(t.to_string()),
                Event::SoftBreak | Event::HardBreak => Some("\n".into()),
                _ => None,
            })
            .collect()
    }

    /// HTML, a link, an image, a code block or a table: what no escaped
    /// text may open, a block's included.
    fn opens_markup(e: &Event) -> bool {
        matches!(
            e,
            Event::Html(_)
                | Event::InlineHtml(_)
                | Event::Start(
                    Tag::Link { .. } | Tag::Image { .. } | Tag::CodeBlock(_) | Tag::Table(_)
                )
        )
    }

    /// [`opens_markup`], or emphasis, a heading or a code span: what
    /// inline text may not open either.
    fn opens_anything(md: &str) -> bool {
        events(md).iter().any(|e| {
            opens_markup(e)
                || matches!(
                    e,
                    Event::Start(
                        Tag::Emphasis | Tag::Strong | Tag::Strikethrough | Tag::Heading { .. }
                    ) | Event::Code(_)
                )
        })
    }

    const HOSTILE: &[&str] = &[
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "[x](javascript&colon;alert(1))",
        "[x][r]\n\n[r]: javascript:alert(1)",
        "<javascript:alert(1)>",
        "![x](data:text/html,<script>alert(1)</script>)",
        "**bold** _em_ ~~gone~~ `code` ``",
        "a | b | c",
        "# heading",
        "\u{1b}]0;owned\u{7}\u{1b}[2J",
        "\\[x](javascript:alert(1))",
        "`` ` ``",
        "&amp; &#60;b&#62;",
    ];

    #[test]
    fn inline_text_opens_nothing_and_reads_as_itself() {
        for h in HOSTILE {
            let md = md_inline(h);
            assert!(!opens_anything(&md), "{h:?} → {md:?}: {:?}", events(&md));
            // It reads as the characters it had (newlines as spaces,
            // controls as their escapes).
            let expected = terminal_line(h).replace("\\n", " ");
            assert_eq!(shown(&md), expected, "{h:?} → {md:?}");
            assert!(!md.contains('\u{1b}'), "{md:?}");
        }
        // Ordinary names read as themselves, even raw.
        assert_eq!(md_inline("process/max_rss_bytes"), "process/max_rss_bytes");
        assert_eq!(md_inline("main~2@abc"), "main~2@abc");
        assert_eq!(md_inline("a~b~c"), "a\\~b\\~c");
        assert_eq!(md_inline("2. tiled"), "2\\. tiled");
        assert_eq!(md_inline("v2. x"), "v2. x");
        assert_eq!(md_inline("a < b & c"), "a \\< b & c");
    }

    #[test]
    fn inline_text_keeps_a_table_whole() {
        let row = format!("| {} | {} |", md_inline("a|b"), md_inline("c\\|d"));
        let md = format!("| x | y |\n|---|---|\n{row}\n");
        let cells = events(&md)
            .into_iter()
            .filter(|e| matches!(e, Event::Start(Tag::TableCell)))
            .count();
        assert_eq!(cells, 4, "{md}");
    }

    #[test]
    fn code_spans_hold_any_backticks() {
        for h in HOSTILE.iter().chain(&["`", "``x``", " ", "a`"]) {
            let md = format!("see {} here", md_code(h));
            let codes: Vec<String> = events(&md)
                .into_iter()
                .filter_map(|e| match e {
                    Event::Code(t) => Some(t.to_string()),
                    _ => None,
                })
                .collect();
            assert_eq!(codes.len(), 1, "{h:?} → {md:?}");
            assert!(
                !events(&md).iter().any(|e| matches!(
                    e,
                    Event::Start(Tag::Link { .. }) | Event::InlineHtml(_) | Event::Html(_)
                )),
                "{md:?}"
            );
        }
        assert_eq!(md_code("interleaved"), "`interleaved`");
        assert_eq!(md_code("a`b"), "``a`b``");
    }

    #[test]
    fn blocks_keep_the_authors_emphasis_but_no_links_or_html() {
        for h in HOSTILE {
            let md = md_block(h);
            let bad = events(&md).iter().any(opens_markup);
            assert!(!bad, "{h:?} → {md:?}");
        }
        for h in ["~~~\nswallowed", "Title\n=== ", "- # x", "1. # x"] {
            let md = md_block(h);
            let opened = events(&md)
                .into_iter()
                .any(|e| matches!(e, Event::Start(Tag::CodeBlock(_) | Tag::Heading { .. })));
            assert!(!opened, "{h:?} → {md:?}");
        }
        let md = md_block("Two lines\n**bold** kept\n- a list\n\n    not code\n===");
        assert!(events(&md)
            .iter()
            .any(|e| matches!(e, Event::Start(Tag::Strong))));
        assert!(events(&md)
            .iter()
            .any(|e| matches!(e, Event::Start(Tag::List(_)))));
        assert!(!events(&md)
            .iter()
            .any(|e| matches!(e, Event::Start(Tag::Heading { .. }))));
    }

    #[test]
    fn blocks_keep_the_authors_code_spans() {
        let codes = |md: &str| -> Vec<String> {
            events(md)
                .into_iter()
                .filter_map(|e| match e {
                    Event::Code(t) => Some(t.to_string()),
                    _ => None,
                })
                .collect()
        };
        let notes = "Set `traversal.opponent_policy=network` and ``a`b``.";
        assert_eq!(md_block(notes), notes);
        assert_eq!(
            codes(&md_block(notes)),
            ["traversal.opponent_policy=network", "a`b"]
        );
        // What is inside reads as itself and opens nothing.
        for (h, code) in [
            ("`<script>alert(1)</script>`", "<script>alert(1)</script>"),
            ("`[x](javascript:alert(1))`", "[x](javascript:alert(1))"),
            ("`&#106;` x", "&#106;"),
            ("`a\u{1b}[2Jb\tc`", "a\\x1b[2Jb c"),
            ("- `# not a heading`", "# not a heading"),
        ] {
            let md = md_block(h);
            assert!(!events(&md).iter().any(opens_markup), "{h:?} → {md:?}");
            assert_eq!(codes(&md), [code], "{h:?} → {md:?}");
            assert!(!md.contains('\u{1b}'), "{md:?}");
        }
        // Not closed on its line, three backticks, or a `|` inside: text.
        for h in [
            "`open\nclosed`",
            "```x```",
            "```\ncode\n```",
            "`a|b`",
            "`` ` x",
            "a``b",
        ] {
            let md = md_block(h);
            assert!(codes(&md).is_empty(), "{h:?} → {md:?}");
            assert!(!events(&md).iter().any(opens_markup), "{h:?} → {md:?}");
            assert_eq!(
                shown(&md).replace('\n', " "),
                h.replace('\n', " "),
                "{h:?} → {md:?}"
            );
        }
    }

    #[test]
    fn terminals_see_controls_as_escapes() {
        assert_eq!(terminal("a\u{1b}[2Jb\n\tc"), "a\\x1b[2Jb\n\tc");
        assert_eq!(terminal("x\u{202e}y\u{9b}"), "x\\u{202e}y\\u{9b}");
        assert!(matches!(terminal("plain <b> & text"), Cow::Borrowed(_)));
        assert_eq!(terminal_line("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(terminal_line("\u{0}"), "\\x00");
    }

    #[test]
    fn only_web_and_relative_links_are_safe() {
        for ok in [
            "https://example.com/x",
            "http://a",
            "e/1.html",
            "../index.html",
            "#diff",
            "plot.svg",
            "a/b:c",
        ] {
            assert!(safe_href(ok), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            " java\tscript:alert(1)",
            "&#106;avascript:alert(1)",
            "javascript&colon;alert(1)",
            "data:text/html,<script>",
            "vbscript:msgbox",
            "\u{1}javascript:x",
            "file:///etc/passwd",
            "a:b/c",
        ] {
            assert!(!safe_href(bad), "{bad}");
        }
    }

    #[test]
    fn json_keeps_its_value_and_shows_controls() {
        let v = serde_json::json!({"s": "a\u{9b}b\u{202e}c\u{1b}"});
        let text = serde_json::to_string(&v).unwrap();
        let shown = json_visible(&text);
        assert!(!shown.chars().any(is_hidden_control), "{shown}");
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn html_escapes_text_and_attributes() {
        assert_eq!(html("a\"<b>&'"), "a&quot;&lt;b&gt;&amp;&#39;");
        assert_eq!(html("\u{202e}x"), "\\u{202e}x");
    }
}
