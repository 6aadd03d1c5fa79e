//! The scout: deterministic facts about the pack plus one model judgment of what the material
//! is (domain, languages, frameworks, content types, review focus); a failed call falls back to a
//! facts-only classification (the machine's).

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use quorum_core::flows::flow::Role;
use quorum_core::schema;
use quorum_core::task::Classification;
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

/// The deterministic half of the scout, and its prompt. Pure: unit-testable without a model.
pub fn scout_prompt(ctx: &ReviewContext) -> (String, String) {
    scout_prompt_in(ctx, ctx.budget())
}

/// [`scout_prompt`] fitted to `budget`.
pub fn scout_prompt_in(ctx: &ReviewContext, budget: ContextBudget) -> (String, String) {
    let facts = ctx.pack.facts();
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"domain\": \
         \"software|legal|financial|scientific|documentation|mixed\", \"languages\": [..], \
         \"frameworks\": [..], \"content_types\": [..], \"review_focus\": [..]}}",
        ctx.instructions(Role::Scout)
    );
    let mut head = String::new();
    let _ = writeln!(
        head,
        "## Facts\nfiles: {}\nlines: {}\nskipped: {}",
        facts.file_count, facts.total_lines, facts.skipped_count
    );
    let langs: Vec<String> = facts
        .languages
        .iter()
        .map(|(l, n)| format!("{l} ({n})"))
        .collect();
    let _ = writeln!(head, "languages: {}", langs.join(", "));
    let kinds: Vec<String> = facts
        .kinds
        .iter()
        .map(|(k, n)| format!("{k} ({n})"))
        .collect();
    let _ = writeln!(head, "kinds: {}", kinds.join(", "));
    let _ = writeln!(head, "key files: {}", facts.key_files.join(", "));
    let tree = weaver::delimit("file tree", &ctx.pack.tree(200, 4));
    let excerpts: Vec<String> = facts
        .key_files
        .iter()
        .take(6)
        .filter_map(|p| {
            ctx.pack
                .read_lines(p, 1, 60)
                .ok()
                .map(|t| weaver::delimit(p, &t))
        })
        .collect();
    let joined = excerpts.join("\n");
    let fitted = budget.fit(
        &system,
        &[
            Slot {
                name: "facts",
                content: &head,
                weight: 1,
            },
            Slot {
                name: "tree",
                content: &tree,
                weight: 2,
            },
            Slot {
                name: "excerpts",
                content: &joined,
                weight: 3,
            },
        ],
    );
    let user = format!(
        "{}\n## Tree\n{}\n## Key file excerpts\n{}",
        fitted[0], fitted[1], fitted[2]
    );
    (system, user)
}

pub async fn scout(ctx: &ReviewContext) -> Result<(Classification, StageStats), AttemptError> {
    let (system, user) = scout_prompt(ctx);
    let (client, model) = ctx.pick("scout", &system, &user, None)?;
    let budget = ctx.budget_for(&client, &model);
    let (system, user) = if budget == ctx.budget() {
        (system, user)
    } else {
        scout_prompt_in(ctx, budget)
    };
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &client,
        &ctx.call_spec(budget, &model),
        &system,
        &user,
        schema::classification_schema(),
        Expect::Object,
        &mut stats,
    )
    .await?;
    let Parsed::Object(v) = parsed else {
        return Err(AttemptError::Internal("expected an object".into()));
    };
    Ok((
        schema::normalize_classification(&v),
        StageStats { model, stats },
    ))
}
