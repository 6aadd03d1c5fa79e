//! Conformance review (seed 002 §5.4): a spec's acceptance criteria, the judge's verdict on each
//! (met, unmet, divergent), the grounding of that verdict's evidence, and the merge gate.
//!
//! Everything here is deterministic. [`extract`] reads criteria out of a spec's own form —
//! markdown checklists (`- [ ]`, `- [x]`), numbered or identified requirements (`1.`, `R1:`,
//! `REQ-12`, `C3.`) and RFC 2119 lines (an upper-case MUST, SHALL or SHOULD) — and gives each a
//! stable id: the spec's own when it names one, else `C<n>` by position. Only when it finds
//! nothing does the engine ask a model (the flow's criteria stage), and [`normalize_criteria`]
//! reads that answer. A judge's answer is read by [`normalize_judgments`] and checked by
//! [`ground_judgment`] with the same grounding as any finding: a `met` without one grounded
//! quote becomes `unmet`, saying why. [`MergeReadiness`] is `merge-readiness.json`.

use crate::pack::ContextPack;
use crate::parse::lenient_string;
use crate::review::finding::{RawFinding, Routing, Severity};
use crate::review::grounding::{self, Grounding};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// At most this many criteria are taken from one spec; the rest are left out with a note, so
/// one huge spec cannot turn a review into thousands of judge calls.
pub const MAX_CRITERIA: usize = 100;

/// A criterion's text is cut to this many characters.
pub const MAX_CRITERION_CHARS: usize = 600;

/// Evidence items kept per judgment.
pub const MAX_EVIDENCE: usize = 6;

/// The largest spec file read (bytes).
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

/// The acceptance contract of a conformance review: the user's own words, read from a file
/// that need not be inside the target. Recorded with the review's scope, so a resume judges
/// against the same text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// The path the user gave, for the report.
    pub path: String,
    pub text: String,
    /// The spec's path inside the pack when it lies inside the target: the judge does not see
    /// it as target material, and a quote from it is no evidence (the spec cannot prove itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_path: Option<String>,
}

impl Spec {
    /// A spec from its text as a client read it (`path` is what the user gave, for the
    /// report): refused when empty or over [`MAX_SPEC_BYTES`], wherever it was read. Where it
    /// lies in the pack is decided by whoever holds the target ([`Spec::pack_path`]).
    pub fn from_text(path: &str, text: String) -> Result<Spec, String> {
        if text.len() as u64 > MAX_SPEC_BYTES {
            return Err(format!(
                "the spec {path} is {} bytes, over the limit of {MAX_SPEC_BYTES}: pass only the acceptance criteria",
                text.len()
            ));
        }
        if text.trim().is_empty() {
            return Err(format!(
                "the spec {path} is empty: write the acceptance criteria into it"
            ));
        }
        Ok(Spec {
            path: path.to_string(),
            text,
            pack_path: None,
        })
    }
}

/// One adjudicable criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Criterion {
    pub id: String,
    pub text: String,
    /// Line of the spec it starts on (0 when a model extracted it).
    #[serde(default)]
    pub line: u32,
}

/// The verdict on one criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CriterionStatus {
    /// The target does what the criterion asks.
    Met,
    /// Not done.
    Unmet,
    /// Done, but not what was asked: locally defensible code that is the wrong code.
    Divergent,
}

impl CriterionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CriterionStatus::Met => "met",
            CriterionStatus::Unmet => "unmet",
            CriterionStatus::Divergent => "divergent",
        }
    }

    /// Lenient: "MET", "Not met", "partially met" (unmet), "diverges".
    pub fn parse(s: &str) -> Option<CriterionStatus> {
        let t = s.trim().to_ascii_lowercase().replace(['_', '-'], " ");
        if t.starts_with("diverg") || t == "wrong" {
            Some(CriterionStatus::Divergent)
        } else if t == "met" || t == "satisfied" || t == "done" || t == "pass" || t == "yes" {
            Some(CriterionStatus::Met)
        } else if t.contains("unmet")
            || t.contains("not met")
            || t.starts_with("partial")
            || t == "missing"
            || t == "no"
            || t == "fail"
        {
            Some(CriterionStatus::Unmet)
        } else {
            None
        }
    }
}

