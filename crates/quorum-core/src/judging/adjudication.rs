//! Finish review (seed 002 §5.3): a prior review's findings, the author's dispositions of them,
//! and the independent ruling on each against the current tree — `fixed`, `still_present`,
//! `disputed_accepted` or `disputed_rejected` — with the findings the new review made apart.
//!
//! Three judgments stay separate: what was found (the prior report, read by [`parse_prior`]),
//! what the author says (the dispositions file, read by [`parse_dispositions`]) and what the
//! adjudicator rules. Everything here is deterministic: [`precheck`] looks at the current tree
//! before any model does (file gone: fixed, no judge call; the prior evidence still there
//! verbatim: a strong signal), [`normalize_rulings`] reads the judge's answer, and [`settle`]
//! grounds it: a finding ruled still standing needs a quote found in the current tree (the
//! judge's, else the pre-check's), and a `fixed` ruled while the exact evidence is still there
//! is downgraded to standing. [`Adjudication::mark_new`] sets apart the new review's findings
//! that match no prior finding's anchor.

use crate::error::PriorError;
use crate::judging::conformance::{evidence_of, ground_evidence, Evidence, MAX_EVIDENCE};
use crate::pack::ContextPack;
use crate::parse::lenient_string;
use crate::review::finding::{Finding, Severity};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The largest prior report or dispositions file read (bytes).
pub const MAX_PRIOR_BYTES: u64 = 8 << 20;

/// At most this many prior findings are adjudicated; a larger prior report is refused (a usage
/// error), so one report cannot turn a review into thousands of judge calls.
pub const MAX_PRIOR_FINDINGS: usize = 500;

/// A prior finding's text fields are cut to this many characters before they reach a prompt.
pub const MAX_FIELD_CHARS: usize = 1200;

/// Lines either side of a prior finding's cited lines that the pre-check and the judge look at:
/// code moves a little between reviews.
pub const NEAR_LINES: u32 = 30;

/// What the author says about a prior finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// The author says it is fixed (checked like any other: the tree decides).
    Fixed,
    /// Acknowledged, left as is (it still counts where it stands).
    WontFix,
    /// Deferred to later work (it still counts where it stands).
    Deferred,
    /// The author says it is not a problem: the judge weighs the argument.
    Disputed,
}

impl Disposition {
    pub const ALL: [Disposition; 4] = [
        Disposition::Fixed,
        Disposition::WontFix,
        Disposition::Deferred,
        Disposition::Disputed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Fixed => "fixed",
            Disposition::WontFix => "wont_fix",
            Disposition::Deferred => "deferred",
            Disposition::Disputed => "disputed",
        }
    }

    /// "fixed", "wont_fix" / "won't fix" / "wontfix", "deferred", "disputed" / "dispute".
    pub fn parse(s: &str) -> Option<Disposition> {
        let t: String = s
            .trim()
            .to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        match t.as_str() {
            "fixed" | "resolved" | "done" => Some(Disposition::Fixed),
            "wontfix" | "wontdo" | "accepted" | "acknowledged" => Some(Disposition::WontFix),
            "deferred" | "defer" | "later" => Some(Disposition::Deferred),
            "disputed" | "dispute" | "notabug" | "falsepositive" => Some(Disposition::Disputed),
            _ => None,
        }
    }
}

/// The author's note on one prior finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorNote {
    pub disposition: Disposition,
    #[serde(default)]
    pub comment: String,
}

/// One finding of the prior report, as the adjudicator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorFinding {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line_start: Option<u32>,
    #[serde(default)]
    pub line_end: Option<u32>,
    /// The prior finding's quoted evidence (what the pre-check looks for).
    #[serde(default)]
    pub evidence: String,
    #[serde(default)]
    pub why_it_matters: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<AuthorNote>,
}

impl PriorFinding {
    pub fn disputed(&self) -> bool {
        self.note
            .as_ref()
            .is_some_and(|n| n.disposition == Disposition::Disputed)
    }
}

/// The prior review a finish review adjudicates: recorded with the review's scope, so a resume
/// adjudicates the same findings with the same dispositions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prior {
    /// The path the user gave (`--prior`), for the report.
    pub path: String,
    /// The dispositions file (`--dispositions`), when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispositions: Option<String>,
    pub findings: Vec<PriorFinding>,
}

