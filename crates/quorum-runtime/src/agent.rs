//! Model calls at the judgment nodes: the one-shot JSON call and the specialist's tool loop.
//!
//! Both are bounded by construction: every call carries an output-token bound and a timeout
//! (from the client), a JSON call gets at most one repair turn, and the tool loop runs at most
//! `max_iterations` turns and then demands an answer with tools withdrawn — so a model that
//! never calls a tool, or never stops calling them, still ends.

use crate::error::AttemptError;
use crate::history::{describe_call, History, COMPACT_AT};
use crate::tools;
use quorum_core::pack::ContextPack;
use quorum_core::parse::{self, Recovery};
use quorum_core::weaver::{estimate_tokens, truncate_excerpt, ContextBudget};
use quorum_llm::{ChatMessage, ChatRequest, ChatResponse, LlmClient};
use serde_json::Value;

/// What calls cost and how their output was obtained; summed into the task's report row.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallStats {
    pub llm_calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tool_calls: u32,
    pub text_tool_calls: u32,
    /// Calls that needed a repair turn (the first answer was not usable JSON).
    pub repairs: u32,
    pub recovery: Option<Recovery>,
    /// Every message of the attempt's conversation(s), in order, for the store and trace export.
    pub transcript: Vec<ChatMessage>,
    /// The final answer's full text (never truncated).
    pub output: String,
    /// blake3 of the first system + user prompt: identical prompts hash identically.
    pub prompt_hash: String,
    /// Tool results the loop replaced by a note to fit the context window.
    #[serde(default)]
    pub elided_results: u32,
    /// Responses the output-token bound cut off (the server said it stopped at the length).
    #[serde(default)]
    pub bound_hits: u32,
    /// Every tool call and its result's digest, in order (see `quorum_core::reuse`).
    #[serde(default)]
    pub tool_reads: Vec<quorum_core::reuse::ToolRead>,
}

impl CallStats {
    fn begin(&mut self, system: &str, user: &str) {
        if self.prompt_hash.is_empty() {
            let mut h = blake3::Hasher::new();
            h.update(system.as_bytes());
            h.update(&[0]);
            h.update(user.as_bytes());
            self.prompt_hash = h.finalize().to_hex().to_string();
        }
    }

    fn add(&mut self, r: &ChatResponse) {
        self.llm_calls += r.attempts.max(1) as u64;
        self.tokens_in += r.usage.tokens_in;
        self.tokens_out += r.usage.tokens_out;
        if r.finish_reason.as_deref() == Some("length") {
            self.bound_hits += 1;
        }
    }

    /// What the review machine keeps of an attempt's calls: the counts, the answer, the
    /// transcript (as JSON messages), how an unusable answer was recovered.
    pub fn to_attempt_stats(&self) -> quorum_core::machine::AttemptStats {
        quorum_core::machine::AttemptStats {
            llm_calls: self.llm_calls,
            tokens_in: self.tokens_in,
            tokens_out: self.tokens_out,
            tool_calls: self.tool_calls,
            text_tool_calls: self.text_tool_calls,
            recovery: self.recovery.map(|r| {
                serde_json::to_value(r)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            }),
            output: self.output.clone(),
            prompt_hash: self.prompt_hash.clone(),
            bound_hits: self.bound_hits,
            tool_reads: self.tool_reads.clone(),
            reused_from: None,
            cache: None,
            transcript: self
                .transcript
                .iter()
                .map(|m| serde_json::to_value(m).unwrap_or_default())
                .collect(),
        }
    }

    pub fn merge(&mut self, o: &CallStats) {
        self.llm_calls += o.llm_calls;
        self.tokens_in += o.tokens_in;
        self.tokens_out += o.tokens_out;
        self.tool_calls += o.tool_calls;
        self.text_tool_calls += o.text_tool_calls;
        self.repairs += o.repairs;
        self.elided_results += o.elided_results;
        self.bound_hits += o.bound_hits;
        if o.recovery.is_some() {
            self.recovery = o.recovery;
        }
        self.transcript.extend(o.transcript.iter().cloned());
        self.tool_reads.extend(o.tool_reads.iter().cloned());
        if !o.output.is_empty() {
            self.output = o.output.clone();
        }
        if self.prompt_hash.is_empty() {
            self.prompt_hash = o.prompt_hash.clone();
        }
    }
}

