//! Document review as rules: the flow's team (always-on and signal-called members), the
//! document synthesis of findings, and the plan of `safe_auto` fixes for a copy of the target.
//!
//! Everything here is deterministic. Content signals are counted in Rust from the pack, never
//! judged by a model; the rules (personas, keywords, headings, extensions) are data in the flow
//! file, so the engine names no persona.

use crate::catalog::Catalog;
use crate::flows::flow::{Flow, Signals, SynthesisMode, TeamMemberRule};
use crate::flows::plan::{engine_task, Scope, MAX_ADDED_FILES};
use crate::pack::{ContextPack, FileKind};
use crate::review::dedup::{self, Gated};
use crate::review::finding::{AutofixClass, Dropped, Finding, Severity, Stance, Verdict};
use crate::review::judged::Judged;
use crate::task::{RejectedTask, Task};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// The `origin` prefix of tasks the team rules placed; the report shows what follows it.
pub const TEAM_ORIGIN: &str = "team: ";

/// How strongly a conditional member's signals are present, and where.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignalMatch {
    pub matches: usize,
    /// e.g. `keyword "customer" x4, heading "5. Users and scenarios"`.
    pub detail: String,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Occurrences of `needle` in `hay` (both lowercase) that start and end at word boundaries.
fn count_words(hay: &str, needle: &str) -> usize {
    if needle.is_empty() {
        return 0;
    }
    hay.match_indices(needle)
        .filter(|(i, _)| {
            let before = hay[..*i].chars().next_back();
            let after = hay[i + needle.len()..].chars().next();
            !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
        })
        .count()
}

/// A heading line: Markdown `#`, or a short numbered line such as "6.3 Sync" or "4. Non-goals".
fn heading_text(line: &str) -> Option<&str> {
    let t = line.trim();
    if let Some(rest) = t.strip_prefix('#') {
        return Some(rest.trim_start_matches('#').trim());
    }
    let numbered = t
        .split_once(' ')
        .filter(|(n, rest)| {
            !n.is_empty()
                && n.chars().all(|c| c.is_ascii_digit() || c == '.')
                && n.chars().next().is_some_and(|c| c.is_ascii_digit())
                && !rest.trim().is_empty()
        })
        .map(|(_, rest)| rest.trim());
    numbered.filter(|_| t.len() <= 80)
}

/// Files a document review reads signals from: the documents, or every file when there are none.
fn document_files(pack: &ContextPack) -> Vec<&crate::pack::PackFile> {
    let docs: Vec<_> = pack
        .files
        .values()
        .filter(|f| f.kind == FileKind::Doc)
        .collect();
    if docs.is_empty() {
        pack.files.values().collect()
    } else {
        docs
    }
}

/// Count the signals in the pack: keyword hits, heading hits and files with a listed extension.
pub fn detect(pack: &ContextPack, signals: &Signals) -> SignalMatch {
    let mut matches = 0;
    let mut detail: Vec<String> = Vec::new();
    let files = document_files(pack);
    let lowered: Vec<String> = files.iter().map(|f| f.content.to_lowercase()).collect();
    for k in &signals.keywords {
        let k = k.trim().to_lowercase();
        let n: usize = lowered.iter().map(|t| count_words(t, &k)).sum();
        if n > 0 {
            matches += n;
            detail.push(format!("keyword {k:?} x{n}"));
        }
    }
    for h in &signals.headings {
        let h = h.trim().to_lowercase();
        for f in &files {
            for line in f.content.lines() {
                if let Some(text) = heading_text(line) {
                    if !h.is_empty() && text.to_lowercase().contains(&h) {
                        matches += 1;
                        detail.push(format!("heading {:?} in {}", line.trim(), f.path));
                    }
                }
            }
        }
    }
    for e in &signals.extensions {
        let suffix = format!(".{}", e.trim().trim_start_matches('.').to_lowercase());
        let n = pack
            .files
            .keys()
            .filter(|p| p.to_lowercase().ends_with(&suffix))
            .count();
        if n > 0 {
            matches += n;
            detail.push(format!("{n} {suffix} file(s)"));
        }
    }
    const SHOWN: usize = 4;
    let more = detail.len().saturating_sub(SHOWN);
    detail.truncate(SHOWN);
    if more > 0 {
        detail.push(format!("{more} more"));
    }
    SignalMatch {
        matches,
        detail: detail.join(", "),
    }
}