impl Prior {
    /// The prior review from the texts of its report.json and dispositions file (YAML or
    /// JSON), as a client read them: one place decides what a usable prior is, whether the
    /// files were read here or came over the API. Each text is bounded by [`MAX_PRIOR_BYTES`].
    pub fn from_texts(
        path: &str,
        report: &str,
        dispositions: Option<(&str, &str)>,
    ) -> Result<Prior, PriorError> {
        if report.len() as u64 > MAX_PRIOR_BYTES {
            return Err(PriorError::Report(format!(
                "it is {} bytes, over the limit of {MAX_PRIOR_BYTES}",
                report.len()
            )));
        }
        let mut findings = parse_prior(report)?;
        if let Some((_, text)) = dispositions {
            if text.len() as u64 > MAX_PRIOR_BYTES {
                return Err(PriorError::Dispositions(format!(
                    "it is {} bytes, over the limit of {MAX_PRIOR_BYTES}",
                    text.len()
                )));
            }
            let notes = parse_dispositions(text, &findings)?;
            for f in &mut findings {
                f.note = notes.get(&f.id).cloned();
            }
        }
        Ok(Prior {
            path: path.to_string(),
            dispositions: dispositions.map(|(p, _)| p.to_string()),
            findings,
        })
    }
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_FIELD_CHARS).collect()
}

/// Read a prior quorum report.json: its `findings` with their ids, titles, severities and
/// anchors. Anything that is not a quorum report (no `schema_version`, no `findings` array, a
/// finding without an id, title or readable severity, a repeated id) is refused saying what.
pub fn parse_prior(text: &str) -> Result<Vec<PriorFinding>, PriorError> {
    let bad = |m: String| PriorError::Report(m);
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("it is not JSON ({e})")))?;
    if v.get("schema_version").and_then(Value::as_u64).is_none() {
        return Err(bad(
            "it has no schema_version: it is not a quorum report.json".into(),
        ));
    }
    let Some(list) = v.get("findings").and_then(Value::as_array) else {
        return Err(bad("it has no findings array".into()));
    };
    if list.len() > MAX_PRIOR_FINDINGS {
        return Err(bad(format!(
            "it has {} findings, over the limit of {MAX_PRIOR_FINDINGS}",
            list.len()
        )));
    }
    let mut out: Vec<PriorFinding> = Vec::new();
    for (i, f) in list.iter().enumerate() {
        let field = |k: &str| {
            f.get(k)
                .and_then(lenient_string)
                .map(|s| s.trim().to_string())
        };
        let id = field("id").ok_or_else(|| bad(format!("finding {} has no id", i + 1)))?;
        let title = field("title").ok_or_else(|| bad(format!("finding {id} has no title")))?;
        let severity = field("severity")
            .and_then(|s| Severity::parse_lenient(&s))
            .ok_or_else(|| bad(format!("finding {id} has no severity P0-P3")))?;
        if out.iter().any(|p| p.id == id) {
            return Err(bad(format!("finding id {id} appears twice")));
        }
        let line = |k: &str| crate::judging::conformance::line_of(f.get(k));
        out.push(PriorFinding {
            id,
            title: cut(&title),
            severity,
            file: field("file"),
            line_start: line("line_start"),
            line_end: line("line_end").or(line("line_start")),
            evidence: cut(&field("evidence").unwrap_or_default()),
            why_it_matters: cut(&field("why_it_matters").unwrap_or_default()),
            note: None,
        });
    }
    Ok(out)
}

