//! HTML text: escaping, a report's markdown as HTML, and the page frame
//! every page of the site shares. Pure functions of their arguments.

use pulldown_cmark::{html, CowStr, Event, Options, Parser};

/// `text` safe inside an element or a quoted attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Markdown (a report, a compare table) as HTML, tables included. Raw HTML
/// in the text is shown as text, never passed through: names and notes
/// come from experiment files, and a shared site must not run them.
pub fn markdown(text: &str) -> String {
    let parser = Parser::new_ext(text, Options::ENABLE_TABLES).map(|event| match event {
        Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
        Event::Start(pulldown_cmark::Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(pulldown_cmark::Tag::Image {
            link_type,
            // Only the plots written beside the page: a plain file name.
            dest_url: if is_plain_file(&dest_url) {
                dest_url
            } else {
                CowStr::from("")
            },
            title,
            id,
        }),
        other => other,
    });
    let mut out = String::with_capacity(text.len() * 2);
    html::push_html(&mut out, parser);
    // Tables get their own class, so that the style can scroll wide ones.
    out.replace("<table>", "<div class=\"table\" tabindex=\"0\"><table>")
        .replace("</table>", "</table></div>")
        .replace("<pre>", "<pre tabindex=\"0\">")
}

fn is_plain_file(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A whole page: `root` is the way back to the site's folder from the
/// page's (`""` or `"../"`), so that every link is relative and the site
/// works from the file system, any host or a CI artifact.
pub fn page(title: &str, root: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title} · lcx</title>\n\
         <link rel=\"stylesheet\" href=\"{root}assets/site.css\">\n\
         <link rel=\"icon\" href=\"data:,\">\n\
         </head>\n<body>\n<header><a class=\"home\" href=\"{root}index.html\">lcx results</a></header>\n\
         <main>\n{body}\n</main>\n\
         <footer>Written by <code>lcx publish</code>; every page reads only files in this folder.</footer>\n\
         <script src=\"{root}assets/site.js\"></script>\n</body>\n</html>\n",
        title = esc(title)
    )
}

/// A check word as a badge: its colour and its text (never colour alone).
pub fn badge(word: &str) -> String {
    let class = match word {
        "PASS" => "pass",
        "FAIL" => "fail",
        _ => "inconclusive",
    };
    format!("<span class=\"badge {class}\">{}</span>", esc(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_in_markdown_is_shown_as_text() {
        let out = markdown("# a <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n");
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img src=x"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
    }

    #[test]
    fn tables_and_plots_become_html() {
        let out = markdown("| a | b |\n|---|---|\n| 1 | 2 |\n\n![speed](7-speedup.svg)\n\n![x](https://example.com/x.svg)\n");
        assert!(
            out.contains("<div class=\"table\" tabindex=\"0\"><table>"),
            "{out}"
        );
        assert!(out.contains("<th>a</th>"), "{out}");
        assert!(
            out.contains("<img src=\"7-speedup.svg\" alt=\"speed\""),
            "{out}"
        );
        // Nothing outside the folder is loaded.
        assert!(!out.contains("example.com"), "{out}");
    }

    #[test]
    fn attributes_are_escaped() {
        assert_eq!(esc("a\"<b>&'"), "a&quot;&lt;b&gt;&amp;&#39;");
    }
}
