//! Output contracts of every judgment node: JSON schemas for constrained decoding, the
//! engine-injected format text, and lenient normalisation of what models actually return.
//!
//! The schemas go to backends that support structured output; the same shapes are described in
//! prose for backends (or models) that ignore them, and the normalisers accept the common
//! deviations (severity "high", confidence "80%", line "L12") instead of discarding the work.

use crate::catalog::{Catalog, KNOWN_TOOLS, TEAM_TOOLS};
use crate::pack::ContextPack;
use crate::parse::{lenient_f64, lenient_string, lenient_u32};
use crate::review::finding::{
    AutofixClass, RawFinding, Routing, Severity, Stance, TextFix, Verdict,
};
use crate::task::{Classification, RejectedTask, Task, DOMAINS};
use serde_json::{json, Value};

pub fn classification_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "domain": {"type": "string", "enum": DOMAINS},
            "languages": {"type": "array", "items": {"type": "string"}},
            "frameworks": {"type": "array", "items": {"type": "string"}},
            "content_types": {"type": "array", "items": {"type": "string"}},
            "review_focus": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["domain", "languages", "frameworks", "content_types", "review_focus"]
    })
}

/// The plan schema constrained to this review: at most `max_tasks` tasks, persona names from the
/// catalog, and (for packs small enough to list) file paths from the pack. Constrained decoding
/// then cannot produce an unknown persona, an invented path or an endless list — the failure a
/// small model shows without it is walking the whole catalog until its token bound.
pub fn tasks_schema_for(personas: &[&str], files: &[&str], max_tasks: usize) -> Value {
    /// Beyond this many paths the enum costs more grammar than it saves; validation still drops
    /// paths outside the pack.
    const MAX_FILE_ENUM: usize = 200;
    let mut schema = tasks_schema();
    let tasks = &mut schema["properties"]["tasks"];
    tasks["maxItems"] = json!(max_tasks);
    tasks["minItems"] = json!(1);
    if !personas.is_empty() {
        tasks["items"]["properties"]["persona"]["enum"] = json!(personas);
    }
    if !files.is_empty() && files.len() <= MAX_FILE_ENUM {
        tasks["items"]["properties"]["files"]["items"]["enum"] = json!(files);
        tasks["items"]["properties"]["files"]["maxItems"] = json!(files.len());
    }
    schema
}

pub fn tasks_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "persona": {"type": "string"},
                        "files": {"type": "array", "items": {"type": "string"}},
                        "mandate": {"type": "string"},
                        // Bounded: a small model under a grammar otherwise repeats one tool
                        // name until the answer's token bound cuts the plan off.
                        "tools": {"type": "array", "maxItems": KNOWN_TOOLS.len() + TEAM_TOOLS.len(), "items": {"type": "string", "enum": KNOWN_TOOLS.iter().chain(TEAM_TOOLS.iter()).collect::<Vec<_>>()}},
                        "verification": {"type": "string"},
                        "model": {"type": "string"},
                        "dimension": {"type": "string"}
                    },
                    "required": ["id", "persona", "files", "mandate"]
                }
            }
        },
        "required": ["tasks"]
    })
}

pub fn findings_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "findings": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "severity": {"type": "string", "enum": ["P0", "P1", "P2", "P3"]},
                        "confidence": {"type": "number"},
                        "category": {"type": "string"},
                        "file": {"type": "string"},
                        "line_start": {"type": "integer"},
                        "line_end": {"type": "integer"},
                        "symbol": {"type": "string"},
                        "evidence": {"type": "string"},
                        "why_it_matters": {"type": "string"},
                        "suggested_fix": {"type": "string"},
                        "autofix_class": {"type": "string", "enum": ["safe_auto", "gated_auto", "manual", "advisory"]},
                        "owner": {"type": "string"},
                        "stance": {"type": "string", "enum": ["keep", "remove", "add", "change"]},
                        "autofix": {"type": "object",
                                    "properties": {"old": {"type": "string"}, "new": {"type": "string"}},
                                    "required": ["old", "new"]}
                    },
                    "required": ["title", "severity", "confidence", "category", "file",
                                 "line_start", "line_end", "evidence", "why_it_matters",
                                 "suggested_fix"]
                }
            }
        },
        "required": ["findings"]
    })
}