/// Read a dispositions file (YAML or JSON, DESIGN-style): a map from prior finding id to
/// `{disposition: fixed|wont_fix|deferred|disputed, comment: "..."}`, optionally under a
/// top-level `dispositions:` key. An id the prior report does not have, or a disposition that
/// is not one of those, is refused saying which.
pub fn parse_dispositions(
    text: &str,
    prior: &[PriorFinding],
) -> Result<BTreeMap<String, AuthorNote>, PriorError> {
    let bad = |m: String| PriorError::Dispositions(m);
    let v: Value =
        serde_yaml::from_str(text).map_err(|e| bad(format!("it is not YAML or JSON ({e})")))?;
    let map = match v.get("dispositions").unwrap_or(&v) {
        Value::Object(m) => m.clone(),
        Value::Null => serde_json::Map::new(),
        _ => {
            return Err(bad(
                "it is not a map of finding id to {disposition, comment}".into(),
            ))
        }
    };
    let mut out = BTreeMap::new();
    for (id, entry) in map {
        let Some(known) = prior.iter().find(|p| p.id.eq_ignore_ascii_case(id.trim())) else {
            return Err(bad(format!(
                "it names {id}, which the prior report has no finding for"
            )));
        };
        let (raw, comment) = match &entry {
            Value::String(s) => (s.clone(), String::new()),
            Value::Object(o) => (
                o.get("disposition")
                    .or_else(|| o.get("status"))
                    .and_then(lenient_string)
                    .unwrap_or_default(),
                o.get("comment")
                    .or_else(|| o.get("reason"))
                    .and_then(lenient_string)
                    .unwrap_or_default(),
            ),
            _ => (String::new(), String::new()),
        };
        let disposition = Disposition::parse(&raw).ok_or_else(|| {
            let all: Vec<&str> = Disposition::ALL.iter().map(|d| d.as_str()).collect();
            bad(format!(
                "{id}: disposition {raw:?} is not one of {}",
                all.join(", ")
            ))
        })?;
        out.insert(
            known.id.clone(),
            AuthorNote {
                disposition,
                comment: cut(comment.trim()),
            },
        );
    }
    Ok(out)
}

/// What the engine sees in the current tree before any model does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PreCheck {
    /// The cited file is not in the current tree: fixed, no judge call.
    FileGone,
    /// The prior evidence is still in the file verbatim (trimmed lines, in order) at `line`.
    EvidencePresent { line: u32, quote: String },
    /// The file is there, the prior evidence is not.
    EvidenceGone,
    /// The prior finding cites no file or quotes nothing: only the judge can tell.
    NoAnchor,
}

impl PreCheck {
    /// One line for the judge's prompt and the report.
    pub fn describe(&self) -> String {
        match self {
            PreCheck::FileGone => "the cited file is no longer in the tree".into(),
            PreCheck::EvidencePresent { line, .. } => {
                format!("the prior evidence is still in the file verbatim at line {line}")
            }
            PreCheck::EvidenceGone => {
                "the file is there; the prior evidence is no longer in it verbatim".into()
            }
            PreCheck::NoAnchor => "the prior finding has no file or evidence to look for".into(),
        }
    }
}

/// Look for a prior finding in the current tree: its file, then its evidence's non-empty lines
/// (trimmed, consecutive) anywhere in the file, the occurrence nearest its cited lines winning.
pub fn precheck(f: &PriorFinding, pack: &ContextPack) -> PreCheck {
    let Some(path) = f.file.as_deref().filter(|p| !p.trim().is_empty()) else {
        return PreCheck::NoAnchor;
    };
    let Ok(file) = pack.resolve(path) else {
        return PreCheck::FileGone;
    };
    let wanted: Vec<&str> = f
        .evidence
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if wanted.is_empty() {
        return PreCheck::NoAnchor;
    }
    let lines: Vec<&str> = file.content.lines().map(str::trim).collect();
    let cited = f.line_start.unwrap_or(1);
    let mut best: Option<usize> = None;
    for i in 0..lines.len().saturating_sub(wanted.len() - 1) {
        if lines[i..i + wanted.len()] == wanted[..] {
            let dist = |k: usize| (k as i64 + 1 - i64::from(cited)).unsigned_abs();
            if best.is_none_or(|b| dist(i) < dist(b)) {
                best = Some(i);
            }
        }
    }
    match best {
        Some(i) => PreCheck::EvidencePresent {
            line: u32::try_from(i + 1).unwrap_or(u32::MAX),
            quote: file
                .content
                .lines()
                .skip(i)
                .take(wanted.len())
                .collect::<Vec<_>>()
                .join("\n"),
        },
        None => PreCheck::EvidenceGone,
    }
}