/// Parameters shared by every call of one attempt.
#[derive(Debug, Clone)]
pub struct CallSpec {
    pub model: String,
    pub max_tokens: u32,
    pub temperature: f32,
    pub num_ctx: Option<u32>,
}

impl CallSpec {
    fn request(&self, messages: Vec<ChatMessage>, schema: Option<Value>) -> ChatRequest {
        ChatRequest {
            model: self.model.clone(),
            messages,
            tools: Vec::new(),
            json_schema: schema,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            num_ctx: self.num_ctx,
        }
    }
}

/// How to read the JSON a call must return.
#[derive(Debug, Clone, Copy)]
pub enum Expect<'a> {
    /// One object.
    Object,
    /// A list of objects, possibly wrapped under one of `keys`, recovered at `id_key`.
    Objects {
        keys: &'a [&'a str],
        id_key: &'a str,
    },
}

/// Parsed JSON from a call.
#[derive(Debug, Clone)]
pub enum Parsed {
    Object(Value),
    Objects(Vec<Value>),
}

fn parse_expect(text: &str, expect: Expect<'_>) -> Result<(Parsed, Recovery), parse::ParseError> {
    match expect {
        Expect::Object => parse::extract_object(text).map(|(v, r)| (Parsed::Object(v), r)),
        Expect::Objects { keys, id_key } => {
            parse::extract_objects(text, keys, id_key).map(|(v, r)| (Parsed::Objects(v), r))
        }
    }
}

/// One JSON-returning call with structured output requested, and one repair turn when the answer
/// cannot be parsed. Returns the parsed JSON and the raw text of the final answer.
pub async fn json_call(
    client: &LlmClient,
    spec: &CallSpec,
    system: &str,
    user: &str,
    schema: Value,
    expect: Expect<'_>,
    stats: &mut CallStats,
) -> Result<(Parsed, String), AttemptError> {
    stats.begin(system, user);
    let mut messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
    stats.transcript.extend(messages.iter().cloned());
    let resp = client
        .chat(&spec.request(messages.clone(), Some(schema.clone())))
        .await?;
    stats.add(&resp);
    stats.transcript.push(ChatMessage::assistant(&resp.content));
    stats.output = resp.content.clone();
    match parse_expect(&resp.content, expect) {
        Ok((p, rec)) => {
            stats.recovery = Some(rec);
            return Ok((p, resp.content));
        }
        Err(first) => {
            tracing::debug!(error = %first, "unparseable answer; asking once more");
            stats.repairs += 1;
            messages.push(ChatMessage::assistant(&resp.content));
            messages.push(ChatMessage::user(format!(
                "Your answer could not be parsed ({first}). Answer again with only the JSON \
                 object described above: no prose, no code fence."
            )));
            stats
                .transcript
                .extend(messages[messages.len() - 1..].iter().cloned());
        }
    }
    let resp = client.chat(&spec.request(messages, Some(schema))).await?;
    stats.add(&resp);
    stats.transcript.push(ChatMessage::assistant(&resp.content));
    stats.output = resp.content.clone();
    match parse_expect(&resp.content, expect) {
        Ok((p, rec)) => {
            stats.recovery = Some(rec);
            Ok((p, resp.content))
        }
        Err(e) => Err(AttemptError::MalformedOutput {
            kind: match e {
                parse::ParseError::Empty => "empty",
                parse::ParseError::NoJson => "prose",
                parse::ParseError::Truncated => "truncated",
            }
            .to_string(),
            detail: snippet(&resp.content),
        }),
    }
}