fn doc_files(pack: &ContextPack) -> Vec<String> {
    document_files(pack)
        .into_iter()
        .map(|f| f.path.clone())
        .take(MAX_ADDED_FILES)
        .collect()
}

fn next_id(tasks: &[Task]) -> String {
    let taken: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    (1..)
        .map(|n| format!("m{n}"))
        .find(|id| !taken.contains(id.as_str()))
        .unwrap_or_else(|| "m".to_string())
}

/// Seat one flow-set member: stamp the planner's task for it with the reason, or add one.
fn seat(
    member: &TeamMemberRule,
    reason: String,
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
    refused: &mut Vec<RejectedTask>,
) {
    let origin = format!("{TEAM_ORIGIN}{reason}");
    let mut seated = false;
    for t in tasks.iter_mut().filter(|t| t.persona == member.persona) {
        t.origin.get_or_insert_with(|| origin.clone());
        seated = true;
    }
    if seated {
        return;
    }
    let id = next_id(tasks);
    match engine_task(
        Scope {
            catalog,
            pack,
            stage_tools,
        },
        id,
        &member.persona,
        &doc_files(pack),
        member.mandate.trim(),
        origin,
    ) {
        Ok(t) => tasks.push(t),
        Err(r) => refused.push(r),
    }
}

/// Apply the flow's team rules to a plan. Always-on members are seated whatever the planner
/// said; a conditional member is seated exactly when its signals reach `min_matches`, and the
/// planner's tasks for one whose signals are absent are refused with the count. Returns the
/// refused tasks for the report.
pub fn complete_team(
    flow: &Flow,
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
) -> Vec<RejectedTask> {
    let mut refused = Vec::new();
    let Some(team) = &flow.team else {
        return refused;
    };
    for m in &team.always {
        seat(
            m,
            "always on in this flow".to_string(),
            catalog,
            pack,
            stage_tools,
            tasks,
            &mut refused,
        );
    }
    for m in &team.conditional {
        let Some(signals) = &m.signals else { continue };
        let found = detect(pack, signals);
        if found.matches >= signals.min_matches {
            let reason = format!("conditional, called by {}", found.detail);
            seat(m, reason, catalog, pack, stage_tools, tasks, &mut refused);
        } else {
            let reason = format!(
                "conditional member whose content signals are absent ({} of {} needed)",
                found.matches, signals.min_matches
            );
            tasks.retain(|t| {
                if t.persona == m.persona {
                    refused.push(RejectedTask {
                        id: t.id.clone(),
                        persona: t.persona.clone(),
                        reason: reason.clone(),
                    });
                    false
                } else {
                    true
                }
            });
        }
    }
    refused
}

/// Merge, gate and number a run's judged findings the way the flow asks.
pub fn merge_and_gate(flow: &Flow, judged: Vec<Judged>) -> Gated {
    merge_and_gate_at(flow, judged, flow.parameters.confidence_gate)
}

/// [`merge_and_gate`] with the confidence gate given (a review profile may move it).
pub fn merge_and_gate_at(flow: &Flow, judged: Vec<Judged>, gate: f64) -> Gated {
    match flow.synthesis {
        SynthesisMode::Standard => dedup::merge_and_gate(judged, gate),
        SynthesisMode::Document => synthesize(judged, gate),
    }
}

/// Lowercase words only, so "6.3 Sync:" and "6.3  sync" meet.
fn normalize(s: &str) -> String {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '.')
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The section a finding is about: its symbol, else its line's 5-line bucket, else its file.
fn section_of(j: &Judged) -> String {
    let f = &j.reported.finding;
    match (&f.symbol, f.line_start) {
        (Some(s), _) if !normalize(s).is_empty() => normalize(s),
        (_, Some(l)) => format!("line {}", (l.max(1) - 1) / dedup::BUCKET_LINES),
        _ => String::new(),
    }
}