/// A quote from the target that supports a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    pub file: String,
    #[serde(default)]
    pub line_start: Option<u32>,
    #[serde(default)]
    pub line_end: Option<u32>,
    pub quote: String,
}

/// The judge's verdict on one criterion, after grounding when [`ground_judgment`] ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgment {
    pub id: String,
    pub status: CriterionStatus,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// The judge's reason, and what grounding changed.
    #[serde(default)]
    pub reason: String,
    /// False when no judge answered for it (call failed, criterion missing from the answer).
    #[serde(default = "yes")]
    pub judged: bool,
}

fn yes() -> bool {
    true
}

impl Judgment {
    /// A criterion no judge ruled on: unmet, saying why.
    pub fn not_judged(id: &str, why: impl Into<String>) -> Judgment {
        Judgment {
            id: id.to_string(),
            status: CriterionStatus::Unmet,
            evidence: Vec::new(),
            reason: why.into(),
            judged: false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Extraction

/// A pattern compiled once; `None` only if the literal were invalid (the unit tests compile
/// every one), so a typo degrades extraction instead of panicking.
fn compiled(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

const CHECKLIST: &str = r"^\s*[-*+]\s+\[([ xX])\]\s+(.+)$";
/// `R1:`, `REQ-12`, `C3.`, `**AC-2**:`, `FR 4 -`, also as a bullet.
const IDENTIFIED: &str = r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?([A-Z]{1,6})[-_ ]?(\d{1,4})(?:\*\*|__)?\s*(?:[:.)]|\s-|\s—)\s*(.+)$";
const NUMBERED: &str = r"^\s*(\d{1,4})[.)]\s+(.+)$";
const RFC2119: &str = r"\b(MUST|SHALL|SHOULD|REQUIRED)\b";
const BULLET: &str = r"^\s*(?:[-*+]\s+|\d{1,4}[.)]\s+)";

fn checklist_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&R, CHECKLIST)
}

fn identified_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&R, IDENTIFIED)
}

fn numbered_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&R, NUMBERED)
}

fn rfc2119_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&R, RFC2119)
}

fn bullet_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&R, BULLET)
}

/// What kind of criterion line a spec line is.
enum Start {
    /// Checklist, identified or numbered item: may continue on the next lines.
    Item { id: Option<String>, text: String },
    /// A prose line with an RFC 2119 keyword: just this line.
    Keyword(String),
}

fn classify_line(line: &str) -> Option<Start> {
    let identified = |text: &str| {
        identified_re()
            .and_then(|r| r.captures(text))
            .map(|c| Start::Item {
                id: Some(join_id(&c[1], &c[2], text)),
                text: c[3].to_string(),
            })
    };
    if let Some(c) = checklist_re().and_then(|r| r.captures(line)) {
        let text = c.get(2).map_or("", |m| m.as_str());
        // A checklist item may carry its own id: "- [ ] R3: ...".
        return identified(text).or_else(|| {
            Some(Start::Item {
                id: None,
                text: text.to_string(),
            })
        });
    }
    if let Some(item) = identified(line) {
        return Some(item);
    }
    if let Some(c) = numbered_re().and_then(|r| r.captures(line)) {
        return Some(Start::Item {
            id: None,
            text: c[2].to_string(),
        });
    }
    if rfc2119_re().is_some_and(|r| r.is_match(line)) {
        let text = match bullet_re() {
            Some(r) => r.replace(line, "").into_owned(),
            None => line.to_string(),
        };
        return Some(Start::Keyword(text.trim().to_string()));
    }
    None
}

/// The spec's own id, spelled as it spelled it: "REQ-12" stays "REQ-12", "R1" stays "R1".
fn join_id(prefix: &str, number: &str, line: &str) -> String {
    let dashed = format!("{prefix}-{number}");
    if line.contains(&dashed) {
        dashed
    } else {
        format!("{prefix}{number}")
    }
}

fn clean(text: &str) -> String {
    let t = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let t = t.trim().trim_matches(|c| c == '*' || c == '_').trim();
    if t.chars().count() > MAX_CRITERION_CHARS {
        let mut cut: String = t.chars().take(MAX_CRITERION_CHARS).collect();
        cut.push('…');
        cut
    } else {
        t.to_string()
    }
}

