//! The judge panel (seed 001 §4.2): reading each judge's scores of a review's findings, their
//! deterministic aggregation per axis, and the verdict rule used when the meta-judge cannot give one.
//!
//! Models only judge. Everything that decides what a judge's answer counts for — which scores
//! are valid, what an unknown finding id means, the mean and spread of an axis, when judges
//! disagree, the verdict when the meta-judge is unavailable — is here, pure and tested.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The highest score a judge may give (the lowest is 0).
pub const MAX_SCORE: f64 = 10.0;

/// Judges of one axis whose overall scores are this far apart disagree: the report says so
/// instead of letting the mean hide it.
pub const DISAGREEMENT_SPREAD: f64 = 4.0;

/// The most judges one axis may have (one per perspective the catalog ships).
pub const MAX_JUDGES_PER_AXIS: usize = 3;

/// A lowest axis mean below this rejects the output (the rule the meta-judge is given too).
pub const REJECT_BELOW: f64 = 4.0;

/// A lowest axis mean below this (and not below [`REJECT_BELOW`]) asks for a revision.
pub const REVISE_BELOW: f64 = 7.0;

/// One finding's score from one judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ItemScore {
    /// The finding's id in the report (F001, ...).
    pub finding: String,
    pub score: f64,
    #[serde(default)]
    pub reason: String,
}

/// One judge's answer, as recorded and reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JudgeScore {
    /// The judge's catalog name.
    pub judge: String,
    pub axis: String,
    pub perspective: String,
    pub model: String,
    pub overall: f64,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub items: Vec<ItemScore>,
}

/// A judge that gave no score: never counted, listed with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JudgeFailure {
    pub judge: String,
    pub error: String,
}

/// The panel's verdict on the review's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "PanelVerdict")]
pub enum Verdict {
    Accept,
    Revise,
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Accept => "accept",
            Verdict::Revise => "revise",
            Verdict::Reject => "reject",
        }
    }

    fn parse(s: &str) -> Option<Verdict> {
        match s.trim().to_ascii_lowercase().as_str() {
            "accept" => Some(Verdict::Accept),
            "revise" => Some(Verdict::Revise),
            "reject" => Some(Verdict::Reject),
            _ => None,
        }
    }
}

/// Who decided the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictBy {
    /// The meta-judge's answer.
    MetaJudge,
    /// [`rule_verdict`], because the meta-judge gave none.
    Rule,
}

/// A verdict and how it came about, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub verdict: Verdict,
    pub by: VerdictBy,
    pub summary: String,
}

/// One axis of the panel: its judges' scores and what they add up to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AxisReport {
    pub axis: String,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub spread: f64,
    pub disagreement: bool,
    pub scores: Vec<JudgeScore>,
}

/// report.json `panel`: the judge panel's scores of the review's findings and its verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PanelReport {
    /// Axes with at least one score, in the flow's order.
    pub axes: Vec<AxisReport>,
    /// Judges that gave no score, with why; never counted.
    #[serde(default)]
    pub failed: Vec<JudgeFailure>,
    /// The mean of the axis means; absent when no judge scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_by: Option<VerdictBy>,
    #[serde(default)]
    pub summary: String,
    /// Every judge asked gave a score. A panel that is not complete never fails the review.
    pub complete: bool,
    /// Why the panel did not run or did not finish, when it did not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A score as a judge may write it: a number, or a string holding one ("7", "7.5").
fn score_of(v: Option<&Value>) -> Option<f64> {
    let x = match v? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (x.is_finite() && (0.0..=MAX_SCORE).contains(&x)).then_some(x)
}

fn text_of(v: Option<&Value>) -> String {
    v.and_then(Value::as_str)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// What one judge's answer says: its overall score and reason and its per-finding scores.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeAnswer {
    pub overall: f64,
    pub reason: String,
    pub items: Vec<ItemScore>,
}

