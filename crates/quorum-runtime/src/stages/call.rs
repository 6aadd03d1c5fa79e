//! What every stage's model call shares: the call spec and budget a review gives a model (the
//! window it was built for, the flow's output bound), and what a stage attempt reports back.

use crate::agent::{CallSpec, CallStats};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use quorum_core::flows::flow::Role;
use quorum_core::weaver::{self, ContextBudget};

impl ReviewContext {
    /// Every call carries the window it was built for: Ollama receives it as `num_ctx`, and the
    /// client reads it to know how far to lower the model's window if the server refuses.
    pub(crate) fn call_spec(&self, budget: ContextBudget, model: &str) -> CallSpec {
        CallSpec {
            model: model.to_string(),
            max_tokens: budget.output_tokens,
            temperature: 0.1,
            num_ctx: Some(budget.context_tokens),
        }
    }

    /// The budget the flow assumes, before a model is chosen.
    pub(crate) fn budget(&self) -> ContextBudget {
        ContextBudget {
            context_tokens: self.flow.parameters.context_tokens,
            output_tokens: self.flow.parameters.max_output_tokens,
        }
    }

    /// The budget of one model: the flow's, within the window the model is known to be served
    /// with (probed, or lowered after the server refused a request). A smaller window also
    /// lowers the output bound to a quarter of it, so a short window is not all answer.
    pub fn budget_for(&self, client: &quorum_llm::LlmClient, model: &str) -> ContextBudget {
        window_budget(self.budget(), client.context_window(model))
    }

    pub(crate) fn instructions(&self, role: Role) -> &str {
        self.flow.stage(role).instructions.trim()
    }

    /// The model for one call: pinned, requested-and-eligible, or best-scoring for these needs.
    pub(crate) fn pick(
        &self,
        task_type: &str,
        system: &str,
        user: &str,
        requested: Option<&str>,
    ) -> Result<(quorum_llm::LlmClient, String), AttemptError> {
        let mut needs = quorum_core::models::TaskNeeds::new(task_type);
        needs.prompt_tokens =
            (weaver::estimate_tokens(system) + weaver::estimate_tokens(user)) as u64;
        let sel = match self.backends.select(needs.clone(), requested) {
            Ok(sel) => sel,
            // No window holds the prompt as built for the flow's budget. Only the system
            // prompt is fixed; the rest is refitted to the chosen model's window.
            Err(_) => {
                needs.prompt_tokens = weaver::estimate_tokens(system) as u64;
                self.backends
                    .select(needs, requested)
                    .map_err(|e| AttemptError::Config(e.to_string()))?
            }
        };
        Ok((sel.client, sel.model))
    }
}

/// `flow` within a model's known `window` (see [`ReviewContext::budget_for`]).
pub fn window_budget(flow: ContextBudget, window: Option<u32>) -> ContextBudget {
    match window {
        Some(w) if w < flow.context_tokens => ContextBudget {
            context_tokens: w,
            output_tokens: flow.output_tokens.min(w / 4).max(1),
        },
        _ => flow,
    }
}

/// Output of a stage attempt other than the specialists'.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct StageStats {
    pub model: String,
    pub stats: CallStats,
}
