//! The hostile-string property test: a report whose every recorded string
//! (see [`crate::report::fixture::hostile_input`]) is built from script tags, event
//! attributes, `javascript:` links in every encoding, terminal escapes, NUL
//! and bidi controls, rendered into every output a report has — the
//! markdown lcx prints and archives, its JSON and CSV, the site's HTML
//! pages and the SVG plots — and each output checked against its reader's
//! rule ([`crate::escape`]).

use proptest::prelude::*;
use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::html::markdown as site_markdown;
use super::pages::{experiment_page, history_page, index_page, ExperimentPage, IndexRow};
use crate::escape::{is_hidden_control, safe_href};
use crate::report::builder::{assemble, Options as ReportOptions};
use crate::report::fixture::hostile_input;
use crate::report::render::{render_csv, render_json, render_markdown};

/// What an adversary puts into names, labels, notes and output.
const FRAGMENTS: &[&str] = &[
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "\"><script>alert(1)</script>",
    "' onmouseover='alert(1)",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](&#x6A;avascript:alert(1))",
    "[click](javascript&colon;alert(1))",
    "[click](java\tscript:alert(1))",
    "[click][ref]\n\n[ref]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](vbscript:msgbox(1))",
    "![x](javascript:alert(1))",
    "<a href=\"javascript:alert(1)\">x</a>",
    "\u{1b}]0;owned\u{7}",
    "\u{1b}[2J\u{1b}[H",
    "\u{9b}31m",
    "\u{0}",
    "\r\n",
    "\u{202e}evil\u{202c}",
    "\u{2066}x\u{2069}",
    "\u{200b}",
    "`",
    "```",
    "| a | b |\n|---|---|",
    "# heading",
    " # heading",
    "## Cells",
    "- item",
    "1. item",
    "~~~",
    "\n~~~\n",
    "Title\n=== ",
    "- # x",
    "a~b~c",
    "\\",
    "&amp;&lt;",
    "*emph* _x_ ~~s~~",
    "-->",
    "<!--",
    "]]>",
];

/// A hostile string: fragments and a little ordinary text.
fn hostile() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(FRAGMENTS).prop_map(str::to_string),
            1 => "[a-z0-9 .:/_-]{0,8}",
        ],
        1..4,
    )
    .prop_map(|parts| parts.concat())
}

/// The h2 headings lcx writes into a report.
const SECTIONS: &[&str] = &[
    "Verdicts vs",
    "Cells",
    "Reproduce",
    "Environment",
    "Runs",
    "Notes",
    "Plots",
];

/// The markdown rule: nothing opens HTML, no link or image other than
/// lcx's own (a Slurm job's script by a plain path; a plot by file name),
/// one title, only lcx's sections, no hidden control character.
fn check_markdown(md: &str) -> Result<(), String> {
    if let Some(c) = md.chars().find(|c| is_hidden_control(*c)) {
        return Err(format!("hidden control {c:?} in the markdown"));
    }
    let mut h1 = 0;
    let mut heading: Option<(HeadingLevel, String)> = None;
    for event in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match event {
            Event::Html(t) | Event::InlineHtml(t) => return Err(format!("raw HTML: {t}")),
            Event::Start(Tag::Link { dest_url, .. }) => {
                let plain = dest_url
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c));
                if !plain || !dest_url.ends_with("job.sh") {
                    return Err(format!("a link lcx did not write: {dest_url}"));
                }
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                return Err(format!("an image lcx did not write: {dest_url}"))
            }
            // lcx's only code blocks are its fenced `sh` reproduce lines.
            Event::Start(Tag::CodeBlock(kind)) => {
                let ours = matches!(&kind, pulldown_cmark::CodeBlockKind::Fenced(info) if info.as_ref() == "sh");
                if !ours {
                    return Err(format!("a code block lcx did not write: {kind:?}"));
                }
            }
            Event::Start(Tag::Heading { level, .. }) => {
                heading = Some((level, String::new()));
                if level == HeadingLevel::H1 {
                    h1 += 1;
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, text)) = heading.as_mut() {
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, text)) = heading.take() {
                    let ours = level == HeadingLevel::H1
                        || (level == HeadingLevel::H2
                            && SECTIONS.iter().any(|s| text.starts_with(s)));
                    if !ours {
                        return Err(format!("a heading lcx did not write: {level:?} {text}"));
                    }
                }
            }
            _ => {}
        }
    }
    if h1 != 1 {
        return Err(format!("{h1} titles"));
    }
    Ok(())
}