/// Read a judge's JSON answer. `known` are the ids of the findings it was shown: an item
/// naming any other id is ignored, as is an item without a valid 0..=10 score, and a second
/// item for the same finding. Without a valid overall score the judge gave no score (Err, with
/// why).
pub fn read_judge_answer(v: &Value, known: &[&str]) -> Result<JudgeAnswer, String> {
    let Some(obj) = v.as_object() else {
        return Err("the answer is not a JSON object".into());
    };
    let overall = match obj.get("overall") {
        // Either {"overall": 7, "reason": ".."} or {"overall": {"score": 7, "reason": ".."}}.
        Some(Value::Object(o)) => (score_of(o.get("score")), text_of(o.get("reason"))),
        other => (score_of(other), text_of(obj.get("reason"))),
    };
    let (Some(score), reason) = overall else {
        return Err("no overall score from 0 to 10".into());
    };
    let mut items: Vec<ItemScore> = Vec::new();
    let list = ["items", "scores", "findings"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_array));
    for item in list.into_iter().flatten() {
        let id = text_of(item.get("finding").or_else(|| item.get("id")));
        if !known.contains(&id.as_str()) || items.iter().any(|i| i.finding == id) {
            continue;
        }
        if let Some(s) = score_of(item.get("score")) {
            items.push(ItemScore {
                finding: id,
                score: s,
                reason: text_of(item.get("reason")),
            });
        }
    }
    Ok(JudgeAnswer {
        overall: score,
        reason,
        items,
    })
}

/// Read the meta-judge's answer: a verdict of accept, revise or reject and a summary.
pub fn read_meta_answer(v: &Value) -> Result<(Verdict, String), String> {
    let verdict = v
        .get("verdict")
        .and_then(Value::as_str)
        .and_then(Verdict::parse)
        .ok_or("no verdict of accept, revise or reject")?;
    let summary = text_of(v.get("summary"));
    if summary.is_empty() {
        return Err("no summary".into());
    }
    Ok((verdict, summary))
}

/// The JSON schema a judge's answer is asked to follow.
pub fn judge_schema(ids: &[&str]) -> Value {
    json!({
        "type": "object",
        "required": ["items", "overall", "reason"],
        "properties": {
            "items": {"type": "array", "items": {
                "type": "object",
                "required": ["finding", "score", "reason"],
                "properties": {
                    "finding": {"type": "string", "enum": ids},
                    "score": {"type": "number", "minimum": 0, "maximum": MAX_SCORE},
                    "reason": {"type": "string"}
                }
            }},
            "overall": {"type": "number", "minimum": 0, "maximum": MAX_SCORE},
            "reason": {"type": "string"}
        }
    })
}

/// The JSON schema of the meta-judge's answer.
pub fn meta_schema() -> Value {
    json!({
        "type": "object",
        "required": ["verdict", "summary"],
        "properties": {
            "verdict": {"type": "string", "enum": ["accept", "revise", "reject"]},
            "summary": {"type": "string"}
        }
    })
}

/// Per axis (in `axes` order, axes without a score left out): mean, min, max and spread of
/// the judges' overall scores, and whether they disagree; then the overall score, the mean of
/// the axis means.
pub fn aggregate(axes: &[String], scores: &[JudgeScore]) -> (Vec<AxisReport>, Option<f64>) {
    let mut out = Vec::new();
    for axis in axes {
        let mine: Vec<JudgeScore> = scores.iter().filter(|s| &s.axis == axis).cloned().collect();
        if mine.is_empty() {
            continue;
        }
        let n = mine.len() as f64;
        let mean = mine.iter().map(|s| s.overall).sum::<f64>() / n;
        let min = mine.iter().map(|s| s.overall).fold(f64::INFINITY, f64::min);
        let max = mine
            .iter()
            .map(|s| s.overall)
            .fold(f64::NEG_INFINITY, f64::max);
        let spread = max - min;
        out.push(AxisReport {
            axis: axis.clone(),
            mean: round2(mean),
            min,
            max,
            spread: round2(spread),
            disagreement: spread >= DISAGREEMENT_SPREAD,
            scores: mine,
        });
    }
    let overall = (!out.is_empty())
        .then(|| round2(out.iter().map(|a| a.mean).sum::<f64>() / out.len() as f64));
    (out, overall)
}

