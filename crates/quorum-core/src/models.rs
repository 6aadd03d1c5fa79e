//! Model cards and automatic model selection: which model runs which task, and why.
//!
//! A [`ModelCard`] has three layers:
//!
//! - **vendor** ([`VendorCard`]): what the backend says about the model — family, parameter count,
//!   quantization, context length, capabilities — read from Ollama's `/api/show` or an
//!   OpenAI-compatible `/v1/models` entry, with gaps filled from the model's name
//!   (`Qwen2.5-Coder-0.5B-Instruct` is a 0.5B `qwen2.5`).
//! - **agentic** ([`AgenticCard`]): what the operator says in TOML (cost, speed, locality, reasoning,
//!   tool use, JSON compliance, strengths, recommended and avoided tasks). Every field the operator
//!   set overrides the default derived from the vendor layer ([`AgenticCard::vendor_defaults`]).
//! - **runtime** ([`RuntimeStats`] per task type): what recorded runs taught — calls, successes,
//!   tokens and an exponentially weighted latency.
//!
//! [`score`] turns a card and a task's [`TaskNeeds`] into an explainable weighted sum; [`choose`]
//! picks the best eligible card, [`choose_verifier`] prefers a family other than the finders', and
//! [`resolve_requested`] replaces a model the planner or a persona named but that does not exist or
//! may not run the task.
//!
//! # Hard constraints
//!
//! A card that breaks one is ineligible, whatever its score: it is never chosen.
//!
//! | constraint | why |
//! |---|---|
//! | sensitive review and locality `remote` | a sensitive target never leaves the operator's machines |
//! | context length known and `< prompt_tokens + OUTPUT_RESERVE_TOKENS` | the prompt would be truncated |
//! | task type in `avoid_tasks` | the operator said so |
//! | capabilities known, contain `embedding` but not `completion` | it cannot generate text |
//!
//! # The score
//!
//! Tiers count as Low 0, Medium 1, High 2. Parts are listed in [`Score::parts`] only when their
//! condition holds, so a score explains itself.
//!
//! | part | when | value |
//! |---|---|---|
//! | `tool_use` | task uses tools | `+1.5 × tool_use tier` |
//! | `small_model_long_prompt` | tools, `prompt_tokens > 4000`, ≤ 10B parameters | `−2.0` |
//! | `json` | task must answer JSON | `+0.75 × json_compliance tier` |
//! | `reasoning` | always | `−1.5 ×` tiers short of `needs.reasoning` (never positive) |
//! | `context_headroom` | context known, prompt + reserve above 75% of it | `−0.5` |
//! | `size_band` | specialist work | `+1.0` inside 12–20B, `p/12` below, `20/p` above, `0.5` unknown |
//! | `success_rate` | ≥ 3 recorded calls of this task type | `+5.0 × (rate − 0.8)` |
//! | `latency` | ≥ 3 recorded calls of this task type | `−0.5 × min(avg_ms / 60000, 1)` |
//! | `load` | always | `−2.0 × load` (load clamped to 0..2) |
//! | `recommended` | task type in `recommended_tasks` | `+1.0` |
//! | `strengths` | strengths naming a task keyword | `+0.25` each, at most `+0.5` |
//! | `weaknesses` | weaknesses naming a task keyword | `−0.25` each, at most `−0.5` |
//! | `cost` | always | `−0.15 × cost tier` |
//! | `speed` | always | `+0.15 × speed tier` |
//! | `same_family` | family lineage equals an avoided family | `−6.0` |
//!
//! Why these weights: the size band is a mild preference (a 70B model still beats a 3B one on a
//! reasoning-heavy task, because missing reasoning costs more than leaving the band), while a
//! measured success rate is the strongest signal there is — four failures in four calls cost 4.0,
//! enough to flip a choice between otherwise similar models. Tool use weighs more than JSON because a
//! specialist that cannot call tools cannot read beyond its prompt; the small-model penalty is
//! smaller than the gap between High and Low tool use, because a small model that sometimes calls
//! tools under a long prompt still beats one that never does. Cost and speed only break near-ties.
//! The family penalty is large but finite, so a verifier from another family wins unless it is far
//! worse, and a same-family verifier is still possible (reported as degraded) when it is all there is.
//!
//! Task keywords (for strengths and weaknesses) are the words of the task type, plus `tools`, `json`
//! and `reasoning` when the task needs them. Specialist work is every task type other than `scout`,
//! `planner`, `verifier` and `synthesizer` — the `specialist` stage itself and persona names.
//!
//! Ties in total break by model name, then node, so the same cards always give the same choice.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::OnceLock;

/// Tokens kept free for the answer when checking that a prompt fits a model's context.
pub const OUTPUT_RESERVE_TOKENS: u64 = 1024;
/// A prompt longer than this is "long" for the small-model penalty.
pub const LONG_PROMPT_TOKENS: u64 = 4000;
/// Models at or below this many billion parameters often stop calling tools under long prompts.
pub const SMALL_MODEL_B: f64 = 10.0;
/// The preferred size band for specialists, in billions: fits a 16–24 GB workstation GPU at Q4.
pub const SIZE_BAND_B: (f64, f64) = (12.0, 20.0);
/// Recorded calls of a task type before its success rate counts.
pub const MIN_RUNTIME_CALLS: u64 = 3;
/// Weight of the newest sample in the latency moving average.
pub const LATENCY_EWMA_ALPHA: f64 = 0.2;

const W_TOOL_USE: f64 = 1.5;
const W_SMALL_MODEL: f64 = -2.0;
const W_JSON: f64 = 0.75;
const W_REASONING_SHORT: f64 = -1.5;
const W_CONTEXT_TIGHT: f64 = -0.5;
const W_SIZE_BAND: f64 = 1.0;
const W_SUCCESS: f64 = 5.0;
const SUCCESS_NEUTRAL: f64 = 0.8;
const W_LATENCY: f64 = -0.5;
const LATENCY_SCALE_MS: f64 = 60_000.0;
const W_LOAD: f64 = -2.0;
const W_RECOMMENDED: f64 = 1.0;
const W_STRENGTH: f64 = 0.25;
const W_COST: f64 = -0.15;
const W_SPEED: f64 = 0.15;
const W_SAME_FAMILY: f64 = -6.0;