fn file_key(f: Option<&str>) -> String {
    f.map(|f| f.trim().trim_start_matches("./").to_string())
        .unwrap_or_default()
}

fn sane(c: f64) -> f64 {
    if c.is_nan() {
        0.0
    } else {
        c.clamp(0.0, 1.0)
    }
}

/// One merged document finding with the personas behind it and its section key.
struct Merged {
    finding: Finding,
    personas: BTreeSet<String>,
    section: (String, String),
}

fn verdict_rank(v: Verdict) -> u8 {
    match v {
        Verdict::Confirmed => 0,
        Verdict::Plausible => 1,
        Verdict::Unverifiable => 2,
        Verdict::Unverified => 3,
        Verdict::Hallucinated => 4,
    }
}

/// The note on a finding no reporter gave an `autofix_class`, routed `manual` for it.
pub const UNCLASSED_NOTE: &str =
    "the model gave no autofix_class; routed manual, the conservative class";

/// Merge reports sharing a fingerprint (file, normalised section, normalised title): highest
/// severity and confidence, the union of evidence, every reporter, the most cautious route.
fn merge(mut members: Vec<Judged>) -> Option<Merged> {
    // Document order first, so the merged text does not depend on which reviewer finished first.
    members.sort_by(|a, b| {
        let (fa, fb) = (&a.reported.finding, &b.reported.finding);
        (fa.line_start, &fa.evidence, &a.reported.reporter).cmp(&(
            fb.line_start,
            &fb.evidence,
            &b.reported.reporter,
        ))
    });
    let best = members.iter().min_by(|a, b| {
        verdict_rank(a.verdict).cmp(&verdict_rank(b.verdict)).then(
            sane(b.reported.finding.confidence)
                .partial_cmp(&sane(a.reported.finding.confidence))
                .unwrap_or(Ordering::Equal),
        )
    })?;
    let f = &best.reported.finding;
    let mut evidence: Vec<&str> = Vec::new();
    for m in &members {
        let e = m.reported.finding.evidence.trim();
        if !e.is_empty() && !evidence.contains(&e) {
            evidence.push(e);
        }
    }
    let mut routing = f.routing.clone();
    for m in &members {
        let c = m.reported.finding.routing.autofix_class;
        if let (Some(c), Some(r)) = (c, routing.autofix_class) {
            if c.caution() > r.caution() {
                routing.autofix_class = Some(c);
            }
        } else if routing.autofix_class.is_none() {
            routing.autofix_class = c;
        }
    }
    // The flow promises every finding a route: one no reporter classed takes the most
    // conservative class, and says so.
    let unclassed = routing.autofix_class.is_none();
    if unclassed {
        routing.autofix_class = Some(AutofixClass::Manual);
    }
    if routing.autofix_class != Some(AutofixClass::SafeAuto) {
        // A replacement is only ever applied for a finding every reporter deemed safe.
        routing.autofix = None;
    }
    let reporters: BTreeSet<_> = members
        .iter()
        .map(|m| m.reported.reporter.clone())
        .collect();
    let personas = reporters.iter().map(|r| r.persona.clone()).collect();
    let section = (file_key(f.file.as_deref()), section_of(best));
    let finding = Finding {
        id: String::new(),
        title: f.title.clone(),
        severity: members.iter().map(|m| m.reported.finding.severity).min()?,
        confidence: members
            .iter()
            .map(|m| sane(m.reported.finding.confidence))
            .fold(0.0, f64::max),
        category: f.category.clone(),
        file: f.file.clone(),
        line_start: f.line_start,
        line_end: f.line_end,
        symbol: f.symbol.clone(),
        evidence: evidence.join("\n…\n"),
        why_it_matters: f.why_it_matters.clone(),
        suggested_fix: f.suggested_fix.clone(),
        verdict: best.verdict,
        reporters: reporters.into_iter().collect(),
        anchor: format!("{}#{}", section.0, section.1),
        promoted: false,
        notes: {
            let mut n: Vec<String> = members.iter().flat_map(|m| m.notes.clone()).collect();
            n.dedup();
            if unclassed {
                n.push(UNCLASSED_NOTE.to_string());
            }
            n
        },
        routing,
        rescored: crate::review::judged::rescored_of(best, &members),
        fresh_eyes: false,
        carried_from: None,
        seen_before: None,
        cwe: None,
    };
    Some(Merged {
        finding,
        personas,
        section,
    })
}

