//! The judge's prompts, and what is cut when they do not fit.
//!
//! Truncation policy (docs/review.md): tokens are estimated as one per 3
//! characters (no tokenizer offline; code runs 3-4 characters a token, so
//! this over-counts, which is the safe side). The budget is the context
//! window minus the reply's `max_output_tokens`, minus the fixed text
//! (instructions, rubric) and a margin of 64. When issue and diff(s) fit,
//! nothing is cut. Otherwise the issue keeps its head, cut at a line, up to
//! the larger of a quarter of the budget and what the diffs leave; the
//! diffs share the rest (in pairwise mode half each, a diff that needs less
//! leaving its surplus to the other). A diff keeps whole hunks in patch
//! order and the first hunk that does not fit ends it; the hunks cut are
//! named (`path @@ header`) in the prompt and in the [`Truncation`] record.
//! If not even the first hunk fits, it is cut by lines.

use serde::Serialize;

use super::rubric::Rubric;

/// Bumped whenever the prompts change, so cached replies are not reused.
pub const PROMPT_VERSION: u32 = 1;

/// Room kept for message framing the estimate does not see.
const MARGIN: usize = 64;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

/// Estimated tokens of a text: one per 3 characters, rounded up.
pub fn estimate_tokens(s: &str) -> usize {
    s.chars().count().div_ceil(3)
}

/// What was cut from one prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Truncation {
    /// Lines of the issue text cut from its end.
    pub issue_lines_cut: usize,
    /// Hunks of the candidate diff not shown (`path @@ header`).
    pub candidate_hunks_cut: Vec<String>,
    /// Hunks of the gold diff not shown (pairwise mode).
    pub gold_hunks_cut: Vec<String>,
    /// Lines cut inside a hunk too big to show whole.
    pub lines_cut_in_hunk: usize,
    /// Estimated prompt tokens after cutting.
    pub prompt_tokens_estimate: usize,
}

impl Truncation {
    pub fn is_empty(&self) -> bool {
        self.issue_lines_cut == 0
            && self.candidate_hunks_cut.is_empty()
            && self.gold_hunks_cut.is_empty()
            && self.lines_cut_in_hunk == 0
    }
}

/// The prompt does not fit even with everything cut.
#[derive(Debug, thiserror::Error)]
#[error("the judge's context of {max_context_tokens} tokens cannot hold the instructions and rubric ({fixed} estimated tokens) plus {max_output_tokens} reply tokens")]
pub struct TooSmall {
    pub max_context_tokens: usize,
    pub max_output_tokens: usize,
    pub fixed: usize,
}

fn rubric_text(r: &Rubric) -> String {
    let mut s = String::new();
    for c in &r.criteria {
        s.push_str(&format!("### {} ({})\n{}\n", c.id, c.name, c.question));
        for (k, a) in &c.anchors {
            s.push_str(&format!("{k}: {a}\n"));
        }
        s.push('\n');
    }
    s
}

fn pointwise_system(r: &Rubric) -> String {
    let keys: Vec<String> = r
        .ids()
        .map(|id| format!("\"{id}\": {{\"score\": <1-5>, \"reason\": \"<one sentence>\"}}"))
        .collect();
    format!(
        "You are a senior maintainer of the project reviewing a patch submitted for an issue. \
Judge whether you would merge it. Score it on each criterion below from 1 to 5, using the anchors.\n\n\
{}Reply with one JSON object and nothing else, exactly of this shape:\n\
{{\"scores\": {{{}}}, \"summary\": \"<two sentences>\"}}\n",
        rubric_text(r),
        keys.join(", ")
    )
}

fn pairwise_system(r: &Rubric) -> String {
    let keys: Vec<String> = r
        .ids()
        .map(|id| format!("\"{id}\": \"A\"|\"B\"|\"tie\""))
        .collect();
    format!(
        "You are a senior maintainer of the project comparing two patches, A and B, submitted for the same issue. \
For each criterion below (the anchors describe the 1-5 scale), say which patch is better, or tie.\n\n\
{}Reply with one JSON object and nothing else, exactly of this shape:\n\
{{\"preferred\": \"A\"|\"B\"|\"tie\", \"criteria\": {{{}}}, \"reason\": \"<two sentences>\"}}\n",
        rubric_text(r),
        keys.join(", ")
    )
}

/// A diff split into units: file headers and hunks, in order.
struct PromptUnit {
    text: String,
    /// `path @@ header` for a hunk; None for a file header.
    name: Option<String>,
}

fn units(diff: &str) -> Vec<PromptUnit> {
    let mut out: Vec<PromptUnit> = Vec::new();
    let mut path = String::new();
    for line in diff.lines() {
        let starts_file = line.starts_with("diff --git ");
        let starts_hunk = line.starts_with("@@");
        if starts_file {
            path = line.rsplit_once(" b/").map_or(line, |(_, p)| p).to_string();
        }
        if starts_file || starts_hunk || out.is_empty() {
            out.push(PromptUnit {
                text: String::new(),
                name: starts_hunk.then(|| format!("{path} {}", line.trim_end())),
            });
        }
        let u = out.last_mut().expect("pushed above");
        u.text.push_str(line);
        u.text.push('\n');
    }
    out
}

