//! What the scripted server says: rules matched on the prompt, the replies they hand out in order,
//! and the builders that keep a test's script readable.
//!
//! A script is plain data (it also loads from YAML, see [`Script::from_yaml`]); the per-rule hit
//! counters live in the server, so one `Script` value can be started many times.

use std::collections::BTreeSet;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::api::Api;
use crate::error::ScriptError;
use crate::request::RecordedRequest;

/// The model a script serves when it names none.
pub const DEFAULT_MODEL: &str = "scripted-model";

/// A whole script: rules tried in order, what to say when none matches, and the models served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Reply>,
    /// Served by `/api/tags` and `/v1/models`; a chat naming another model gets a 404. Empty means
    /// "accept any model", for tests that do not care which model the client asks for.
    #[serde(default = "default_models")]
    pub models: Vec<String>,
    /// A context window the server enforces, as a llama-server started with `-c N` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<ContextWindow>,
}

/// The server's context window: a chat whose [`RecordedRequest::window_tokens`] exceed `tokens`
/// is answered with llama-server's real HTTP 400 `exceed_context_size_error` body (recorded
/// with rule name [`CONTEXT_WINDOW_RULE`]); with `advertised`, `GET /props` states the window
/// as llama-server does (`default_generation_settings.n_ctx`), else `/props` is a 404.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextWindow {
    pub tokens: u64,
    #[serde(default)]
    pub advertised: bool,
}

/// The rule name recorded on requests refused for not fitting the context window.
pub const CONTEXT_WINDOW_RULE: &str = "context-window";

fn default_models() -> Vec<String> {
    vec![DEFAULT_MODEL.to_string()]
}

impl Default for Script {
    fn default() -> Self {
        Script {
            rules: Vec::new(),
            fallback: None,
            models: default_models(),
            context_window: None,
        }
    }
}

impl Script {
    /// An empty script serving [`DEFAULT_MODEL`]: every request gets "no rule matched" until rules
    /// or a fallback are added.
    pub fn new() -> Self {
        Script::default()
    }

    /// Appends a rule; rules are tried in the order they were added.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The reply for requests no rule matches.
    pub fn fallback(mut self, reply: Reply) -> Self {
        self.fallback = Some(reply);
        self
    }

    /// Replaces the served model list.
    pub fn models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.models = models.into_iter().map(Into::into).collect();
        self
    }

    /// Enforce a context window of `tokens` without saying so (like vLLM or Ollama: a client
    /// learns it only from the refusal).
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(ContextWindow {
            tokens,
            advertised: false,
        });
        self
    }

    /// Enforce a context window of `tokens` and state it at `GET /props`, like llama-server.
    pub fn advertised_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(ContextWindow {
            tokens,
            advertised: true,
        });
        self
    }

    /// Accepts chats for any model name (and lists none).
    pub fn any_model(mut self) -> Self {
        self.models.clear();
        self
    }

    /// Parses a script from YAML and checks it (see [`Script::validate`]).
    pub fn from_yaml(text: &str) -> Result<Script, ScriptError> {
        let script: Script = serde_yaml::from_str(text)?;
        script.validate()?;
        Ok(script)
    }

    /// Renders the script as YAML in the same shape [`Script::from_yaml`] reads.
    pub fn to_yaml(&self) -> Result<String, ScriptError> {
        Ok(serde_yaml::to_string(self)?)
    }

    /// Rejects what could only be an authoring mistake: a rule without replies, a regex that does
    /// not compile, an HTTP status that does not exist.
    pub fn validate(&self) -> Result<(), ScriptError> {
        for rule in &self.rules {
            if rule.replies.is_empty() {
                return Err(ScriptError::NoReplies(rule.name.clone()));
            }
            if let Some(pattern) = &rule.when.regex {
                Regex::new(pattern).map_err(|source| ScriptError::Regex {
                    rule: rule.name.clone(),
                    source,
                })?;
            }
            for reply in &rule.replies {
                reply.validate(&format!("rule {:?}", rule.name))?;
            }
        }
        if let Some(reply) = &self.fallback {
            reply.validate("fallback")?;
        }
        Ok(())
    }
}

/// One rule: when its [`Match`] holds, it answers with its replies in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Recorded on every request it answers, so tests can assert routing by name.
    pub name: String,
    #[serde(default)]
    pub when: Match,
    /// Handed out one per hit; the last one repeats forever.
    pub replies: Vec<Reply>,
    /// After this many hits the rule stops matching and later rules (or the fallback) apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<usize>,
}