/// The verdict when the meta-judge gives none, by the rule the meta-judge is told: reject if
/// any axis mean is below [`REJECT_BELOW`], revise if any is below [`REVISE_BELOW`], else
/// accept. None when no axis has a score.
pub fn rule_verdict(axes: &[AxisReport]) -> Option<Decision> {
    let lowest = axes.iter().min_by(|a, b| a.mean.total_cmp(&b.mean))?;
    let verdict = if lowest.mean < REJECT_BELOW {
        Verdict::Reject
    } else if lowest.mean < REVISE_BELOW {
        Verdict::Revise
    } else {
        Verdict::Accept
    };
    let contested: Vec<&str> = axes
        .iter()
        .filter(|a| a.disagreement)
        .map(|a| a.axis.as_str())
        .collect();
    let mut summary = format!(
        "Verdict by rule ({}): the lowest axis is {} with a mean of {} of 10 (reject below {REJECT_BELOW}, revise below {REVISE_BELOW}).",
        verdict.as_str(),
        lowest.axis,
        lowest.mean
    );
    if !contested.is_empty() {
        summary.push_str(&format!(
            " The judges disagree on {}.",
            contested.join(", ")
        ));
    }
    Some(Decision {
        verdict,
        by: VerdictBy::Rule,
        summary,
    })
}

/// The material the meta-judge sees: each axis's aggregate and its judges' reasons, with
/// their scores but without who gave them. Reasons are model text that may quote the target,
/// so each axis's reasons come in one delimited block.
pub fn meta_material(axes: &[AxisReport]) -> String {
    let mut out = String::new();
    for a in axes {
        out.push_str(&format!(
            "### {}\nmean {} · min {} · max {} · spread {}{}\n",
            a.axis,
            a.mean,
            a.min,
            a.max,
            a.spread,
            if a.disagreement {
                " · the judges disagree"
            } else {
                ""
            }
        ));
        let mut reasons = String::new();
        for (k, s) in a.scores.iter().enumerate() {
            reasons.push_str(&format!(
                "judge {}: overall {} — {}\n",
                k + 1,
                s.overall,
                s.reason
            ));
            for i in &s.items {
                reasons.push_str(&format!("  {} {}: {}\n", i.finding, i.score, i.reason));
            }
        }
        out.push_str(&crate::weaver::delimit(
            &format!("judges' reasons on {}", a.axis),
            &reasons,
        ));
        out.push('\n');
    }
    out
}

impl PanelReport {
    /// The report of a panel that ran (or started): `asked` the judges asked, in order;
    /// `scores` those that answered; `failed` why the others did not; `decision` the recorded
    /// verdict, if any — else the rule's.
    pub fn build(
        axes: &[String],
        asked: usize,
        scores: &[JudgeScore],
        failed: Vec<JudgeFailure>,
        decision: Option<Decision>,
    ) -> PanelReport {
        let (axes, overall) = aggregate(axes, scores);
        let decision = decision.or_else(|| rule_verdict(&axes));
        let complete = failed.is_empty() && scores.len() >= asked;
        let note = if scores.is_empty() && asked > 0 {
            "no judge gave a score".to_string()
        } else if !complete {
            format!("{} of {asked} judges gave a score", scores.len())
        } else {
            String::new()
        };
        PanelReport {
            axes,
            failed,
            overall,
            verdict: decision.as_ref().map(|d| d.verdict),
            verdict_by: decision.as_ref().map(|d| d.by),
            summary: decision.map(|d| d.summary).unwrap_or_default(),
            complete,
            note,
        }
    }