/// `diff` cut to about `budget` tokens: (shown text, hunks cut, lines cut
/// inside the first hunk).
fn cut_diff(diff: &str, budget: usize) -> (String, Vec<String>, usize) {
    if estimate_tokens(diff) <= budget {
        return (diff.to_string(), Vec::new(), 0);
    }
    let units = units(diff);
    let mut shown = String::new();
    let mut cut = Vec::new();
    let mut lines_cut = 0;
    let mut full = false;
    let mut any_hunk = false;
    for u in &units {
        if full {
            cut.extend(u.name.clone());
            continue;
        }
        if estimate_tokens(&shown) + estimate_tokens(&u.text) <= budget {
            shown.push_str(&u.text);
            any_hunk |= u.name.is_some();
            continue;
        }
        full = true;
        if !any_hunk && u.name.is_some() {
            // Not even one hunk fits: show its head, cut by lines.
            for l in u.text.lines() {
                if estimate_tokens(&shown) + estimate_tokens(l) + 1 > budget {
                    lines_cut += 1;
                } else if lines_cut == 0 {
                    shown.push_str(l);
                    shown.push('\n');
                } else {
                    lines_cut += 1;
                }
            }
            any_hunk = true;
        } else {
            cut.extend(u.name.clone());
        }
    }
    if !cut.is_empty() || lines_cut > 0 {
        shown.push_str(&format!(
            "[... truncated: {} hunk(s) and {lines_cut} line(s) not shown: {} ...]\n",
            cut.len(),
            cut.join("; ")
        ));
    }
    (shown, cut, lines_cut)
}

/// `text`'s head, cut at a line to about `budget` tokens: (shown, lines cut).
fn cut_issue(text: &str, budget: usize) -> (String, usize) {
    if estimate_tokens(text) <= budget {
        return (text.to_string(), 0);
    }
    let mut shown = String::new();
    let mut cut = 0;
    for l in text.lines() {
        if cut == 0 && estimate_tokens(&shown) + estimate_tokens(l) < budget.saturating_sub(8) {
            shown.push_str(l);
            shown.push('\n');
        } else {
            cut += 1;
        }
    }
    shown.push_str(&format!("[... {cut} more line(s) of the issue cut ...]\n"));
    (shown, cut)
}

/// What a prompt is built from.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    pub issue: &'a str,
    pub candidate: &'a str,
    /// For pairwise mode.
    pub gold: Option<&'a str>,
    /// Pairwise: show gold as patch A (else the candidate is A).
    pub gold_first: bool,
}