/// First 200 chars of a model answer, for error messages.
pub fn snippet(s: &str) -> String {
    let t: String = s.trim().chars().take(200).collect();
    if t.is_empty() {
        "(empty answer)".into()
    } else {
        t
    }
}

/// Outcome of a tool loop: the final answer's text (to be parsed by the caller).
#[derive(Debug, Clone)]
pub struct LoopOutcome {
    pub final_text: String,
    pub iterations: u32,
}

/// Bounds of one tool loop: the window it must fit and how much one turn may add to it.
#[derive(Debug, Clone, Copy)]
pub struct LoopLimits {
    pub max_iterations: u32,
    pub budget: ContextBudget,
    pub max_tool_calls_per_turn: u32,
    pub max_tool_result_tokens: u32,
}

impl LoopLimits {
    /// Longest tool result in characters: the flow's bound, and never more than a third of
    /// the input budget, so one file cannot crowd out the conversation.
    fn result_chars(&self) -> usize {
        let cap = self
            .max_tool_result_tokens
            .min(self.budget.input_tokens() / 3)
            .max(64);
        cap as usize * 4
    }
}

/// Tokens reserved for the last turn's "answer now" line.
const LAST_TURN_NOTE_TOKENS: u32 = 32;

/// The specialist's tool loop over the pack.
///
/// Each turn offers the granted tools natively. Native tool calls and JSON-text tool calls
/// (recognised by [`tools::text_tool_call`]) are executed against the pack and fed back; any
/// other answer ends the loop. On the last turn tools are withdrawn and structured output is
/// requested, so the loop ends with an answer even if the model would keep exploring.
///
/// Every request fits `limits.budget`: tool results are capped, at most
/// `max_tool_calls_per_turn` calls of a turn run (the rest are answered "not run"), and the
/// history is compacted ([`History::fit`]) once it passes [`COMPACT_AT`] of the input budget.
#[allow(clippy::too_many_arguments)]
pub async fn tool_loop(
    client: &LlmClient,
    spec: &CallSpec,
    pack: &ContextPack,
    granted: &[String],
    system: &str,
    user: &str,
    schema: Value,
    limits: LoopLimits,
    board: Option<tools::BoardAccess<'_>>,
    stats: &mut CallStats,
) -> Result<LoopOutcome, AttemptError> {
    // Team tools are only offered when the review has a board.
    let granted: Vec<String> = granted
        .iter()
        .filter(|t| board.is_some() || !t.starts_with("team_bb_"))
        .cloned()
        .collect();
    let mut toolbox = tools::PackTools {
        pack,
        granted: &granted,
        board,
    };
    tool_loop_with(
        client,
        spec,
        &mut toolbox,
        system,
        user,
        schema,
        limits,
        stats,
    )
    .await
}

