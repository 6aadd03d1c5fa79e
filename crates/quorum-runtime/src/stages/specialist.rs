//! A specialist task: the persona's prompt, its files and scope, the engine-injected findings
//! format, then the tool loop over the pack; the answer's findings are normalised, never trusted.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use crate::stages::scope::{analyzer_leads_section, specialist_scope_sections_in};
use quorum_core::flows::flow::Role;
use quorum_core::review::finding::RawFinding;
use quorum_core::schema;
use quorum_core::task::Task;
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

pub fn specialist_prompt(
    ctx: &ReviewContext,
    task: &Task,
    prior_error: Option<&str>,
) -> Result<(String, String), AttemptError> {
    specialist_prompt_in(ctx, task, prior_error, &[], ctx.budget())
}

/// The least of its material a specialist must be able to see (about 20 lines of code) for a
/// request to be worth sending.
pub const MIN_MATERIAL_TOKENS: u32 = 256;

/// The heading of a specialist's section of its teammates' insights.
pub const TEAMMATE_INSIGHTS: &str = "Insights from teammates";
/// The heading of the planner's section of earlier reviews' insights.
pub const EARLIER_INSIGHTS: &str = "Insights from earlier reviews";

/// [`specialist_prompt`] with the teammates' insights chosen for the task, fitted to `budget`.
pub fn specialist_prompt_in(
    ctx: &ReviewContext,
    task: &Task,
    prior_error: Option<&str>,
    insights: &[quorum_core::memory::Offered],
    budget: ContextBudget,
) -> Result<(String, String), AttemptError> {
    let persona = ctx
        .catalog
        .get(&task.persona)
        .map_err(|e| AttemptError::Internal(e.to_string()))?;
    // The persona's guidance gets at most a share of the window; the material gets the rest.
    let persona_cap = (budget.input_tokens() as f64 * ctx.flow.parameters.persona_share) as u32;
    let fitted_persona = weaver::persona_prefix_within(persona, &ctx.catalog, persona_cap);
    if fitted_persona.omitted_heuristics + fitted_persona.omitted_examples > 0 {
        tracing::debug!(
            task = %task.id,
            persona = %task.persona,
            window = budget.context_tokens,
            omitted_heuristics = fitted_persona.omitted_heuristics,
            omitted_examples = fitted_persona.omitted_examples,
            "persona prompt shortened to fit the window"
        );
    }
    let mut system = fitted_persona.text;
    let _ = write!(
        system,
        "\n{DATA_NOT_INSTRUCTIONS}\n\n{}\n",
        schema::FINDINGS_FORMAT
    );
    // A flow may add to the output contract (document review's routing fields).
    let extra = ctx.instructions(Role::Specialist);
    if !extra.is_empty() {
        let _ = write!(system, "\n## This review's additional rules\n{extra}\n");
    }
    if !task.tools.is_empty() {
        let _ = write!(
            system,
            "\nYou may call these tools: {}. {}\n",
            task.tools.join(", "),
            schema::TEXT_TOOL_CALL_FORMAT
        );
    }
    // Tool definitions travel with every request and take context too.
    let tool_json = serde_json::to_string(&crate::tools::specs(&task.tools)).unwrap_or_default();
    let fixed = format!("{system}{tool_json}");
    // With tools, the loop's history needs room too: what the system prompt leaves below the
    // compaction threshold is split between the excerpts and one turn of tool results (at
    // most half for the history: the seed's split of retrieved context against conversation
    // history), so the first turn does not start over it. Compaction keeps later turns in.
    let fit_budget = if task.tools.is_empty() {
        budget
    } else {
        let sys = weaver::estimate_tokens(&fixed);
        let compact_at = (budget.input_tokens() as f64 * crate::history::COMPACT_AT) as u32;
        let room = compact_at.saturating_sub(sys);
        let p = &ctx.flow.parameters;
        let one_turn = p
            .max_tool_calls_per_turn
            .max(1)
            .saturating_mul(p.max_tool_result_tokens.max(1));
        let history = (room / 2).min(one_turn);
        ContextBudget {
            context_tokens: budget.output_tokens + sys + room - history,
            output_tokens: budget.output_tokens,
        }
    };
    let mut head = format!("## Task {}\n{}\n", task.id, task.mandate);
    if !task.verification.trim().is_empty() {
        let _ = writeln!(
            head,
            "\nA checker will verify findings by: {}",
            task.verification.trim()
        );
    }
    if let Some(err) = prior_error {
        let _ = writeln!(
            head,
            "\n## Previous attempt failed\n{err}\nAvoid repeating that mistake."
        );
    }
    // The change's hunks get a share of what the task section can hold once the fixed part
    // is in, so nothing after them (the left-out notes, the file list) is ever cut.
    let room = fit_budget
        .input_tokens()
        .saturating_sub(weaver::estimate_tokens(&fixed));
    head.push_str(&specialist_scope_sections_in(ctx, task, room));
    head.push_str(&analyzer_leads_section(ctx, task));
    // Teammates' insights are a hint, never the bulk of the prompt: a quarter of the room at
    // most (the files keep the rest).
    head.push_str(&quorum_core::memory::section(
        TEAMMATE_INSIGHTS,
        insights,
        (room / 4).min(1_500),
    ));
    if task.files.is_empty() {
        head.push_str(
            "\nNo files were assigned: use the tools to find what your mandate covers.\n",
        );
    } else {
        let _ = writeln!(head, "\n## Files\n{}", task.files.join("\n"));
    }
    let bodies: Vec<String> = task
        .files
        .iter()
        .filter_map(|p| {
            let f = ctx.pack.get(p)?;
            let text = ctx.pack.read_lines(&f.path, 1, f.line_count).ok()?;
            Some(weaver::delimit(&f.path, &text))
        })
        .collect();
    let mut slots = vec![Slot {
        name: "task",
        content: &head,
        weight: 1000,
    }];
    for b in &bodies {
        slots.push(Slot {
            name: "file",
            content: b,
            weight: 10,
        });
    }
    let fitted = fit_budget.fit(&fixed, &slots);
    let mut user = String::with_capacity(fitted.iter().map(|s| s.len()).sum::<usize>() + 64);
    for (i, s) in fitted.iter().enumerate() {
        if i == 1 {
            user.push_str("\n## File contents (numbered lines)\n");
        }
        user.push_str(s);
    }
    Ok((system, user))
}

