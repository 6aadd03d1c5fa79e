//! Model calls at the judgment nodes: the one-shot JSON call and the specialist's tool loop.
//!
//! Both are bounded by construction: every call carries an output-token bound and a timeout
//! (from the client), a JSON call gets at most one repair turn, and the tool loop runs at most
//! `max_iterations` turns and then demands an answer with tools withdrawn — so a model that
//! never calls a tool, or never stops calling them, still ends.

use crate::error::AttemptError;
use crate::tools;
use quorum_core::pack::ContextPack;
use quorum_core::parse::{self, Recovery};
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
    }

    pub fn merge(&mut self, o: &CallStats) {
        self.llm_calls += o.llm_calls;
        self.tokens_in += o.tokens_in;
        self.tokens_out += o.tokens_out;
        self.tool_calls += o.tool_calls;
        self.text_tool_calls += o.text_tool_calls;
        self.repairs += o.repairs;
        if o.recovery.is_some() {
            self.recovery = o.recovery;
        }
        self.transcript.extend(o.transcript.iter().cloned());
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

/// Longest tool result fed back to the model, so one file cannot crowd out the conversation.
const MAX_TOOL_RESULT_CHARS: usize = 12_000;

/// The specialist's tool loop over the pack.
///
/// Each turn offers the granted tools natively. Native tool calls and JSON-text tool calls
/// (recognised by [`tools::text_tool_call`]) are executed against the pack and fed back; any
/// other answer ends the loop. On the last turn tools are withdrawn and structured output is
/// requested, so the loop ends with an answer even if the model would keep exploring.
#[allow(clippy::too_many_arguments)]
pub async fn tool_loop(
    client: &LlmClient,
    spec: &CallSpec,
    pack: &ContextPack,
    granted: &[String],
    system: &str,
    user: &str,
    schema: Value,
    max_iterations: u32,
    board: Option<tools::BoardAccess<'_>>,
    stats: &mut CallStats,
) -> Result<LoopOutcome, AttemptError> {
    // Team tools are only offered when the review has a board.
    let granted: Vec<String> = granted
        .iter()
        .filter(|t| board.is_some() || !t.starts_with("team_bb_"))
        .cloned()
        .collect();
    let granted = granted.as_slice();
    let tool_specs = tools::specs(granted);
    stats.begin(system, user);
    let mut messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
    let max_iterations = max_iterations.max(1);
    for turn in 1..=max_iterations {
        let last = turn == max_iterations || tool_specs.is_empty();
        let mut req = spec.request(messages.clone(), None);
        if last {
            req.json_schema = Some(schema.clone());
            if turn > 1 {
                req.messages.push(ChatMessage::user(
                    "Your tool budget is used up. Answer now with the findings JSON only.",
                ));
            }
        } else {
            req.tools = tool_specs.clone();
        }
        let resp = client.chat(&req).await?;
        stats.add(&resp);

        if !last && !resp.tool_calls.is_empty() {
            messages.push(ChatMessage {
                tool_calls: resp.tool_calls.clone(),
                ..ChatMessage::assistant(&resp.content)
            });
            for call in &resp.tool_calls {
                stats.tool_calls += 1;
                let r = tools::execute_with(pack, granted, board, &call.name, &call.arguments);
                tracing::debug!(tool = %call.name, error = r.is_error, "tool call");
                messages.push(ChatMessage::tool_result(
                    &call.id,
                    &call.name,
                    cap(&r.content),
                ));
            }
            continue;
        }
        if !last {
            if let Some((name, args)) = tools::text_tool_call(&resp.content) {
                stats.tool_calls += 1;
                stats.text_tool_calls += 1;
                let r = tools::execute_with(pack, granted, board, &name, &args);
                tracing::debug!(tool = %name, error = r.is_error, "text tool call");
                messages.push(ChatMessage::assistant(&resp.content));
                messages.push(ChatMessage::user(format!(
                    "Result of {name}:\n{}\nContinue. When done, answer with the findings JSON.",
                    cap(&r.content)
                )));
                continue;
            }
        }
        messages.push(ChatMessage::assistant(&resp.content));
        stats.transcript.extend(messages);
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

fn cap(s: &str) -> String {
    quorum_core::weaver::truncate_at_boundary(s, MAX_TOOL_RESULT_CHARS).into_owned()
}

/// Up to 4,000 chars of a model answer, for repair prompts.
pub fn snippet_long(s: &str) -> String {
    quorum_core::weaver::truncate_at_boundary(s.trim(), 4000).into_owned()
}
