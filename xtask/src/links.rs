//! `cargo xtask links`: every relative link of the pages (the root's `*.md`, `docs/*.md`) goes
//! to a file that exists, and every `#anchor` to a heading of its page, as GitHub makes anchors
//! of headings. A test runs the same check on every `cargo test --workspace`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The pages checked: the root's and docs/'s markdown files.
pub fn pages(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut pages = Vec::new();
    for dir in [root.to_path_buf(), root.join("docs")] {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    Ok(pages)
}

/// What is wrong with the links of `pages`, one line each (`page: link: why`).
pub fn check(root: &Path, pages: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(page)?;
        let shown = page.strip_prefix(root).unwrap_or(page).display().to_string();
        for link in links(&text) {
            if let Some(why) = broken(page, &text, &link)? {
                problems.push(format!("{shown}: {link}: {why}"));
            }
        }
    }
    Ok(problems)
}

/// Why `link` (from `page`, whose text is `text`) goes nowhere; `None` when it resolves or is
/// not a link to this repository's files.
fn broken(page: &Path, text: &str, link: &str) -> anyhow::Result<Option<String>> {
    if link.contains("://") || link.starts_with("mailto:") {
        return Ok(None);
    }
    let (path, anchor) = match link.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (link, None),
    };
    let target = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap_or(Path::new(".")).join(path)
    };
    if !target.exists() {
        return Ok(Some("no such file".to_owned()));
    }
    let Some(anchor) = anchor else { return Ok(None) };
    if target.extension().is_none_or(|e| e != "md") {
        return Ok(None);
    }
    let target_text =
        if path.is_empty() { text.to_owned() } else { std::fs::read_to_string(&target)? };
    Ok((!anchors(&target_text).contains(anchor)).then(|| "no such heading".to_owned()))
}

/// The targets of the page's links, `[text](target)` and `[label]: target`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let line = without_code_spans(&line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            if !target.is_empty() {
                out.push(target.trim_matches(['<', '>']).to_owned());
            }
            rest = &after[end..];
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some((_, target)) = trimmed.split_once("]: ")
        {
            out.push(target.split_whitespace().next().unwrap_or("").to_owned());
        }
    }
    out
}

/// The page's lines outside fenced code blocks.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push(line.to_owned());
        }
    }
    out
}

/// The line with its `code spans` blanked out.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The anchors GitHub gives the page's headings: lower case, punctuation dropped but `-` and
/// `_`, spaces as `-`; a repeated one gets `-1`, `-2`, ...
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else {
            continue;
        };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_relative_link_and_anchor_of_the_pages_resolves() {
        let root = crate::workspace_root();
        let pages = pages(&root).unwrap();
        assert!(pages.iter().any(|p| p.ends_with("README.md")), "{pages:?}");
        let problems = check(&root, &pages).unwrap();
        assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
    }

    #[test]
    fn anchors_are_githubs() {
        let page = "# Speed and memory\n## The LLM-API tap (`--tap`)\n## Notes\n## Notes\n```\n# not a heading\n```\n";
        let got = anchors(page);
        let want = ["speed-and-memory", "the-llm-api-tap---tap", "notes", "notes-1"];
        assert_eq!(got, want.iter().map(|s| (*s).to_owned()).collect());
    }

    #[test]
    fn a_missing_file_or_heading_is_found() {
        let dir = std::env::temp_dir().join(format!("xtask-links-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let page = dir.join("a.md");
        let text =
            "# Top\n[ok](#top) [gone](#nowhere) [file](b.md) `[code](c.md)`\n[web](https://x.y)\n";
        std::fs::write(&page, text).unwrap();
        let problems = check(&dir, &[page]).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(problems, ["a.md: #nowhere: no such heading", "a.md: b.md: no such file"]);
    }
}
