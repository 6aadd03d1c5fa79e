//! The judge panel's calls: one blind call per judge scoring the surviving findings on its
//! axis, and the meta-judge's call that turns the aggregated scores into a verdict.
//!
//! Judges come from the catalog by name (the conductor picks them by kind, axis and
//! perspective); nothing here names one. Findings quote the target, so every finding is
//! wrapped in `weaver::delimit` markers: a finding's words cannot instruct its judge. A judge
//! sees its own persona and the findings, never another judge's score or reason. The answers
//! are only read here (`quorum_core::judging::panel`); the conductor aggregates and records them.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use quorum_core::catalog::Persona;
use quorum_core::flows::flow::Role;
use quorum_core::judging::panel::{self, AxisReport, Decision, JudgeScore, VerdictBy};
use quorum_core::review::finding::Finding;
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

/// Paths listed for the judges (coverage needs to know what the target holds).
const MAX_LISTED_FILES: usize = 200;

/// One judge's scores, read and checked against the findings it was shown.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct JudgeOutput {
    pub score: JudgeScore,
    pub stage: StageStats,
}

/// The meta-judge's verdict.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MetaOutput {
    pub decision: Decision,
    pub stage: StageStats,
}

fn location(f: &Finding) -> String {
    match (f.file.as_deref(), f.line_start, f.line_end) {
        (Some(p), Some(a), Some(b)) if a != b => format!("{p}:{a}-{b}"),
        (Some(p), Some(a), _) => format!("{p}:{a}"),
        (Some(p), None, _) => p.to_string(),
        (None, ..) => "(no file)".to_string(),
    }
}

/// The findings as every judge sees them: one delimited block per finding, with its id
/// outside the block so the judge can name it.
pub fn findings_material(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let body = format!(
            "severity: {}\nconfidence: {:.2}\nlocation: {}\ntitle: {}\nbody: {}\nsuggested fix: {}\nevidence (quoted from the target, checked there by grounding):\n{}\n",
            f.severity.as_str(),
            f.confidence,
            location(f),
            f.title,
            f.why_it_matters,
            f.suggested_fix,
            f.evidence
        );
        let _ = writeln!(out, "### {}", f.id);
        out.push_str(&weaver::delimit(&format!("finding {}", f.id), &body));
        out.push('\n');
    }
    out
}

fn bullets(out: &mut String, heading: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n## {heading}");
    for i in items {
        let _ = writeln!(out, "- {}", i.trim());
    }
}

/// The persona part of a judge's or the meta-judge's system prompt.
fn persona_section(ctx: &ReviewContext, p: &Persona) -> String {
    let mut out = format!("\n## Mandate\n{}\n", p.mandate.trim());
    bullets(&mut out, "Directives", &p.directives);
    for h in ctx.catalog.heuristics_of(p) {
        bullets(&mut out, &format!("Checks: {}", h.title), &h.checks);
    }
    bullets(&mut out, "Do not score", &p.suppress);
    out
}

/// One judge's prompt: its persona and axis, and the findings (delimited).
pub fn judge_prompt_in(
    ctx: &ReviewContext,
    judge: &Persona,
    findings: &[Finding],
    budget: ContextBudget,
) -> (String, String) {
    let axis = judge.axis.as_deref().unwrap_or("its");
    let perspective = judge.perspective.as_deref().unwrap_or("its own");
    let system = format!(
        "You are {}, a judge on the review panel: you score the review's findings on one axis, \
         {axis}, from the {perspective} perspective.\n\n{}\n{}\n{DATA_NOT_INSTRUCTIONS}\n\n\
         Answer with one JSON object: {{\"items\": [{{\"finding\": \"<a finding id as \
         listed>\", \"score\": <0 to 10>, \"reason\": \"<one sentence>\"}}], \"overall\": \
         <0 to 10>, \"reason\": \"<one or two sentences>\"}} with one item for every finding id \
         listed. Scores are numbers from 0 \
         (worst) to 10 (best) on {axis} only.",
        judge.name,
        ctx.instructions(Role::Panel),
        persona_section(ctx, judge)
    );
    let listed: Vec<&str> = ctx
        .pack
        .files
        .keys()
        .map(String::as_str)
        .take(MAX_LISTED_FILES)
        .collect();
    let mut files = listed.join("\n");
    if ctx.pack.len() > listed.len() {
        let _ = write!(files, "\n({} more files)", ctx.pack.len() - listed.len());
    }
    let files = weaver::delimit("files of the reviewed target", &files);
    let material = findings_material(findings);
    let fitted = budget.fit(
        &system,
        &[
            Slot {
                name: "findings",
                content: &material,
                weight: 3,
            },
            Slot {
                name: "target files",
                content: &files,
                weight: 1,
            },
        ],
    );
    (
        system,
        format!(
            "## Findings to score ({})\n{}\n## The reviewed target\n{}",
            findings.len(),
            fitted[0],
            fitted[1]
        ),
    )
}