impl Rule {
    /// A rule that matches everything and has no replies yet.
    pub fn new(name: impl Into<String>) -> Self {
        Rule {
            name: name.into(),
            when: Match::default(),
            replies: Vec::new(),
            times: None,
        }
    }

    /// Replaces the whole condition.
    pub fn when(mut self, when: Match) -> Self {
        self.when = when;
        self
    }

    /// Adds substrings that must all appear in the request's text.
    pub fn when_all<I, S>(mut self, needles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.when.all.extend(needles.into_iter().map(Into::into));
        self
    }

    /// Adds substrings of which at least one must appear in the request's text.
    pub fn when_any<I, S>(mut self, needles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.when.any.extend(needles.into_iter().map(Into::into));
        self
    }

    /// Adds substrings that must not appear in the request's text.
    pub fn when_none<I, S>(mut self, needles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.when.none.extend(needles.into_iter().map(Into::into));
        self
    }

    /// A regex the request's text must match.
    pub fn when_regex(mut self, pattern: impl Into<String>) -> Self {
        self.when.regex = Some(pattern.into());
        self
    }

    /// Adds substrings that must appear in the system message(s).
    pub fn when_system<I, S>(mut self, needles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.when.system.extend(needles.into_iter().map(Into::into));
        self
    }

    /// Adds substrings that must appear in the last user or tool message.
    pub fn when_last_user<I, S>(mut self, needles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.when
            .last_user
            .extend(needles.into_iter().map(Into::into));
        self
    }

    /// The model the request must name.
    pub fn when_model(mut self, model: impl Into<String>) -> Self {
        self.when.model = Some(model.into());
        self
    }

    /// The API the request must come through.
    pub fn when_api(mut self, api: Api) -> Self {
        self.when.api = Some(api);
        self
    }

    /// Whether the request must (or must not) offer tools.
    pub fn when_has_tools(mut self, has_tools: bool) -> Self {
        self.when.has_tools = Some(has_tools);
        self
    }

    /// How many assistant messages the conversation must already hold (0 = first call).
    pub fn turn(mut self, turn: usize) -> Self {
        self.when.turn = Some(turn);
        self
    }

    /// Appends a reply.
    pub fn reply(mut self, reply: Reply) -> Self {
        self.replies.push(reply);
        self
    }

    /// Appends the reply for the next hit; reads better than a second `reply` in a sequence.
    pub fn then(self, reply: Reply) -> Self {
        self.reply(reply)
    }

    /// Stops matching after `n` hits.
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }
}

/// The condition of a rule; every field that is set must hold (an empty `Match` matches anything).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Match {
    /// Every substring must appear in the request's text (all message contents).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub all: Vec<String>,
    /// At least one must appear (if non-empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub any: Vec<String>,
    /// None may appear.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub none: Vec<String>,
    /// Must match the request's text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Substrings that must appear in the system message(s) specifically.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<String>,
    /// Substrings that must appear in the last user or tool message, which is how a script says
    /// "after the tool result arrives, answer X".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub last_user: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// Whether the request offered tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_tools: Option<bool>,
    /// Number of assistant messages already in the conversation (0 = first call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<usize>,
}

impl Match {
    /// Whether this condition holds for a request. An invalid regex never matches.
    pub fn matches(&self, req: &RecordedRequest) -> bool {
        let regex = match &self.regex {
            Some(pattern) => match Regex::new(pattern) {
                Ok(regex) => Some(regex),
                Err(_) => return false,
            },
            None => None,
        };
        self.holds(req, regex.as_ref())
    }

    /// [`Match::matches`] with the regex compiled once by the caller; `regex` must be this
    /// match's own pattern (the server compiles it when a script is installed).
    pub(crate) fn holds(&self, req: &RecordedRequest, regex: Option<&Regex>) -> bool {
        let text = req.text.as_str();
        self.all.iter().all(|s| text.contains(s.as_str()))
            && (self.any.is_empty() || self.any.iter().any(|s| text.contains(s.as_str())))
            && !self.none.iter().any(|s| text.contains(s.as_str()))
            && (self.regex.is_none() || regex.is_some_and(|r| r.is_match(text)))
            && self.system.iter().all(|s| req.system.contains(s.as_str()))
            && self
                .last_user
                .iter()
                .all(|s| req.last_user.contains(s.as_str()))
            && self
                .model
                .as_ref()
                .is_none_or(|m| same_model(m, &req.model))
            && self.api.is_none_or(|api| api == req.api)
            && self.has_tools.is_none_or(|t| t == req.has_tools)
            && self.turn.is_none_or(|t| t == req.turn)
    }
}