/// The key document synthesis merges a report under, as [`corroboration_key`] needs it: the
/// same for a report and for the finding it merged into (`anchor` then the title).
pub fn report_key(j: &Judged) -> String {
    format!(
        "{}#{}|{}",
        file_key(j.reported.finding.file.as_deref()),
        section_of(j),
        normalize(&j.reported.finding.title)
    )
}

/// [`report_key`] of a finding document synthesis produced.
pub fn finding_key(f: &crate::review::finding::Finding) -> String {
    format!("{}|{}", f.anchor, normalize(&f.title))
}

fn dedup_by_fingerprint(judged: Vec<Judged>) -> (Vec<Merged>, usize) {
    let mut groups: Vec<(String, Vec<Judged>)> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let total = judged.len();
    for j in judged {
        let key = format!(
            "{}|{}|{}",
            file_key(j.reported.finding.file.as_deref()),
            section_of(&j),
            normalize(&j.reported.finding.title)
        );
        match index.get(&key) {
            Some(&i) => groups[i].1.push(j),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![j]));
            }
        }
    }
    let merged = total - groups.len();
    (
        groups.into_iter().filter_map(|(_, m)| merge(m)).collect(),
        merged,
    )
}

/// Two reviewers taking opposite stances on one section become one `manual` finding for a
/// person to decide, presenting both sides.
fn combine(a: Merged, b: Merged) -> Merged {
    // Sides in persona order, so the text does not depend on which reviewer finished first.
    let (a, b) = if a.personas <= b.personas {
        (a, b)
    } else {
        (b, a)
    };
    let side = |m: &Merged| {
        let who: Vec<&str> = m.personas.iter().map(String::as_str).collect();
        let stance = m
            .finding
            .routing
            .stance
            .map(Stance::as_str)
            .unwrap_or("change");
        (who.join(", "), stance)
    };
    let (wa, sa) = side(&a);
    let (wb, sb) = side(&b);
    let (fa, fb) = (&a.finding, &b.finding);
    let section = fa.symbol.clone().unwrap_or_else(|| a.section.1.clone());
    let mut evidence = vec![fa.evidence.trim()];
    if fb.evidence.trim() != fa.evidence.trim() {
        evidence.push(fb.evidence.trim());
    }
    let mut reporters = fa.reporters.clone();
    for r in &fb.reporters {
        if !reporters.contains(r) {
            reporters.push(r.clone());
        }
    }
    reporters.sort();
    let finding = Finding {
        id: String::new(),
        title: format!("Reviewers disagree on {section}: {wa} would {sa} it, {wb} would {sb} it"),
        severity: fa.severity.min(fb.severity),
        confidence: fa.confidence.max(fb.confidence),
        category: "document/contradiction".to_string(),
        file: fa.file.clone(),
        line_start: fa.line_start,
        line_end: fa.line_end,
        symbol: fa.symbol.clone(),
        evidence: evidence.join("\n…\n"),
        why_it_matters: format!(
            "{wa} ({sa}): {} — {}\n{wb} ({sb}): {} — {}",
            fa.title, fa.why_it_matters, fb.title, fb.why_it_matters
        ),
        suggested_fix: format!(
            "Decide between the two: (a) {} (b) {}",
            fa.suggested_fix, fb.suggested_fix
        ),
        verdict: if verdict_rank(fa.verdict) <= verdict_rank(fb.verdict) {
            fa.verdict
        } else {
            fb.verdict
        },
        reporters,
        anchor: fa.anchor.clone(),
        promoted: fa.promoted || fb.promoted,
        notes: fa.notes.iter().chain(&fb.notes).cloned().collect(),
        routing: crate::review::finding::Routing {
            autofix_class: Some(AutofixClass::Manual),
            owner: Some("human".to_string()),
            stance: None,
            autofix: None,
        },
        rescored: None,
        fresh_eyes: false,
        carried_from: None,
        seen_before: None,
        cwe: None,
    };
    let mut personas = a.personas;
    personas.extend(b.personas);
    Merged {
        finding,
        personas,
        section: a.section,
    }
}

