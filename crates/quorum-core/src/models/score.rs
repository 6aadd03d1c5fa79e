//! Choosing a model for a task: a task's [`TaskNeeds`], the explainable weighted [`Score`] of a
//! card against them (the table and the reasons for its weights are in [`crate::models`]), and
//! the choice of the best eligible card, a verifier steering away from the finders' families.

use super::card::{task_key, valid_params, Locality, ModelCard, Tier, SMALL_MODEL_B};
use super::vendor::lineage;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Tokens kept free for the answer when checking that a prompt fits a model's context.
pub const OUTPUT_RESERVE_TOKENS: u64 = 1024;

/// A prompt longer than this is "long" for the small-model penalty.
pub const LONG_PROMPT_TOKENS: u64 = 4000;

/// The preferred size band for specialists, in billions: fits a 16–24 GB workstation GPU at Q4.
pub const SIZE_BAND_B: (f64, f64) = (12.0, 20.0);

const W_TOOL_USE: f64 = 1.5;
const W_SMALL_MODEL: f64 = -2.0;
const W_JSON: f64 = 0.75;
const W_REASONING_SHORT: f64 = -1.5;
const W_CONTEXT_TIGHT: f64 = -0.5;
const W_SIZE_BAND: f64 = 1.0;
const W_SUCCESS: f64 = 5.0;
const SUCCESS_NEUTRAL: f64 = 0.8;
const W_LATENCY: f64 = -0.5;
const LATENCY_SCALE_MS: f64 = 60_000.0;
const W_LOAD: f64 = -2.0;
const W_RECOMMENDED: f64 = 1.0;
const W_STRENGTH: f64 = 0.25;
const W_COST: f64 = -0.15;
const W_SPEED: f64 = 0.15;
const W_SAME_FAMILY: f64 = -6.0;

/// Stages that are not specialist work (the size band does not apply to them).
const NON_SPECIALIST_STAGES: [&str; 7] = [
    "scout",
    "planner",
    "verifier",
    "synthesizer",
    "criteria",
    "conformance",
    "adjudicator",
];

/// What a task asks of its model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskNeeds {
    /// `scout`, `planner`, `specialist`, `verifier`, `synthesizer`, or a persona name.
    pub task_type: String,
    pub tool_use: bool,
    pub json: bool,
    pub reasoning: Tier,
    /// Estimated tokens of the prompt the model will get.
    pub prompt_tokens: u64,
    /// The review is sensitive: only local models may see it.
    pub sensitive: bool,
    /// A family to steer away from (the verifier passes the finders' family).
    pub avoid_family: Option<String>,
}

impl TaskNeeds {
    /// The usual needs of a stage: `scout` answers JSON with light reasoning; `planner` answers
    /// JSON with deep reasoning; `verifier`, `synthesizer`, `criteria` and `conformance` answer JSON
    /// with medium reasoning;
    /// anything else is specialist work — tools, JSON, medium reasoning. Prompt size, sensitivity
    /// and the avoided family are the caller's to set.
    pub fn new(task_type: impl Into<String>) -> TaskNeeds {
        let task_type = task_type.into();
        let (tool_use, reasoning) = match task_key(&task_type).as_str() {
            "scout" => (false, Tier::Low),
            "planner" => (false, Tier::High),
            "verifier" | "synthesizer" | "criteria" | "conformance" | "adjudicator" => {
                (false, Tier::Medium)
            }
            _ => (true, Tier::Medium),
        };
        TaskNeeds {
            task_type,
            tool_use,
            json: true,
            reasoning,
            prompt_tokens: 0,
            sensitive: false,
            avoid_family: None,
        }
    }

    fn is_specialist_work(&self) -> bool {
        !NON_SPECIALIST_STAGES.contains(&task_key(&self.task_type).as_str())
    }

    /// The words strengths and weaknesses are matched against.
    fn keywords(&self) -> Vec<String> {
        let mut words = words_of(&self.task_type);
        if self.tool_use {
            words.extend(["tools".to_string(), "tool".to_string()]);
        }
        if self.json {
            words.push("json".to_string());
        }
        if self.reasoning == Tier::High {
            words.push("reasoning".to_string());
        }
        words
    }
}

