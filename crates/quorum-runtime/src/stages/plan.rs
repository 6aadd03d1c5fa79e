//! The planner: the prompt (classification, the catalog ranked for the material, the pack's
//! tree or atlas, the review's scope and leads), the model's plan read resiliently and validated
//! (unknown personas, files outside the pack, empty mandates rejected and logged), and the
//! flow's rules (dimensions, coverage, team, full coverage) applied to what it returned.

use crate::agent::{self, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use crate::stages::call::StageStats;
use crate::stages::scope::planner_scope_section;
use crate::stages::selection::select_personas;
use crate::stages::specialist::EARLIER_INSIGHTS;
use quorum_core::flows::fit::{fit_plan, PlanBudget};
use quorum_core::flows::flow::Role;
use quorum_core::flows::selection::SelectionRecord;
use quorum_core::schema;
use quorum_core::task::{Classification, RejectedTask, Task};
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

pub fn planner_prompt(
    ctx: &ReviewContext,
    classification: &Classification,
    previous_errors: &[String],
    roster: Option<&[String]>,
) -> (String, String) {
    planner_prompt_in(ctx, classification, previous_errors, roster, ctx.budget())
}

/// [`planner_prompt`] fitted to `budget`.
pub fn planner_prompt_in(
    ctx: &ReviewContext,
    classification: &Classification,
    previous_errors: &[String],
    roster: Option<&[String]>,
    budget: ContextBudget,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\n{} Answer with one JSON \
         object: {{\"tasks\": [{{\"id\": \"t1\", \"persona\": \"<name from the catalog>\", \
         \"files\": [\"<path from the file list>\"], \"mandate\": \"what to look for\", \
         \"tools\": [\"file_read\", \"file_grep\"], \"verification\": \"how to confirm\"}}]}}",
        ctx.instructions(Role::Planner),
        PlanBudget::for_material(&ctx.flow, &ctx.pack, classification).describe()
    );
    let mut files = String::new();
    let atlas = quorum_core::pack::atlas::LIST_FILES_UP_TO;
    let (files_heading, files) = if ctx.pack.len() > atlas {
        // Too many paths to read (or to fit): the planner sees the directories and assigns
        // them; validation expands each `dir/` to the files under it, boundedly.
        let summary = quorum_core::pack::atlas::directory_summary(&ctx.pack, 120);
        (
            format!(
                "## Directories ({} files; name a directory as `path/` in a task's files to give it                  up to {} files under it)",
                ctx.pack.len(),
                quorum_core::pack::atlas::FILES_PER_DIRECTORY_ENTRY
            ),
            summary,
        )
    } else {
        for f in ctx.pack.files.values() {
            let _ = writeln!(
                files,
                "- {} ({}, {}, {} lines)",
                f.path,
                f.language,
                f.kind.as_str(),
                f.line_count
            );
        }
        ("## File list".to_string(), files)
    };
    let class = serde_json::to_string_pretty(classification).unwrap_or_default();
    let ranked = quorum_core::flows::selection::rank_for_planner(
        &ctx.catalog,
        &ctx.pack,
        classification,
        roster,
    );
    let catalog = quorum_core::flows::selection::planner_catalog(&ranked);
    let mut errors = String::new();
    if !previous_errors.is_empty() {
        errors.push_str("## Your previous plan was rejected\n");
        for e in previous_errors {
            let _ = writeln!(errors, "- {e}");
        }
        errors.push_str("Use only persona names from the catalog and paths from the file list.\n");
    }
    let files = weaver::delimit("file list", &files);
    let models = if ctx.backends.is_auto() && ctx.backends.cards().len() > 1 {
        format!(
            "## Models\nYou may set \"model\" on a task to one of these names; omit it to let the \
             engine choose.\n{}\n",
            ctx.backends.models_list()
        )
    } else {
        String::new()
    };
    let fitted = budget.fit(
        &system,
        &[
            Slot {
                name: "catalog",
                content: &catalog,
                weight: 3,
            },
            Slot {
                name: "files",
                content: &files,
                weight: 3,
            },
        ],
    );
    let dimensions = if ctx.flow.dimensions.is_empty() {
        String::new()
    } else {
        format!(
            "## Required dimensions\nEvery dimension needs a task; set \"dimension\" on each \
             task. Personas that serve each one:\n{}\n",
            quorum_core::flows::coverage::dimensions_prompt(&ctx.flow)
        )
    };
    let user = format!(
        "## Classification\n{class}\n\n## Persona catalog\n{}\n{files_heading}\n{}\n{dimensions}{models}{errors}",
        fitted[0], fitted[1]
    );
    let memory = ctx
        .scope
        .memory
        .as_ref()
        .map(|m| {
            quorum_core::memory::section(
                EARLIER_INSIGHTS,
                &m.offered,
                (budget.input_tokens() / 10).min(2_000),
            )
        })
        .unwrap_or_default();
    (system, user + &planner_scope_section(ctx) + &memory)
}

/// The planner's validated output.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub tasks: Vec<Task>,
    pub rejected: Vec<RejectedTask>,
    /// Two-tier selection's decisions, when the flow selects its roster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionRecord>,
    pub stage: StageStats,
}

/// The flow's deterministic rules on a plan: gaps in its coverage become tasks, its team's
/// always-on and signalled members are seated, unsignalled conditional members are refused,
/// and with `--coverage full` every file still in no task is batched into tasks.
pub(crate) fn apply_flow_rules(
    ctx: &ReviewContext,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
) -> Vec<RejectedTask> {
    let mut refused = quorum_core::flows::coverage::complete_plan(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        tasks,
    );
    refused.extend(quorum_core::judging::docreview::complete_team(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        tasks,
    ));
    // `--coverage full`: every file the tasks so far leave out, in directory batches.
    refused.extend(quorum_core::flows::coverage::add_full_coverage(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        tasks,
    ));
    // Last, so the lane never stands in for a gap the coverage rules would have filled.
    refused.extend(quorum_core::flows::coverage::add_fresh_eyes(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        tasks,
    ));
    // Self-consistency: every open task so far asked in the flow's passes (probes are not).
    quorum_core::flows::passes::add_passes(&ctx.flow, tasks);
    // The narrow probes come after every open task: they add questions, never coverage.
    refused.extend(quorum_core::flows::probes::add_probes(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        tasks,
    ));
    refused
}

/// Selection instead of the planner: every selected persona gets its own task, on the files
/// its triggers meet, with no model call; then the flow's deterministic rules, as after any
/// plan. An empty roster is a plan of the flow's rules alone.
pub(crate) fn plan_from_selection(
    ctx: &ReviewContext,
    record: &SelectionRecord,
    max_files: usize,
) -> Plan {
    let stage_tools = &ctx.flow.stage(Role::Specialist).tools;
    let (mut tasks, mut rejected) = quorum_core::flows::selection::tasks_from_selection(
        record,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        max_files,
    );
    rejected.extend(apply_flow_rules(ctx, stage_tools, &mut tasks));
    tracing::info!(
        tasks = tasks.len(),
        "plan from selection: one task per selected persona, no planner call"
    );
    Plan {
        tasks,
        rejected,
        selection: Some(record.clone()),
        stage: StageStats {
            model: String::new(),
            stats: CallStats::default(),
        },
    }
}

/// Plan, and re-plan with the rejection reasons when no task survives validation.
pub async fn plan(
    ctx: &ReviewContext,
    classification: &Classification,
) -> Result<Plan, AttemptError> {
    let mut selection = select_personas(ctx, classification).await;
    if let (Some(sel), Some(record)) = (ctx.flow.selection.as_ref(), selection.as_ref()) {
        if sel.instead_of_planner {
            return Ok(plan_from_selection(ctx, record, sel.max_files_per_task));
        }
    }
    let roster_owned: Option<Vec<String>> = selection.as_ref().map(|s| s.selected.clone());
    let roster = roster_owned.as_deref();
    let (probe_system, probe_user) = planner_prompt(ctx, classification, &[], roster);
    let (client, model) = ctx.pick("planner", &probe_system, &probe_user, None)?;
    let budget = ctx.budget_for(&client, &model);
    let spec = ctx.call_spec(budget, &model);
    let stage_tools = &ctx.flow.stage(Role::Specialist).tools;
    let personas: Vec<&str> = ctx
        .catalog
        .reviewers()
        .filter(|p| roster.is_none_or(|r| r.contains(&p.name)))
        .map(|p| p.name.as_str())
        .collect();
    let files: Vec<&str> = ctx.pack.files.keys().map(String::as_str).collect();
    let mut stats = CallStats::default();
    let mut errors: Vec<String> = Vec::new();
    let mut all_rejected = Vec::new();
    for round in 0..=ctx.flow.parameters.planner_retries {
        let (system, user) = planner_prompt_in(ctx, classification, &errors, roster, budget);
        let parsed = agent::json_call(
            &client,
            &spec,
            &system,
            &user,
            schema::tasks_schema_for(&personas, &files, ctx.flow.parameters.max_tasks),
            Expect::Objects {
                keys: &["tasks", "plan"],
                id_key: "id",
            },
            &mut stats,
        )
        .await;
        let values = match parsed {
            Ok((Parsed::Objects(v), _)) => v,
            Ok((Parsed::Object(v), _)) => vec![v],
            Err(e @ AttemptError::MalformedOutput { .. }) => {
                errors = vec![e.to_string()];
                continue;
            }
            Err(e) => return Err(e),
        };
        let values = quorum_core::parse::dedup_by_key(values, "id");
        let (mut tasks, mut rejected) = schema::validate_tasks(
            &values,
            &ctx.catalog,
            &ctx.pack,
            stage_tools,
            ctx.flow.parameters.max_tasks,
        );
        if let Some(roster) = roster {
            tasks.retain(|t| {
                let kept = roster.contains(&t.persona);
                if !kept {
                    rejected.push(RejectedTask {
                        id: t.id.clone(),
                        persona: t.persona.clone(),
                        reason: "not selected for this review (prefilter and interest poll)".into(),
                    });
                }
                kept
            });
        }
        // The plan fitted to the material: personas it gives no reason to be on it refused,
        // one persona's overlapping tasks merged, the rest within the material's budget.
        let fitted = fit_plan(
            &ctx.flow,
            &ctx.catalog,
            &ctx.pack,
            classification,
            &PlanBudget::for_material(&ctx.flow, &ctx.pack, classification),
            tasks,
        );
        let tasks = fitted.tasks;
        rejected.extend(fitted.rejected);
        if !fitted.refused.is_empty() {
            let record = selection.get_or_insert_with(Default::default);
            for r in fitted.refused {
                if !record.refused.iter().any(|x| x.persona == r.persona) {
                    record.refused.push(r);
                }
            }
        }
        for r in &rejected {
            tracing::info!(task = %r.id, persona = %r.persona, reason = %r.reason, "planner task rejected");
        }
        if !tasks.is_empty() {
            let mut tasks = tasks;
            all_rejected.extend(rejected);
            // A task over the per-task budget (a directory named whole) becomes module shards.
            all_rejected.extend(quorum_core::flows::coverage::shard_tasks(
                &ctx.flow, &ctx.pack, &mut tasks,
            ));
            all_rejected.extend(apply_flow_rules(ctx, stage_tools, &mut tasks));
            return Ok(Plan {
                tasks,
                rejected: all_rejected,
                selection: selection.clone(),
                stage: StageStats { model, stats },
            });
        }
        errors = if rejected.is_empty() {
            vec!["the plan contained no tasks".to_string()]
        } else {
            rejected
                .iter()
                .map(|r| format!("task {} ({}): {}", r.id, r.persona, r.reason))
                .collect()
        };
        tracing::warn!(round, "plan has no valid task; re-planning with the errors");
        all_rejected.extend(rejected);
    }
    // The flow's own members and coverage tasks do not depend on the planner: they are seated
    // even when it produced nothing usable.
    let mut tasks = Vec::new();
    let refused = apply_flow_rules(ctx, stage_tools, &mut tasks);
    if !tasks.is_empty() {
        tracing::warn!("no valid planner task; running the tasks the flow's rules set");
        all_rejected.extend(refused);
        return Ok(Plan {
            tasks,
            rejected: all_rejected,
            selection: selection.clone(),
            stage: StageStats { model, stats },
        });
    }
    Err(AttemptError::SchemaViolation(format!(
        "the planner produced no valid task ({})",
        errors.join("; ")
    )))
}