pub fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["CONFIRMED", "PLAUSIBLE", "HALLUCINATED", "UNVERIFIABLE"]},
            "reason": {"type": "string"}
        },
        "required": ["verdict", "reason"]
    })
}

/// A probe's answer: what the lines do, then whether the asked defect holds there and where. The
/// keys sort with the reasoning first, as a grammar built from the schema orders them.
pub fn probe_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "analysis": {"type": "string"},
            "holds": {"type": "boolean"},
            "line": {"type": "integer", "minimum": 1},
            "quote": {"type": "string"}
        },
        "required": ["analysis", "holds", "line", "quote"]
    })
}

/// The answer format a probe's prompt states: placeholders only, nothing a model could copy
/// into a grounded answer.
pub const PROBE_FORMAT: &str = "Think first, then answer. Answer with one JSON object and nothing \
else, its keys in this order: {\"analysis\": \"<one sentence on what the lines shown do>\", \
\"holds\": <true if the lines shown have the defect the question asks about, else false>, \
\"line\": <the number of the line with the defect>, \"quote\": \"<that line, copied exactly \
from the code>\"}. If your analysis describes the defect, holds is true.";

/// The confidence consultant's answer: its own severity and confidence for one finding.
pub fn rescore_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "severity": {"type": "string", "enum": ["P0", "P1", "P2", "P3"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string"}
        },
        "required": ["severity", "confidence", "reason"]
    })
}

/// The consultant's severity, confidence (0..=1) and reason; both scores must be readable, or
/// the answer is not used (the finding keeps the finder's scores).
pub fn normalize_rescore(v: &Value) -> Result<(Severity, f64, String), String> {
    let severity = field(v, &["severity", "priority", "level"])
        .and_then(lenient_string)
        .and_then(|s| Severity::parse_lenient(&s))
        .ok_or("the consultant's answer had no readable severity")?;
    let confidence = field(v, &["confidence", "certainty"])
        .and_then(lenient_f64)
        .ok_or("the consultant's answer had no readable confidence")?;
    let reason = field(v, &["reason", "rationale", "explanation"])
        .and_then(lenient_string)
        .unwrap_or_else(|| "no reason given".into());
    Ok((severity, confidence, reason))
}

pub fn synthesis_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "action_items": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["summary", "action_items"]
    })
}

/// Appended by the engine to every specialist prompt, whatever the persona says. Every value
/// is a placeholder a model cannot return as an answer (`<first line you cite>`): a small model
/// copies concrete examples (a format that said `"line_start": 12` got findings on lines 12-14
/// of every file), and a copied placeholder fails grounding and is dropped as a prompt echo.
pub const FINDINGS_FORMAT: &str = r#"## Output format (required)
When you have finished investigating, answer with one JSON object and nothing else:
{"findings": [{"title": "<one line: what is wrong>",
  "severity": "<P0, P1, P2 or P3>",
  "confidence": <a number from 0 to 1>,
  "category": "<area/kind, such as security/injection>",
  "file": "<a path exactly as the file list shows it>",
  "line_start": <the first line you cite>, "line_end": <the last line you cite>,
  "symbol": "<the function, class or clause, or empty>",
  "evidence": "<the cited lines, copied exactly from the file>",
  "why_it_matters": "<the concrete consequence>",
  "suggested_fix": "<what to change>"}]}
Severity: P0 critical (exploitable, data loss, legal exposure now), P1 serious, P2 moderate,
P3 minor. Cite only lines you have read; evidence must be copied from them, or the finding is
discarded. If you find nothing, answer {"findings": []}."#;

/// The values in a prompt's answer formats and examples that a model could return verbatim as
/// an answer: a concrete line number, score or confidence in a format, a concrete path, quote or
/// finding id where a placeholder belongs, and, in examples, a path, a line reference or a
/// finding id. Delimited material (the target's files, between `<<<BEGIN UNTRUSTED` and
/// `<<<END UNTRUSTED`) is the model's to quote and is not looked at; neither should the caller
/// pass the task's own file list. Empty for a prompt with nothing to copy.
pub fn copyable_values(prompt: &str) -> Vec<String> {
    copyable(prompt, true)
}

/// Only the answer formats' copyable values of a prompt (a concrete number, path, quote or id
/// where a placeholder belongs), for a prompt whose prose rightly names the task's files and
/// finding ids (a task's own file list, the findings a judge scores).
pub fn copyable_in_formats(prompt: &str) -> Vec<String> {
    copyable(prompt, false)
}