/// Lowercase words of at least three characters: short fragments match too much by accident.
fn words_of(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// One card's score for one task, with its parts so the choice can be explained and logged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    pub model: String,
    pub total: f64,
    pub parts: Vec<(&'static str, f64)>,
    pub eligible: bool,
    /// Every hard constraint the card breaks, joined with `; `.
    pub why_ineligible: Option<String>,
}

impl Score {
    /// The value of a named part, if it applied.
    pub fn part(&self, name: &str) -> Option<f64> {
        self.parts.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// `total 3.15 (tool_use +2.00, size_band +1.00, ...)`, or the reason it is ineligible.
    pub fn explain(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(n, v)| format!("{n} {v:+.2}"))
            .collect();
        match &self.why_ineligible {
            Some(why) => format!("ineligible: {why}"),
            None => format!("total {:.2} ({})", self.total, parts.join(", ")),
        }
    }
}

/// Scores `card` for `needs` (see the module documentation for the table).
pub fn score(card: &ModelCard, needs: &TaskNeeds) -> Score {
    let avoid: Vec<&str> = needs.avoid_family.iter().map(String::as_str).collect();
    score_avoiding(card, needs, &avoid)
}

fn score_avoiding(card: &ModelCard, needs: &TaskNeeds, avoid_families: &[&str]) -> Score {
    let eff = card.effective();
    let params = valid_params(card.vendor.parameter_count);
    let task = task_key(&needs.task_type);
    let caps = &card.vendor.capabilities;
    let needed_context = needs.prompt_tokens.saturating_add(OUTPUT_RESERVE_TOKENS);

    let mut why = Vec::new();
    if needs.sensitive && eff.locality == Some(Locality::Remote) {
        why.push("remote model on a sensitive review".to_string());
    }
    if let Some(ctx) = card.vendor.context_length {
        if ctx < needed_context {
            why.push(format!(
                "context of {ctx} tokens is below the {needed_context} the task needs"
            ));
        }
    }
    if eff.avoid_tasks.iter().any(|t| task_key(t) == task) {
        why.push(format!("operator avoids it for {task} tasks"));
    }
    if caps.iter().any(|c| c == "embedding") && !caps.iter().any(|c| c == "completion") {
        why.push("embedding-only model".to_string());
    }

    let level = |t: Option<Tier>| f64::from(t.unwrap_or(Tier::Medium).level());
    let mut parts: Vec<(&'static str, f64)> = Vec::new();
    if needs.tool_use {
        parts.push(("tool_use", W_TOOL_USE * level(eff.tool_use)));
        if needs.prompt_tokens > LONG_PROMPT_TOKENS && params.is_some_and(|p| p <= SMALL_MODEL_B) {
            parts.push(("small_model_long_prompt", W_SMALL_MODEL));
        }
    }
    if needs.json {
        parts.push(("json", W_JSON * level(eff.json_compliance)));
    }
    let short = f64::from(needs.reasoning.level()) - level(eff.reasoning);
    parts.push(("reasoning", W_REASONING_SHORT * short.max(0.0)));
    if let Some(ctx) = card.vendor.context_length {
        if ctx > 0 && (needed_context as f64) > 0.75 * ctx as f64 {
            parts.push(("context_headroom", W_CONTEXT_TIGHT));
        }
    }
    if needs.is_specialist_work() {
        parts.push(("size_band", W_SIZE_BAND * size_band(params)));
    }
    if let Some(stats) = card.runtime_for(&task) {
        if let Some(rate) = stats.success_rate() {
            parts.push(("success_rate", W_SUCCESS * (rate - SUCCESS_NEUTRAL)));
            let latency = if stats.latency_ms_avg.is_finite() {
                (stats.latency_ms_avg.max(0.0) / LATENCY_SCALE_MS).min(1.0)
            } else {
                1.0
            };
            parts.push(("latency", W_LATENCY * latency));
        }
    }
    let load = if card.load.is_finite() {
        card.load.clamp(0.0, 2.0)
    } else {
        2.0
    };
    parts.push(("load", W_LOAD * load));
    if eff.recommended_tasks.iter().any(|t| task_key(t) == task) {
        parts.push(("recommended", W_RECOMMENDED));
    }
    let keywords = needs.keywords();
    let matching = |list: &[String]| {
        list.iter()
            .filter(|s| task_key(s) == task || words_of(s).iter().any(|w| keywords.contains(w)))
            .count()
            .min(2) as f64
    };
    let strengths = matching(&eff.strengths);
    if strengths > 0.0 {
        parts.push(("strengths", W_STRENGTH * strengths));
    }
    let weaknesses = matching(&eff.weaknesses);
    if weaknesses > 0.0 {
        parts.push(("weaknesses", -W_STRENGTH * weaknesses));
    }
    parts.push(("cost", W_COST * level(eff.cost_tier)));
    parts.push(("speed", W_SPEED * level(eff.speed_tier)));
    let family = lineage(&card.family());
    if avoid_families.iter().any(|f| lineage(f) == family) {
        parts.push(("same_family", W_SAME_FAMILY));
    }

    let total = parts.iter().map(|(_, v)| v).sum();
    Score {
        model: card.name.clone(),
        total,
        parts,
        eligible: why.is_empty(),
        why_ineligible: (!why.is_empty()).then(|| why.join("; ")),
    }
}

/// 1 inside the preferred band, tapering proportionally outside it (half at 6B or 40B), 0.5 when
/// the size is unknown so an unknown model is neither favoured nor punished.
fn size_band(params: Option<f64>) -> f64 {
    let (low, high) = SIZE_BAND_B;
    match params {
        None => 0.5,
        Some(p) if p < low => p / low,
        Some(p) if p > high => high / p,
        Some(_) => 1.0,
    }
}

/// Higher total first; ties by name, then node, so the order of `cards` never matters.
pub(crate) fn better(a: (&ModelCard, &Score), b: (&ModelCard, &Score)) -> Ordering {
    a.1.total
        .total_cmp(&b.1.total)
        .then_with(|| b.0.name.cmp(&a.0.name))
        .then_with(|| b.0.node.cmp(&a.0.node))
}

fn best(
    cards: &[ModelCard],
    mut score_of: impl FnMut(&ModelCard) -> Score,
) -> Option<(&ModelCard, Score)> {
    cards
        .iter()
        .map(|c| (c, score_of(c)))
        .filter(|(_, s)| s.eligible)
        .max_by(|a, b| better((a.0, &a.1), (b.0, &b.1)))
}

/// The best eligible card for `needs`, with its score; `None` when no card is eligible.
pub fn choose<'a>(cards: &'a [ModelCard], needs: &TaskNeeds) -> Option<(&'a ModelCard, Score)> {
    best(cards, |c| score(c, needs))
}

/// The best eligible verifier, steering away from every finder family (and `needs.avoid_family`).
/// The flag is true when the chosen model shares a family with a finder: verification is degraded
/// and the report must say so.
pub fn choose_verifier<'a>(
    cards: &'a [ModelCard],
    needs: &TaskNeeds,
    finder_families: &[String],
) -> Option<(&'a ModelCard, Score, bool)> {
    let mut avoid: Vec<&str> = finder_families.iter().map(String::as_str).collect();
    if let Some(f) = needs.avoid_family.as_deref() {
        avoid.push(f);
    }
    let (card, score) = best(cards, |c| score_avoiding(c, needs, &avoid))?;
    let family = lineage(&card.family());
    let degraded = finder_families.iter().any(|f| lineage(f) == family);
    Some((card, score, degraded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_band_is_one_inside_and_tapers_outside() {
        assert_eq!(size_band(Some(12.0)), 1.0);
        assert_eq!(size_band(Some(20.0)), 1.0);
        assert_eq!(size_band(Some(6.0)), 0.5);
        assert_eq!(size_band(Some(40.0)), 0.5);
        assert_eq!(size_band(None), 0.5);
    }

    #[test]
    fn runtime_keys_ignore_case_and_stages_have_presets() {
        let mut card = ModelCard::default();
        card.record(" Specialist ", true, 1, 1, 10);
        assert_eq!(card.runtime_for("specialist").map(|s| s.calls), Some(1));
        assert!(card.runtime.contains_key("specialist"));

        let planner = TaskNeeds::new("planner");
        assert!(!planner.tool_use && planner.json && planner.reasoning == Tier::High);
        let persona = TaskNeeds::new("security-auditor");
        assert!(persona.tool_use && persona.is_specialist_work());
        assert!(!TaskNeeds::new("Verifier").is_specialist_work());
    }

    #[test]
    fn scores_explain_themselves() {
        let card = ModelCard {
            name: "m".into(),
            load: f64::NAN,
            ..ModelCard::default()
        };
        let s = score(&card, &TaskNeeds::new("scout"));
        assert!(s.eligible);
        assert_eq!(s.part("load"), Some(-4.0));
        assert!(s.total.is_finite());
        assert!(s.explain().starts_with("total "), "{}", s.explain());
        assert!(s.explain().contains("load -4.00"));
    }
}