fn is_heading(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('#') || t.chars().all(|c| c == '=' || c == '-') && !t.is_empty()
}

/// The criteria a spec states in a form the engine can read without a model, in spec order,
/// with stable ids; empty when the spec has none of the forms (then a model is asked). At most
/// [`MAX_CRITERIA`]. Code blocks are skipped (a `1.` in an example is not a requirement), an
/// item's text continues on the following lines until a blank line, heading or next item, and
/// the same text stated twice is one criterion.
pub fn extract(spec: &str) -> Vec<Criterion> {
    let mut out: Vec<(Option<String>, String, u32)> = Vec::new();
    let mut in_code = false;
    // Whether the last criterion may take continuation lines.
    let mut open = false;
    for (i, line) in spec.lines().enumerate() {
        let n = i as u32 + 1;
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_code = !in_code;
            open = false;
            continue;
        }
        if in_code || t.is_empty() || is_heading(line) {
            open = false;
            continue;
        }
        match classify_line(line) {
            Some(Start::Item { id, text }) => {
                out.push((id, text, n));
                open = true;
            }
            Some(Start::Keyword(text)) => {
                // A keyword line right under an open item is that item's continuation.
                if open {
                    if let Some(last) = out.last_mut() {
                        last.1.push(' ');
                        last.1.push_str(t);
                        continue;
                    }
                }
                out.push((None, text, n));
                open = false;
            }
            // A plain bullet is not a criterion, nor part of the one before it.
            None if bullet_re().is_some_and(|r| r.is_match(line)) => open = false,
            None if open => {
                if let Some(last) = out.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(t);
                }
            }
            None => {}
        }
    }
    assign_ids(
        out.into_iter()
            .map(|(id, text, line)| (id, clean(&text), line)),
    )
}

/// Give every criterion an id: its own when unique, else `C<n>` (n its 1-based position,
/// bumped past ids the spec already uses). Empty and repeated texts are dropped.
fn assign_ids(items: impl Iterator<Item = (Option<String>, String, u32)>) -> Vec<Criterion> {
    let mut seen_text = BTreeSet::new();
    let items: Vec<_> = items
        .filter(|(_, t, _)| !t.is_empty() && seen_text.insert(t.to_lowercase()))
        .take(MAX_CRITERIA)
        .collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut own: Vec<Option<String>> = Vec::with_capacity(items.len());
    for (id, _, _) in &items {
        own.push(id.clone().filter(|id| used.insert(id.clone())));
    }
    let mut out = Vec::with_capacity(items.len());
    for (k, ((_, text, line), id)) in items.into_iter().zip(own).enumerate() {
        let id = id.unwrap_or_else(|| {
            let mut n = k + 1;
            while used.contains(&format!("C{n}")) {
                n += 1;
            }
            let id = format!("C{n}");
            used.insert(id.clone());
            id
        });
        out.push(Criterion { id, text, line });
    }
    out
}

/// Criteria from a model's answer (the fallback extraction): each object's `text` (or
/// `criterion`/`description`), ids assigned like [`extract`]'s.
pub fn normalize_criteria(values: &[Value]) -> Vec<Criterion> {
    let items = values.iter().filter_map(|v| {
        let text = match v {
            Value::String(s) => Some(s.clone()),
            _ => ["text", "criterion", "description", "requirement"]
                .iter()
                .find_map(|k| v.get(*k).and_then(lenient_string)),
        }?;
        let id = v
            .get("id")
            .and_then(lenient_string)
            .map(|s| s.trim().to_string())
            .filter(|s| {
                !s.is_empty()
                    && s.len() <= 16
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        Some((id, clean(&text), 0))
    });
    assign_ids(items)
}

// ---------------------------------------------------------------------------------------------
// Judging

/// Output schema of the criteria stage (the fallback extraction).
pub fn criteria_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"criteria": {"type": "array", "items": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]}}},
        "required": ["criteria"]
    })
}