fn resolve_contradictions(found: Vec<Merged>) -> Vec<Merged> {
    let mut out: Vec<Merged> = Vec::new();
    for m in found {
        let opposite = out.iter().position(|o| {
            o.section == m.section
                && o.finding.category != "document/contradiction"
                && o.personas.is_disjoint(&m.personas)
                && matches!(
                    (o.finding.routing.stance, m.finding.routing.stance),
                    (Some(x), Some(y)) if x.opposes(y)
                )
        });
        match opposite {
            Some(i) => {
                let o = out.remove(i);
                out.insert(i, combine(o, m));
            }
            None => out.push(m),
        }
    }
    out
}

/// Document order: by file, then first line (unlocated last).
fn document_order(a: &Finding, b: &Finding) -> Ordering {
    a.file
        .cmp(&b.file)
        .then_with(|| a.line_start.is_none().cmp(&b.line_start.is_none()))
        .then_with(|| a.line_start.cmp(&b.line_start))
}

fn number(mut v: Vec<Finding>, prefix: &str) -> Vec<Finding> {
    v.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(
                sane(b.confidence)
                    .partial_cmp(&sane(a.confidence))
                    .unwrap_or(Ordering::Equal),
            )
            .then_with(|| document_order(a, b))
            .then_with(|| a.title.cmp(&b.title))
    });
    for (i, f) in v.iter_mut().enumerate() {
        f.id = format!("{prefix}{:03}", i + 1);
    }
    v
}

/// The confidence a promoted residual is shown with (seed 003: P2 at 0.55-0.65).
const PROMOTED_CONFIDENCE: (f64, f64) = (0.55, 0.65);

/// Seed 003's synthesis: validate (drop HALLUCINATED), gate at `gate` into findings and residual
/// concerns, dedup each by fingerprint, promote residuals corroborated by another persona's
/// finding on the same section (at P2), surface contradictions as one manual finding, and sort
/// P0→P3, then confidence, then document order.
pub fn synthesize(judged: Vec<Judged>, gate: f64) -> Gated {
    let mut out = Gated::default();
    let mut above = Vec::new();
    let mut below = Vec::new();
    for j in judged {
        if j.verdict == Verdict::Hallucinated {
            out.dropped.push(Dropped {
                title: j.reported.finding.title.clone(),
                file: j.reported.finding.file.clone(),
                removed_by: crate::review::finding::removed_by(j.deterministic, &j.reason),
                reason: j.reason,
                verdict: Some(Verdict::Hallucinated),
            });
        } else if sane(j.reported.finding.confidence) >= gate {
            above.push(j);
        } else {
            below.push(j);
        }
    }
    let (found, merged_a) = dedup_by_fingerprint(above);
    let (residual, merged_b) = dedup_by_fingerprint(below);
    out.merged = merged_a + merged_b;
    let mut found = found;
    let mut still_residual = Vec::new();
    for r in residual {
        // The same fingerprint above and below the gate is one finding: fold the weak report in.
        let title = normalize(&r.finding.title);
        if let Some(f) = found
            .iter_mut()
            .find(|f| f.section == r.section && normalize(&f.finding.title) == title)
        {
            for rep in r.finding.reporters {
                if !f.finding.reporters.contains(&rep) {
                    f.finding.reporters.push(rep);
                }
            }
            f.finding.reporters.sort();
            let e = r.finding.evidence.trim().to_string();
            if !e.is_empty() && !f.finding.evidence.contains(&e) {
                f.finding.evidence = format!("{}\n…\n{e}", f.finding.evidence);
            }
            f.finding.severity = f.finding.severity.min(r.finding.severity);
            f.personas.extend(r.personas);
            out.merged += 1;
            continue;
        }
        let corroborated = found
            .iter()
            .any(|f| f.section == r.section && f.personas.iter().any(|p| !r.personas.contains(p)));
        if corroborated {
            let mut r = r;
            r.finding.promoted = true;
            r.finding.severity = Severity::P2;
            r.finding.confidence = r
                .finding
                .confidence
                .clamp(PROMOTED_CONFIDENCE.0, PROMOTED_CONFIDENCE.1);
            found.push(r);
        } else {
            still_residual.push(r.finding);
        }
    }
    let found = resolve_contradictions(found);
    out.findings = number(found.into_iter().map(|m| m.finding).collect(), "F");
    out.residual = number(still_residual, "R");
    out
}

