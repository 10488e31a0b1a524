//! Markdown to HTML that is safe to put in a page: rendered by
//! pulldown-cmark, then cleaned by ammonia, which keeps formatting, tables
//! and links and drops scripts, event handlers and anything else that
//! could run.

use pulldown_cmark::{Options, Parser, html};

/// `markdown` as sanitized HTML. Images may only come from this server
/// (a relative address): an image from elsewhere would tell its owner
/// who opened a shared report, and when.
pub fn to_safe_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut unsafe_html = String::new();
    html::push_html(&mut unsafe_html, Parser::new_ext(markdown, options));
    ammonia::Builder::default()
        .attribute_filter(|element, attribute, value| match (element, attribute) {
            ("img", "src") if !local(value) => None,
            _ => Some(value.into()),
        })
        .clean(&unsafe_html)
        .to_string()
}

/// Whether `url` stays on this server, as a browser reads it: a path from
/// the root, in the characters a path is written with. A browser reads
/// `\` as `/` and drops tabs and newlines, so `/\host`, `/<TAB>/host` and
/// the like would leave it: anything but those characters is refused.
fn local(url: &str) -> bool {
    let mut chars = url.chars();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/-._~%?=&+:@!$'()*,;#".contains(c);
    chars.next() == Some('/') && !matches!(chars.next(), Some('/')) && url.chars().all(plain)
}

/// `markdown` as sanitized HTML with each second-level section folded: its
/// heading the `<summary>` of a closed `<details>`, so a long write-up
/// reads as a list of its sections' titles. Text before the first heading
/// stays open. Each piece is cleaned by [`to_safe_html`] on its own; the
/// tags around them are fixed here.
pub fn to_folded_html(markdown: &str) -> String {
    use pulldown_cmark::{Event, HeadingLevel, Tag};
    let starts: Vec<usize> = Parser::new_ext(markdown, Options::ENABLE_TABLES)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Heading { level: HeadingLevel::H2, .. }) => Some(range.start),
            _ => None,
        })
        .collect();
    let mut out = to_safe_html(&markdown[..starts.first().copied().unwrap_or(markdown.len())]);
    for (i, &start) in starts.iter().enumerate() {
        let section = &markdown[start..starts.get(i + 1).copied().unwrap_or(markdown.len())];
        let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
        out.push_str(&format!(
            "<details class=\"section\"><summary>{}</summary>{}</details>",
            to_safe_html(heading).trim(),
            to_safe_html(body)
        ));
    }
    out
}

/// The longest run of backticks in `text`.
fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `body` as a fenced code block that nothing in it can close: the fence
/// is longer than any run of backticks inside.
pub fn fenced(lang: &str, body: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(body).max(2) + 1);
    let body = body.strip_suffix('\n').unwrap_or(body);
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

/// `text` as inline code that nothing in it can end, on one line.
pub fn code(text: &str) -> String {
    let text = text.replace(['\n', '\r'], " ");
    let ticks = "`".repeat(longest_backtick_run(&text) + 1);
    // A space keeps a backtick at either end from joining the fence.
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{ticks}{pad}{text}{pad}{ticks}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_fold_under_their_headings_and_code_is_not_split() {
        let md = "Lead.\n\n## Best\n\n- **x**\n\n## Run it\n\n```sh\n## not a heading\n```\n";
        let html = to_folded_html(md);
        assert!(html.starts_with("<p>Lead.</p>"), "{html}");
        assert_eq!(html.matches("<details class=\"section\">").count(), 2, "{html}");
        assert!(html.contains("<summary><h2>Best</h2></summary><ul>"), "{html}");
        assert!(html.contains("## not a heading"), "{html}");
        let attack = to_folded_html("## <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>");
        assert!(!attack.contains("<script") && !attack.contains("onerror"), "{attack}");
    }

    #[test]
    fn images_only_from_this_server_however_the_address_is_written() {
        for outside in [
            "/\\evil.example/t.png",
            "/\t/evil.example/t.png",
            "/&#9;/evil.example/t.png",
            "/&#x0A;/evil.example/t.png",
            "/\\/evil.example/t.png",
            "//evil.example/t.png",
            "https://evil.example/t.png",
            " /\\evil.example/t.png",
        ] {
            let html = to_safe_html(&format!("<img src=\"{outside}\">"));
            assert!(!html.contains("evil.example"), "{outside:?} → {html}");
        }
        assert!(to_safe_html("<img src=\"/pkg/a-b_c.png?v=1\">").contains("/pkg/a-b_c.png?v=1"));
    }

    proptest::proptest! {
        /// Whatever follows the first `/`, an image that survives cleaning
        /// names a path of this server, as a browser would read it.
        #[test]
        fn no_image_address_survives_that_a_browser_reads_as_elsewhere(
            rest in "[/\\\\ \t\n\ra-z.:%&#;x0-9]{0,12}"
        ) {
            let html = to_safe_html(&format!("<img src=\"/{rest}\">"));
            if let Some(at) = html.find("<img src=\"") {
                let src = &html[at + 10..];
                let src = &src[..src.find('"').unwrap()];
                // A browser's reading: `\` is `/`, tabs and newlines gone.
                let read: String =
                    src.replace('\\', "/").chars().filter(|c| !"\t\n\r".contains(*c)).collect();
                proptest::prop_assert!(!read.starts_with("//"), "{src:?} from {rest:?}");
                proptest::prop_assert!(src.chars().all(|c| !c.is_whitespace()), "{src:?}");
            }
        }
    }

    #[test]
    fn formatting_stays_and_scripts_go() {
        let html = to_safe_html("**best** `threads=8`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(html.contains("<strong>best</strong>") && html.contains("<code>threads=8</code>"));
        assert!(html.contains("<table>"), "{html}");
        for attack in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "[click](javascript:alert(1))",
            "<a href=\"javascript:alert(1)\">x</a>",
            "<iframe src=\"https://example.org\"></iframe>",
            "![pixel](https://evil.example/track.png)",
            "<img src=\"//evil.example/track.png\">",
        ] {
            let html = to_safe_html(attack);
            let lower = html.to_lowercase();
            assert!(
                !lower.contains("<script")
                    && !lower.contains("onerror")
                    && !lower.contains("javascript:")
                    && !lower.contains("<iframe")
                    && !lower.contains("evil.example"),
                "{attack} → {html}"
            );
        }
        assert!(to_safe_html("![plot](/pkg/plot.png)").contains("src=\"/pkg/plot.png\""));
    }

    #[test]
    fn no_value_breaks_out_of_its_code() {
        let value = "x\n```\n\n[Log in again](https://evil.example)\n```";
        let md = format!("Before\n\n{}\nAfter {}", fenced("sh", value), code("a`b``"));
        let html = to_safe_html(&md);
        assert!(!html.contains("<a "), "a link escaped the fence: {html}");
        assert!(html.contains("<code>a`b``</code>"), "{html}");
        assert!(html.contains("After"), "{html}");
    }
}
