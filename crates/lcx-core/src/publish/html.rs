//! HTML text: escaping, a report's markdown as HTML, and the page frame
//! every page of the site shares. Pure functions of their arguments.

use pulldown_cmark::{html, CowStr, Event, Options, Parser, Tag, TagEnd};

/// `text` safe inside an element or a quoted attribute (the HTML rule of
/// [`crate::escape`]).
pub fn esc(text: &str) -> String {
    crate::escape::html(text)
}

/// Markdown (a report, a compare table) as HTML, tables included. Two
/// layers stand between an experiment file and a colleague's browser: the
/// report's markdown already escapes every recorded string, and here raw
/// HTML is shown as text, a link is kept only for `http:`, `https:`, a
/// relative path or a `#fragment` ([`crate::escape::safe_href`]), an image
/// only for a plot beside the page; then the HTML passes `ammonia`'s
/// sanitizer, which allows the tags a report uses and nothing that runs.
pub fn markdown(text: &str) -> String {
    // Links do not nest in markdown: one flag says whether the link being
    // read was dropped, so that its end is dropped with it.
    let mut dropping = false;
    let parser = Parser::new_ext(text, Options::ENABLE_TABLES).filter_map(move |event| {
        match event {
            Event::Html(t) | Event::InlineHtml(t) => Some(Event::Text(t)),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => Some(Event::Start(Tag::Image {
                link_type,
                // Only the plots written beside the page: a plain file name.
                dest_url: if is_plain_file(&dest_url) {
                    dest_url
                } else {
                    CowStr::from("")
                },
                title,
                id,
            })),
            // A link to anywhere else loses its link and keeps its words.
            Event::Start(Tag::Link { ref dest_url, .. }) if !crate::escape::safe_href(dest_url) => {
                dropping = true;
                None
            }
            Event::End(TagEnd::Link) if dropping => {
                dropping = false;
                None
            }
            other => Some(other),
        }
    });
    let mut out = String::with_capacity(text.len() * 2);
    html::push_html(&mut out, parser);
    // Tables get their own class, so that the style can scroll wide ones.
    let out = out
        .replace("<table>", "<div class=\"table\" tabindex=\"0\"><table>")
        .replace("</table>", "</table></div>")
        .replace("<pre>", "<pre tabindex=\"0\">");
    sanitizer().clean(&out).to_string()
}

/// What a report's HTML may hold: ammonia's default tags (text, lists,
/// tables, code, images), a table's scrolling wrapper, links and images
/// only to `http:`, `https:` or a relative path (a plot, another page of
/// the site). Built once.
fn sanitizer() -> &'static ammonia::Builder<'static> {
    static SANITIZER: std::sync::OnceLock<ammonia::Builder<'static>> = std::sync::OnceLock::new();
    SANITIZER.get_or_init(|| {
        let mut b = ammonia::Builder::default();
        b.url_schemes(["http", "https"].into_iter().collect())
            .url_relative(ammonia::UrlRelative::PassThrough)
            .add_tag_attributes("div", ["class", "tabindex"])
            .add_tag_attributes("pre", ["tabindex"]);
        b
    })
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
        "completed" => "neutral",
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