fn copyable(prompt: &str, prose: bool) -> Vec<String> {
    static FORMATS: std::sync::OnceLock<Vec<regex::Regex>> = std::sync::OnceLock::new();
    static PROSE: std::sync::OnceLock<Vec<regex::Regex>> = std::sync::OnceLock::new();
    let compile = |patterns: &[&str]| -> Vec<regex::Regex> {
        patterns
            .iter()
            .filter_map(|p| regex::Regex::new(p).ok())
            .collect()
    };
    let formats = FORMATS.get_or_init(|| {
        compile(&[
            // A number where a format asks for a line, a score or a confidence.
            r#""(?:line|line_start|line_end|start|end|score|overall|confidence)"\s*:\s*-?\d"#,
            // A concrete string where a format asks for a location or a quote.
            r#""(?:file|path|evidence|quote)"\s*:\s*"[^"<]"#,
            // A finding id in a format.
            r#""finding"\s*:\s*"[A-Z]\d{2,}""#,
        ])
    });
    let prose_patterns = PROSE.get_or_init(|| {
        compile(&[
            // A line reference or a path in prose (an example's "lines 12-14", "src/db.py").
            r"\blines? \d+",
            r"\b[\w.-]+/[\w./-]*\.(?:py|rs|js|ts|go|java|rb|php|cpp|md|yaml|yml|toml|tf|sql|sh)\b",
            // A finding id in prose ("F001: parameterise ...").
            r"\bF\d{3}\b",
        ])
    });
    let mut out = Vec::new();
    for part in outside_material(prompt) {
        let patterns = formats
            .iter()
            .chain(prose_patterns.iter().filter(|_| prose));
        for re in patterns {
            for m in re.find_iter(part) {
                out.push(m.as_str().to_string());
            }
        }
    }
    out
}

/// The parts of a prompt outside its delimited material: each `<<<BEGIN UNTRUSTED label>>>`
/// up to its own `<<<END UNTRUSTED label>>>` is left out; a marker without its end (a prompt
/// that only mentions the markers) leaves everything in.
fn outside_material(prompt: &str) -> Vec<&str> {
    const BEGIN: &str = "<<<BEGIN UNTRUSTED ";
    let mut parts = Vec::new();
    let mut rest = prompt;
    while let Some(start) = rest.find(BEGIN) {
        let after_begin = &rest[start + BEGIN.len()..];
        let Some(label_end) = after_begin.find(">>>") else {
            break;
        };
        let end_marker = format!("<<<END UNTRUSTED {}>>>", &after_begin[..label_end]);
        let Some(end) = after_begin.find(&end_marker) else {
            // Not a block: keep looking after this marker.
            parts.push(&rest[..start + BEGIN.len()]);
            rest = after_begin;
            continue;
        };
        parts.push(&rest[..start]);
        rest = &after_begin[end + end_marker.len()..];
    }
    parts.push(rest);
    parts
}

/// Tool-call convention described to models without native tool calling.
pub const TEXT_TOOL_CALL_FORMAT: &str = r#"To call a tool without native tool calling, answer with only:
{"tool": "<tool name>", "arguments": {...}}"#;