/// The ruling on one prior finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Fixed,
    StillPresent,
    DisputedAccepted,
    DisputedRejected,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Fixed,
        Status::StillPresent,
        Status::DisputedAccepted,
        Status::DisputedRejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Fixed => "fixed",
            Status::StillPresent => "still_present",
            Status::DisputedAccepted => "disputed_accepted",
            Status::DisputedRejected => "disputed_rejected",
        }
    }

    /// Whether the finding still stands (it gates the merge at/above `--fail-on`).
    pub fn stands(self) -> bool {
        matches!(self, Status::StillPresent | Status::DisputedRejected)
    }

    /// Lenient: "still present", "STILL_PRESENT", "present", "accepted", "rejected".
    pub fn parse(s: &str) -> Option<Status> {
        let t = s.trim().to_ascii_lowercase().replace(['_', '-'], " ");
        if t.contains("reject") {
            Some(Status::DisputedRejected)
        } else if t.contains("accept") {
            Some(Status::DisputedAccepted)
        } else if t.contains("still") || t == "present" || t == "open" || t == "unfixed" {
            Some(Status::StillPresent)
        } else if t == "fixed" || t == "resolved" || t == "gone" {
            Some(Status::Fixed)
        } else {
            None
        }
    }
}

/// The adjudication of one prior finding (report.json `adjudication.findings[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Adjudged {
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub file: Option<String>,
    pub severity: Severity,
    /// The author's disposition, when the dispositions file gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disposition: Option<Disposition>,
    pub status: Status,
    /// The judge's reason, and what the engine changed (grounding, downgrades).
    pub reason: String,
    /// Quotes from the current tree, grounded.
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// Who ruled: "judge" or "pre-check" (a deterministic ruling, no model call).
    pub decided_by: String,
    /// False when no judge ruled (call failed, finding missing from the answer): the review
    /// is partial and the finding is counted as still present.
    #[serde(default = "yes")]
    pub judged: bool,
}

fn yes() -> bool {
    true
}

impl Adjudged {
    fn from_prior(f: &PriorFinding, status: Status, reason: String, by: &str) -> Adjudged {
        Adjudged {
            id: f.id.clone(),
            title: f.title.clone(),
            file: f.file.clone(),
            severity: f.severity,
            disposition: f.note.as_ref().map(|n| n.disposition),
            status,
            reason,
            evidence: Vec::new(),
            decided_by: by.to_string(),
            judged: true,
        }
    }

    /// A finding no judge ruled on: counted as standing (it cannot be called fixed unseen).
    pub fn not_judged(f: &PriorFinding, why: impl Into<String>) -> Adjudged {
        let status = if f.disputed() {
            Status::DisputedRejected
        } else {
            Status::StillPresent
        };
        Adjudged {
            judged: false,
            ..Adjudged::from_prior(f, status, why.into(), "judge")
        }
    }

    /// The deterministic ruling when the pre-check alone decides (the file is gone).
    pub fn by_precheck(f: &PriorFinding, pre: &PreCheck) -> Option<Adjudged> {
        (*pre == PreCheck::FileGone)
            .then(|| Adjudged::from_prior(f, Status::Fixed, pre.describe(), "pre-check"))
    }
}

