//! A unified-diff view of a change to a text file: what `setup --dry-run` prints and what setup
//! shows before it asks.

use std::fmt::Write as _;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// Past this many cells the middle of the files is shown as replaced whole rather than matched
/// line by line (settings files are far smaller).
const MAX_CELLS: usize = 4_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op<'a> {
    Same(&'a str),
    Gone(&'a str),
    New(&'a str),
}

/// `old` → `new` as a unified diff labelled `old_name` and `new_name` (`/dev/null` for a file
/// that is created or deleted); empty when they are equal.
pub fn unified(old_name: &str, new_name: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = ops(&a, &b);
    let changes: Vec<usize> =
        ops.iter().enumerate().filter(|(_, o)| !matches!(o, Op::Same(_))).map(|(i, _)| i).collect();
    if changes.is_empty() {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    // Changes closer than two contexts share a hunk.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for &i in &changes {
        match groups.last_mut() {
            Some((_, last)) if i - *last <= 2 * CONTEXT => *last = i,
            _ => groups.push((i, i)),
        }
    }
    for (first, last) in groups {
        let start = first.saturating_sub(CONTEXT);
        let end = (last + CONTEXT + 1).min(ops.len());
        // Line numbers (1-based) of the hunk's first line on each side.
        let before = &ops[..start];
        let old_at = before.iter().filter(|o| !matches!(o, Op::New(_))).count();
        let new_at = before.iter().filter(|o| !matches!(o, Op::Gone(_))).count();
        let hunk = &ops[start..end];
        let old_len = hunk.iter().filter(|o| !matches!(o, Op::New(_))).count();
        let new_len = hunk.iter().filter(|o| !matches!(o, Op::Gone(_))).count();
        // An empty side is numbered by the line before it, as diff does.
        let from = |at: usize, len: usize| if len == 0 { at } else { at + 1 };
        let _ = writeln!(
            out,
            "@@ -{},{old_len} +{},{new_len} @@",
            from(old_at, old_len),
            from(new_at, new_len)
        );
        for op in hunk {
            let _ = match op {
                Op::Same(l) => writeln!(out, " {l}"),
                Op::Gone(l) => writeln!(out, "-{l}"),
                Op::New(l) => writeln!(out, "+{l}"),
            };
        }
    }
    out
}

/// The edit script from `a` to `b`: the common head and tail, and a longest common subsequence
/// of what lies between.
fn ops<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail =
        a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (am, bm) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut out: Vec<Op<'a>> = a[..head].iter().map(|l| Op::Same(l)).collect();
    if (am.len() + 1) * (bm.len() + 1) > MAX_CELLS {
        out.extend(am.iter().map(|l| Op::Gone(l)));
        out.extend(bm.iter().map(|l| Op::New(l)));
    } else {
        // lcs[i][j]: the longest common subsequence of am[i..] and bm[j..].
        let w = bm.len() + 1;
        let mut lcs = vec![0u32; (am.len() + 1) * w];
        for i in (0..am.len()).rev() {
            for j in (0..bm.len()).rev() {
                lcs[i * w + j] = if am[i] == bm[j] {
                    lcs[(i + 1) * w + j + 1] + 1
                } else {
                    lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < am.len() || j < bm.len() {
            if i < am.len() && j < bm.len() && am[i] == bm[j] {
                out.push(Op::Same(am[i]));
                i += 1;
                j += 1;
            } else if j < bm.len() && (i == am.len() || lcs[i * w + j + 1] > lcs[(i + 1) * w + j]) {
                // Lines that go are listed before the lines that replace them.
                out.push(Op::New(bm[j]));
                j += 1;
            } else {
                out.push(Op::Gone(am[i]));
                i += 1;
            }
        }
    }
    out.extend(a[a.len() - tail..].iter().map(|l| Op::Same(l)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_have_context_and_line_numbers() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n";
        let new = "a\nb\nc\nd\nX\ne\nf\ng\nh\ni\nj\nk\nL\n";
        assert_eq!(
            unified("f", "f", old, new),
            "--- f\n+++ f\n@@ -2,6 +2,7 @@\n b\n c\n d\n+X\n e\n f\n g\n@@ -9,4 +10,4 @@\n i\n j\n \
             k\n-l\n+L\n"
        );
    }

    #[test]
    fn created_and_emptied_files() {
        assert_eq!(
            unified("/dev/null", "f", "", "{\n}\n"),
            "--- /dev/null\n+++ f\n@@ -0,0 +1,2 @@\n+{\n+}\n"
        );
        assert_eq!(
            unified("f", "/dev/null", "x\n", ""),
            "--- f\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-x\n"
        );
        assert_eq!(unified("f", "f", "same\r\n", "same\r\n"), "");
    }
}