/// Stages that are not specialist work (the size band does not apply to them).
const NON_SPECIALIST_STAGES: [&str; 7] = [
    "scout",
    "planner",
    "verifier",
    "synthesizer",
    "criteria",
    "conformance",
    "adjudicator",
];

/// A coarse three-step rating, as operators write it in TOML (`"low"`, `"medium"`, `"high"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Low,
    Medium,
    High,
}

impl Tier {
    /// Low 0, Medium 1, High 2: the unit every tier-valued part of the score is weighted in.
    pub fn level(self) -> u8 {
        match self {
            Tier::Low => 0,
            Tier::Medium => 1,
            Tier::High => 2,
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Low => "low",
            Tier::Medium => "medium",
            Tier::High => "high",
        })
    }
}

/// Whether prompts sent to a model stay on the operator's machines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Locality {
    #[default]
    Local,
    Remote,
}

impl fmt::Display for Locality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Locality::Local => "local",
            Locality::Remote => "remote",
        })
    }
}

/// The locality a backend host implies: loopback, private, link-local and unique-local addresses,
/// `localhost`, single-label names and `.local`/`.lan`/`.internal`/`.home.arpa` names are local;
/// everything else is remote. Operators override it per model with `locality` in the agentic card.
pub fn locality_for_host(host: &str) -> Locality {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        let local = match ip {
            IpAddr::V4(v4) => {
                v4.is_loopback() || v4.is_private() || v4.is_link_local() || v4.is_unspecified()
            }
            IpAddr::V6(v6) => {
                let first = v6.segments()[0];
                v6.is_loopback()
                    || v6.is_unspecified()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80
                    || v6
                        .to_ipv4_mapped()
                        .is_some_and(|v4| v4.is_loopback() || v4.is_private())
            }
        };
        return if local {
            Locality::Local
        } else {
            Locality::Remote
        };
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    let lan_suffix = [".local", ".lan", ".internal", ".home.arpa", ".localhost"]
        .iter()
        .any(|s| name.ends_with(s));
    if name == "localhost" || (!name.is_empty() && !name.contains('.')) || lan_suffix {
        Locality::Local
    } else {
        Locality::Remote
    }
}

/// The vendor layer: what the serving backend reports about a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VendorCard {
    pub name: String,
    /// Lowercase architecture family (`qwen2`, `llama`, `gemma2`), as reported or inferred from the name.
    pub family: Option<String>,
    /// Billions of parameters.
    pub parameter_count: Option<f64>,
    /// `Q4_K_M`, `Q8_0`, `F16`, `AWQ`, ...
    pub quantization: Option<String>,
    /// Tokens of context the model was built or served with.
    pub context_length: Option<u64>,
    /// Lowercase capability names as Ollama reports them: `completion`, `tools`, `vision`,
    /// `thinking`, `embedding`, `insert`. Empty when the backend does not say.
    pub capabilities: Vec<String>,
}

impl VendorCard {
    /// A card that knows only its name.
    pub fn named(name: impl Into<String>) -> Self {
        VendorCard {
            name: name.into(),
            ..VendorCard::default()
        }
    }

    /// Reads an Ollama `POST /api/show` reply. Family comes from `details.family`, else the first
    /// of `details.families`, else `general.architecture`; parameters from `details.parameter_size`,
    /// else `general.parameter_count`; context from `<architecture>.context_length`, else the largest
    /// `*.context_length` key. Anything still missing is inferred from the name.
    pub fn from_ollama_show(name: &str, show: &Value) -> VendorCard {
        let details = show.get("details");
        let info = show.get("model_info").and_then(Value::as_object);
        let info_str = |key: &str| info.and_then(|m| m.get(key)).and_then(non_empty_str);

        let family = details
            .and_then(|d| d.get("family"))
            .and_then(non_empty_str)
            .or_else(|| {
                details
                    .and_then(|d| d.get("families"))
                    .and_then(Value::as_array)
                    .and_then(|all| all.iter().find_map(non_empty_str))
            })
            .or_else(|| info_str("general.architecture"))
            .map(|f| f.to_lowercase());
        let parameter_count = details
            .and_then(|d| d.get("parameter_size"))
            .and_then(Value::as_str)
            .and_then(VendorCard::parse_parameter_size)
            .or_else(|| {
                info.and_then(|m| m.get("general.parameter_count"))
                    .and_then(as_count)
                    .map(|n| n as f64 / 1e9)
            });
        let quantization = details
            .and_then(|d| d.get("quantization_level"))
            .and_then(non_empty_str);
        let context_length = info.and_then(|m| {
            let arch = m.get("general.architecture").and_then(non_empty_str);
            arch.and_then(|a| m.get(&format!("{a}.context_length")))
                .and_then(as_count)
                .or_else(|| {
                    m.iter()
                        .filter(|(k, _)| k.ends_with(".context_length"))
                        .filter_map(|(_, v)| as_count(v))
                        .max()
                })
        });
        VendorCard {
            name: name.to_string(),
            family,
            parameter_count,
            quantization,
            context_length,
            capabilities: capabilities(show.get("capabilities")),
        }
        .with_name_inference()
    }