/// Normalise a model's classification object; unknown domains become "mixed".
pub fn normalize_classification(v: &Value) -> Classification {
    let list = |k: &str| -> Vec<String> {
        match v.get(k) {
            Some(Value::Array(a)) => a.iter().filter_map(lenient_string).take(12).collect(),
            Some(other) => lenient_string(other)
                .map(|s| {
                    s.split(',')
                        .map(|p| p.trim().to_string())
                        .filter(|p| !p.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            None => Vec::new(),
        }
    };
    let domain = v
        .get("domain")
        .and_then(lenient_string)
        .map(|d| d.trim().to_ascii_lowercase())
        .filter(|d| DOMAINS.contains(&d.as_str()))
        .unwrap_or_else(|| "mixed".to_string());
    Classification {
        domain,
        languages: list("languages"),
        frameworks: list("frameworks"),
        content_types: list("content_types"),
        review_focus: list("review_focus"),
    }
}

fn field<'a>(v: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| v.get(*n))
        .filter(|x| !x.is_null())
}

/// Normalise one finding object. Fails (with why) only when it has no usable title.
pub fn normalize_finding(v: &Value) -> Result<RawFinding, String> {
    if !v.is_object() {
        return Err("finding is not a json object".into());
    }
    let title = field(v, &["title", "summary", "issue", "description"])
        .and_then(lenient_string)
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or("finding has no title")?;
    let severity = field(v, &["severity", "priority", "level"])
        .and_then(lenient_string)
        .and_then(|s| Severity::parse_lenient(&s))
        .unwrap_or(Severity::P2);
    let confidence = field(v, &["confidence", "certainty"])
        .and_then(lenient_f64)
        .unwrap_or(0.5);
    let mut line_start =
        field(v, &["line_start", "line", "start_line", "lines"]).and_then(lenient_u32);
    let mut line_end = field(v, &["line_end", "end_line"]).and_then(lenient_u32);
    // "lines": "12-14" carries both ends.
    if line_end.is_none() {
        if let Some(Value::String(s)) = field(v, &["lines", "line"]) {
            if let Some((_, b)) = s.split_once('-') {
                line_end = b.trim().trim_start_matches(['L', 'l']).parse().ok();
            }
        }
    }
    if line_start == Some(0) {
        line_start = None;
    }
    let line_end = match (line_start, line_end) {
        (Some(s), Some(e)) if e >= s => Some(e),
        (Some(s), Some(e)) => Some(s.max(e)),
        (Some(s), None) => Some(s),
        _ => None,
    };
    let text = |names: &[&str]| field(v, names).and_then(lenient_string).unwrap_or_default();
    let file = field(v, &["file", "path", "location"])
        .and_then(lenient_string)
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty());
    Ok(RawFinding {
        title,
        severity,
        confidence,
        category: {
            let c = text(&["category", "type", "kind"]);
            if c.trim().is_empty() {
                "general".into()
            } else {
                c.trim().to_ascii_lowercase()
            }
        },
        file,
        line_start,
        line_end,
        symbol: field(v, &["symbol", "function", "clause"])
            .and_then(lenient_string)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        evidence: text(&["evidence", "quote", "code"]),
        why_it_matters: text(&["why_it_matters", "impact", "rationale", "explanation"]),
        suggested_fix: text(&["suggested_fix", "fix", "recommendation", "remediation"]),
        routing: normalize_routing(v),
    })
}

/// The optional document-review fields; anything unrecognisable is left out, never guessed.
fn normalize_routing(v: &Value) -> Routing {
    let word = |names: &[&str]| field(v, names).and_then(lenient_string);
    let autofix = field(v, &["autofix", "replacement"]).and_then(|a| {
        let old = a.get("old").and_then(lenient_string)?;
        let new = a.get("new").and_then(lenient_string)?;
        (!old.is_empty() && old != new).then_some(TextFix { old, new })
    });
    Routing {
        autofix_class: word(&["autofix_class", "route"])
            .and_then(|s| AutofixClass::parse_lenient(&s)),
        owner: word(&["owner"])
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty()),
        stance: word(&["stance", "position"]).and_then(|s| Stance::parse_lenient(&s)),
        autofix,
    }
}

/// Normalise a verdict object: (verdict, reason). A missing or unknown verdict is UNVERIFIED:
/// the verifier said nothing the engine can read, which is not a judgment that the claim cannot
/// be checked.
pub fn normalize_verdict(v: &Value) -> (Verdict, String) {
    let said = field(v, &["verdict", "status", "result"]).and_then(lenient_string);
    let reason = field(v, &["reason", "rationale", "explanation"])
        .and_then(lenient_string)
        .unwrap_or_else(|| "no reason given".into());
    match said.as_deref().and_then(Verdict::parse_lenient) {
        Some(verdict) => (verdict, reason),
        None => (
            Verdict::Unverified,
            format!(
                "the verifier's answer had no readable verdict ({})",
                said.as_deref().unwrap_or("none given")
            ),
        ),
    }
}

