//! The work of each stage: prompt construction, the model call, and normalisation of the answer.
//!
//! Each function is one task attempt's body; the conductor decides when it runs, how often it is
//! retried and what happens to its result. Prompts are assembled here and nowhere else, which is
//! what the prompt-construction tests pin down.

use crate::agent::{self, CallSpec, CallStats, Expect, Parsed};
use crate::context::ReviewContext;
use crate::error::AttemptError;
use quorum_core::finding::{Judged, RawFinding, Reported, Verdict};
use quorum_core::flow::Role;
use quorum_core::grounding::{self, Grounding};
use quorum_core::schema;
use quorum_core::task::{Classification, RejectedTask, Task};
use quorum_core::weaver::{self, ContextBudget, Slot, DATA_NOT_INSTRUCTIONS};
use std::fmt::Write as _;

impl ReviewContext {
    fn call_spec(&self, model: &str) -> CallSpec {
        CallSpec {
            model: model.to_string(),
            max_tokens: self.flow.parameters.max_output_tokens,
            temperature: 0.1,
            num_ctx: Some(self.flow.parameters.context_tokens),
        }
    }

    fn budget(&self) -> ContextBudget {
        ContextBudget {
            context_tokens: self.flow.parameters.context_tokens,
            output_tokens: self.flow.parameters.max_output_tokens,
        }
    }

    fn instructions(&self, role: Role) -> &str {
        self.flow.stage(role).instructions.trim()
    }

    /// The model for one call: pinned, requested-and-eligible, or best-scoring for these needs.
    fn pick(
        &self,
        task_type: &str,
        system: &str,
        user: &str,
        requested: Option<&str>,
    ) -> Result<(quorum_llm::LlmClient, String), AttemptError> {
        let mut needs = quorum_core::models::TaskNeeds::new(task_type);
        needs.prompt_tokens =
            (weaver::estimate_tokens(system) + weaver::estimate_tokens(user)) as u64;
        let sel = self
            .backends
            .select(needs, requested)
            .map_err(|e| AttemptError::Config(e.to_string()))?;
        Ok((sel.client, sel.model))
    }
}

/// Output of a stage attempt other than the specialists'.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct StageStats {
    pub model: String,
    pub stats: CallStats,
}

// ---------------------------------------------------------------------------------------------
// Scout