    /// Reads one entry of an OpenAI-compatible `GET /v1/models` reply (`data[i]`). The name is `id`;
    /// context comes from vLLM's `max_model_len`, else `context_length`, else llama-server's
    /// `meta.n_ctx_train` (the trained context: the server may run with less); parameters from
    /// `meta.n_params`. Family, size and quantization not reported are inferred from the id.
    pub fn from_openai_model(entry: &Value) -> VendorCard {
        let meta = entry.get("meta");
        let context_length = entry
            .get("max_model_len")
            .and_then(as_count)
            .or_else(|| entry.get("context_length").and_then(as_count))
            .or_else(|| meta.and_then(|m| m.get("n_ctx_train")).and_then(as_count));
        let parameter_count = meta
            .and_then(|m| m.get("n_params"))
            .and_then(as_count)
            .map(|n| n as f64 / 1e9);
        VendorCard {
            name: entry.get("id").and_then(non_empty_str).unwrap_or_default(),
            family: entry
                .get("family")
                .and_then(non_empty_str)
                .map(|f| f.to_lowercase()),
            parameter_count,
            quantization: entry.get("quantization").and_then(non_empty_str),
            context_length,
            capabilities: capabilities(entry.get("capabilities")),
        }
        .with_name_inference()
    }

    /// Every usable entry of a whole `/v1/models` reply (`{"object":"list","data":[...]}`); entries
    /// without an id are skipped.
    pub fn from_openai_models(list: &Value) -> Vec<VendorCard> {
        list.get("data")
            .and_then(Value::as_array)
            .map(|data| {
                data.iter()
                    .map(VendorCard::from_openai_model)
                    .filter(|c| !c.name.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Fills family, parameter count and quantization from the name where the backend said nothing:
    /// `Qwen/Qwen2.5-14B-Instruct` → `qwen2.5`, 14B; `llama3.1:8b-instruct-q4_K_M` → `llama3.1`,
    /// 8B, `Q4_K_M`. Mixture-of-experts names count every expert: `mixtral-8x7b` → 56B, although
    /// the real model shares weights and has 46.7B — close enough for a size preference.
    pub fn with_name_inference(mut self) -> Self {
        if self.family.is_none() {
            self.family = family_from_name(&self.name);
        }
        if self.parameter_count.is_none() {
            self.parameter_count = parameter_count_from_name(&self.name);
        }
        if self.quantization.is_none() {
            self.quantization = quantization_from_name(&self.name);
        }
        self
    }

    /// Parses a parameter count in billions: `"7.6B"` → 7.6, `"494.03M"` → 0.49403, `"13B"` → 13,
    /// `"8x7B"` → 56, `"1.2T"` → 1200. A unit (K, M, B, T) is required; anything else is `None`.
    pub fn parse_parameter_size(s: &str) -> Option<f64> {
        let s = s.trim().to_ascii_lowercase();
        let unit = s.chars().last()?;
        let scale = match unit {
            'k' => 1e-6,
            'm' => 1e-3,
            'b' => 1.0,
            't' => 1e3,
            _ => return None,
        };
        let number = s[..s.len() - 1].trim();
        let mut value = 1.0;
        for factor in number.split('x') {
            let digits = factor.trim();
            let plain = !digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
                && digits.chars().any(|c| c.is_ascii_digit());
            if !plain {
                return None;
            }
            value *= digits.parse::<f64>().ok()?;
        }
        let billions = value * scale;
        (billions.is_finite() && billions > 0.0).then_some(billions)
    }
}

fn non_empty_str(v: &Value) -> Option<String> {
    v.as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A non-negative integer, also when a server wrote it as a float (`32768.0`).
fn as_count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

fn capabilities(v: Option<&Value>) -> Vec<String> {
    let mut caps: Vec<String> = Vec::new();
    for cap in v.and_then(Value::as_array).into_iter().flatten() {
        if let Some(c) = non_empty_str(cap).map(|c| c.to_lowercase()) {
            if !caps.contains(&c) {
                caps.push(c);
            }
        }
    }
    caps
}

/// The name without registry/organisation prefix and file extension.
fn base_name(name: &str) -> &str {
    let name = name.trim();
    let base = name.rsplit('/').next().unwrap_or(name);
    let lower = base.to_ascii_lowercase();
    for ext in [".gguf", ".safetensors", ".bin", ".ggml"] {
        if lower.ends_with(ext) {
            return &base[..base.len() - ext.len()];
        }
    }
    base
}

/// The first segment of the name before `-`, `:` or `_`, lowercased, without registry prefix.
pub fn family_from_name(name: &str) -> Option<String> {
    base_name(name)
        .split(['-', ':', '_'])
        .next()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
}

fn name_regex(
    cell: &'static OnceLock<Option<regex::Regex>>,
    pattern: &str,
) -> Option<&'static regex::Regex> {
    cell.get_or_init(|| regex::Regex::new(pattern).ok())
        .as_ref()
}

fn parameter_count_from_name(name: &str) -> Option<f64> {
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    // Only B and M: a K suffix in a name is a context size (`phi-3-mini-128k`), not parameters.
    let re = name_regex(
        &RE,
        r"(?i)(?:^|[-_:/.\s])(\d+(?:\.\d+)?(?:x\d+(?:\.\d+)?)?[bm])(?:$|[-_:/.\s])",
    )?;
    re.captures_iter(name)
        .filter_map(|c| c.get(1))
        .find_map(|m| VendorCard::parse_parameter_size(m.as_str()))
}

fn quantization_from_name(name: &str) -> Option<String> {
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let re = name_regex(
        &RE,
        r"(?i)(?:^|[-_:/.\s])(i?q\d(?:_[a-z0-9]+)*|bf16|fp16|f16|f32|fp8|awq|gptq|int4|int8)(?:$|[-_:/.\s])",
    )?;
    re.captures(name)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_ascii_uppercase())
}

/// The family with trailing version numbers removed (`qwen2.5` → `qwen`, `llama3.1` → `llama`,
/// `gemma2` → `gemma`): what "same family" means for cross-family verification, because Ollama
/// reports `qwen2` for a model whose name says `qwen2.5` and both come from one lab's training.
pub fn lineage(family: &str) -> String {
    let lower = family.trim().to_lowercase();
    let stripped = lower.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if stripped.is_empty() {
        lower
    } else {
        stripped.to_string()
    }
}

/// The model family of a model name, coarse on purpose: "qwen2.5-coder:7b" -> "qwen2.5",
/// "meta/llama3.1-8b" -> "llama3.1". Two sizes of one family count as the same family, which is
/// what verifier independence needs.
pub fn family_of(model: &str) -> String {
    family_from_name(model).unwrap_or_else(|| {
        let base = model.rsplit('/').next().unwrap_or(model);
        let base = base.split(':').next().unwrap_or(base);
        base.split(['-', '_'])
            .next()
            .unwrap_or(base)
            .to_ascii_lowercase()
    })
}

/// The agentic layer: the operator's judgment of a model, from TOML (`[models."<name>".agentic]`).
/// Every field is optional; unknown keys are an authoring error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgenticCard {
    pub cost_tier: Option<Tier>,
    pub speed_tier: Option<Tier>,
    pub locality: Option<Locality>,
    pub reasoning: Option<Tier>,
    pub tool_use: Option<Tier>,
    pub json_compliance: Option<Tier>,
    pub strengths: Vec<String>,
    pub weaknesses: Vec<String>,
    pub recommended_tasks: Vec<String>,
    pub avoid_tasks: Vec<String>,
    /// How many agents may share this model at once (the scheduler's capacity; scoring sees `load`).
    pub max_agents: Option<u32>,
}

impl AgenticCard {
    /// The defaults the vendor layer implies, before the operator says anything:
    ///
    /// - `tool_use`: High when capabilities contain `tools`, Low when capabilities are reported
    ///   without it, Medium when none are reported (OpenAI-compatible servers never say).
    /// - `reasoning`: by size — High from 30B, Medium from 12B, Low below; Medium when unknown.
    /// - `json_compliance`: by size — High from 12B, Medium from 3B, Low below; Medium when unknown.
    /// - `speed_tier`: by size — High up to 10B, Medium up to 30B, Low above; Medium when unknown.
    /// - `cost_tier`: Low for local models (the hardware is already paid for), Medium for remote.
    /// - `locality`: what the caller derived from the backend's host ([`locality_for_host`]).
    /// - lists empty and `max_agents` unset: only the operator knows them.
    pub fn vendor_defaults(vendor: &VendorCard, locality: Locality) -> AgenticCard {
        let params = valid_params(vendor.parameter_count);
        let by_size = |high: f64, medium: f64| match params {
            Some(p) if p >= high => Tier::High,
            Some(p) if p >= medium => Tier::Medium,
            Some(_) => Tier::Low,
            None => Tier::Medium,
        };
        let tool_use = if vendor.capabilities.is_empty() {
            Tier::Medium
        } else if vendor.capabilities.iter().any(|c| c == "tools") {
            Tier::High
        } else {
            Tier::Low
        };
        let speed = match params {
            Some(p) if p <= SMALL_MODEL_B => Tier::High,
            Some(p) if p <= 30.0 => Tier::Medium,
            Some(_) => Tier::Low,
            None => Tier::Medium,
        };
        AgenticCard {
            cost_tier: Some(match locality {
                Locality::Local => Tier::Low,
                Locality::Remote => Tier::Medium,
            }),
            speed_tier: Some(speed),
            locality: Some(locality),
            reasoning: Some(by_size(30.0, 12.0)),
            tool_use: Some(tool_use),
            json_compliance: Some(by_size(12.0, 3.0)),
            ..AgenticCard::default()
        }
    }

    /// This card with every field the operator set (`Some`, or a non-empty list) taken from
    /// `operator`; unset operator fields keep this card's value.
    pub fn overlay(self, operator: &AgenticCard) -> AgenticCard {
        let list = |mine: Vec<String>, theirs: &Vec<String>| {
            if theirs.is_empty() {
                mine
            } else {
                theirs.clone()
            }
        };
        AgenticCard {
            cost_tier: operator.cost_tier.or(self.cost_tier),
            speed_tier: operator.speed_tier.or(self.speed_tier),
            locality: operator.locality.or(self.locality),
            reasoning: operator.reasoning.or(self.reasoning),
            tool_use: operator.tool_use.or(self.tool_use),
            json_compliance: operator.json_compliance.or(self.json_compliance),
            strengths: list(self.strengths, &operator.strengths),
            weaknesses: list(self.weaknesses, &operator.weaknesses),
            recommended_tasks: list(self.recommended_tasks, &operator.recommended_tasks),
            avoid_tasks: list(self.avoid_tasks, &operator.avoid_tasks),
            max_agents: operator.max_agents.or(self.max_agents),
        }
    }
}

/// What recorded runs of one model on one task type taught.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeStats {
    pub calls: u64,
    pub successes: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Exponentially weighted moving average (newest sample weighs [`LATENCY_EWMA_ALPHA`]), so a
    /// model that got slower under load is noticed without forgetting its history at once.
    pub latency_ms_avg: f64,
}

impl RuntimeStats {
    pub fn record(&mut self, ok: bool, tokens_in: u64, tokens_out: u64, latency_ms: u64) {
        self.calls = self.calls.saturating_add(1);
        if ok {
            self.successes = self.successes.saturating_add(1);
        }
        self.tokens_in = self.tokens_in.saturating_add(tokens_in);
        self.tokens_out = self.tokens_out.saturating_add(tokens_out);
        let sample = latency_ms as f64;
        self.latency_ms_avg = if self.calls == 1 || !self.latency_ms_avg.is_finite() {
            sample
        } else {
            self.latency_ms_avg + LATENCY_EWMA_ALPHA * (sample - self.latency_ms_avg)
        };
    }