    /// A panel that had nothing to score.
    pub fn skipped(why: &str) -> PanelReport {
        PanelReport {
            complete: true,
            note: why.to_string(),
            ..PanelReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(judge: &str, axis: &str, overall: f64) -> JudgeScore {
        JudgeScore {
            judge: judge.into(),
            axis: axis.into(),
            perspective: "p".into(),
            model: "m".into(),
            overall,
            reason: format!("scored {overall}"),
            items: Vec::new(),
        }
    }

    fn axes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// A judge answer's expected reading: (overall, item ids kept), or words of the error.
    type Reading = Result<(f64, Vec<&'static str>), &'static str>;

    /// Scores of one axis, and (mean, min, max, spread, disagreement).
    type AxisCase = (Vec<f64>, (f64, f64, f64, f64, bool));

    #[test]
    fn judge_answers_are_read_defensively() {
        let known = ["F001", "F002"];
        // (answer, Ok((overall, item ids kept)) or Err(words of the error))
        let cases: Vec<(Value, Reading)> = vec![
            (
                json!({"items": [{"finding": "F001", "score": 8, "reason": "r"},
                                 {"finding": "F002", "score": 3, "reason": "r"}],
                       "overall": 6, "reason": "ok"}),
                Ok((6.0, vec!["F001", "F002"])),
            ),
            // An unknown id is ignored, the rest stands.
            (
                json!({"items": [{"finding": "F009", "score": 1}, {"finding": "F002", "score": 4}],
                       "overall": 5}),
                Ok((5.0, vec!["F002"])),
            ),
            // Scores as strings, "id" for "finding", "scores" for "items".
            (
                json!({"scores": [{"id": "F001", "score": "7.5"}], "overall": "7"}),
                Ok((7.0, vec!["F001"])),
            ),
            // An item out of range or without a score is ignored; a duplicate keeps the first.
            (
                json!({"items": [{"finding": "F001", "score": 11}, {"finding": "F002"},
                                 {"finding": "F001", "score": 2}, {"finding": "F001", "score": 9}],
                       "overall": 2}),
                Ok((2.0, vec!["F001"])),
            ),
            // The overall as an object.
            (
                json!({"overall": {"score": 9, "reason": "fine"}}),
                Ok((9.0, vec![])),
            ),
            (
                json!({"items": [], "reason": "no score"}),
                Err("no overall score"),
            ),
            (json!({"overall": 12}), Err("no overall score")),
            (json!({"overall": -1}), Err("no overall score")),
            (json!({"overall": "high"}), Err("no overall score")),
            (json!({"overall": null}), Err("no overall score")),
            (json!([1, 2]), Err("not a JSON object")),
        ];
        for (answer, want) in cases {
            let got = read_judge_answer(&answer, &known);
            match (got, want) {
                (Ok(a), Ok((overall, ids))) => {
                    assert_eq!(a.overall, overall, "{answer}");
                    let got: Vec<&str> = a.items.iter().map(|i| i.finding.as_str()).collect();
                    assert_eq!(got, ids, "{answer}");
                }
                (Err(e), Err(words)) => assert!(e.contains(words), "{answer}: {e}"),
                (got, want) => panic!("{answer}: got {got:?}, want {want:?}"),
            }
        }
        let a = read_judge_answer(
            &json!({"items": [{"finding": "F001", "score": 3, "reason": " thin "}], "overall": 4, "reason": " why "}),
            &known,
        )
        .unwrap();
        assert_eq!(
            (a.reason.as_str(), a.items[0].reason.as_str()),
            ("why", "thin")
        );
    }

    #[test]
    fn meta_answers_need_a_known_verdict_and_a_summary() {
        for (answer, want) in [
            (
                json!({"verdict": "accept", "summary": "s"}),
                Ok(Verdict::Accept),
            ),
            (
                json!({"verdict": " Revise ", "summary": "s"}),
                Ok(Verdict::Revise),
            ),
            (
                json!({"verdict": "REJECT", "summary": "s"}),
                Ok(Verdict::Reject),
            ),
            (
                json!({"verdict": "maybe", "summary": "s"}),
                Err("no verdict"),
            ),
            (json!({"summary": "s"}), Err("no verdict")),
            (
                json!({"verdict": "accept", "summary": "  "}),
                Err("no summary"),
            ),
        ] {
            match (read_meta_answer(&answer), want) {
                (Ok((v, _)), Ok(w)) => assert_eq!(v, w, "{answer}"),
                (Err(e), Err(words)) => assert!(e.contains(words), "{answer}: {e}"),
                (got, want) => panic!("{answer}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn axes_aggregate_to_mean_min_max_spread_and_disagreement() {
        // (scores per axis, want (mean, min, max, spread, disagreement))
        let cases: Vec<AxisCase> = vec![
            (vec![2.0, 9.0], (5.5, 2.0, 9.0, 7.0, true)),
            (vec![6.0, 8.0, 7.0], (7.0, 6.0, 8.0, 2.0, false)),
            (vec![3.0, 7.0], (5.0, 3.0, 7.0, 4.0, true)),
            (vec![3.0, 6.5], (4.75, 3.0, 6.5, 3.5, false)),
            (vec![10.0], (10.0, 10.0, 10.0, 0.0, false)),
            (vec![1.0, 2.0, 2.0], (1.67, 1.0, 2.0, 1.0, false)),
        ];
        for (values, want) in cases {
            let scores: Vec<JudgeScore> = values
                .iter()
                .enumerate()
                .map(|(k, v)| score(&format!("j{k}"), "grounding", *v))
                .collect();
            let (axes, overall) = aggregate(&axes(&["grounding"]), &scores);
            let a = &axes[0];
            assert_eq!(
                (a.mean, a.min, a.max, a.spread, a.disagreement),
                want,
                "{values:?}"
            );
            assert_eq!(overall, Some(a.mean));
            assert_eq!(a.scores.len(), values.len());
        }
    }

    #[test]
    fn overall_is_the_mean_of_axis_means_in_flow_order() {
        let scores = vec![
            score("a", "coverage", 4.0),
            score("b", "grounding", 2.0),
            score("c", "grounding", 9.0),
            score("d", "coverage", 8.0),
            score("e", "calibration", 5.0),
        ];
        let (got, overall) = aggregate(
            &axes(&["grounding", "coverage", "actionability", "calibration"]),
            &scores,
        );
        let names: Vec<&str> = got.iter().map(|a| a.axis.as_str()).collect();
        assert_eq!(
            names,
            ["grounding", "coverage", "calibration"],
            "no score, no axis"
        );
        // (5.5 + 6 + 5) / 3
        assert_eq!(overall, Some(5.5));
        assert_eq!(aggregate(&axes(&["grounding"]), &[]), (Vec::new(), None));
    }

    #[test]
    fn the_rule_verdict_follows_the_lowest_axis() {
        for (means, want) in [
            (vec![8.0, 7.0], Verdict::Accept),
            (vec![9.0, 6.9], Verdict::Revise),
            (vec![9.0, 4.0], Verdict::Revise),
            (vec![9.0, 3.9], Verdict::Reject),
        ] {
            let scores: Vec<JudgeScore> = means
                .iter()
                .enumerate()
                .map(|(k, m)| score("j", &format!("axis{k}"), *m))
                .collect();
            let names: Vec<String> = (0..means.len()).map(|k| format!("axis{k}")).collect();
            let (a, _) = aggregate(&names, &scores);
            let d = rule_verdict(&a).unwrap();
            assert_eq!((d.verdict, d.by), (want, VerdictBy::Rule), "{means:?}");
            assert!(d.summary.contains("by rule"), "{}", d.summary);
        }
        assert!(rule_verdict(&[]).is_none());
    }

    #[test]
    fn a_panel_with_failed_judges_is_incomplete_and_counts_only_scores() {
        let names = axes(&["grounding"]);
        let scores = vec![score("a", "grounding", 2.0), score("b", "grounding", 9.0)];
        let failed = vec![JudgeFailure {
            judge: "c".into(),
            error: "malformed".into(),
        }];
        let p = PanelReport::build(&names, 3, &scores, failed, None);
        assert!(!p.complete);
        assert_eq!(p.axes[0].mean, 5.5);
        assert_eq!(p.verdict_by, Some(VerdictBy::Rule));
        assert_eq!(p.verdict, Some(Verdict::Revise));
        assert!(p.note.contains("2 of 3"), "{}", p.note);
        let meta = Decision {
            verdict: Verdict::Accept,
            by: VerdictBy::MetaJudge,
            summary: "fine".into(),
        };
        let p = PanelReport::build(&names, 2, &scores, Vec::new(), Some(meta));
        assert!(p.complete && p.note.is_empty());
        assert_eq!(
            (p.verdict, p.verdict_by, p.summary.as_str()),
            (Some(Verdict::Accept), Some(VerdictBy::MetaJudge), "fine")
        );
        let dead = PanelReport::build(&names, 2, &[], Vec::new(), None);
        assert!(!dead.complete && dead.verdict.is_none() && dead.overall.is_none());
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["verdict_by"], "meta_judge");
        assert_eq!(v["axes"][0]["disagreement"], true);
        assert_eq!(v["axes"][0]["scores"][1]["overall"], 9.0);
    }

    #[test]
    fn the_meta_judge_sees_aggregates_and_reasons_but_no_judge() {
        let mut a = score("judge_grounding_skeptic", "grounding", 2.0);
        a.items.push(ItemScore {
            finding: "F001".into(),
            score: 2.0,
            reason: "lines do not show it".into(),
        });
        let (axes, _) = aggregate(
            &axes(&["grounding"]),
            &[a, score("judge_grounding_auditor", "grounding", 9.0)],
        );
        let m = meta_material(&axes);
        assert!(
            m.contains("mean 5.5") && m.contains("the judges disagree"),
            "{m}"
        );
        assert!(m.contains("F001 2: lines do not show it"), "{m}");
        assert!(
            m.contains("<<<BEGIN UNTRUSTED judges' reasons on grounding>>>"),
            "{m}"
        );
        assert!(!m.contains("judge_grounding"), "{m}");
    }
}