/// [`tool_loop`] over any [`tools::Toolbox`]: the same bounds, turns and answer rules.
#[allow(clippy::too_many_arguments)]
pub async fn tool_loop_with(
    client: &LlmClient,
    spec: &CallSpec,
    toolbox: &mut dyn tools::Toolbox,
    system: &str,
    user: &str,
    schema: Value,
    limits: LoopLimits,
    stats: &mut CallStats,
) -> Result<LoopOutcome, AttemptError> {
    let tool_specs = toolbox.specs();
    // Tool definitions and the answer schema travel with requests and take context too.
    let tools_tokens = estimate_tokens(&serde_json::to_string(&tool_specs).unwrap_or_default());
    let schema_tokens = estimate_tokens(&schema.to_string());
    let compact_at = (limits.budget.input_tokens() as f64 * COMPACT_AT) as u32;
    let result_chars = limits.result_chars();
    let per_turn = limits.max_tool_calls_per_turn.max(1) as usize;
    stats.begin(system, user);
    let mut history = History::new(system, user);
    let max_iterations = limits.max_iterations.max(1);
    for turn in 1..=max_iterations {
        let last = turn == max_iterations || tool_specs.is_empty();
        let extra = if last {
            schema_tokens + LAST_TURN_NOTE_TOKENS
        } else {
            tools_tokens
        };
        if history.fit(compact_at.saturating_sub(extra)) {
            tracing::debug!(
                turn,
                elided = history.elided(),
                tokens = history.tokens(),
                "tool-loop history compacted to fit the context window"
            );
        }
        stats.elided_results = history.elided();
        let mut req = spec.request(history.messages(), None);
        if last {
            req.json_schema = Some(schema.clone());
            if turn > 1 {
                req.messages.push(ChatMessage::user(format!(
                    "Your tool budget is used up. Answer now with the {} only.",
                    toolbox.answer_name()
                )));
            }
        } else {
            req.tools = tool_specs.clone();
        }
        let resp = match client.chat(&req).await {
            Ok(r) => r,
            Err(e) => {
                stats.transcript.extend(history.messages());
                return Err(e.into());
            }
        };
        stats.add(&resp);

        if !last && !resp.tool_calls.is_empty() {
            history.push(ChatMessage {
                tool_calls: resp.tool_calls.clone(),
                ..ChatMessage::assistant(&resp.content)
            });
            for (i, call) in resp.tool_calls.iter().enumerate() {
                let what = describe_call(&call.name, &call.arguments);
                let make = |c: String| ChatMessage::tool_result(&call.id, &call.name, c);
                if i >= per_turn {
                    // Every call gets an answer (the APIs require it), but only the first few run.
                    let body = format!(
                        "not run: at most {per_turn} tool calls are executed per turn; call it \
                         again in your next turn if you still need it"
                    );
                    history.push_result(make, what, "", &body, "");
                    continue;
                }
                stats.tool_calls += 1;
                let r = toolbox.execute(&call.name, &call.arguments);
                stats
                    .tool_reads
                    .push(read_of(&call.name, &call.arguments, &r.content));
                tracing::debug!(tool = %call.name, error = r.is_error, "tool call");
                history.push_result(make, what, "", &cap(&r.content, result_chars), "");
            }
            continue;
        }
        if !last {
            if let Some((name, args)) = tools::text_tool_call(&resp.content) {
                stats.tool_calls += 1;
                stats.text_tool_calls += 1;
                let r = toolbox.execute(&name, &args);
                stats.tool_reads.push(read_of(&name, &args, &r.content));
                tracing::debug!(tool = %name, error = r.is_error, "text tool call");
                history.push(ChatMessage::assistant(&resp.content));
                history.push_result(
                    ChatMessage::user,
                    describe_call(&name, &args),
                    &format!("Result of {name}:\n"),
                    &cap(&r.content, result_chars),
                    &format!(
                        "\nContinue. When done, answer with the {}.",
                        toolbox.answer_name()
                    ),
                );
                continue;
            }
        }
        history.push(ChatMessage::assistant(&resp.content));
        stats.transcript.extend(history.messages());
        stats.output = resp.content.clone();
        return Ok(LoopOutcome {
            final_text: resp.content,
            iterations: turn,
        });
    }
    // Unreachable in practice: the last turn always returns. Kept as a typed error, not a panic.
    Err(AttemptError::Internal(
        "tool loop ended without an answer".into(),
    ))
}

/// What an incremental review replays of a tool call: its name, arguments, result digest.
fn read_of(name: &str, args: &Value, content: &str) -> quorum_core::reuse::ToolRead {
    quorum_core::reuse::ToolRead {
        tool: name.to_string(),
        args: args.clone(),
        digest: quorum_core::reuse::content_digest(content),
    }
}

fn cap(s: &str, max_chars: usize) -> String {
    truncate_excerpt(s, max_chars).into_owned()
}

/// Up to 4,000 chars of a model answer, for repair prompts.
pub fn snippet_long(s: &str) -> String {
    quorum_core::weaver::truncate_at_boundary(s.trim(), 4000).into_owned()
}