    /// Successes per call, once [`MIN_RUNTIME_CALLS`] calls are recorded: fewer say too little.
    pub fn success_rate(&self) -> Option<f64> {
        (self.calls >= MIN_RUNTIME_CALLS)
            .then(|| (self.successes.min(self.calls) as f64) / (self.calls as f64))
    }
}

/// A model as selection sees it: the three layers, plus where it runs and how busy it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelCard {
    pub name: String,
    pub vendor: VendorCard,
    pub agentic: AgenticCard,
    /// Keyed by lowercase task type (`specialist`, `verifier`, or a persona name).
    pub runtime: BTreeMap<String, RuntimeStats>,
    /// The cluster node that serves it (empty for a single-node run).
    pub node: String,
    /// Outstanding requests over capacity: 0 idle, 1 full, above 1 queueing.
    pub load: f64,
}

impl ModelCard {
    /// A card from the vendor layer and the operator's agentic card: the operator's fields override
    /// [`AgenticCard::vendor_defaults`]. `host_locality` is what the caller derived from the
    /// backend's address (see [`locality_for_host`]; `Locality::Local` when it does not know).
    pub fn merged(vendor: VendorCard, agentic: AgenticCard, host_locality: Locality) -> ModelCard {
        let effective = AgenticCard::vendor_defaults(&vendor, host_locality).overlay(&agentic);
        ModelCard {
            name: vendor.name.clone(),
            vendor,
            agentic: effective,
            runtime: BTreeMap::new(),
            node: String::new(),
            load: 0.0,
        }
    }