/// The meta-judge's prompt: the per-axis aggregates and the judges' reasons, anonymous.
pub fn meta_prompt_in(
    ctx: &ReviewContext,
    meta: &Persona,
    axes: &[AxisReport],
    overall: Option<f64>,
    budget: ContextBudget,
) -> (String, String) {
    let system = format!(
        "You are {}, the meta-judge of the review panel: you turn the judges' scores into one \
         verdict on the review's findings.\n\n{}\n{}\n{DATA_NOT_INSTRUCTIONS}\n\nThe judges \
         are anonymous: you see each axis's aggregate and the reasons its judges gave. Answer \
         with one JSON object: {{\"verdict\": \"accept|revise|reject\", \"summary\": \"two or \
         three sentences\"}}.",
        meta.name,
        ctx.instructions(Role::Panel),
        persona_section(ctx, meta)
    );
    let material = panel::meta_material(axes);
    let fitted = budget.fit(
        &system,
        &[Slot {
            name: "panel",
            content: &material,
            weight: 1,
        }],
    );
    let overall = overall
        .map(|o| format!("{o} of 10"))
        .unwrap_or_else(|| "none".into());
    (
        system,
        format!(
            "## Panel scores by axis\n{}\nOverall (mean of the axis means): {overall}\n",
            fitted[0]
        ),
    )
}

fn persona<'a>(ctx: &'a ReviewContext, name: &str) -> Result<&'a Persona, AttemptError> {
    ctx.catalog
        .personas
        .get(name)
        .ok_or_else(|| AttemptError::Config(format!("the catalog has no persona {name:?}")))
}

/// The finders' models, so the panel prefers a model of another family, as verification does.
fn finder_models(findings: &[Finding]) -> Vec<String> {
    let mut m: Vec<String> = findings
        .iter()
        .flat_map(|f| f.reporters.iter().map(|r| r.model.clone()))
        .filter(|m| !m.is_empty())
        .collect();
    m.sort();
    m.dedup();
    m
}

fn one_object(parsed: Parsed) -> serde_json::Value {
    match parsed {
        Parsed::Object(v) => v,
        Parsed::Objects(mut v) => v.pop().unwrap_or_default(),
    }
}

/// One judge's call. An answer without a usable overall score is malformed output, so the
/// flow's attempts retry it like any other; after them the judge counts as having given none.
pub async fn judge(
    ctx: &ReviewContext,
    judge: &str,
    findings: &[Finding],
) -> Result<JudgeOutput, AttemptError> {
    let p = persona(ctx, judge)?;
    let (sel, _) = ctx
        .backends
        .select_verifier(ctx.verifier_model.as_deref(), &finder_models(findings))
        .map_err(|e| AttemptError::Config(e.to_string()))?;
    let budget = ctx.budget_for(&sel.client, &sel.model);
    let (system, user) = judge_prompt_in(ctx, p, findings, budget);
    let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
    let mut stats = CallStats::default();
    let (parsed, text) = agent::json_call(
        &sel.client,
        &ctx.call_spec(budget, &sel.model),
        &system,
        &user,
        panel::judge_schema(&ids),
        Expect::Object,
        &mut stats,
    )
    .await?;
    let answer = panel::read_judge_answer(&one_object(parsed), &ids).map_err(|why| {
        AttemptError::MalformedOutput {
            kind: "no score".into(),
            detail: format!("{why}: {}", agent::snippet(&text)),
        }
    })?;
    Ok(JudgeOutput {
        score: JudgeScore {
            judge: p.name.clone(),
            axis: p.axis.clone().unwrap_or_default(),
            perspective: p.perspective.clone().unwrap_or_default(),
            model: sel.model.clone(),
            overall: answer.overall,
            reason: answer.reason,
            items: answer.items,
        },
        stage: StageStats {
            model: sel.model,
            stats,
        },
    })
}

/// The meta-judge's call over the aggregates.
pub async fn meta_judge(
    ctx: &ReviewContext,
    meta: &str,
    axes: &[AxisReport],
    overall: Option<f64>,
) -> Result<MetaOutput, AttemptError> {
    let p = persona(ctx, meta)?;
    let (sel, _) = ctx
        .backends
        .select_verifier(ctx.verifier_model.as_deref(), &[])
        .map_err(|e| AttemptError::Config(e.to_string()))?;
    let budget = ctx.budget_for(&sel.client, &sel.model);
    let (system, user) = meta_prompt_in(ctx, p, axes, overall, budget);
    let mut stats = CallStats::default();
    let (parsed, text) = agent::json_call(
        &sel.client,
        &ctx.call_spec(budget, &sel.model),
        &system,
        &user,
        panel::meta_schema(),
        Expect::Object,
        &mut stats,
    )
    .await?;
    let (verdict, summary) = panel::read_meta_answer(&one_object(parsed)).map_err(|why| {
        AttemptError::MalformedOutput {
            kind: "no verdict".into(),
            detail: format!("{why}: {}", agent::snippet(&text)),
        }
    })?;
    Ok(MetaOutput {
        decision: Decision {
            verdict,
            by: VerdictBy::MetaJudge,
            summary,
        },
        stage: StageStats {
            model: sel.model,
            stats,
        },
    })
}
