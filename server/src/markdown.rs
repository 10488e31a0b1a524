//! Markdown to HTML that is safe to put in a page: rendered by
//! pulldown-cmark, then cleaned by ammonia, which keeps formatting, tables
//! and links and drops scripts, event handlers and anything else that
//! could run.

use pulldown_cmark::{Options, Parser, html};

/// `markdown` as sanitized HTML.
pub fn to_safe_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut unsafe_html = String::new();
    html::push_html(&mut unsafe_html, Parser::new_ext(markdown, options));
    ammonia::clean(&unsafe_html)
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
        ] {
            let html = to_safe_html(attack);
            let lower = html.to_lowercase();
            assert!(
                !lower.contains("<script")
                    && !lower.contains("onerror")
                    && !lower.contains("javascript:")
                    && !lower.contains("<iframe"),
                "{attack} → {html}"
            );
        }
    }
}