    /// The vendor family, else the family read from the name.
    pub fn family(&self) -> String {
        self.vendor
            .family
            .as_deref()
            .map(|f| f.trim().to_lowercase())
            .filter(|f| !f.is_empty())
            .or_else(|| family_from_name(&self.name))
            .unwrap_or_else(|| self.name.trim().to_lowercase())
    }

    /// Records one run of this model on `task_type`.
    pub fn record(
        &mut self,
        task_type: &str,
        ok: bool,
        tokens_in: u64,
        tokens_out: u64,
        latency_ms: u64,
    ) {
        self.runtime
            .entry(task_key(task_type))
            .or_default()
            .record(ok, tokens_in, tokens_out, latency_ms);
    }

    /// Runtime stats for a task type, if any were recorded.
    pub fn runtime_for(&self, task_type: &str) -> Option<&RuntimeStats> {
        self.runtime.get(&task_key(task_type))
    }

    /// The agentic layer with vendor-derived defaults behind whatever is unset (cards not built by
    /// [`ModelCard::merged`] may leave fields empty); unset locality counts as local.
    fn effective(&self) -> AgenticCard {
        let locality = self.agentic.locality.unwrap_or_default();
        AgenticCard::vendor_defaults(&self.vendor, locality).overlay(&self.agentic)
    }
}

fn task_key(task_type: &str) -> String {
    task_type.trim().to_lowercase()
}

fn valid_params(p: Option<f64>) -> Option<f64> {
    p.filter(|p| p.is_finite() && *p > 0.0)
}

/// What a task asks of its model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskNeeds {
    /// `scout`, `planner`, `specialist`, `verifier`, `synthesizer`, or a persona name.
    pub task_type: String,
    pub tool_use: bool,
    pub json: bool,
    pub reasoning: Tier,
    /// Estimated tokens of the prompt the model will get.
    pub prompt_tokens: u64,
    /// The review is sensitive: only local models may see it.
    pub sensitive: bool,
    /// A family to steer away from (the verifier passes the finders' family).
    pub avoid_family: Option<String>,
}

impl TaskNeeds {
    /// The usual needs of a stage: `scout` answers JSON with light reasoning; `planner` answers
    /// JSON with deep reasoning; `verifier`, `synthesizer`, `criteria` and `conformance` answer JSON
    /// with medium reasoning;
    /// anything else is specialist work — tools, JSON, medium reasoning. Prompt size, sensitivity
    /// and the avoided family are the caller's to set.
    pub fn new(task_type: impl Into<String>) -> TaskNeeds {
        let task_type = task_type.into();
        let (tool_use, reasoning) = match task_key(&task_type).as_str() {
            "scout" => (false, Tier::Low),
            "planner" => (false, Tier::High),
            "verifier" | "synthesizer" | "criteria" | "conformance" | "adjudicator" => {
                (false, Tier::Medium)
            }
            _ => (true, Tier::Medium),
        };
        TaskNeeds {
            task_type,
            tool_use,
            json: true,
            reasoning,
            prompt_tokens: 0,
            sensitive: false,
            avoid_family: None,
        }
    }

    fn is_specialist_work(&self) -> bool {
        !NON_SPECIALIST_STAGES.contains(&task_key(&self.task_type).as_str())
    }

    /// The words strengths and weaknesses are matched against.
    fn keywords(&self) -> Vec<String> {
        let mut words = words_of(&self.task_type);
        if self.tool_use {
            words.extend(["tools".to_string(), "tool".to_string()]);
        }
        if self.json {
            words.push("json".to_string());
        }
        if self.reasoning == Tier::High {
            words.push("reasoning".to_string());
        }
        words
    }
}

