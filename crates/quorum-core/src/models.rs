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
//!
//! The rooms: the vendor layer (`vendor`), the operator's and the runtime's layers and the card
//! they make (`card`), the score and the choice (`score`), and resolving a requested model
//! (`resolve`). This module only declares them and re-exports their items, so each has one
//! path.

mod card;
mod resolve;
mod score;
mod vendor;

pub use card::{
    locality_for_host, AgenticCard, Locality, ModelCard, RuntimeStats, Tier, LATENCY_EWMA_ALPHA,
    MIN_RUNTIME_CALLS, SMALL_MODEL_B,
};
pub use resolve::{resolve_requested, Resolution, SelectionError};
pub use score::{
    choose, choose_verifier, score, Score, TaskNeeds, LONG_PROMPT_TOKENS, OUTPUT_RESERVE_TOKENS,
    SIZE_BAND_B,
};
pub use vendor::{family_from_name, family_of, lineage, VendorCard};