/// The deterministic half of the scout, and its prompt. Pure: unit-testable without a model.
pub fn scout_prompt(ctx: &ReviewContext) -> (String, String) {
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
    let fitted = ctx.budget().fit(
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

/// A classification from facts alone, used when the scout's model call fails: the review goes on
/// with a coarser plan rather than stopping.
pub fn fallback_classification(ctx: &ReviewContext) -> Classification {
    let facts = ctx.pack.facts();
    let code = facts.kinds.get("code").copied().unwrap_or(0);
    let docs = facts.kinds.get("doc").copied().unwrap_or(0);
    let domain = if code > 0 && docs > code {
        "mixed"
    } else if code > 0 {
        "software"
    } else {
        "documentation"
    };
    Classification {
        domain: domain.into(),
        languages: facts.languages.iter().map(|(l, _)| l.clone()).collect(),
        frameworks: Vec::new(),
        content_types: Vec::new(),
        review_focus: Vec::new(),
    }
}

pub async fn scout(ctx: &ReviewContext) -> Result<(Classification, StageStats), AttemptError> {
    let (system, user) = scout_prompt(ctx);
    let (client, model) = ctx.pick("scout", &system, &user, None)?;
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &client,
        &ctx.call_spec(&model),
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

// ---------------------------------------------------------------------------------------------
// Planner

pub fn planner_prompt(
    ctx: &ReviewContext,
    classification: &Classification,
    previous_errors: &[String],
    roster: Option<&[String]>,
) -> (String, String) {
    let p = &ctx.flow.parameters;
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nPlan between {} and {} tasks. Answer with one JSON \
         object: {{\"tasks\": [{{\"id\": \"t1\", \"persona\": \"<name from the catalog>\", \
         \"files\": [\"<path from the file list>\"], \"mandate\": \"what to look for\", \
         \"tools\": [\"file_read\", \"file_grep\"], \"verification\": \"how to confirm\"}}]}}",
        ctx.instructions(Role::Planner),
        p.min_tasks,
        p.max_tasks
    );
    let mut files = String::new();
    for f in ctx.pack.files.values().take(400) {
        let _ = writeln!(
            files,
            "- {} ({}, {}, {} lines)",
            f.path,
            f.language,
            kind_str(f.kind),
            f.line_count
        );
    }
    if ctx.pack.len() > 400 {
        let _ = writeln!(files, "- … {} more files", ctx.pack.len() - 400);
    }
    let class = serde_json::to_string_pretty(classification).unwrap_or_default();
    let catalog = ctx.catalog.personas_list_among(roster);
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
    let fitted = ctx.budget().fit(
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
            quorum_core::coverage::dimensions_prompt(&ctx.flow)
        )
    };
    let user = format!(
        "## Classification\n{class}\n\n## Persona catalog\n{}\n## File list\n{}\n{dimensions}{models}{errors}",
        fitted[0], fitted[1]
    );
    (system, user)
}

fn kind_str(k: quorum_core::pack::FileKind) -> &'static str {
    match k {
        quorum_core::pack::FileKind::Code => "code",
        quorum_core::pack::FileKind::Config => "config",
        quorum_core::pack::FileKind::Doc => "doc",
        quorum_core::pack::FileKind::Data => "data",
    }
}

/// The planner's validated output.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tasks: Vec<Task>,
    pub rejected: Vec<RejectedTask>,
    pub stage: StageStats,
}

/// Two-tier selection (when the flow asks for it): the deterministic prefilter, then one short
/// interest poll per discretionary survivor. Fails open: a poll that errors, times out or
/// answers unreadably keeps its persona. `None` when the flow selects nothing (whole catalog).
async fn select_personas(
    ctx: &ReviewContext,
    classification: &Classification,
) -> Option<Vec<String>> {
    let sel = ctx.flow.selection.as_ref()?;
    let candidates =
        quorum_core::selection::prefilter(&ctx.flow, &ctx.catalog, &ctx.pack, classification);
    for c in &candidates {
        tracing::info!(persona = %c.persona, reason = %c.reason, "selection: prefilter kept");
    }
    if !sel.interest_poll {
        return Some(candidates.into_iter().map(|c| c.persona).collect());
    }
    let mut files = String::new();
    for f in ctx.pack.files.values().take(200) {
        let _ = writeln!(files, "- {} ({})", f.path, kind_str(f.kind));
    }
    if ctx.pack.len() > 200 {
        let _ = writeln!(files, "- … {} more files", ctx.pack.len() - 200);
    }
    let material = format!(
        "## Classification\n{}\n\n## Files\n{}",
        serde_json::to_string_pretty(classification).unwrap_or_default(),
        weaver::delimit("file list", &files)
    );
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: \
         {{\"interested\": true or false, \"reason\": \"one short sentence\"}}",
        sel.instructions.trim()
    );
    let mut polls = tokio::task::JoinSet::new();
    let mut polled: Vec<String> = Vec::new();
    let mut selected = Vec::new();
    for c in candidates {
        if c.floor {
            selected.push(c.persona);
            continue;
        }
        let Ok(p) = ctx.catalog.get(&c.persona) else {
            continue;
        };
        let user = format!(
            "## Candidate\n{}: {}\n\n## Its mandate\n{}\n\n{material}",
            p.name,
            p.summary.trim(),
            p.mandate.trim()
        );
        // The verifier tier: a short yes/no needs no tools and little reasoning.
        let picked = ctx.pick("verifier", &system, &user, None);
        let system = system.clone();
        let spec_of = |model: &str| CallSpec {
            max_tokens: sel.max_output_tokens,
            ..ctx.call_spec(model)
        };
        let timeout = std::time::Duration::from_secs(ctx.flow.parameters.call_timeout_secs.max(1));
        match picked {
            Err(e) => {
                tracing::warn!(persona = %c.persona, error = %e, "selection: no model for the poll; kept (fail open)");
                selected.push(c.persona);
            }
            Ok((client, model)) => {
                let spec = spec_of(&model);
                let name = c.persona;
                polled.push(name.clone());
                polls.spawn(async move {
                    let mut stats = CallStats::default();
                    let call = agent::json_call(
                        &client,
                        &spec,
                        &system,
                        &user,
                        serde_json::json!({"type": "object",
                            "properties": {"interested": {"type": "boolean"}, "reason": {"type": "string"}},
                            "required": ["interested"]}),
                        Expect::Object,
                        &mut stats,
                    );
                    let answer = tokio::time::timeout(timeout, call).await;
                    let interested = match answer {
                        Ok(Ok((Parsed::Object(v), _))) => v.get("interested").and_then(|b| b.as_bool()),
                        _ => None,
                    };
                    (name, interested)
                });
            }
        }
    }
    let mut declined = Vec::new();
    while let Some(joined) = polls.join_next().await {
        match joined {
            Ok((name, Some(false))) => {
                tracing::info!(persona = %name, "selection: not interested");
                declined.push(name);
            }
            Ok((name, interested)) => {
                if interested.is_none() {
                    tracing::warn!(persona = %name, "selection: poll failed; kept (fail open)");
                }
                selected.push(name);
            }
            // Its name is lost with the task: the sweep below keeps it (fail open).
            Err(e) => tracing::warn!(error = %e, "selection: a poll task ended abnormally"),
        }
    }
    for name in polled {
        if !declined.contains(&name) && !selected.contains(&name) {
            selected.push(name);
        }
    }
    // Catalog order, whatever order the polls finished in.
    let order: Vec<&str> = ctx.catalog.reviewers().map(|p| p.name.as_str()).collect();
    selected.sort_by_key(|n| order.iter().position(|o| o == n));
    Some(selected)
}

/// The flow's deterministic rules on a plan: gaps in its coverage become tasks, its team's
/// always-on and signalled members are seated, unsignalled conditional members are refused.
fn apply_flow_rules(
    ctx: &ReviewContext,
    stage_tools: &[String],
    tasks: &mut Vec<Task>,
) -> Vec<RejectedTask> {
    let mut refused = quorum_core::coverage::complete_plan(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        tasks,
    );
    refused.extend(quorum_core::docreview::complete_team(
        &ctx.flow,
        &ctx.catalog,
        &ctx.pack,
        stage_tools,
        tasks,
    ));
    refused
}

/// Plan, and re-plan with the rejection reasons when no task survives validation.
pub async fn plan(
    ctx: &ReviewContext,
    classification: &Classification,
) -> Result<Plan, AttemptError> {
    let roster = select_personas(ctx, classification).await;
    let roster = roster.as_deref();
    let (probe_system, probe_user) = planner_prompt(ctx, classification, &[], roster);
    let (client, model) = ctx.pick("planner", &probe_system, &probe_user, None)?;
    let spec = ctx.call_spec(&model);
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
        let (system, user) = planner_prompt(ctx, classification, &errors, roster);
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
        for r in &rejected {
            tracing::info!(task = %r.id, persona = %r.persona, reason = %r.reason, "planner task rejected");
        }
        if !tasks.is_empty() {
            let mut tasks = tasks;
            all_rejected.extend(rejected);
            all_rejected.extend(apply_flow_rules(ctx, stage_tools, &mut tasks));
            return Ok(Plan {
                tasks,
                rejected: all_rejected,
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
            stage: StageStats { model, stats },
        });
    }
    Err(AttemptError::SchemaViolation(format!(
        "the planner produced no valid task ({})",
        errors.join("; ")
    )))
}

// ---------------------------------------------------------------------------------------------
// Specialists

pub fn specialist_prompt(
    ctx: &ReviewContext,
    task: &Task,
    prior_error: Option<&str>,
) -> Result<(String, String), AttemptError> {
    let persona = ctx
        .catalog
        .get(&task.persona)
        .map_err(|e| AttemptError::Internal(e.to_string()))?;
    let mut system = weaver::persona_prefix(persona, &ctx.catalog);
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
    // Tool definitions travel with every request and take context too.
    let tool_json = serde_json::to_string(&crate::tools::specs(&task.tools)).unwrap_or_default();
    let fitted = ctx.budget().fit(&format!("{system}{tool_json}"), &slots);
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
) -> Result<SpecialistOutput, AttemptError> {
    let (system, user) = specialist_prompt(ctx, task, prior_error)?;
    let (client, model) = ctx.pick(&task.persona, &system, &user, task.model.as_deref())?;
    let spec = ctx.call_spec(&model);
    let mut stats = CallStats::default();
    let outcome = agent::tool_loop(
        &client,
        &spec,
        &ctx.pack,
        &task.tools,
        &system,
        &user,
        schema::findings_schema(),
        ctx.flow.parameters.max_iterations,
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
        Err(_) if is_explicit_nothing(&outcome.final_text) => Vec::new(),
        Err(_) => {
            // One repair turn: the answer may be prose describing findings.
            let repair_user = format!(
                "{user}\n\n## Your previous answer\n{}\n\nRewrite it as the findings JSON only.",
                weaver::delimit("previous answer", &agent::snippet_long(&outcome.final_text))
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

/// "No findings" said in words rather than JSON still counts as an answer.
fn is_explicit_nothing(text: &str) -> bool {
    let t = text.trim().to_ascii_lowercase();
    t.is_empty() || t.contains("no findings") || t.contains("no issues found")
}

// ---------------------------------------------------------------------------------------------
// Verifier

/// The verifier's prompt for one grounded finding. By construction it carries the claim and the
/// cited source only: never the finder's persona, model or confidence.
pub fn verifier_prompt(
    ctx: &ReviewContext,
    finding: &RawFinding,
    excerpt: &str,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"verdict\": \
         \"CONFIRMED|PLAUSIBLE|HALLUCINATED|UNVERIFIABLE\", \"reason\": \"one sentence\"}}",
        ctx.instructions(Role::Verifier)
    );
    let location = match (&finding.file, finding.line_start, finding.line_end) {
        (Some(f), Some(a), Some(b)) if a != b => format!("{f} lines {a}-{b}"),
        (Some(f), Some(a), _) => format!("{f} line {a}"),
        (Some(f), None, _) => f.clone(),
        (None, _, _) => "(none)".into(),
    };
    let mut claim = format!(
        "## Claim\nTitle: {}\nCategory: {}\nLocation: {location}\n",
        finding.title, finding.category
    );
    if let Some(s) = &finding.symbol {
        let _ = writeln!(claim, "Symbol: {s}");
    }
    let _ = writeln!(claim, "Explanation: {}", finding.why_it_matters);
    if !finding.evidence.trim().is_empty() {
        let _ = writeln!(
            claim,
            "Quoted evidence:\n{}",
            weaver::delimit("quoted evidence", &finding.evidence)
        );
    }
    let source = weaver::delimit(finding.file.as_deref().unwrap_or("source"), excerpt);
    let fitted = ctx.budget().fit(
        &system,
        &[
            Slot {
                name: "claim",
                content: &claim,
                weight: 1,
            },
            Slot {
                name: "source",
                content: &source,
                weight: 3,
            },
        ],
    );
    (system, format!("{}\n## Source\n{}", fitted[0], fitted[1]))
}

/// Verify one reported finding: grounding first, then (if grounded) an independent model call.
pub async fn verify_one(
    ctx: &ReviewContext,
    reported: Reported,
    verifier: &crate::backends::Selected,
    stats: &mut CallStats,
) -> Judged {
    match grounding::ground(&reported.finding, &ctx.pack) {
        Grounding::Decided { verdict, reason } => Judged {
            reported,
            verdict,
            reason,
            deterministic: true,
        },
        Grounding::Grounded { excerpt } => {
            let (system, user) = verifier_prompt(ctx, &reported.finding, &excerpt);
            let result = agent::json_call(
                &verifier.client,
                &ctx.call_spec(&verifier.model),
                &system,
                &user,
                schema::verdict_schema(),
                Expect::Object,
                stats,
            )
            .await;
            match result {
                Ok((Parsed::Object(v), _)) => {
                    let (verdict, reason) = schema::normalize_verdict(&v);
                    Judged {
                        reported,
                        verdict,
                        reason,
                        deterministic: false,
                    }
                }
                Ok((Parsed::Objects(_), _)) => Judged {
                    reported,
                    verdict: Verdict::Unverifiable,
                    reason: "verifier answer was not a verdict".into(),
                    deterministic: false,
                },
                Err(e) => Judged {
                    reported,
                    verdict: Verdict::Unverifiable,
                    reason: format!("grounded, but the verifier call failed: {e}"),
                    deterministic: false,
                },
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Synthesizer

pub fn synthesizer_prompt(
    ctx: &ReviewContext,
    gated: &quorum_core::dedup::Gated,
    classification: &Classification,
) -> (String, String) {
    let system = format!(
        "{}\n\n{DATA_NOT_INSTRUCTIONS}\n\nAnswer with one JSON object: {{\"summary\": \"...\", \
         \"action_items\": [\"...\"]}}",
        ctx.instructions(Role::Synthesizer)
    );
    let mut list = String::new();
    for f in &gated.findings {
        let loc = match (&f.file, f.line_start) {
            (Some(p), Some(l)) => format!("{p}:{l}"),
            (Some(p), None) => p.clone(),
            _ => "-".into(),
        };
        let _ = writeln!(
            list,
            "{} [{}] {} — {} ({}, {})",
            f.id, f.severity, f.title, loc, f.verdict, f.category
        );
    }
    if list.is_empty() {
        list.push_str("(no findings survived verification)\n");
    }
    let stats = format!(
        "domain: {}\nfiles reviewed: {}\nfindings: {}\nresidual concerns: {}\ndropped as hallucinated: {}\n",
        classification.domain,
        ctx.pack.len(),
        gated.findings.len(),
        gated.residual.len(),
        gated.dropped.len()
    );
    let list = weaver::delimit("findings", &list);
    let fitted = ctx.budget().fit(
        &system,
        &[Slot {
            name: "findings",
            content: &list,
            weight: 1,
        }],
    );
    (
        system,
        format!("## Statistics\n{stats}\n## Findings\n{}", fitted[0]),
    )
}

/// The synthesizer's output; `fallback` when the model call failed and the text was built
/// deterministically from the findings.
#[derive(Debug, Clone)]
pub struct Synthesis {
    pub summary: String,
    pub action_items: Vec<String>,
    pub fallback: bool,
}

pub fn fallback_synthesis(ctx: &ReviewContext, gated: &quorum_core::dedup::Gated) -> Synthesis {
    let mut counts = [0usize; 4];
    for f in &gated.findings {
        counts[f.severity as usize] += 1;
    }
    let summary = if ctx.pack.is_empty() {
        "There was nothing to review: the target holds no reviewable files.".to_string()
    } else if gated.findings.is_empty() {
        format!(
            "No finding survived verification across {} files ({} residual concerns, {} dropped).",
            ctx.pack.len(),
            gated.residual.len(),
            gated.dropped.len()
        )
    } else {
        format!(
            "{} findings survived verification across {} files: {} P0, {} P1, {} P2, {} P3.",
            gated.findings.len(),
            ctx.pack.len(),
            counts[0],
            counts[1],
            counts[2],
            counts[3]
        )
    };
    let action_items = gated
        .findings
        .iter()
        .take(8)
        .map(|f| {
            format!(
                "{}: {}",
                f.id,
                if f.suggested_fix.trim().is_empty() {
                    f.title.as_str()
                } else {
                    f.suggested_fix.trim()
                }
            )
        })
        .collect();
    Synthesis {
        summary,
        action_items,
        fallback: true,
    }
}

pub async fn synthesize(
    ctx: &ReviewContext,
    gated: &quorum_core::dedup::Gated,
    classification: &Classification,
) -> Result<(Synthesis, StageStats), AttemptError> {
    let (system, user) = synthesizer_prompt(ctx, gated, classification);
    let (client, model) = ctx.pick("synthesizer", &system, &user, None)?;
    let mut stats = CallStats::default();
    let (parsed, _) = agent::json_call(
        &client,
        &ctx.call_spec(&model),
        &system,
        &user,
        schema::synthesis_schema(),
        Expect::Object,
        &mut stats,
    )
    .await?;
    let Parsed::Object(v) = parsed else {
        return Err(AttemptError::Internal("expected an object".into()));
    };
    let summary = v
        .get("summary")
        .and_then(quorum_core::parse::lenient_string)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| AttemptError::SchemaViolation("synthesis has no summary".into()))?;
    let action_items = match v.get("action_items") {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(quorum_core::parse::lenient_string)
            .take(12)
            .collect(),
        _ => Vec::new(),
    };
    Ok((
        Synthesis {
            summary,
            action_items,
            fallback: false,
        },
        StageStats { model, stats },
    ))
}

/// Verification without a model: grounding decides, and a grounded claim is PLAUSIBLE. Used when
/// the flow budget leaves no room for model verdicts.
pub fn ground_only(ctx: &ReviewContext, reported: Vec<Reported>) -> Vec<Judged> {
    reported
        .into_iter()
        .map(|r| match grounding::ground(&r.finding, &ctx.pack) {
            Grounding::Decided { verdict, reason } => Judged {
                reported: r,
                verdict,
                reason,
                deterministic: true,
            },
            Grounding::Grounded { .. } => Judged {
                reported: r,
                verdict: Verdict::Plausible,
                reason: "grounded; not model-checked: the flow budget was spent".into(),
                deterministic: true,
            },
        })
        .collect()
}
