//! Incremental reviews at run time: before a specialist attempt is started, the conductor keys
//! it (`quorum_core::reuse`) and, when the review reuses results, takes a recorded result whose
//! tool reads all replay the same on today's snapshot instead of calling a model; when an
//! attempt it keyed succeeds, its result is recorded under the key.
//!
//! Keying happens where the attempt is placed, so a result is found whichever node would have
//! run it, and recorded by the conductor whichever node ran it. Only first attempts are keyed
//! (a retry's prompt carries the failure it repairs); a task that used the team blackboard is
//! never recorded (what it read depends on its teammates' timing).

use crate::conductor::dispatch::place_model;
use crate::context::{Incremental, ReviewContext};
use crate::error::AttemptError;
use crate::facts::now_ms;
use crate::stages::specialist_prompt_in;
use quorum_core::machine::{AttemptStats, ModelUse, Outcome};
use quorum_core::reuse::{self, Decision, FileHash, TaskResult, TaskTrace, ToolRead};
use quorum_core::review::finding::RawFinding;
use quorum_core::task::Task;

/// A keyed specialist attempt: what its result is recorded under.
#[derive(Debug, Clone)]
pub(super) struct Keyed {
    pub key: String,
    pub identity: String,
    /// The model the key was computed for: a result from another model is not recorded.
    pub model: String,
    pub task: Task,
    /// Why it runs (an incremental review says so in its report).
    pub why: Option<String>,
}

/// Key a specialist task as it would first be asked. `Err` when no model here can take it (the
/// attempt then runs unkeyed, and fails or is placed as it would have been).
pub(super) fn key(ctx: &ReviewContext, task: &Task) -> Result<Keyed, AttemptError> {
    let requested = match &task.model {
        Some(m) => m.clone(),
        None => place_model(ctx, task, None)?.0,
    };
    let (system, user) = specialist_prompt_in(ctx, task, None, &[], ctx.budget())?;
    let (client, model) = ctx.pick(&task.persona, &system, &user, Some(&requested))?;
    let budget = ctx.budget_for(&client, &model);
    let (system, user) = if budget == ctx.budget() {
        (system, user)
    } else {
        specialist_prompt_in(ctx, task, None, &[], budget)?
    };
    let p = &ctx.flow.parameters;
    let call = format!(
        "{:?} iterations={} calls_per_turn={} result_tokens={}",
        ctx.call_spec(budget, &model),
        p.max_iterations,
        p.max_tool_calls_per_turn,
        p.max_tool_result_tokens
    );
    Ok(Keyed {
        key: reuse::task_key(&model, &system, &user, &call, &task.tools),
        identity: reuse::task_identity(&task.persona, &task.mandate, &task.files),
        model,
        task: task.clone(),
        why: None,
    })
}

fn hash_now(ctx: &ReviewContext, path: &str) -> Option<String> {
    ctx.pack.get(path).map(|f| f.hash.clone())
}

/// Whether `keyed` may take a recorded result: looked up, its tool reads replayed on today's
/// snapshot. A store error is a miss (said in the log): reuse never fails a review.
pub(super) fn decide(ctx: &ReviewContext, inc: &Incremental, keyed: &Keyed) -> Decision {
    let found = inc.cache.task(&keyed.key).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "result cache not readable; running the task");
        None
    });
    let trace = inc.cache.trace(&keyed.identity).ok().flatten();
    reuse::decide(
        found,
        trace.as_ref(),
        &keyed.model,
        |p| hash_now(ctx, p),
        |read| {
            let r = crate::tools::execute(&ctx.pack, &keyed.task.tools, &read.tool, &read.args);
            reuse::content_digest(&r.content)
        },
    )
}

/// The outcome a reused result stands for: no model was called.
pub(super) fn reused_outcome(found: TaskResult) -> Outcome {
    let stats = AttemptStats {
        reused_from: Some(found.flow_id.clone()),
        cache: Some(format!(
            "reused from {}: no file it was given or read has changed",
            found.flow_id
        )),
        tool_reads: found.reads.clone(),
        ..AttemptStats::default()
    };
    Outcome::Specialist {
        findings: found.findings,
        invalid: found.invalid,
        iterations: found.iterations,
        by: ModelUse {
            model: found.model,
            stats,
        },
    }
}

/// The result of a keyed attempt that succeeded, to record; `None` when it must not be (another
/// model answered, or it read the team blackboard).
pub(super) fn result_of(
    ctx: &ReviewContext,
    keyed: &Keyed,
    findings: &[RawFinding],
    invalid: usize,
    iterations: u32,
    by: &ModelUse,
) -> Option<(TaskResult, TaskTrace)> {
    if by.model != keyed.model || by.stats.reused_from.is_some() {
        return None;
    }
    let reads: &[ToolRead] = &by.stats.tool_reads;
    if reads.iter().any(|r| r.tool.starts_with("team_")) {
        return None;
    }
    let mut paths: Vec<String> = keyed.task.files.clone();
    paths.extend(reuse::read_paths(reads));
    paths.sort();
    paths.dedup();
    let files: Vec<FileHash> = paths
        .into_iter()
        .filter_map(|path| {
            let hash = hash_now(ctx, &path)?;
            Some(FileHash { path, hash })
        })
        .collect();
    let result = TaskResult {
        flow_id: ctx.flow_id.clone(),
        task_id: keyed.task.id.clone(),
        persona: keyed.task.persona.clone(),
        model: by.model.clone(),
        findings: findings.to_vec(),
        invalid,
        iterations,
        reads: reads.to_vec(),
        files: files.clone(),
        recorded_ms: now_ms(),
    };
    let trace = TaskTrace {
        key: keyed.key.clone(),
        flow_id: ctx.flow_id.clone(),
        model: by.model.clone(),
        files,
    };
    Some((result, trace))
}