/// Output schema of one judge call for the criteria `ids` of its batch: constrained decoding
/// can then only name those.
pub fn judgments_schema(ids: &[&str]) -> Value {
    let id = if ids.is_empty() {
        json!({"type": "string"})
    } else {
        json!({"type": "string", "enum": ids})
    };
    json!({
        "type": "object",
        "properties": {"judgments": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "id": id,
                "status": {"type": "string", "enum": ["met", "unmet", "divergent"]},
                "reason": {"type": "string"},
                "evidence": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string"},
                        "line_start": {"type": "integer"},
                        "line_end": {"type": "integer"},
                        "quote": {"type": "string"}},
                    "required": ["file", "quote"]}}},
            "required": ["id", "status", "reason", "evidence"]}}},
        "required": ["judgments"]
    })
}

pub(crate) fn line_of(v: Option<&Value>) -> Option<u32> {
    match v? {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(crate) fn evidence_of(v: &Value) -> Option<Evidence> {
    let file = ["file", "path"]
        .iter()
        .find_map(|k| v.get(*k).and_then(lenient_string))?;
    let quote = ["quote", "evidence", "text", "code"]
        .iter()
        .find_map(|k| v.get(*k).and_then(lenient_string))
        .unwrap_or_default();
    let start = line_of(v.get("line_start").or_else(|| v.get("line")));
    Some(Evidence {
        file: file.trim().to_string(),
        line_start: start,
        line_end: line_of(v.get("line_end")).or(start),
        quote,
    })
}

/// Read a judge's answer for one batch: one judgment per criterion of the batch, in batch
/// order. A criterion the answer does not rule on, or rules on with an unreadable status, is
/// unmet and not judged, with the reason; answers about ids outside the batch are ignored.
pub fn normalize_judgments(values: &[Value], batch: &[Criterion]) -> Vec<Judgment> {
    batch
        .iter()
        .map(|c| {
            let Some(v) = values.iter().find(|v| {
                v.get("id")
                    .and_then(lenient_string)
                    .is_some_and(|id| id.trim().eq_ignore_ascii_case(&c.id))
            }) else {
                return Judgment::not_judged(&c.id, "the judge's answer did not rule on it");
            };
            let raw = v
                .get("status")
                .or_else(|| v.get("verdict"))
                .and_then(lenient_string)
                .unwrap_or_default();
            let Some(status) = CriterionStatus::parse(&raw) else {
                return Judgment::not_judged(
                    &c.id,
                    format!("the judge's status {raw:?} is not met, unmet or divergent"),
                );
            };
            let evidence = match v.get("evidence") {
                Some(Value::Array(a)) => a.iter().filter_map(evidence_of).collect(),
                Some(o @ Value::Object(_)) => evidence_of(o).into_iter().collect(),
                _ => Vec::new(),
            };
            Judgment {
                id: c.id.clone(),
                status,
                evidence: evidence.into_iter().take(MAX_EVIDENCE).collect(),
                reason: v
                    .get("reason")
                    .and_then(lenient_string)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
                judged: true,
            }
        })
        .collect()
}

/// Ground quoted evidence against the pack the way every finding is grounded: a quote kept is
/// found where it says (lines corrected to where it really is); the others are refused with
/// the reason. A quote from `refuse_path` (a spec inside the target) is refused outright.
pub fn ground_evidence(
    evidence: Vec<Evidence>,
    pack: &ContextPack,
    refuse_path: Option<&str>,
) -> (Vec<Evidence>, Vec<String>) {
    let mut kept = Vec::new();
    let mut refused = Vec::new();
    for e in evidence {
        let resolved = pack.resolve(&e.file).ok().map(|f| f.path.as_str());
        if resolved.is_some() && resolved == refuse_path {
            refused.push(format!(
                "{}: a quote from the spec itself proves nothing",
                e.file
            ));
            continue;
        }
        let probe = RawFinding {
            title: String::new(),
            severity: Severity::P2,
            confidence: 1.0,
            category: String::new(),
            file: Some(e.file.clone()),
            line_start: e.line_start,
            line_end: e.line_end,
            symbol: None,
            evidence: e.quote.clone(),
            why_it_matters: String::new(),
            suggested_fix: String::new(),
            routing: Routing::default(),
        };
        match grounding::ground(&probe, pack) {
            Grounding::Grounded { corrected, .. } => {
                let (a, b) = corrected
                    .map(|(a, b)| (Some(a), Some(b)))
                    .unwrap_or((e.line_start, e.line_end));
                let file = pack
                    .resolve(&e.file)
                    .map(|f| f.path.clone())
                    .unwrap_or(e.file);
                kept.push(Evidence {
                    file,
                    line_start: a,
                    line_end: b,
                    quote: e.quote,
                });
            }
            Grounding::Decided { reason, .. } => refused.push(format!("{}: {reason}", e.file)),
        }
    }
    (kept, refused)
}

/// Check a judgment's evidence against the pack with the grounding every finding gets: quotes
/// that are not where they say (or not in the target at all) are dropped, lines are corrected
/// to where the quote really is. A `met` left with no grounded quote is `unmet`: a claim that
/// the work is done needs the code that does it. An `unmet` needs no quote (absence cannot be
/// quoted); a `divergent` blocks the merge whatever its evidence, so it stays divergent with a
/// note when none grounded. `spec_path` is the spec's own path in the pack, if it is there:
/// a quote from the spec is refused.
pub fn ground_judgment(mut j: Judgment, pack: &ContextPack, spec_path: Option<&str>) -> Judgment {
    let (kept, refused) = ground_evidence(std::mem::take(&mut j.evidence), pack, spec_path);
    j.evidence = kept;
    let note =
        (!refused.is_empty()).then(|| format!("evidence not grounded ({})", refused.join("; ")));
    if j.status == CriterionStatus::Met && j.evidence.is_empty() {
        j.status = CriterionStatus::Unmet;
        let why = note.unwrap_or_else(|| "no evidence quoted".to_string());
        j.reason = format!(
            "judged met without grounded evidence, so unmet: {why}{}",
            if j.reason.is_empty() {
                String::new()
            } else {
                format!(" (the judge said: {})", j.reason)
            }
        );
    } else if let Some(note) = note {
        j.reason = if j.reason.is_empty() {
            note
        } else {
            format!("{}; {note}", j.reason)
        };
    }
    j
}

// ---------------------------------------------------------------------------------------------
// The gate

/// One criterion as `merge-readiness.json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CriterionResult {
    pub id: String,
    pub text: String,
    pub status: CriterionStatus,
    pub evidence: Vec<Evidence>,
    /// The files its grounded evidence is in.
    pub files: Vec<String>,
    pub reason: String,
    /// False when no judge ruled on it (then it is unmet).
    pub judged: bool,
}

/// `merge-readiness.json`: every criterion's verdict and the gate. `ready` only when the
/// review completed, there was at least one criterion, and every one is met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeReadiness {
    pub criteria: Vec<CriterionResult>,
    pub ready: bool,
    /// The spec's path as given.
    pub spec: String,
    /// "deterministic" (read from the spec's form) or "model" (the criteria stage).
    pub extraction: String,
    /// Why the gate is closed when it is not only the statuses: a partial review, no criteria.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl MergeReadiness {
    /// Build the gate from the criteria and what is known of their verdicts; a criterion with
    /// no judgment is unmet and not judged.
    pub fn build(
        spec: &str,
        by_model: bool,
        criteria: &[Criterion],
        judgments: &std::collections::BTreeMap<String, Judgment>,
    ) -> MergeReadiness {
        let criteria: Vec<CriterionResult> = criteria
            .iter()
            .map(|c| {
                let j = judgments
                    .get(&c.id)
                    .cloned()
                    .unwrap_or_else(|| Judgment::not_judged(&c.id, "not judged"));
                let mut files: Vec<String> = j.evidence.iter().map(|e| e.file.clone()).collect();
                files.sort();
                files.dedup();
                CriterionResult {
                    id: c.id.clone(),
                    text: c.text.clone(),
                    status: j.status,
                    evidence: j.evidence,
                    files,
                    reason: j.reason,
                    judged: j.judged,
                }
            })
            .collect();
        let ready =
            !criteria.is_empty() && criteria.iter().all(|c| c.status == CriterionStatus::Met);
        MergeReadiness {
            note: if criteria.is_empty() {
                "no acceptance criteria were found in the spec".to_string()
            } else {
                String::new()
            },
            criteria,
            ready,
            spec: spec.to_string(),
            extraction: if by_model { "model" } else { "deterministic" }.to_string(),
        }
    }

    /// Close the gate for a reason beyond the statuses (the review did not complete).
    pub fn close(&mut self, why: &str) {
        self.ready = false;
        if self.note.is_empty() {
            self.note = why.to_string();
        } else {
            self.note = format!("{}; {why}", self.note);
        }
    }

    /// How many criteria have each status: (met, unmet, divergent).
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |s| self.criteria.iter().filter(|c| c.status == s).count();
        (
            n(CriterionStatus::Met),
            n(CriterionStatus::Unmet),
            n(CriterionStatus::Divergent),
        )
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn ids(c: &[Criterion]) -> Vec<&str> {
        c.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn patterns_compile() {
        for p in [CHECKLIST, IDENTIFIED, NUMBERED, RFC2119, BULLET] {
            assert!(Regex::new(p).is_ok(), "{p}");
        }
        assert!(checklist_re().is_some() && identified_re().is_some() && bullet_re().is_some());
    }

    #[test]
    fn checklists_checked_or_not_are_criteria() {
        let spec = "# Done when\n\n- [ ] Requests beyond the limit get HTTP 429.\n- [x] The limit is configurable.\n* [X] Retry-After is set.\n- not a criterion\n";
        let c = extract(spec);
        assert_eq!(ids(&c), ["C1", "C2", "C3"]);
        assert_eq!(c[0].text, "Requests beyond the limit get HTTP 429.");
        assert_eq!(c[1].line, 4);
        assert_eq!(c[2].text, "Retry-After is set.");
    }

    #[test]
    fn identified_requirements_keep_their_own_ids() {
        let spec = "R1: the API returns 429.\nREQ-12 - the limit is read from config\n**AC-3**: logs are structured\nC4. Existing callers are\nunaffected (no regression).\n";
        let c = extract(spec);
        assert_eq!(ids(&c), ["R1", "REQ-12", "AC-3", "C4"]);
        assert_eq!(c[1].text, "the limit is read from config");
        // The item continues on the next line until a blank line or the next item.
        assert_eq!(
            c[3].text,
            "Existing callers are unaffected (no regression)."
        );
    }

    #[test]
    fn numbered_items_and_rfc2119_lines() {
        let spec = "Intro prose that should not count (lower case).\n\n1. Add a /health endpoint.\n2) It returns JSON.\n\nThe service MUST log every request.\nClients SHOULD retry.\nThe word must in lower case is prose.\n";
        let c = extract(spec);
        assert_eq!(ids(&c), ["C1", "C2", "C3", "C4"]);
        assert_eq!(c[0].text, "Add a /health endpoint.");
        assert_eq!(c[2].text, "The service MUST log every request.");
        assert_eq!(c[3].text, "Clients SHOULD retry.");
    }

    #[test]
    fn generated_ids_skip_ids_the_spec_uses_and_are_stable() {
        let spec = "- [ ] first\nC1: explicit one\n- [ ] third\n";
        let c = extract(spec);
        assert_eq!(ids(&c), ["C2", "C1", "C3"]);
        assert_eq!(extract(spec), c, "the same spec gives the same ids");
        // A duplicated own id is generated instead of repeated.
        let c = extract("R1: a\nR1: b\n");
        assert_eq!(ids(&c), ["R1", "C2"]);
    }

    #[test]
    fn code_blocks_headings_and_duplicates_are_skipped() {
        let spec = "## Steps\n```\n1. not a requirement\nx MUST y\n```\n- [ ] The thing MUST work.\n- [ ] The thing MUST work.\n";
        let c = extract(spec);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].text, "The thing MUST work.");
    }

    #[test]
    fn prose_without_any_form_yields_nothing_so_a_model_is_asked() {
        assert!(extract("We would like the service to be faster and nicer.\n\nThanks!").is_empty());
        assert!(extract("").is_empty());
    }

    #[test]
    fn extraction_is_bounded() {
        let spec: String = (1..=500).map(|i| format!("- [ ] item {i}\n")).collect();
        let c = extract(&spec);
        assert_eq!(c.len(), MAX_CRITERIA);
        let long = format!("- [ ] {}", "word ".repeat(1000));
        assert!(extract(&long)[0].text.chars().count() <= MAX_CRITERION_CHARS + 1);
    }

    #[test]
    fn model_criteria_are_normalised() {
        let v = vec![
            json!({"text": "  first   thing "}),
            json!("second thing"),
            json!({"id": "REQ-7", "criterion": "third"}),
            json!({"id": "bad id with spaces", "text": "fourth"}),
            json!({"nothing": 1}),
            json!({"text": ""}),
        ];
        let c = normalize_criteria(&v);
        assert_eq!(ids(&c), ["C1", "C2", "REQ-7", "C4"]);
        assert_eq!(c[0].text, "first thing");
    }

    #[test]
    fn the_judge_schema_names_only_the_batch() {
        let s = judgments_schema(&["C1", "REQ-2"]);
        let id = &s["properties"]["judgments"]["items"]["properties"]["id"];
        assert_eq!(id["enum"], json!(["C1", "REQ-2"]));
        let status = &s["properties"]["judgments"]["items"]["properties"]["status"];
        assert_eq!(status["enum"], json!(["met", "unmet", "divergent"]));
        assert!(
            judgments_schema(&[])["properties"]["judgments"]["items"]["properties"]["id"]
                .get("enum")
                .is_none()
        );
    }

    #[test]
    fn statuses_parse_leniently() {
        assert_eq!(CriterionStatus::parse("MET"), Some(CriterionStatus::Met));
        assert_eq!(
            CriterionStatus::parse("not met"),
            Some(CriterionStatus::Unmet)
        );
        assert_eq!(
            CriterionStatus::parse("partially_met"),
            Some(CriterionStatus::Unmet)
        );
        assert_eq!(
            CriterionStatus::parse("Divergent"),
            Some(CriterionStatus::Divergent)
        );
        assert_eq!(CriterionStatus::parse("maybe"), None);
    }

    fn batch() -> Vec<Criterion> {
        extract("- [ ] one thing here\n- [ ] two thing here\n- [ ] three thing here\n")
    }

    #[test]
    fn judgments_follow_the_batch_and_missing_ones_are_unmet() {
        let v = vec![
            json!({"id": "c2", "status": "divergent", "reason": "hard-coded",
                   "evidence": [{"file": "a.py", "line_start": "2", "quote": "LIMIT = 5"}]}),
            json!({"id": "C1", "status": "met", "reason": "done", "evidence": {"file": "a.py", "line": 1, "quote": "x"}}),
            json!({"id": "C9", "status": "met"}),
        ];
        let j = normalize_judgments(&v, &batch());
        assert_eq!(j.len(), 3);
        assert_eq!(j[0].status, CriterionStatus::Met);
        assert_eq!(j[0].evidence[0].line_start, Some(1));
        assert_eq!(j[1].status, CriterionStatus::Divergent);
        assert_eq!(j[1].evidence[0].line_end, Some(2));
        assert_eq!(j[2].status, CriterionStatus::Unmet);
        assert!(!j[2].judged);
        let bad = normalize_judgments(&[json!({"id": "C1", "status": "perhaps"})], &batch()[..1]);
        assert_eq!(bad[0].status, CriterionStatus::Unmet);
        assert!(bad[0].reason.contains("perhaps"), "{}", bad[0].reason);
    }

    fn pack() -> ContextPack {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("limits.py"),
            "import os\n\nRATE_LIMIT = int(os.environ.get(\"RATE_LIMIT\", \"60\"))\n\ndef check(n):\n    return n <= RATE_LIMIT\n",
        )
        .unwrap();
        let p = ContextPack::snapshot(dir.path(), &Default::default()).unwrap();
        let _ = PathBuf::from(dir.path());
        p
    }

    fn ground_judgment_t(j: Judgment, p: &ContextPack) -> Judgment {
        ground_judgment(j, p, None)
    }

    #[test]
    fn a_quote_from_the_spec_itself_is_no_evidence() {
        let p = pack();
        let j = met("limits.py", 3, "RATE_LIMIT = int(os.environ.get(");
        let j = ground_judgment(j, &p, Some("limits.py"));
        assert_eq!(j.status, CriterionStatus::Unmet);
        assert!(j.reason.contains("spec itself"), "{}", j.reason);
    }

    fn met(file: &str, line: u32, quote: &str) -> Judgment {
        Judgment {
            id: "C1".into(),
            status: CriterionStatus::Met,
            evidence: vec![Evidence {
                file: file.into(),
                line_start: Some(line),
                line_end: Some(line),
                quote: quote.into(),
            }],
            reason: "it is configurable".into(),
            judged: true,
        }
    }

    #[test]
    fn met_with_grounded_evidence_stays_met_and_lines_are_corrected() {
        let p = pack();
        let j = ground_judgment_t(met("limits.py", 4, "RATE_LIMIT = int(os.environ.get("), &p);
        assert_eq!(j.status, CriterionStatus::Met, "{}", j.reason);
        assert_eq!(j.evidence.len(), 1);
        assert_eq!(
            j.evidence[0].line_start,
            Some(3),
            "moved to where the quote is"
        );
    }

    #[test]
    fn met_with_fabricated_evidence_becomes_unmet_with_the_reason() {
        let p = pack();
        let j = ground_judgment_t(met("limits.py", 3, "RATE_LIMIT = load_from_redis()"), &p);
        assert_eq!(j.status, CriterionStatus::Unmet);
        assert!(j.evidence.is_empty());
        assert!(
            j.reason.contains("without grounded evidence") && j.reason.contains("limits.py"),
            "{}",
            j.reason
        );
        let j = ground_judgment_t(met("nowhere.py", 1, "RATE_LIMIT = int(os"), &p);
        assert_eq!(j.status, CriterionStatus::Unmet);
        let mut none = met("limits.py", 1, "");
        none.evidence.clear();
        let j = ground_judgment_t(none, &p);
        assert_eq!(j.status, CriterionStatus::Unmet);
        assert!(j.reason.contains("no evidence quoted"), "{}", j.reason);
    }

    #[test]
    fn divergent_and_unmet_keep_their_status_without_evidence() {
        let p = pack();
        let mut d = met("limits.py", 3, "something invented here");
        d.status = CriterionStatus::Divergent;
        let j = ground_judgment_t(d, &p);
        assert_eq!(j.status, CriterionStatus::Divergent);
        assert!(j.reason.contains("evidence not grounded"), "{}", j.reason);
        let mut u = met("limits.py", 3, "x");
        u.status = CriterionStatus::Unmet;
        u.evidence.clear();
        assert_eq!(ground_judgment_t(u, &p).status, CriterionStatus::Unmet);
    }

    #[test]
    fn the_gate_is_open_only_when_every_criterion_is_met() {
        let c = batch();
        let mut judged = BTreeMap::new();
        for x in &c {
            let mut j = met("a", 1, "q");
            j.id = x.id.clone();
            judged.insert(x.id.clone(), j);
        }
        let all = MergeReadiness::build("spec.md", false, &c, &judged);
        assert!(all.ready);
        assert_eq!(all.counts(), (3, 0, 0));
        assert_eq!(all.criteria[0].files, ["a"]);
        let v: Value = serde_json::from_str(&all.to_json()).unwrap();
        for k in ["id", "text", "status", "evidence", "files"] {
            assert!(v["criteria"][0].get(k).is_some(), "{k}");
        }
        assert_eq!(v["ready"], true);

        judged.get_mut("C2").unwrap().status = CriterionStatus::Divergent;
        assert!(!MergeReadiness::build("spec.md", false, &c, &judged).ready);
        judged.remove("C2");
        let missing = MergeReadiness::build("spec.md", false, &c, &judged);
        assert!(!missing.ready);
        assert_eq!(missing.criteria[1].status, CriterionStatus::Unmet);
        assert!(!missing.criteria[1].judged);

        let empty = MergeReadiness::build("spec.md", true, &[], &BTreeMap::new());
        assert!(!empty.ready, "no criteria is not a pass");
        assert!(!empty.note.is_empty());

        let mut closed = all.clone();
        closed.close("the review is partial");
        assert!(!closed.ready);
        assert!(closed.note.contains("partial"));
    }
}