/// Lowercase words of at least three characters: short fragments match too much by accident.
fn words_of(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// One card's score for one task, with its parts so the choice can be explained and logged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    pub model: String,
    pub total: f64,
    pub parts: Vec<(&'static str, f64)>,
    pub eligible: bool,
    /// Every hard constraint the card breaks, joined with `; `.
    pub why_ineligible: Option<String>,
}

impl Score {
    /// The value of a named part, if it applied.
    pub fn part(&self, name: &str) -> Option<f64> {
        self.parts.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// `total 3.15 (tool_use +2.00, size_band +1.00, ...)`, or the reason it is ineligible.
    pub fn explain(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(n, v)| format!("{n} {v:+.2}"))
            .collect();
        match &self.why_ineligible {
            Some(why) => format!("ineligible: {why}"),
            None => format!("total {:.2} ({})", self.total, parts.join(", ")),
        }
    }
}

/// Scores `card` for `needs` (see the module documentation for the table).
pub fn score(card: &ModelCard, needs: &TaskNeeds) -> Score {
    let avoid: Vec<&str> = needs.avoid_family.iter().map(String::as_str).collect();
    score_avoiding(card, needs, &avoid)
}

fn score_avoiding(card: &ModelCard, needs: &TaskNeeds, avoid_families: &[&str]) -> Score {
    let eff = card.effective();
    let params = valid_params(card.vendor.parameter_count);
    let task = task_key(&needs.task_type);
    let caps = &card.vendor.capabilities;
    let needed_context = needs.prompt_tokens.saturating_add(OUTPUT_RESERVE_TOKENS);

    let mut why = Vec::new();
    if needs.sensitive && eff.locality == Some(Locality::Remote) {
        why.push("remote model on a sensitive review".to_string());
    }
    if let Some(ctx) = card.vendor.context_length {
        if ctx < needed_context {
            why.push(format!(
                "context of {ctx} tokens is below the {needed_context} the task needs"
            ));
        }
    }
    if eff.avoid_tasks.iter().any(|t| task_key(t) == task) {
        why.push(format!("operator avoids it for {task} tasks"));
    }
    if caps.iter().any(|c| c == "embedding") && !caps.iter().any(|c| c == "completion") {
        why.push("embedding-only model".to_string());
    }

    let level = |t: Option<Tier>| f64::from(t.unwrap_or(Tier::Medium).level());
    let mut parts: Vec<(&'static str, f64)> = Vec::new();
    if needs.tool_use {
        parts.push(("tool_use", W_TOOL_USE * level(eff.tool_use)));
        if needs.prompt_tokens > LONG_PROMPT_TOKENS && params.is_some_and(|p| p <= SMALL_MODEL_B) {
            parts.push(("small_model_long_prompt", W_SMALL_MODEL));
        }
    }
    if needs.json {
        parts.push(("json", W_JSON * level(eff.json_compliance)));
    }
    let short = f64::from(needs.reasoning.level()) - level(eff.reasoning);
    parts.push(("reasoning", W_REASONING_SHORT * short.max(0.0)));
    if let Some(ctx) = card.vendor.context_length {
        if ctx > 0 && (needed_context as f64) > 0.75 * ctx as f64 {
            parts.push(("context_headroom", W_CONTEXT_TIGHT));
        }
    }
    if needs.is_specialist_work() {
        parts.push(("size_band", W_SIZE_BAND * size_band(params)));
    }
    if let Some(stats) = card.runtime_for(&task) {
        if let Some(rate) = stats.success_rate() {
            parts.push(("success_rate", W_SUCCESS * (rate - SUCCESS_NEUTRAL)));
            let latency = if stats.latency_ms_avg.is_finite() {
                (stats.latency_ms_avg.max(0.0) / LATENCY_SCALE_MS).min(1.0)
            } else {
                1.0
            };
            parts.push(("latency", W_LATENCY * latency));
        }
    }
    let load = if card.load.is_finite() {
        card.load.clamp(0.0, 2.0)
    } else {
        2.0
    };
    parts.push(("load", W_LOAD * load));
    if eff.recommended_tasks.iter().any(|t| task_key(t) == task) {
        parts.push(("recommended", W_RECOMMENDED));
    }
    let keywords = needs.keywords();
    let matching = |list: &[String]| {
        list.iter()
            .filter(|s| task_key(s) == task || words_of(s).iter().any(|w| keywords.contains(w)))
            .count()
            .min(2) as f64
    };
    let strengths = matching(&eff.strengths);
    if strengths > 0.0 {
        parts.push(("strengths", W_STRENGTH * strengths));
    }
    let weaknesses = matching(&eff.weaknesses);
    if weaknesses > 0.0 {
        parts.push(("weaknesses", -W_STRENGTH * weaknesses));
    }
    parts.push(("cost", W_COST * level(eff.cost_tier)));
    parts.push(("speed", W_SPEED * level(eff.speed_tier)));
    let family = lineage(&card.family());
    if avoid_families.iter().any(|f| lineage(f) == family) {
        parts.push(("same_family", W_SAME_FAMILY));
    }

    let total = parts.iter().map(|(_, v)| v).sum();
    Score {
        model: card.name.clone(),
        total,
        parts,
        eligible: why.is_empty(),
        why_ineligible: (!why.is_empty()).then(|| why.join("; ")),
    }
}

/// 1 inside the preferred band, tapering proportionally outside it (half at 6B or 40B), 0.5 when
/// the size is unknown so an unknown model is neither favoured nor punished.
fn size_band(params: Option<f64>) -> f64 {
    let (low, high) = SIZE_BAND_B;
    match params {
        None => 0.5,
        Some(p) if p < low => p / low,
        Some(p) if p > high => high / p,
        Some(_) => 1.0,
    }
}

/// Higher total first; ties by name, then node, so the order of `cards` never matters.
fn better(a: (&ModelCard, &Score), b: (&ModelCard, &Score)) -> Ordering {
    a.1.total
        .total_cmp(&b.1.total)
        .then_with(|| b.0.name.cmp(&a.0.name))
        .then_with(|| b.0.node.cmp(&a.0.node))
}

fn best(
    cards: &[ModelCard],
    mut score_of: impl FnMut(&ModelCard) -> Score,
) -> Option<(&ModelCard, Score)> {
    cards
        .iter()
        .map(|c| (c, score_of(c)))
        .filter(|(_, s)| s.eligible)
        .max_by(|a, b| better((a.0, &a.1), (b.0, &b.1)))
}

/// The best eligible card for `needs`, with its score; `None` when no card is eligible.
pub fn choose<'a>(cards: &'a [ModelCard], needs: &TaskNeeds) -> Option<(&'a ModelCard, Score)> {
    best(cards, |c| score(c, needs))
}

/// The best eligible verifier, steering away from every finder family (and `needs.avoid_family`).
/// The flag is true when the chosen model shares a family with a finder: verification is degraded
/// and the report must say so.
pub fn choose_verifier<'a>(
    cards: &'a [ModelCard],
    needs: &TaskNeeds,
    finder_families: &[String],
) -> Option<(&'a ModelCard, Score, bool)> {
    let mut avoid: Vec<&str> = finder_families.iter().map(String::as_str).collect();
    if let Some(f) = needs.avoid_family.as_deref() {
        avoid.push(f);
    }
    let (card, score) = best(cards, |c| score_avoiding(c, needs, &avoid))?;
    let family = lineage(&card.family());
    let degraded = finder_families.iter().any(|f| lineage(f) == family);
    Some((card, score, degraded))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameter_sizes_parse_with_their_unit() {
        let cases: [(&str, Option<f64>); 12] = [
            ("7.6B", Some(7.6)),
            ("494.03M", Some(0.49403)),
            ("13B", Some(13.0)),
            (" 8b ", Some(8.0)),
            ("8x7B", Some(56.0)),
            ("1.2T", Some(1200.0)),
            ("350K", Some(0.00035)),
            ("13", None),
            ("B", None),
            ("NaNB", None),
            ("-7B", None),
            ("0B", None),
        ];
        for (text, want) in cases {
            let got = VendorCard::parse_parameter_size(text);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{text}: {g} != {w}"),
                (g, w) => assert_eq!(g, w, "{text}"),
            }
        }
    }

    #[test]
    fn names_reveal_family_size_and_quantization() {
        // (name, family, billions, quantization)
        type Case = (
            &'static str,
            Option<&'static str>,
            Option<f64>,
            Option<&'static str>,
        );
        let cases: [Case; 10] = [
            (
                "Qwen2.5-Coder-0.5B-Instruct-GGUF",
                Some("qwen2.5"),
                Some(0.5),
                None,
            ),
            ("llama3.1:8b", Some("llama3.1"), Some(8.0), None),
            (
                "llama3.1:8b-instruct-q4_K_M",
                Some("llama3.1"),
                Some(8.0),
                Some("Q4_K_M"),
            ),
            ("mixtral-8x7b", Some("mixtral"), Some(56.0), None),
            (
                "Qwen/Qwen2.5-14B-Instruct",
                Some("qwen2.5"),
                Some(14.0),
                None,
            ),
            ("Qwen/Qwen3-30B-A3B", Some("qwen3"), Some(30.0), None),
            (
                "models/Qwen2.5-Coder-0.5B-Instruct-Q8_0.gguf",
                Some("qwen2.5"),
                Some(0.5),
                Some("Q8_0"),
            ),
            ("phi-3-mini-128k-instruct", Some("phi"), None, None),
            ("smollm2:135m", Some("smollm2"), Some(0.135), None),
            (
                "registry.ollama.ai/library/gemma2:27b",
                Some("gemma2"),
                Some(27.0),
                None,
            ),
        ];
        for (name, family, params, quant) in cases {
            let card = VendorCard::named(name).with_name_inference();
            assert_eq!(card.family.as_deref(), family, "{name}");
            match (card.parameter_count, params) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{name}: {g} != {w}"),
                (g, w) => assert_eq!(g, w, "{name}"),
            }
            assert_eq!(card.quantization.as_deref(), quant, "{name}");
        }
    }

    #[test]
    fn ollama_context_prefers_the_architecture_key() {
        let show = json!({
            "details": {"families": ["", "llama"], "parameter_size": ""},
            "model_info": {
                "general.architecture": "llama",
                "general.parameter_count": 7241732096u64,
                "clip.context_length": 77,
                "llama.context_length": 4096
            }
        });
        let card = VendorCard::from_ollama_show("llava:7b", &show);
        assert_eq!(card.context_length, Some(4096));
        assert_eq!(card.family.as_deref(), Some("llama"));
        let params = card.parameter_count.unwrap();
        assert!((params - 7.241732096).abs() < 1e-9);
        assert!(card.capabilities.is_empty());

        // Without the architecture, the largest context key wins over a vision tower's.
        let show =
            json!({"model_info": {"clip.context_length": 77, "mllama.context_length": 131072}});
        let card = VendorCard::from_ollama_show("x", &show);
        assert_eq!(card.context_length, Some(131072));
    }

    #[test]
    fn malformed_replies_give_an_empty_card_not_a_panic() {
        for reply in [
            json!(null),
            json!([1, 2]),
            json!({"details": "x", "model_info": 3, "capabilities": "tools"}),
            json!({"details": {"parameter_size": 7}, "model_info": {"a.context_length": -1}}),
        ] {
            let card = VendorCard::from_ollama_show("mystery", &reply);
            assert_eq!(card.name, "mystery");
            assert_eq!(card.context_length, None);
            assert!(card.capabilities.is_empty());
            let card = VendorCard::from_openai_model(&reply);
            assert_eq!(card.name, "");
        }
        assert!(VendorCard::from_openai_models(&json!({"data": [{"object": "model"}]})).is_empty());
    }

    #[test]
    fn lineage_drops_version_numbers() {
        assert_eq!(lineage("qwen2.5"), "qwen");
        assert_eq!(lineage("Qwen2"), "qwen");
        assert_eq!(lineage("llama3.1"), "llama");
        assert_eq!(lineage("gemma2"), "gemma");
        assert_eq!(lineage("nomic-bert"), "nomic-bert");
        assert_eq!(lineage("42"), "42");
    }

    #[test]
    fn hosts_map_to_locality() {
        for host in [
            "127.0.0.1",
            "localhost",
            "[::1]",
            "10.0.0.7",
            "192.168.1.20",
            "172.20.0.3",
            "fd00::1",
            "gpu-box-3",
            "gpu3.lan",
            "ollama.internal",
        ] {
            assert_eq!(locality_for_host(host), Locality::Local, "{host}");
        }
        for host in ["api.openai.com", "8.8.8.8", "2001:db8::1", "openrouter.ai"] {
            assert_eq!(locality_for_host(host), Locality::Remote, "{host}");
        }
    }

    #[test]
    fn runtime_stats_average_latency_and_wait_for_evidence() {
        let mut stats = RuntimeStats::default();
        assert_eq!(stats.success_rate(), None);
        stats.record(true, 100, 10, 1000);
        assert_eq!(stats.latency_ms_avg, 1000.0);
        stats.record(false, 200, 20, 2000);
        assert!((stats.latency_ms_avg - 1200.0).abs() < 1e-9);
        assert_eq!(stats.success_rate(), None);
        stats.record(true, 300, 30, 1200);
        assert!((stats.latency_ms_avg - 1200.0).abs() < 1e-9);
        assert_eq!(stats.calls, 3);
        assert_eq!(stats.successes, 2);
        assert_eq!((stats.tokens_in, stats.tokens_out), (600, 60));
        assert!((stats.success_rate().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn vendor_defaults_follow_the_documented_rules() {
        let mut vendor = VendorCard::named("qwen2.5-coder:14b");
        vendor.parameter_count = Some(14.8);
        vendor.capabilities = vec!["completion".into(), "tools".into()];
        let d = AgenticCard::vendor_defaults(&vendor, Locality::Local);
        assert_eq!(d.tool_use, Some(Tier::High));
        assert_eq!(d.reasoning, Some(Tier::Medium));
        assert_eq!(d.json_compliance, Some(Tier::High));
        assert_eq!(d.speed_tier, Some(Tier::Medium));
        assert_eq!(d.cost_tier, Some(Tier::Low));
        assert_eq!(d.locality, Some(Locality::Local));

        vendor.capabilities = vec!["completion".into()];
        vendor.parameter_count = Some(1.5);
        let d = AgenticCard::vendor_defaults(&vendor, Locality::Remote);
        assert_eq!(d.tool_use, Some(Tier::Low));
        assert_eq!(d.reasoning, Some(Tier::Low));
        assert_eq!(d.json_compliance, Some(Tier::Low));
        assert_eq!(d.speed_tier, Some(Tier::High));
        assert_eq!(d.cost_tier, Some(Tier::Medium));

        let unknown = AgenticCard::vendor_defaults(&VendorCard::named("gpt-4o"), Locality::Remote);
        assert_eq!(unknown.tool_use, Some(Tier::Medium));
        assert_eq!(unknown.reasoning, Some(Tier::Medium));
        assert_eq!(unknown.json_compliance, Some(Tier::Medium));
        assert_eq!(unknown.speed_tier, Some(Tier::Medium));
        assert_eq!(unknown.locality, Some(Locality::Remote));

        vendor.parameter_count = Some(70.0);
        let big = AgenticCard::vendor_defaults(&vendor, Locality::Local);
        assert_eq!(big.reasoning, Some(Tier::High));
        assert_eq!(big.speed_tier, Some(Tier::Low));
    }

    #[test]
    fn operator_fields_override_and_empty_ones_keep_defaults() {
        let mut vendor = VendorCard::named("llama3.1:8b");
        vendor.parameter_count = Some(8.0);
        vendor.capabilities = vec!["completion".into(), "tools".into()];
        let operator: AgenticCard = serde_json::from_value(json!({
            "reasoning": "high",
            "locality": "remote",
            "strengths": ["security"],
            "max_agents": 4
        }))
        .unwrap();
        let card = ModelCard::merged(vendor, operator, Locality::Local);
        assert_eq!(card.name, "llama3.1:8b");
        assert_eq!(card.agentic.reasoning, Some(Tier::High));
        assert_eq!(card.agentic.locality, Some(Locality::Remote));
        assert_eq!(card.agentic.tool_use, Some(Tier::High));
        assert_eq!(card.agentic.speed_tier, Some(Tier::High));
        assert_eq!(card.agentic.strengths, vec!["security".to_string()]);
        assert!(card.agentic.avoid_tasks.is_empty());
        assert_eq!(card.agentic.max_agents, Some(4));
        assert_eq!(card.node, "");
        assert_eq!(card.load, 0.0);
    }

    #[test]
    fn agentic_cards_reject_unknown_keys_and_bad_tiers() {
        assert!(serde_json::from_value::<AgenticCard>(json!({"tool-use": "high"})).is_err());
        assert!(serde_json::from_value::<AgenticCard>(json!({"reasoning": "huge"})).is_err());
        let empty: AgenticCard = serde_json::from_value(json!({})).unwrap();
        assert_eq!(empty, AgenticCard::default());
        assert_eq!(serde_json::to_value(Tier::Medium).unwrap(), json!("medium"));
        assert_eq!(
            serde_json::to_value(Locality::Remote).unwrap(),
            json!("remote")
        );
    }

    #[test]
    fn family_falls_back_to_the_name() {
        let mut card = ModelCard {
            name: "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M".into(),
            ..ModelCard::default()
        };
        assert_eq!(card.family(), "llama");
        card.vendor.family = Some("Qwen2".into());
        assert_eq!(card.family(), "qwen2");
    }

    #[test]
    fn size_band_is_one_inside_and_tapers_outside() {
        assert_eq!(size_band(Some(12.0)), 1.0);
        assert_eq!(size_band(Some(20.0)), 1.0);
        assert_eq!(size_band(Some(6.0)), 0.5);
        assert_eq!(size_band(Some(40.0)), 0.5);
        assert_eq!(size_band(None), 0.5);
    }

    #[test]
    fn runtime_keys_ignore_case_and_stages_have_presets() {
        let mut card = ModelCard::default();
        card.record(" Specialist ", true, 1, 1, 10);
        assert_eq!(card.runtime_for("specialist").map(|s| s.calls), Some(1));
        assert!(card.runtime.contains_key("specialist"));

        let planner = TaskNeeds::new("planner");
        assert!(!planner.tool_use && planner.json && planner.reasoning == Tier::High);
        let persona = TaskNeeds::new("security-auditor");
        assert!(persona.tool_use && persona.is_specialist_work());
        assert!(!TaskNeeds::new("Verifier").is_specialist_work());
    }

    #[test]
    fn scores_explain_themselves() {
        let card = ModelCard {
            name: "m".into(),
            load: f64::NAN,
            ..ModelCard::default()
        };
        let s = score(&card, &TaskNeeds::new("scout"));
        assert!(s.eligible);
        assert_eq!(s.part("load"), Some(-4.0));
        assert!(s.total.is_finite());
        assert!(s.explain().starts_with("total "), "{}", s.explain());
        assert!(s.explain().contains("load -4.00"));
    }
}