/// Output schema of one judge call for the prior findings `ids` of its batch.
pub fn rulings_schema(ids: &[&str]) -> Value {
    let id = if ids.is_empty() {
        json!({"type": "string"})
    } else {
        json!({"type": "string", "enum": ids})
    };
    let statuses: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
    json!({
        "type": "object",
        "properties": {"rulings": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "id": id,
                "status": {"type": "string", "enum": statuses},
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
        "required": ["rulings"]
    })
}

/// Read a judge's answer for one batch: one ruling per prior finding of the batch, in batch
/// order, before grounding. A finding the answer does not rule on, or rules on with an
/// unreadable status, is not judged; answers about ids outside the batch are ignored.
pub fn normalize_rulings(values: &[Value], batch: &[PriorFinding]) -> Vec<Adjudged> {
    batch
        .iter()
        .map(|f| {
            let Some(v) = values.iter().find(|v| {
                v.get("id")
                    .and_then(lenient_string)
                    .is_some_and(|id| id.trim().eq_ignore_ascii_case(&f.id))
            }) else {
                return Adjudged::not_judged(f, "the judge's answer did not rule on it");
            };
            let raw = v
                .get("status")
                .or_else(|| v.get("verdict"))
                .and_then(lenient_string)
                .unwrap_or_default();
            let Some(status) = Status::parse(&raw) else {
                return Adjudged::not_judged(
                    f,
                    format!("the judge's status {raw:?} is not one of fixed, still_present, disputed_accepted, disputed_rejected"),
                );
            };
            let evidence = match v.get("evidence") {
                Some(Value::Array(a)) => a.iter().filter_map(evidence_of).collect(),
                Some(o @ Value::Object(_)) => evidence_of(o).into_iter().collect(),
                _ => Vec::new(),
            };
            let reason = v
                .get("reason")
                .and_then(lenient_string)
                .unwrap_or_default()
                .trim()
                .to_string();
            Adjudged {
                evidence: evidence.into_iter().take(MAX_EVIDENCE).collect(),
                ..Adjudged::from_prior(f, status, reason, "judge")
            }
        })
        .collect()
}

fn append(reason: &mut String, note: &str) {
    if reason.is_empty() {
        *reason = note.to_string();
    } else {
        *reason = format!("{reason}; {note}");
    }
}

/// Settle a judge's ruling against the current tree (deterministic, on the conductor):
/// - the disputed statuses belong to disputed findings: on any other, `disputed_rejected` is
///   `still_present` and `disputed_accepted` is `fixed`; on a disputed one, `still_present`
///   is `disputed_rejected`;
/// - quotes are grounded like any finding's; a standing ruling (`still_present`,
///   `disputed_rejected`) needs one grounded quote from the current tree — the judge's, else
///   the pre-check's verbatim prior evidence — or it cannot be claimed: it becomes `fixed`
///   (`disputed_accepted` for a disputed finding), saying why;
/// - a `fixed` ruled while the pre-check found the exact prior evidence still there is
///   downgraded to `still_present` (`disputed_rejected` for a disputed finding: the judge did
///   not accept the author's argument, it mistook the code for gone), with the pre-check's
///   quote as evidence. A `disputed_accepted` is left alone: a dispute concedes the code is
///   there and argues it is no problem.
pub fn settle(mut a: Adjudged, f: &PriorFinding, pre: &PreCheck, pack: &ContextPack) -> Adjudged {
    if !a.judged {
        if let PreCheck::EvidencePresent { line, quote } = pre {
            a.evidence = vec![precheck_evidence(f, *line, quote, pack)];
        }
        return a;
    }
    let disputed = f.disputed();
    a.status = match (a.status, disputed) {
        (Status::DisputedRejected, false) => Status::StillPresent,
        (Status::DisputedAccepted, false) => Status::Fixed,
        (Status::StillPresent, true) => Status::DisputedRejected,
        (s, _) => s,
    };
    let (kept, refused) = ground_evidence(std::mem::take(&mut a.evidence), pack, None);
    a.evidence = kept;
    if !refused.is_empty() {
        append(
            &mut a.reason,
            &format!("evidence not grounded ({})", refused.join("; ")),
        );
    }
    let present = match pre {
        PreCheck::EvidencePresent { line, quote } => Some((*line, quote.as_str())),
        _ => None,
    };
    if a.status.stands() && a.evidence.is_empty() {
        if let Some((line, quote)) = present {
            a.evidence = vec![precheck_evidence(f, line, quote, pack)];
        } else {
            a.status = if disputed {
                Status::DisputedAccepted
            } else {
                Status::Fixed
            };
            append(
                &mut a.reason,
                "ruled still present without a grounded quote from the current tree, so it cannot be claimed",
            );
        }
    } else if a.status == Status::Fixed {
        if let Some((line, quote)) = present {
            a.status = if disputed {
                Status::DisputedRejected
            } else {
                Status::StillPresent
            };
            a.evidence = vec![precheck_evidence(f, line, quote, pack)];
            append(
                &mut a.reason,
                &format!(
                    "ruled fixed, but the prior evidence is still in the file verbatim at line {line}, so it stands"
                ),
            );
        }
    }
    a
}

fn precheck_evidence(f: &PriorFinding, line: u32, quote: &str, pack: &ContextPack) -> Evidence {
    let file = f
        .file
        .as_deref()
        .and_then(|p| pack.resolve(p).ok())
        .map(|p| p.path.clone())
        .or_else(|| f.file.clone())
        .unwrap_or_default();
    let n = u32::try_from(quote.lines().count().max(1)).unwrap_or(1);
    Evidence {
        file,
        line_start: Some(line),
        line_end: Some(line + n - 1),
        quote: quote.to_string(),
    }
}

/// Counts by status, and the new findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub fixed: usize,
    pub still_present: usize,
    pub disputed_accepted: usize,
    pub disputed_rejected: usize,
    /// Prior findings no judge ruled on (counted as standing as well).
    pub not_judged: usize,
    /// Findings of this review that match no prior finding's anchor.
    pub new: usize,
}