/// `&amp;`, `&#106;`, `&#x6a;` and the few named references HTML text
/// uses, decoded as a browser decodes an attribute; anything else keeps
/// its `&` (which [`safe_href`] refuses).
fn decode_entities(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find(';') else { break };
        let name = &rest[1..end];
        let decoded = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                .ok()
                .and_then(char::from_u32),
            n if n.starts_with('#') => n[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The tags lcx's pages, charts and sanitised reports use.
const TAGS: &[&str] = &[
    "!doctype",
    "html",
    "head",
    "meta",
    "title",
    "link",
    "body",
    "header",
    "main",
    "footer",
    "script",
    "a",
    "nav",
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "div",
    "pre",
    "code",
    "strong",
    "em",
    "span",
    "small",
    "section",
    "article",
    "figure",
    "figcaption",
    "svg",
    "g",
    "path",
    "line",
    "rect",
    "circle",
    "text",
    "desc",
    "polyline",
    "form",
    "label",
    "input",
    "select",
    "option",
    "datalist",
    "img",
    "br",
    "hr",
    "blockquote",
    "b",
    "i",
];

/// The HTML rule, on a page lcx wrote: every `<` starts one of lcx's tags
/// (text escapes it), no event attribute, no inline style or script, every
/// link and source `http:`, `https:`, relative or a fragment once its
/// character references are decoded, the one script the site's own file,
/// no hidden control character.
fn check_html(html: &str) -> Result<(), String> {
    if let Some(c) = html.chars().find(|c| is_hidden_control(*c)) {
        return Err(format!("hidden control {c:?} in the HTML"));
    }
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let Some(end) = rest.find('>') else {
            return Err("a `<` that opens no tag".into());
        };
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        let closing = tag.starts_with('/');
        let tag = tag.strip_prefix('/').unwrap_or(tag);
        let name_end = tag
            .find(|c: char| c.is_whitespace() || c == '/')
            .unwrap_or(tag.len());
        let name = tag[..name_end].to_ascii_lowercase();
        if !TAGS.contains(&name.as_str()) {
            return Err(format!("a tag lcx does not write: <{tag}>"));
        }
        // name="value" pairs, always double-quoted by lcx and ammonia.
        let mut attrs = tag[name_end..].trim().trim_end_matches('/').trim();
        while !attrs.is_empty() {
            let eq = attrs.find('=');
            let space = attrs.find(char::is_whitespace);
            let (attr, value) = match (eq, space) {
                (Some(e), s) if s.is_none_or(|s| e < s) => {
                    let attr = &attrs[..e];
                    let after = &attrs[e + 1..];
                    let Some(body) = after.strip_prefix('"') else {
                        return Err(format!("an unquoted attribute in <{tag}>"));
                    };
                    let Some(close) = body.find('"') else {
                        return Err(format!("an unclosed attribute in <{tag}>"));
                    };
                    attrs = body[close + 1..].trim_start();
                    (attr.to_ascii_lowercase(), Some(&body[..close]))
                }
                (_, Some(s)) => {
                    let attr = &attrs[..s];
                    attrs = attrs[s..].trim_start();
                    (attr.to_ascii_lowercase(), None)
                }
                (_, None) => {
                    let attr = attrs;
                    attrs = "";
                    (attr.to_ascii_lowercase(), None)
                }
            };
            if attr.starts_with("on") || attr == "style" || attr == "srcdoc" {
                return Err(format!("attribute {attr} in <{tag}>"));
            }
            if ["href", "src", "action", "xlink:href", "formaction"].contains(&attr.as_str()) {
                let url = decode_entities(value.unwrap_or(""));
                // The frame's empty icon, which spares the browser a request.
                let icon = name == "link" && url == "data:," && tag.contains("rel=\"icon\"");
                if !safe_href(&url) && !icon {
                    return Err(format!("{attr}={url:?} in <{tag}>"));
                }
                if name == "script" && !url.ends_with("assets/site.js") {
                    return Err(format!("a script lcx did not write: {url}"));
                }
            }
        }
        if name == "script" && !closing && !rest.starts_with("</script>") {
            return Err(format!("an inline script: {}", &rest[..rest.len().min(80)]));
        }
    }
    Ok(())
}

/// The JSON rule: valid JSON, nothing a terminal obeys in its text, and
/// the recorded strings as they were (data, not escaped).
fn check_json(json: &str, name: &str, arms: &[&str]) -> Result<(), String> {
    if let Some(c) = json.chars().find(|c| is_hidden_control(*c)) {
        return Err(format!("hidden control {c:?} in the JSON text"));
    }
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    if v["experiment"]["name"] != name {
        return Err(format!("the name came back as {}", v["experiment"]["name"]));
    }
    for (i, arm) in arms.iter().enumerate() {
        if v["arms"][i]["name"] != *arm {
            return Err(format!("arm {i} came back as {}", v["arms"][i]["name"]));
        }
    }
    Ok(())
}

/// RFC 4180 fields of `csv`, one record per line group.
fn parse_csv(csv: &str) -> Vec<Vec<String>> {
    let mut records = vec![vec![String::new()]];
    let mut quoted = false;
    let mut chars = csv.chars().peekable();
    while let Some(c) = chars.next() {
        let record = records.last_mut().expect("one record at least");
        let field = record.last_mut().expect("one field at least");
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => record.push(String::new()),
            ('\n', false) => records.push(vec![String::new()]),
            (c, _) => field.push(c),
        }
    }
    if records
        .last()
        .is_some_and(|r| r.len() == 1 && r[0].is_empty())
    {
        records.pop();
    }
    records
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn hostile_strings_follow_each_readers_rule(pool in prop::collection::vec(hostile(), 24)) {
        let mut next = 0usize;
        let input = hostile_input(&mut || {
            // Each field a different string; a number keeps names apart.
            let s = format!("{}{next}", pool[next % pool.len()]);
            next += 1;
            s
        });
        let name = input.experiment.name.clone();
        let report = assemble(input, ReportOptions::default());
        let arms: Vec<&str> = report.arms.iter().map(|a| a.name.as_str()).collect();

        let md = render_markdown(&report);
        prop_assert!(check_markdown(&md).is_ok(), "{:?}\n{md}", check_markdown(&md));
        // What `lcx report` prints is that markdown by the terminal rule,
        // which has nothing left to do.
        prop_assert_eq!(crate::escape::terminal(&md), md.as_str());

        let json = render_json(&report);
        prop_assert!(check_json(&json, &name, &arms).is_ok(), "{:?}", check_json(&json, &name, &arms));

        let csv = render_csv(&report);
        let records = parse_csv(&csv);
        let data_arms: Vec<&str> = records[1..].iter().map(|r| r[2].as_str()).collect();
        prop_assert!(records[1..].iter().all(|r| r.len() == records[0].len()), "{csv}");
        prop_assert!(data_arms.iter().all(|a| arms.contains(a)), "{data_arms:?} vs {arms:?}");
        prop_assert!(records[1..].iter().all(|r| r[1] == name), "{csv}");

        let html = site_markdown(&md);
        prop_assert!(check_html(&html).is_ok(), "{:?}\n{html}", check_html(&html));
        let row = IndexRow::of(&report, pool[1].clone(), pool[2].clone(), pool[3].clone());
        let histories = vec![(arms[0].to_string(), pool[3].clone(), format!("h/{}.html", 1))];
        let page = experiment_page(&ExperimentPage {
            row: &row,
            report_markdown: &md,
            file_path: &pool[4],
            file_text: &pool[5],
            previous: Some(1),
            next: Some(3),
            diff_markdown: Some(md.clone()),
            histories,
        });
        prop_assert!(check_html(&page).is_ok(), "{:?}", check_html(&page));
        let index = index_page(std::slice::from_ref(&row));
        prop_assert!(check_html(&index).is_ok(), "{:?}", check_html(&index));
        let history = history_page(&name, arms[1], &pool[6], "<svg></svg>", &md);
        prop_assert!(check_html(&history).is_ok(), "{:?}", check_html(&history));

        let lines: Vec<crate::report::plots::Line> = arms
            .iter()
            .enumerate()
            .map(|(i, a)| crate::report::plots::Line {
                arm: a.to_string(),
                color: i,
                mean: vec![(1.0, 1.0), (2.0, 2.0)],
                repeats: Vec::new(),
            })
            .collect();
        let svg = crate::report::plots::iteration_plot(&name, &pool[7], 0, &lines)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(!svg.chars().any(is_hidden_control), "{svg}");
        let parsed = resvg::usvg::Tree::from_str(&svg, &resvg::usvg::Options::default());
        prop_assert!(parsed.is_ok(), "the plot is not valid SVG: {:?}", parsed.err());
    }
}

#[test]
fn the_checks_catch_what_they_are_for() {
    // Each check fails on the output it exists to refuse.
    assert!(check_markdown("# t\n\n[x](javascript:alert(1))").is_err());
    assert!(check_markdown("# t\n\n<script>alert(1)</script>").is_err());
    assert!(check_markdown("# t\n\n## Injected").is_err());
    assert!(check_markdown("# t\n\n\u{1b}[2J").is_err());
    assert!(check_html("<a href=\"&#106;avascript:alert(1)\">x</a>").is_err());
    assert!(check_html("<img src=x onerror=alert(1)>").is_err());
    assert!(check_html("<p onclick=\"x\">").is_err());
    assert!(check_html("<script>alert(1)</script>").is_err());
    assert!(check_html("<iframe src=\"https://x\">").is_err());
    assert!(check_html("<a href=\"https://example.com/\">ok</a><p>a &lt;b&gt;</p>").is_ok());
    assert!(check_json("{\"experiment\":{\"name\":\"x\"},\"arms\":[]}", "y", &[]).is_err());
    assert_eq!(
        parse_csv("a,b\n\"x,\"\"y\"\"\n\",2\n"),
        vec![vec!["a", "b"], vec!["x,\"y\"\n", "2"]]
    );
}
