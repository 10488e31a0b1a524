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
        .attribute_filter(|element, attribute, value| {
            let local = value.starts_with('/') && !value.starts_with("//");
            match (element, attribute) {
                ("img", "src") if !local => None,
                _ => Some(value.into()),
            }
        })
        .clean(&unsafe_html)
        .to_string()
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