/// report.json `adjudication`: the prior review, every prior finding's ruling, and which of
/// this review's findings are new.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Adjudication {
    pub prior: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispositions: Option<String>,
    pub findings: Vec<Adjudged>,
    /// Ids of this review's findings that match no prior finding's anchor.
    pub new_findings: Vec<String>,
    /// This review's findings that match a prior finding: finding id → prior id.
    #[serde(default)]
    pub matched: BTreeMap<String, String>,
    pub summary: Summary,
}

impl Adjudication {
    /// In prior order; a finding with no ruling yet is not judged.
    pub fn build(prior: &Prior, rulings: &BTreeMap<String, Adjudged>) -> Adjudication {
        let findings = prior
            .findings
            .iter()
            .map(|f| {
                rulings.get(&f.id).cloned().unwrap_or_else(|| {
                    Adjudged::not_judged(f, "the review ended before it was adjudicated")
                })
            })
            .collect();
        let mut a = Adjudication {
            prior: prior.path.clone(),
            dispositions: prior.dispositions.clone(),
            findings,
            new_findings: Vec::new(),
            matched: BTreeMap::new(),
            summary: Summary::default(),
        };
        a.count();
        a
    }

    fn count(&mut self) {
        let mut s = Summary {
            new: self.new_findings.len(),
            ..Summary::default()
        };
        for f in &self.findings {
            match f.status {
                Status::Fixed => s.fixed += 1,
                Status::StillPresent => s.still_present += 1,
                Status::DisputedAccepted => s.disputed_accepted += 1,
                Status::DisputedRejected => s.disputed_rejected += 1,
            }
            if !f.judged {
                s.not_judged += 1;
            }
        }
        self.summary = s;
    }

    /// Set apart this review's findings: one in the same file as a prior finding, with lines
    /// within [`ANCHOR_LINES`] of its cited lines or the same title, is that prior finding met
    /// again (adjudicated above, not counted twice); every other one is new.
    pub fn mark_new(&mut self, prior: &Prior, current: &[Finding]) {
        self.new_findings.clear();
        self.matched.clear();
        for c in current {
            match prior.findings.iter().find(|p| same_anchor(p, c)) {
                Some(p) => {
                    self.matched.insert(c.id.clone(), p.id.clone());
                }
                None => self.new_findings.push(c.id.clone()),
            }
        }
        self.count();
    }

    /// Whether the finish gate blocks at `threshold`: a standing prior finding, or a new one,
    /// at/above it.
    pub fn blocks(&self, current: &[Finding], threshold: Severity) -> bool {
        self.findings
            .iter()
            .any(|f| f.status.stands() && f.severity <= threshold)
            || current
                .iter()
                .any(|f| self.new_findings.contains(&f.id) && f.severity <= threshold)
    }
}

/// Lines between a new finding and a prior one's cited lines that still count as one anchor.
pub const ANCHOR_LINES: u32 = 3;

fn norm_path(p: &str) -> String {
    p.trim().trim_start_matches("./").replace('\\', "/")
}

