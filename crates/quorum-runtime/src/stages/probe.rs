//! A narrow probe (`quorum_core::flows::probes`): one yes/no question about the numbered lines
//! around one pattern match, asked in one short schema-bound call without tools. A "yes" with
//! a quote becomes a candidate finding: the quote is matched loosely (whitespace, quote marks,
//! a copied line number) to a line of the excerpt and that line's own text is cited, else the
//! quote as given; grounding then checks it against the file and the verifier judges it like
//! any other finding. A "no", or a yes without a quote, is no finding.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use quorum_core::review::finding::{RawFinding, Severity};
use quorum_core::schema;
use quorum_core::task::{Probe, Task};
use quorum_core::weaver::{self, ContextBudget, DATA_NOT_INSTRUCTIONS};
use serde_json::Value;

/// The probe's prompt: the question, then the lines around the match, numbered and delimited.
pub fn probe_prompt(ctx: &ReviewContext, probe: &Probe) -> Result<(String, String), AttemptError> {
    let system = format!(
        "You answer one yes/no question about a short excerpt of code, from the lines shown \
         alone.\n{DATA_NOT_INSTRUCTIONS}\n\n{}",
        schema::PROBE_FORMAT
    );
    let excerpt = ctx
        .pack
        .read_lines(&probe.file, probe.start, probe.end)
        .map_err(|e| AttemptError::Internal(format!("probe excerpt: {e}")))?;
    let user = format!(
        "## Question\n{}\n\n## Code ({} lines {}-{}, numbered)\n{}",
        probe.question,
        probe.file,
        probe.start,
        probe.end,
        weaver::delimit(&probe.file, &excerpt)
    );
    Ok((system, user))
}

/// A line's text as compared with a model's quote: no whitespace, one kind of quote mark, no
/// leading "NN |" line number (what small models copy from a numbered excerpt).
fn loose(text: &str) -> String {
    let text = text.trim();
    let text = match text.split_once('|') {
        Some((n, rest)) if !n.trim().is_empty() && n.trim().chars().all(|c| c.is_ascii_digit()) => {
            rest
        }
        _ => text,
    };
    text.chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| {
            if matches!(
                c,
                '\'' | '`' | '\u{2018}' | '\u{2019}' | '\u{201c}' | '\u{201d}'
            ) {
                '"'
            } else {
                c
            }
        })
        .collect()
}

/// The excerpt line the model's quote names, as the file has it: (line number, exact text).
/// The quote is only how the model points at a line; what is cited is the file's own text, so
/// grounding checks the file, not the model's transcription. None when no line of the excerpt
/// holds the quote (grounding then judges the quote as given).
fn anchor(excerpt: &[(u32, String)], quote: &str, near: u32) -> Option<(u32, String)> {
    let q = loose(quote);
    if q.len() < 4 {
        return None;
    }
    excerpt
        .iter()
        .filter(|(_, text)| {
            let l = loose(text);
            !l.is_empty() && (l.contains(&q) || (q.contains(&l) && l.len() >= 8))
        })
        .min_by_key(|(n, _)| n.abs_diff(near))
        .map(|(n, text)| (*n, text.trim().to_string()))
}

fn finding_of(probe: &Probe, excerpt: &[(u32, String)], v: &Value) -> Option<RawFinding> {
    if v.get("holds").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let quote = v.get("quote").and_then(Value::as_str)?.trim().to_string();
    if quote.is_empty() {
        return None;
    }
    let named = v
        .get("line")
        .and_then(Value::as_u64)
        .and_then(|l| u32::try_from(l).ok())
        .filter(|l| (probe.start..=probe.end).contains(l))
        .unwrap_or(probe.line);
    let (line, quote) = anchor(excerpt, &quote, named).unwrap_or((named, quote));
    Some(RawFinding {
        title: probe.title.clone(),
        severity: Severity::parse_lenient(&probe.severity).unwrap_or(Severity::P2),
        // A narrow yes is a candidate: the verifier decides, the gate weighs it as moderate.
        confidence: 0.7,
        category: probe.category.clone(),
        file: Some(probe.file.clone()),
        line_start: Some(line),
        line_end: Some(line),
        symbol: None,
        evidence: quote,
        why_it_matters: v
            .get("analysis")
            .or_else(|| v.get("why"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string(),
        suggested_fix: String::new(),
        routing: Default::default(),
    })
}

/// Ask one probe: its findings (none or one) and what the call cost.
pub async fn probe(
    ctx: &ReviewContext,
    task: &Task,
    probe: &Probe,
) -> Result<(Vec<RawFinding>, StageStats), AttemptError> {
    let (system, user) = probe_prompt(ctx, probe)?;
    let (client, model) = ctx.pick(&task.persona, &system, &user, task.model.as_deref())?;
    let window = ctx.budget_for(&client, &model);
    let output_tokens = ctx
        .flow
        .probes
        .as_ref()
        .map(|p| p.max_output_tokens)
        .unwrap_or(window.output_tokens)
        .min(window.output_tokens)
        .max(32);
    let budget = ContextBudget {
        context_tokens: window.context_tokens,
        output_tokens,
    };
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &client,
        &ctx.call_spec(budget, &model),
        &system,
        &user,
        schema::probe_schema(),
        Expect::Object,
        &mut stats,
    )
    .await?;
    let excerpt: Vec<(u32, String)> = ctx
        .pack
        .resolve(&probe.file)
        .map(|f| {
            (1u32..)
                .zip(f.content.lines())
                .filter(|(n, _)| (probe.start..=probe.end).contains(n))
                .map(|(n, l)| (n, l.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let findings = match parsed {
        Parsed::Object(v) => finding_of(probe, &excerpt, &v).into_iter().collect(),
        Parsed::Objects(vs) => vs
            .iter()
            .filter_map(|v| finding_of(probe, &excerpt, v))
            .take(1)
            .collect(),
    };
    Ok((findings, StageStats { model, stats }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quote_is_anchored_to_the_excerpt_line_it_names_loosely() {
        let excerpt = vec![
            (14, String::new()),
            (15, "SECRET_KEY = \"inv-prod-7f3a9c2e51b84d06\"".to_string()),
            (16, "TOKEN_TTL_SECONDS = 3600".to_string()),
        ];
        // Other quote marks and a wrong line number: the file's line 15.
        assert_eq!(
            anchor(&excerpt, "SECRET_KEY = 'inv-prod-7f3a9c2e51b84d06'", 17),
            Some((15, "SECRET_KEY = \"inv-prod-7f3a9c2e51b84d06\"".to_string()))
        );
        // A copied line number prefix.
        assert_eq!(
            anchor(&excerpt, "   16 | TOKEN_TTL_SECONDS = 3600", 1).map(|a| a.0),
            Some(16)
        );
        // Nothing like it in the excerpt, or too short to mean anything: no anchor.
        assert_eq!(anchor(&excerpt, "os.system(cmd)", 15), None);
        assert_eq!(anchor(&excerpt, "x", 15), None);
    }
}