/// Ollama treats `name` and `name:latest` as the same model, and clients send either.
pub(crate) fn same_model(a: &str, b: &str) -> bool {
    a.strip_suffix(":latest").unwrap_or(a) == b.strip_suffix(":latest").unwrap_or(b)
}

/// What the server does with a request a rule (or the fallback) picked.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An assistant message with this content.
    Text(String),
    /// Native tool calls as (name, arguments). Arguments that are a JSON string are sent to
    /// OpenAI clients verbatim, so a script can hand out malformed arguments on purpose.
    ToolCalls(Vec<(String, serde_json::Value)>),
    /// An HTTP error. An empty body becomes an error body in the API's own shape.
    Status {
        code: u16,
        body: String,
        retry_after: Option<u64>,
    },
    /// Waits, then does `then`.
    Delay { ms: u64, then: Box<Reply> },
    /// Accepts the request and never answers, until the server shuts down (then 503).
    Hang,
    /// Waits until the test calls [`crate::ScriptedServer::release`], then does the inner reply:
    /// a test orders events across processes without guessing how long they take.
    Held(Box<Reply>),
    /// A 200 whose JSON body is cut half-way, as the reply `Text` of this content would be.
    Truncated(String),
    /// A JSON summary of what was received, as the assistant content.
    Echo,
    /// A model stuck in a loop: `prefix`, then `line` over and over until the request's output
    /// bound, where the answer stops with finish reason `length`. Streamed, it goes on until the
    /// client hangs up or the bound is reached.
    Repeat { prefix: String, line: String },
}

impl Reply {
    pub fn text(content: impl Into<String>) -> Reply {
        Reply::Text(content.into())
    }

    /// The value serialised compactly as the assistant content.
    pub fn json(value: &serde_json::Value) -> Reply {
        Reply::Text(value.to_string())
    }

    /// One native tool call.
    pub fn tool(name: impl Into<String>, arguments: serde_json::Value) -> Reply {
        Reply::ToolCalls(vec![(name.into(), arguments)])
    }

    /// Several native tool calls in one assistant message.
    pub fn tools<I, S>(calls: I) -> Reply
    where
        I: IntoIterator<Item = (S, serde_json::Value)>,
        S: Into<String>,
    {
        Reply::ToolCalls(
            calls
                .into_iter()
                .map(|(name, args)| (name.into(), args))
                .collect(),
        )
    }

    /// An HTTP error with an API-shaped body.
    pub fn status(code: u16) -> Reply {
        Reply::Status {
            code,
            body: String::new(),
            retry_after: None,
        }
    }

    /// An HTTP error with exactly this body.
    pub fn status_body(code: u16, body: impl Into<String>) -> Reply {
        Reply::Status {
            code,
            body: body.into(),
            retry_after: None,
        }
    }

    /// A 429 carrying `Retry-After: secs`.
    pub fn rate_limited(retry_after_secs: u64) -> Reply {
        Reply::Status {
            code: 429,
            body: String::new(),
            retry_after: Some(retry_after_secs),
        }
    }

    pub fn delay(ms: u64, then: Reply) -> Reply {
        Reply::Delay {
            ms,
            then: Box::new(then),
        }
    }

    pub fn hang() -> Reply {
        Reply::Hang
    }

    /// `then`, once the server is released (see [`crate::ScriptedServer::release`]).
    pub fn held(then: Reply) -> Reply {
        Reply::Held(Box::new(then))
    }

    pub fn truncated(content: impl Into<String>) -> Reply {
        Reply::Truncated(content.into())
    }

    pub fn echo() -> Reply {
        Reply::Echo
    }

    /// `prefix`, then `line` repeated up to the request's output bound.
    pub fn repeat(prefix: impl Into<String>, line: impl Into<String>) -> Reply {
        Reply::Repeat {
            prefix: prefix.into(),
            line: line.into(),
        }
    }

    fn validate(&self, place: &str) -> Result<(), ScriptError> {
        match self {
            Reply::Status { code, .. } if axum::http::StatusCode::from_u16(*code).is_err() => {
                Err(ScriptError::Status {
                    place: place.to_string(),
                    code: *code,
                })
            }
            Reply::Delay { then, .. } => then.validate(place),
            _ => Ok(()),
        }
    }
}

/// Names of the rules in a script that share a name; tests assert on rule names, so a duplicate
/// is worth a warning when a script is installed.
pub(crate) fn duplicate_rule_names(script: &Script) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut dups = BTreeSet::new();
    for rule in &script.rules {
        if !seen.insert(rule.name.as_str()) {
            dups.insert(rule.name.clone());
        }
    }
    dups.into_iter().collect()
}