/// One `safe_auto` replacement and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SafeFix {
    pub finding: String,
    pub file: String,
    pub old: String,
    pub new: String,
    pub applied: bool,
    /// Why it was not applied (old text absent or ambiguous, file not in the pack).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// Plan the `safe_auto` replacements of `findings` against the pack: each `old` must occur
/// exactly once in its file (after earlier fixes), so a fix can never land in the wrong place.
/// Returns every fix with its outcome and the new content of each changed file; the caller
/// writes them into a copy, never the original.
pub fn plan_safe_fixes(
    pack: &ContextPack,
    findings: &[Finding],
) -> (Vec<SafeFix>, BTreeMap<String, String>) {
    let mut fixes = Vec::new();
    let mut contents: BTreeMap<String, String> = BTreeMap::new();
    for f in findings {
        if f.routing.autofix_class != Some(AutofixClass::SafeAuto) {
            continue;
        }
        let (Some(fix), Some(file)) = (&f.routing.autofix, &f.file) else {
            continue;
        };
        let mut entry = SafeFix {
            finding: f.id.clone(),
            file: file.clone(),
            old: fix.old.clone(),
            new: fix.new.clone(),
            applied: false,
            note: String::new(),
        };
        let Ok(pf) = pack.resolve(file) else {
            entry.note = "the file is not in the review's snapshot".into();
            fixes.push(entry);
            continue;
        };
        let text = contents
            .entry(pf.path.clone())
            .or_insert_with(|| pf.content.to_string());
        match text.matches(fix.old.as_str()).count() {
            1 => {
                *text = text.replacen(fix.old.as_str(), &fix.new, 1);
                entry.applied = true;
            }
            0 => entry.note = "the old text does not occur in the file".into(),
            n => entry.note = format!("the old text occurs {n} times; a fix must be unambiguous"),
        }
        fixes.push(entry);
    }
    let changed: BTreeSet<String> = fixes
        .iter()
        .filter(|f| f.applied)
        .filter_map(|f| pack.resolve(&f.file).ok().map(|p| p.path.clone()))
        .collect();
    contents.retain(|path, _| changed.contains(path));
    (fixes, contents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::PackFile;
    use crate::review::finding::{RawFinding, Reported, Reporter, Routing, TextFix};
    use std::sync::Arc;

    fn pack(files: &[(&str, &str)]) -> ContextPack {
        let mut p = ContextPack {
            root: std::path::PathBuf::from("/nonexistent"),
            head_sha: None,
            files: BTreeMap::new(),
            skipped: Vec::new(),
        };
        for (path, text) in files {
            let f = PackFile::new(path.to_string(), Arc::from(*text));
            p.files.insert(f.path.clone(), f);
        }
        p
    }

    #[test]
    fn a_finding_no_reporter_classed_is_routed_manual_and_says_why() {
        let gated = synthesize(
            vec![judged("editor", "Undefined term", "1. Scope", 3, 0.9, None)],
            0.5,
        );
        let f = &gated.findings[0];
        assert_eq!(f.routing.autofix_class, Some(AutofixClass::Manual));
        assert!(f.notes.iter().any(|n| n == UNCLASSED_NOTE), "{:?}", f.notes);

        let mut classed = judged("editor", "Typo", "1. Scope", 4, 0.9, None);
        classed.reported.finding.routing.autofix_class = Some(AutofixClass::Advisory);
        let gated = synthesize(vec![classed], 0.5);
        let f = &gated.findings[0];
        assert_eq!(f.routing.autofix_class, Some(AutofixClass::Advisory));
        assert!(
            !f.notes.iter().any(|n| n == UNCLASSED_NOTE),
            "{:?}",
            f.notes
        );
    }

    fn judged(
        persona: &str,
        title: &str,
        section: &str,
        line: u32,
        conf: f64,
        stance: Option<Stance>,
    ) -> Judged {
        Judged {
            reported: Reported {
                task_id: format!("t-{persona}"),
                reporter: Reporter {
                    persona: persona.into(),
                    model: "m".into(),
                    node: "n".into(),
                    carried_from: None,
                },
                finding: RawFinding {
                    title: title.into(),
                    severity: Severity::P2,
                    confidence: conf,
                    category: "document".into(),
                    file: Some("plan.md".into()),
                    line_start: Some(line),
                    line_end: Some(line),
                    symbol: Some(section.into()),
                    evidence: format!("line {line}"),
                    why_it_matters: format!("{persona} cares"),
                    suggested_fix: format!("{persona}'s fix"),
                    routing: Routing {
                        stance,
                        ..Routing::default()
                    },
                },
            },
            verdict: Verdict::Confirmed,
            reason: String::new(),
            notes: Vec::new(),
            deterministic: false,
            ballot: None,
            rescored: None,
        }
    }

    #[test]
    fn two_reviewers_disagreeing_on_one_section_become_one_manual_finding() {
        let gated = synthesize(
            vec![
                judged(
                    "scope",
                    "Cut the appendix",
                    "Appendix B",
                    40,
                    0.8,
                    Some(Stance::Remove),
                ),
                judged(
                    "editor",
                    "Keep the appendix for the narrative",
                    "appendix  b",
                    41,
                    0.7,
                    Some(Stance::Keep),
                ),
                judged(
                    "editor",
                    "Define SLA",
                    "2. Terms",
                    5,
                    0.9,
                    Some(Stance::Add),
                ),
            ],
            0.5,
        );
        assert_eq!(gated.findings.len(), 2, "{:#?}", gated.findings);
        let both = gated
            .findings
            .iter()
            .find(|f| f.category == "document/contradiction")
            .expect("a combined finding");
        assert_eq!(both.routing.autofix_class, Some(AutofixClass::Manual));
        assert_eq!(both.routing.owner.as_deref(), Some("human"));
        assert!(
            both.title.contains("editor would keep it")
                && both.title.contains("scope would remove it")
        );
        assert!(
            both.suggested_fix.contains("scope's fix")
                && both.suggested_fix.contains("editor's fix")
        );
        assert_eq!(both.reporters.len(), 2);
        // Same stances from the same reviewer, or compatible stances, are not contradictions.
        let calm = synthesize(
            vec![
                judged(
                    "scope",
                    "Cut the appendix",
                    "Appendix B",
                    40,
                    0.8,
                    Some(Stance::Remove),
                ),
                judged(
                    "editor",
                    "Tighten the appendix",
                    "Appendix B",
                    41,
                    0.7,
                    Some(Stance::Change),
                ),
            ],
            0.5,
        );
        assert!(calm
            .findings
            .iter()
            .all(|f| f.category != "document/contradiction"));
        assert_eq!(calm.findings.len(), 2);
    }

    #[test]
    fn fingerprint_dedup_gate_promotion_and_order() {
        let mut high = judged("a", "Budget  disagrees", "3. Budget", 30, 0.6, None);
        high.reported.finding.severity = Severity::P1;
        let gated = synthesize(
            vec![
                judged("b", "budget disagrees", "3. budget", 31, 0.9, None),
                high,
                judged("c", "Low hunch", "3. Budget", 32, 0.3, None),
                judged("c", "Lonely hunch", "7. Risks", 70, 0.3, None),
                judged("d", "Early", "1. Intro", 2, 0.6, None),
            ],
            0.5,
        );
        let titles: Vec<(&str, Severity)> = gated
            .findings
            .iter()
            .map(|f| (f.title.as_str(), f.severity))
            .collect();
        assert_eq!(
            titles,
            [
                ("budget disagrees", Severity::P1),
                ("Early", Severity::P2),
                ("Low hunch", Severity::P2)
            ]
        );
        let merged = &gated.findings[0];
        assert!(merged.evidence.contains("line 30") && merged.evidence.contains("line 31"));
        assert_eq!(merged.confidence, 0.9);
        assert!(gated.findings[2].promoted);
        assert_eq!(gated.residual.len(), 1);
        assert_eq!(gated.residual[0].title, "Lonely hunch");
        assert_eq!(gated.merged, 1);
        // A weak report of a finding's own fingerprint joins it rather than standing apart.
        let folded = synthesize(
            vec![
                judged("a", "Budget disagrees", "3. Budget", 30, 0.9, None),
                judged("b", "budget disagrees", "3. budget", 33, 0.2, None),
            ],
            0.5,
        );
        assert_eq!(folded.findings.len(), 1);
        assert!(folded.residual.is_empty());
        assert_eq!(folded.findings[0].reporters.len(), 2);
        assert!(folded.findings[0].evidence.contains("line 33"));
    }

    #[test]
    fn signals_count_words_headings_and_extensions() {
        let p = pack(&[
            ("plan.md", "# Plan\n## 5. Users and scenarios\nThe user opens the screen.\nscreenshots are not screens\n"),
            ("ui.fig", "binary-ish"),
        ]);
        let s = Signals {
            keywords: vec!["screen".into(), "user".into()],
            headings: vec!["users".into()],
            extensions: vec!["fig".into()],
            min_matches: 1,
        };
        let m = detect(&p, &s);
        assert_eq!(m.matches, 4, "{}", m.detail);
        assert!(m.detail.contains("keyword \"screen\" x1"), "{}", m.detail);
        assert!(
            m.detail.contains("heading \"## 5. Users and scenarios\""),
            "{}",
            m.detail
        );
        let none = detect(
            &p,
            &Signals {
                keywords: vec!["payment".into()],
                ..s
            },
        );
        assert_eq!(none.matches, 2, "{}", none.detail);
    }

    fn safe(id: &str, old: &str, new: &str) -> Finding {
        let j = judged("a", id, "s", 1, 0.9, None);
        let mut f = synthesize(vec![j], 0.5).findings.remove(0);
        f.id = id.into();
        f.routing.autofix_class = Some(AutofixClass::SafeAuto);
        f.routing.autofix = Some(TextFix {
            old: old.into(),
            new: new.into(),
        });
        f
    }

    #[test]
    fn safe_fixes_apply_only_unambiguous_replacements() {
        let p = pack(&[("plan.md", "the job ticket and the work order\nthe the\n")]);
        let mut gated = safe("F3", "the the", "the");
        gated.routing.autofix_class = Some(AutofixClass::GatedAuto);
        let (fixes, files) = plan_safe_fixes(
            &p,
            &[
                safe("F1", "job ticket", "work order"),
                safe("F2", "and the work", "and a work"),
                gated,
                safe("F4", "absent text", "x"),
                safe("F5", "the", "a"),
            ],
        );
        let outcome: Vec<(&str, bool)> = fixes
            .iter()
            .map(|f| (f.finding.as_str(), f.applied))
            .collect();
        assert_eq!(
            outcome,
            [("F1", true), ("F2", true), ("F4", false), ("F5", false)]
        );
        assert!(
            fixes[3].note.contains("occurs 3 times"),
            "{}",
            fixes[3].note
        );
        assert_eq!(
            files["plan.md"],
            "the work order and a work order\nthe the\n"
        );
    }
}