/// Validate the planner's task objects against the catalog, the pack and the stage's tools.
///
/// An unknown persona or an empty mandate rejects the task (with the reason); files not in the
/// pack are dropped from it; tools are the intersection of what the task asked for (all stage
/// tools when it asked for none), what the persona allows and what the stage grants, so nothing
/// in a plan — itself influenced by reviewed content — can widen a task's tools.
pub fn validate_tasks(
    values: &[Value],
    catalog: &Catalog,
    pack: &ContextPack,
    stage_tools: &[String],
    max_tasks: usize,
) -> (Vec<Task>, Vec<RejectedTask>) {
    let mut tasks: Vec<Task> = Vec::new();
    let mut rejected = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let mut id = field(v, &["id", "task_id"])
            .and_then(lenient_string)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("t{}", i + 1));
        if tasks.iter().any(|t| t.id == id) {
            id = format!("{id}-{}", i + 1);
        }
        let persona = field(v, &["persona", "specialist", "agent"])
            .and_then(lenient_string)
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let reject = |reason: String| RejectedTask {
            id: id.clone(),
            persona: persona.clone(),
            reason,
        };
        let Some(p) = catalog.personas.get(&persona) else {
            rejected.push(reject(format!("unknown persona {persona:?}")));
            continue;
        };
        if !p.is_reviewer() {
            rejected.push(reject(format!(
                "{persona:?} is a {}, which scores outputs and takes no review task",
                p.kind.as_str()
            )));
            continue;
        }
        let mandate = field(v, &["mandate", "instructions", "focus"])
            .and_then(lenient_string)
            .unwrap_or_default();
        if mandate.trim().is_empty() {
            rejected.push(reject("empty mandate".into()));
            continue;
        }
        let requested: Vec<String> = match field(v, &["files", "file"]) {
            Some(Value::Array(a)) => a.iter().filter_map(lenient_string).collect(),
            Some(other) => lenient_string(other).into_iter().collect(),
            None => Vec::new(),
        };
        let mut files = Vec::new();
        for f in &requested {
            if let Ok(pf) = pack.resolve(f) {
                if !files.contains(&pf.path) {
                    files.push(pf.path.clone());
                }
            } else {
                // A large pack's planner sees directories and may name one (`src/api/`).
                for path in crate::pack::atlas::expand_directory(pack, f) {
                    if !files.contains(&path) {
                        files.push(path);
                    }
                }
            }
        }
        let asked: Vec<String> = match field(v, &["tools"]) {
            Some(Value::Array(a)) => a.iter().filter_map(lenient_string).collect(),
            _ => Vec::new(),
        };
        // File tools need the persona's allowance; team tools only the stage's grant.
        let tools: Vec<String> = stage_tools
            .iter()
            .filter(|t| p.tools.contains(t) || TEAM_TOOLS.contains(&t.as_str()))
            .filter(|t| asked.is_empty() || asked.contains(t) || TEAM_TOOLS.contains(&t.as_str()))
            .cloned()
            .collect();
        if tasks.len() >= max_tasks {
            rejected.push(reject(format!("over the flow's max_tasks ({max_tasks})")));
            continue;
        }
        tasks.push(Task {
            id,
            persona,
            files,
            mandate: mandate.trim().to_string(),
            tools,
            verification: field(v, &["verification", "verify"])
                .and_then(lenient_string)
                .unwrap_or_default(),
            model: field(v, &["model"]).and_then(lenient_string),
            dimension: field(v, &["dimension"])
                .and_then(lenient_string)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
            origin: None,
            probe: None,
            pass: None,
        });
    }
    (tasks, rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_schema_is_constrained_to_the_review() {
        let s = tasks_schema_for(&["a", "b"], &["src/x.rs"], 3);
        let t = &s["properties"]["tasks"];
        assert_eq!(t["maxItems"], 3);
        assert_eq!(
            t["items"]["properties"]["persona"]["enum"],
            json!(["a", "b"])
        );
        assert_eq!(
            t["items"]["properties"]["files"]["items"]["enum"],
            json!(["src/x.rs"])
        );
        // Lists a grammar-constrained model could repeat forever are bounded.
        assert_eq!(t["items"]["properties"]["files"]["maxItems"], 1);
        assert_eq!(
            t["items"]["properties"]["tools"]["maxItems"],
            KNOWN_TOOLS.len() + TEAM_TOOLS.len()
        );
        let many: Vec<String> = (0..500).map(|i| format!("f{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let s = tasks_schema_for(&["a"], &many, 3);
        assert!(
            s["properties"]["tasks"]["items"]["properties"]["files"]["items"]
                .get("enum")
                .is_none()
        );
    }
}