fn same_anchor(p: &PriorFinding, c: &Finding) -> bool {
    let (Some(pf), Some(cf)) = (p.file.as_deref(), c.file.as_deref()) else {
        return false;
    };
    if norm_path(pf) != norm_path(cf) {
        return false;
    }
    let title = |t: &str| t.trim().to_lowercase();
    if title(&p.title) == title(&c.title) {
        return true;
    }
    match (p.line_start, c.line_start) {
        (Some(ps), Some(cs)) => {
            let pe = p.line_end.unwrap_or(ps).max(ps);
            let ce = c.line_end.unwrap_or(cs).max(cs);
            cs <= pe + ANCHOR_LINES && ps <= ce + ANCHOR_LINES
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::ContextPack;

    fn pack() -> ContextPack {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("io.py"),
            "import os\n\ndef load(path):\n    f = open(path)\n    return f.read()\n",
        )
        .unwrap();
        ContextPack::snapshot(dir.path(), &Default::default()).unwrap()
    }

    fn prior(id: &str, file: &str, line: u32, evidence: &str) -> PriorFinding {
        PriorFinding {
            id: id.into(),
            title: "file never closed".into(),
            severity: Severity::P2,
            file: Some(file.into()),
            line_start: Some(line),
            line_end: Some(line),
            evidence: evidence.into(),
            why_it_matters: String::new(),
            note: None,
        }
    }

    fn ruling(f: &PriorFinding, status: Status, quote: Option<(&str, u32)>) -> Adjudged {
        let mut a = Adjudged::from_prior(f, status, "judge said so".into(), "judge");
        if let Some((q, line)) = quote {
            a.evidence = vec![Evidence {
                file: "io.py".into(),
                line_start: Some(line),
                line_end: Some(line),
                quote: q.into(),
            }];
        }
        a
    }

    #[test]
    fn prior_report_is_validated() {
        assert!(parse_prior("[]")
            .unwrap_err()
            .to_string()
            .contains("schema_version"));
        assert!(parse_prior("{\"schema_version\": 1}")
            .unwrap_err()
            .to_string()
            .contains("findings"));
        let dup = r#"{"schema_version":1,"findings":[{"id":"F1","title":"a","severity":"P1"},{"id":"F1","title":"b","severity":"P2"}]}"#;
        assert!(parse_prior(dup).unwrap_err().to_string().contains("twice"));
        let ok = r#"{"schema_version":1,"findings":[{"id":"F1","title":"a","severity":"P1","file":"io.py","line_start":4,"evidence":"f = open(path)"}]}"#;
        let f = parse_prior(ok).unwrap();
        assert_eq!(f[0].line_end, Some(4));
        assert_eq!(f[0].severity, Severity::P1);
    }

    #[test]
    fn dispositions_are_validated() {
        let p = vec![prior("F001", "io.py", 4, "x")];
        let d = parse_dispositions(
            "F001: {disposition: disputed, comment: the caller closes it}",
            &p,
        )
        .unwrap();
        assert_eq!(d["F001"].disposition, Disposition::Disputed);
        assert_eq!(d["F001"].comment, "the caller closes it");
        let d = parse_dispositions("{\"dispositions\": {\"f001\": \"won't fix\"}}", &p).unwrap();
        assert_eq!(d["F001"].disposition, Disposition::WontFix);
        let e = parse_dispositions("F009: fixed", &p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("F009"), "{e}");
        let e = parse_dispositions("F001: maybe", &p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("wont_fix"), "{e}");
    }

    #[test]
    fn precheck_finds_gone_files_and_verbatim_evidence_nearest_the_cited_lines() {
        let p = pack();
        assert_eq!(
            precheck(&prior("F1", "gone.py", 1, "x"), &p),
            PreCheck::FileGone
        );
        assert_eq!(
            precheck(
                &prior("F1", "io.py", 9, "f = open(path)\n  return f.read()"),
                &p
            ),
            PreCheck::EvidencePresent {
                line: 4,
                quote: "    f = open(path)\n    return f.read()".into()
            }
        );
        assert_eq!(
            precheck(&prior("F1", "io.py", 4, "with open(path) as f:"), &p),
            PreCheck::EvidenceGone
        );
        assert_eq!(
            precheck(&prior("F1", "io.py", 4, ""), &p),
            PreCheck::NoAnchor
        );
        let gone = prior("F1", "gone.py", 1, "x");
        let a = Adjudged::by_precheck(&gone, &precheck(&gone, &p)).unwrap();
        assert_eq!(
            (a.status, a.decided_by.as_str()),
            (Status::Fixed, "pre-check")
        );
    }

    #[test]
    fn a_fixed_ruling_while_the_evidence_is_still_there_is_downgraded() {
        let p = pack();
        let f = prior("F1", "io.py", 4, "f = open(path)");
        let pre = precheck(&f, &p);
        let a = settle(ruling(&f, Status::Fixed, None), &f, &pre, &p);
        assert_eq!(a.status, Status::StillPresent);
        assert_eq!(a.evidence[0].line_start, Some(4));
        assert!(
            a.reason.contains("still in the file verbatim"),
            "{}",
            a.reason
        );
        let mut d = f.clone();
        d.note = Some(AuthorNote {
            disposition: Disposition::Disputed,
            comment: String::new(),
        });
        let a = settle(ruling(&d, Status::Fixed, None), &d, &pre, &p);
        assert_eq!(a.status, Status::DisputedRejected);
        let a = settle(ruling(&d, Status::DisputedAccepted, None), &d, &pre, &p);
        assert_eq!(a.status, Status::DisputedAccepted);
    }

    #[test]
    fn a_standing_ruling_needs_a_grounded_quote() {
        let p = pack();
        let f = prior("F1", "io.py", 4, "with open(path) as f:");
        let pre = precheck(&f, &p);
        let a = settle(
            ruling(&f, Status::StillPresent, Some(("f = open(path)", 4))),
            &f,
            &pre,
            &p,
        );
        assert_eq!(a.status, Status::StillPresent);
        assert_eq!(a.evidence.len(), 1);
        let a = settle(
            ruling(&f, Status::StillPresent, Some(("f = fopen(path, 'r')", 4))),
            &f,
            &pre,
            &p,
        );
        assert_eq!(a.status, Status::Fixed);
        assert!(a.reason.contains("cannot be claimed"), "{}", a.reason);
        assert!(a.reason.contains("not grounded"), "{}", a.reason);
        let a = settle(ruling(&f, Status::DisputedRejected, None), &f, &pre, &p);
        assert_eq!(a.status, Status::Fixed, "not disputed, no quote");
    }

    #[test]
    fn rulings_are_read_per_batch_finding() {
        let f = vec![prior("F1", "io.py", 4, "x"), prior("F2", "io.py", 5, "y")];
        let v = vec![
            json!({"id": "f1", "status": "STILL PRESENT", "reason": "r", "evidence": []}),
            json!({"id": "F9", "status": "fixed"}),
        ];
        let r = normalize_rulings(&v, &f);
        assert_eq!(r[0].status, Status::StillPresent);
        assert!(r[0].judged);
        assert!(!r[1].judged);
        assert_eq!(r[1].status, Status::StillPresent);
    }

    fn current(id: &str, title: &str, file: &str, line: u32, sev: Severity) -> Finding {
        let mut f: Finding = serde_json::from_value(json!({
            "id": id, "title": title, "severity": sev, "confidence": 0.9, "category": "c",
            "file": file, "line_start": line, "line_end": line, "symbol": null,
            "evidence": "", "why_it_matters": "", "suggested_fix": "",
            "verdict": "CONFIRMED", "reporters": [], "anchor": ""
        }))
        .unwrap();
        f.severity = sev;
        f
    }

    #[test]
    fn new_findings_are_those_matching_no_prior_anchor_and_gate_at_fail_on() {
        let p = Prior {
            path: "prior.json".into(),
            dispositions: None,
            findings: vec![prior("F1", "io.py", 4, "f = open(path)")],
        };
        let mut rulings = BTreeMap::new();
        rulings.insert(
            "F1".to_string(),
            Adjudged::from_prior(&p.findings[0], Status::Fixed, String::new(), "judge"),
        );
        let mut a = Adjudication::build(&p, &rulings);
        let cur = vec![
            current("F001", "leaked handle", "io.py", 5, Severity::P2),
            current("F002", "path traversal", "io.py", 40, Severity::P1),
        ];
        a.mark_new(&p, &cur);
        assert_eq!(a.new_findings, ["F002"]);
        assert_eq!(a.matched["F001"], "F1");
        assert_eq!(a.summary.new, 1);
        assert_eq!(a.summary.fixed, 1);
        assert!(a.blocks(&cur, Severity::P1));
        assert!(!a.blocks(&cur, Severity::P0));
    }
}