/// Findings one specialist attempt produced.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SpecialistOutput {
    pub findings: Vec<RawFinding>,
    /// Objects in the answer that were not usable findings.
    pub invalid: usize,
    pub iterations: u32,
    pub stage: StageStats,
}

pub async fn specialist(
    ctx: &ReviewContext,
    task: &Task,
    prior_error: Option<&str>,
    insights: &[quorum_core::memory::Offered],
) -> Result<SpecialistOutput, AttemptError> {
    if let Some(probe) = &task.probe {
        let (findings, stage) = crate::stages::probe::probe(ctx, task, probe).await?;
        return Ok(SpecialistOutput {
            findings,
            invalid: 0,
            iterations: 1,
            stage,
        });
    }
    let (system, user) = specialist_prompt_in(ctx, task, prior_error, insights, ctx.budget())?;
    let (client, model) = ctx.pick(&task.persona, &system, &user, task.model.as_deref())?;
    let budget = ctx.budget_for(&client, &model);
    let (system, user) = if budget == ctx.budget() {
        (system, user)
    } else {
        specialist_prompt_in(ctx, task, prior_error, insights, budget)?
    };
    // The system prompt is never cut (only shortened by whole sections, above): when it and
    // the tool definitions leave no room for the answer and a first screen of the material,
    // no request can give a review, and the operator has to give the model a larger window.
    // Said once, clearly, instead of sending requests the server must refuse.
    let fixed = weaver::estimate_tokens(&system)
        + weaver::estimate_tokens(
            &serde_json::to_string(&crate::tools::specs(&task.tools)).unwrap_or_default(),
        );
    if fixed + MIN_MATERIAL_TOKENS > budget.input_tokens() {
        return Err(AttemptError::Config(format!(
            "the instructions of persona {} need about {fixed} tokens, which with the answer's \
             {} leave less than {MIN_MATERIAL_TOKENS} of model {model}'s {}-token context window \
             for the material: serve it with a larger one (llama-server -c, vLLM \
             --max-model-len, Ollama num_ctx via the flow's context_tokens)",
            task.persona, budget.output_tokens, budget.context_tokens
        )));
    }
    let mut spec = ctx.call_spec(budget, &model);
    if let Some(pass) = &task.pass {
        // Passes differ by the order they read in and by sampling.
        spec.temperature = pass.temperature;
    }
    let p = &ctx.flow.parameters;
    let limits = agent::LoopLimits {
        max_iterations: p.max_iterations,
        budget,
        max_tool_calls_per_turn: p.max_tool_calls_per_turn,
        max_tool_result_tokens: p.max_tool_result_tokens,
    };
    let mut stats = CallStats::default();
    let outcome = agent::tool_loop(
        &client,
        &spec,
        &ctx.pack,
        &task.tools,
        &system,
        &user,
        schema::findings_schema(),
        limits,
        ctx.board.as_deref().map(|board| crate::tools::BoardAccess {
            board,
            flow_id: &ctx.flow_id,
            author: &task.persona,
        }),
        &mut stats,
    )
    .await?;
    let expect = Expect::Objects {
        keys: &["findings", "issues", "results"],
        id_key: "title",
    };
    let values = match quorum_core::parse::extract_objects(
        &outcome.final_text,
        &["findings", "issues", "results"],
        "title",
    ) {
        Ok((v, rec)) => {
            stats.recovery = Some(rec);
            v
        }
        Err(first) => {
            // One repair turn, naming what was wrong: an empty answer is not "no findings"
            // (only an explicit empty list is), and prose may describe findings.
            let what = match first {
                quorum_core::parse::ParseError::Empty => {
                    "Your previous answer was empty (malformed_output: empty). An empty answer \
                     is not a result: if you found nothing, answer {\"findings\": []}."
                        .to_string()
                }
                other => format!(
                    "Your previous answer could not be read as findings JSON \
                     (malformed_output: {other}):\n{}",
                    weaver::delimit("previous answer", &agent::snippet_long(&outcome.final_text))
                ),
            };
            let repair_user = format!(
                "{user}\n\n## Your previous answer\n{what}\n\nAnswer with the findings JSON only."
            );
            let (parsed, _) = agent::json_call(
                &client,
                &spec,
                &system,
                &repair_user,
                schema::findings_schema(),
                expect,
                &mut stats,
            )
            .await?;
            match parsed {
                Parsed::Objects(v) => v,
                Parsed::Object(v) => vec![v],
            }
        }
    };
    let mut findings = Vec::new();
    let mut invalid = 0;
    for v in &values {
        // An empty wrapper ({"findings": []} parsed as the object itself) is not a finding.
        if v.get("findings").is_some() {
            continue;
        }
        match schema::normalize_finding(v) {
            Ok(f) => findings.push(f),
            Err(why) => {
                invalid += 1;
                tracing::debug!(task = %task.id, %why, "unusable finding object");
            }
        }
    }
    Ok(SpecialistOutput {
        findings,
        invalid,
        iterations: outcome.iterations,
        stage: StageStats { model, stats },
    })
}