/// Builds the messages, cutting to the window.
pub fn build(
    rubric: &Rubric,
    input: &PromptInput,
    max_context_tokens: usize,
    max_output_tokens: usize,
) -> Result<(Vec<Message>, Truncation), TooSmall> {
    let system = match input.gold {
        None => pointwise_system(rubric),
        Some(_) => pairwise_system(rubric),
    };
    let skeleton = "## Issue\n\n## Patch A\n```diff\n```\n\n## Patch B\n```diff\n```\n";
    let fixed = estimate_tokens(&system) + estimate_tokens(skeleton) + MARGIN;
    let budget = max_context_tokens
        .checked_sub(max_output_tokens + fixed)
        .filter(|b| *b > 0)
        .ok_or(TooSmall {
            max_context_tokens,
            max_output_tokens,
            fixed,
        })?;
    let need_c = estimate_tokens(input.candidate);
    let need_g = input.gold.map_or(0, estimate_tokens);
    let need_i = estimate_tokens(input.issue);
    let mut t = Truncation::default();
    let (issue, cand, gold) = if need_i + need_c + need_g <= budget {
        (
            input.issue.to_string(),
            input.candidate.to_string(),
            input.gold.map(str::to_string),
        )
    } else {
        let issue_budget = (budget / 4).max(budget.saturating_sub(need_c + need_g));
        let (issue, cut) = cut_issue(input.issue, issue_budget);
        t.issue_lines_cut = cut;
        let rest = budget.saturating_sub(estimate_tokens(&issue));
        let (cb, gb) = match input.gold {
            None => (rest, 0),
            Some(_) => {
                let half = rest / 2;
                if need_c < half {
                    (need_c, rest - need_c)
                } else if need_g < half {
                    (rest - need_g, need_g)
                } else {
                    (half, rest - half)
                }
            }
        };
        let (c, cc, cl) = cut_diff(input.candidate, cb);
        t.candidate_hunks_cut = cc;
        t.lines_cut_in_hunk += cl;
        let gold = input.gold.map(|g| {
            let (g, gc, gl) = cut_diff(g, gb);
            t.gold_hunks_cut = gc;
            t.lines_cut_in_hunk += gl;
            g
        });
        (issue, c, gold)
    };
    let user = match &gold {
        None => format!("## Issue\n{issue}\n## Patch\n```diff\n{cand}```\n"),
        Some(g) => {
            let (a, b) = if input.gold_first {
                (g, &cand)
            } else {
                (&cand, g)
            };
            format!(
                "## Issue\n{issue}\n## Patch A\n```diff\n{a}```\n\n## Patch B\n```diff\n{b}```\n"
            )
        }
    };
    t.prompt_tokens_estimate = estimate_tokens(&system) + estimate_tokens(&user);
    Ok((
        vec![
            Message {
                role: "system",
                content: system,
            },
            Message {
                role: "user",
                content: user,
            },
        ],
        t,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(files: usize, hunks: usize, lines: usize) -> String {
        let mut s = String::new();
        for f in 0..files {
            s.push_str(&format!(
                "diff --git a/f{f}.py b/f{f}.py\n--- a/f{f}.py\n+++ b/f{f}.py\n"
            ));
            for h in 0..hunks {
                s.push_str(&format!("@@ -{0},1 +{0},{1} @@\n", h * 100 + 1, lines + 1));
                s.push_str(" context\n");
                for l in 0..lines {
                    s.push_str(&format!("+    value_{l} = compute({l}, {h}, {f})\n"));
                }
            }
        }
        s
    }

    #[test]
    fn small_inputs_are_not_cut() {
        let r = Rubric::default_rubric();
        let d = diff(1, 2, 3);
        let (m, t) = build(
            &r,
            &PromptInput {
                issue: "it breaks",
                candidate: &d,
                gold: None,
                gold_first: false,
            },
            8000,
            500,
        )
        .unwrap();
        assert!(t.is_empty());
        assert!(m[0].content.contains("correctness_risk") && m[0].content.contains("\"scores\""));
        assert!(m[1].content.contains(&d) && m[1].content.contains("it breaks"));
        assert!(t.prompt_tokens_estimate + 500 <= 8000);
    }

    #[test]
    fn long_diffs_lose_whole_hunks_and_say_which() {
        let r = Rubric::default_rubric();
        let d = diff(2, 4, 30);
        let issue: String = (0..400)
            .map(|i| format!("issue line {i} with some words\n"))
            .collect();
        let window = 4000;
        let (m, t) = build(
            &r,
            &PromptInput {
                issue: &issue,
                candidate: &d,
                gold: None,
                gold_first: false,
            },
            window,
            500,
        )
        .unwrap();
        assert!(t.issue_lines_cut > 0);
        assert!(!t.candidate_hunks_cut.is_empty());
        assert!(
            t.candidate_hunks_cut[0].starts_with("f"),
            "{:?}",
            t.candidate_hunks_cut
        );
        assert!(m[1].content.contains("[... truncated:"));
        assert!(m[1].content.contains("more line(s) of the issue cut"));
        // The estimate of what is sent respects the window.
        let sent: usize = m.iter().map(|x| estimate_tokens(&x.content)).sum();
        assert!(sent + 500 <= window, "{sent}");
        // The shown hunks are whole: every hunk shown has its 31 lines.
        let shown_hunks = m[1]
            .content
            .lines()
            .filter(|l| l.starts_with("@@ -"))
            .count();
        assert_eq!(shown_hunks + t.candidate_hunks_cut.len(), 8);
    }

    #[test]
    fn pairwise_shares_the_budget_and_orders_patches() {
        let r = Rubric::default_rubric();
        let c = diff(1, 6, 30);
        let g = "diff --git a/g.py b/g.py\n--- a/g.py\n+++ b/g.py\n@@ -1 +1 @@\n-x\n+y\n";
        let inp = PromptInput {
            issue: "bug",
            candidate: &c,
            gold: Some(g),
            gold_first: true,
        };
        let (m, t) = build(&r, &inp, 3000, 300).unwrap();
        assert!(m[0].content.contains("\"preferred\""));
        // Gold is small, so it is whole; the candidate gets the rest.
        assert!(t.gold_hunks_cut.is_empty() && !t.candidate_hunks_cut.is_empty());
        let a = m[1].content.find("## Patch A").unwrap();
        assert!(m[1].content[a..].starts_with(&format!("## Patch A\n```diff\n{g}")));
        assert!(build(&r, &inp, 400, 300).is_err());
    }

    #[test]
    fn one_huge_hunk_is_cut_by_lines() {
        let d = diff(1, 1, 2000);
        let (shown, cut, lines) = cut_diff(&d, 500);
        assert!(cut.is_empty() && lines > 1000);
        assert!(estimate_tokens(&shown) <= 560);
    }
}
