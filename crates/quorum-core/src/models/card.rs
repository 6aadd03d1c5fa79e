//! A model's card as the selector reads it: the operator's agentic layer ([`AgenticCard`]:
//! tiers, locality, preferences, every field overriding a default derived from the vendor
//! layer), what recorded runs taught ([`RuntimeStats`]), and the three together
//! ([`ModelCard`]).

use super::vendor::{family_from_name, VendorCard};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// Models at or below this many billion parameters often stop calling tools under long prompts.
pub const SMALL_MODEL_B: f64 = 10.0;

/// Recorded calls of a task type before its success rate counts.
pub const MIN_RUNTIME_CALLS: u64 = 3;

/// Weight of the newest sample in the latency moving average.
pub const LATENCY_EWMA_ALPHA: f64 = 0.2;

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
    pub(crate) fn effective(&self) -> AgenticCard {
        let locality = self.agentic.locality.unwrap_or_default();
        AgenticCard::vendor_defaults(&self.vendor, locality).overlay(&self.agentic)
    }
}

pub(crate) fn task_key(task_type: &str) -> String {
    task_type.trim().to_lowercase()
}

pub(crate) fn valid_params(p: Option<f64>) -> Option<f64> {
    p.filter(|p| p.is_finite() && *p > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
