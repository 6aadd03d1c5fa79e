//! A model the planner or a persona named, resolved: kept when it exists and may run the task,
//! else replaced by the automatic choice, saying why.

use super::card::ModelCard;
use super::score::{better, choose, score, Score, TaskNeeds};
use serde::{Deserialize, Serialize};

/// The model a task will run on, and whether it differs from the one requested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub model: String,
    /// The node of the chosen card: dispatch to this (model, node) pair, because the same name may
    /// be served elsewhere by a card that is not eligible (a remote endpoint, a full node).
    pub node: String,
    /// The requested name that was replaced (unknown, or not allowed to run this task), for logging.
    pub replaced: Option<String>,
    /// One line saying why this model: `requested`, the auto-selection score, or what was wrong
    /// with the requested one.
    pub reason: String,
}

/// Why no model could be resolved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectionError {
    #[error("no model can run {task_type} tasks: {reasons}")]
    NoEligibleModel { task_type: String, reasons: String },
}

/// Resolves a requested model name for a task. `None`, `""` and `"auto"` (any case) select by
/// score. A name matches a card exactly, else case-insensitively, else with Ollama's `:latest`
/// tag added or removed. A name that matches no card, or matches only cards that are ineligible for
/// this task (for example a remote model on a sensitive review), is replaced by the best-scoring
/// eligible card and reported in `replaced`. Fails only when no card is eligible at all.
pub fn resolve_requested(
    cards: &[ModelCard],
    requested: Option<&str>,
    needs: &TaskNeeds,
) -> Result<Resolution, SelectionError> {
    let requested = requested.map(str::trim).filter(|r| !r.is_empty());
    let requested = requested.filter(|r| !r.eq_ignore_ascii_case("auto"));

    let mut problem = None;
    if let Some(name) = requested {
        let exact: Vec<&ModelCard> = cards.iter().filter(|c| c.name == name).collect();
        let matches: Vec<&ModelCard> = if exact.is_empty() {
            cards
                .iter()
                .filter(|c| names_match(&c.name, name))
                .collect()
        } else {
            exact
        };
        if matches.is_empty() {
            problem = Some(format!("unknown model {name:?}"));
        } else {
            let scored: Vec<(&ModelCard, Score)> =
                matches.iter().map(|c| (*c, score(c, needs))).collect();
            let kept = scored
                .iter()
                .filter(|(_, s)| s.eligible)
                .max_by(|a, b| better((a.0, &a.1), (b.0, &b.1)));
            if let Some((card, _)) = kept {
                return Ok(Resolution {
                    model: card.name.clone(),
                    node: card.node.clone(),
                    replaced: None,
                    reason: "requested".to_string(),
                });
            }
            let why = scored
                .first()
                .and_then(|(_, s)| s.why_ineligible.clone())
                .unwrap_or_default();
            problem = Some(format!("requested model {name:?} is ineligible: {why}"));
        }
    }

    match choose(cards, needs) {
        Some((card, score)) => {
            let chosen = format!(
                "chose {} for {} ({})",
                card.name,
                needs.task_type,
                score.explain()
            );
            Ok(Resolution {
                model: card.name.clone(),
                node: card.node.clone(),
                replaced: requested.map(str::to_string),
                reason: match problem {
                    Some(p) => format!("{p}; {chosen}"),
                    None => format!("auto: {chosen}"),
                },
            })
        }
        None => {
            let mut reasons: Vec<String> = cards
                .iter()
                .map(|c| {
                    let s = score(c, needs);
                    format!("{}: {}", c.name, s.why_ineligible.unwrap_or_default())
                })
                .collect();
            if reasons.is_empty() {
                reasons.push("no models are configured".to_string());
            }
            Err(SelectionError::NoEligibleModel {
                task_type: needs.task_type.clone(),
                reasons: reasons.join("; "),
            })
        }
    }
}

/// Case-insensitive name equality, treating `name` and `name:latest` as the same Ollama model.
fn names_match(card: &str, requested: &str) -> bool {
    let strip = |s: &str| {
        let lower = s.trim().to_lowercase();
        lower
            .strip_suffix(":latest")
            .map(str::to_string)
            .unwrap_or(lower)
    };
    strip(card) == strip(requested)
}
