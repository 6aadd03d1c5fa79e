//! The node's model backends, their model cards, and the choice of a model for each task.
//!
//! Selection is deterministic Rust over the three-layer cards of `quorum_core::models`: vendor
//! facts probed from the servers, the operator's agentic overrides from config, and runtime
//! statistics learned from this node's recorded calls. A pinned `--model` bypasses scoring;
//! `auto` scores every task. A sensitive review only ever reaches local models.

use crate::error::ReviewError;
use quorum_core::models::{self, locality_for_host, AgenticCard, ModelCard, TaskNeeds, VendorCard};
use quorum_llm::{BackendConfig, LlmClient, ModelInfo};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One configured backend, its client, and the models it serves (configured or discovered).
#[derive(Debug, Clone)]
pub struct Backend {
    pub config: BackendConfig,
    pub client: LlmClient,
    pub models: Vec<String>,
}

/// What selection decided for one call.
#[derive(Debug, Clone)]
pub struct Selected {
    pub client: LlmClient,
    pub model: String,
    /// Set when a requested model was unknown/ineligible and scoring replaced it.
    pub replaced: Option<String>,
}

/// All backends this node talks to. Agents only reach models through here, which is what keeps
/// "a node talks only to its own host's model servers" true.
#[derive(Debug, Clone, Default)]
pub struct Backends {
    pub backends: Arc<Vec<Backend>>,
    /// A pinned model name, or "auto" (score per task).
    pub default_model: String,
    /// Cards of every model the backends serve; runtime stats are updated as calls complete.
    pub cards: Arc<Mutex<Vec<ModelCard>>>,
    /// Only local models may see this review.
    pub sensitive: bool,
    /// This node's name, stamped on cards.
    pub node: String,
    /// The operator lets peers' attempts use `locality = remote` (paid) models. Off by default:
    /// a peer holding the cookie must not be able to spend this node's API credit.
    pub allow_peers_remote_backends: bool,
}

fn host_of(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or(rest);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']')) {
        return authority[1..=end].to_string();
    }
    authority.split(':').next().unwrap_or(authority).to_string()
}

fn vendor_card(info: &ModelInfo) -> VendorCard {
    VendorCard {
        name: info.name.clone(),
        family: info.family.clone(),
        parameter_count: info
            .parameter_size
            .as_deref()
            .and_then(VendorCard::parse_parameter_size),
        quantization: info.quantization.clone(),
        context_length: info.context_length,
        capabilities: info.capabilities.clone(),
    }
    .with_name_inference()
}

impl Backends {
    pub fn new(backends: Vec<Backend>, default_model: impl Into<String>) -> Self {
        Backends {
            backends: Arc::new(backends),
            default_model: default_model.into(),
            ..Backends::default()
        }
    }

    /// Build from config; models come from the config (not probed here).
    pub fn from_configs(
        configs: &[BackendConfig],
        default_model: &str,
    ) -> Result<Backends, ReviewError> {
        if configs.is_empty() {
            return Err(ReviewError::NoBackend);
        }
        let mut out = Vec::with_capacity(configs.len());
        for c in configs {
            out.push(Backend {
                client: LlmClient::from_config(c)?,
                models: c.models.clone(),
                config: c.clone(),
            });
        }
        let b = Backends::new(out, default_model);
        // Without a probe, cards are built from configured names alone.
        b.set_cards(
            b.backends
                .iter()
                .flat_map(|be| {
                    be.models
                        .iter()
                        .map(move |m| (be, ModelInfo::named(m.clone())))
                })
                .map(|(be, info)| (be.config.url.clone(), info))
                .collect(),
            &BTreeMap::new(),
        );
        Ok(b)
    }

    pub fn is_auto(&self) -> bool {
        let m = self.default_model.trim();
        m.is_empty() || m.eq_ignore_ascii_case("auto")
    }

    fn set_cards(
        &self,
        probed: Vec<(String, ModelInfo)>,
        operator: &BTreeMap<String, AgenticCard>,
    ) {
        let cards: Vec<ModelCard> = probed
            .into_iter()
            .map(|(url, info)| {
                let agentic = operator.get(&info.name).cloned().unwrap_or_default();
                let mut card = ModelCard::merged(
                    vendor_card(&info),
                    agentic,
                    locality_for_host(&host_of(&url)),
                );
                card.node = self.node.clone();
                card
            })
            .collect();
        if let Ok(mut g) = self.cards.lock() {
            *g = cards;
        }
    }

    /// Probe every backend (bounded by its connect timeout), record discovered models and build
    /// their cards with the operator's agentic overrides. Fails only when *no* backend answers.
    pub async fn probe(
        &mut self,
        operator: &BTreeMap<String, AgenticCard>,
    ) -> Result<Vec<(String, Vec<ModelInfo>)>, ReviewError> {
        let mut found = Vec::new();
        let mut first_err = None;
        let mut updated: Vec<Backend> = self.backends.as_ref().clone();
        let mut probed = Vec::new();
        for b in updated.iter_mut() {
            match b.client.probe().await {
                Ok(models) => {
                    // Configured names restrict what this backend is used for.
                    let keep: Vec<ModelInfo> = if b.models.is_empty() {
                        models.clone()
                    } else {
                        b.models
                            .iter()
                            .map(|m| {
                                models
                                    .iter()
                                    .find(|i| &i.name == m)
                                    .cloned()
                                    .unwrap_or_else(|| ModelInfo::named(m.clone()))
                            })
                            .collect()
                    };
                    for m in &keep {
                        if !b.models.contains(&m.name) {
                            b.models.push(m.name.clone());
                        }
                        probed.push((b.config.url.clone(), m.clone()));
                    }
                    found.push((b.config.url.clone(), models));
                }
                Err(e) => {
                    tracing::info!(url = %b.config.url, error = %e, "backend unreachable");
                    first_err.get_or_insert(e);
                }
            }
        }
        self.backends = Arc::new(updated);
        self.set_cards(probed, operator);
        match (found.is_empty(), first_err) {
            (true, Some(e)) => Err(ReviewError::Llm(e)),
            _ => Ok(found),
        }
    }

    /// A snapshot of the cards (for reports and `models list`).
    pub fn cards(&self) -> Vec<ModelCard> {
        self.cards.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// The client for an explicit model name: the first backend listing it, else the first that
    /// lists no models (it may serve anything), else a single backend (its server reports the
    /// real error).
    pub fn route(&self, model: &str) -> Result<LlmClient, ReviewError> {
        let b = self
            .backends
            .iter()
            .find(|b| b.models.iter().any(|m| m == model || strip_tag(m) == model))
            .or_else(|| self.backends.iter().find(|b| b.models.is_empty()))
            .or_else(|| (self.backends.len() == 1).then(|| &self.backends[0]))
            .ok_or_else(|| ReviewError::UnknownModel {
                model: model.to_string(),
                available: self.all_models().join(", "),
            })?;
        Ok(b.client.clone())
    }

    /// Choose the model for a task: the pinned model, or (auto) the requested one when it is
    /// known and eligible, else the best-scoring card.
    pub fn select(
        &self,
        mut needs: TaskNeeds,
        requested: Option<&str>,
    ) -> Result<Selected, ReviewError> {
        needs.sensitive = self.sensitive;
        if !self.is_auto() {
            self.check_local(&self.default_model)?;
            return Ok(Selected {
                client: self.route(&self.default_model)?,
                model: self.default_model.clone(),
                replaced: None,
            });
        }
        let cards = self.cards();
        let r = models::resolve_requested(&cards, requested, &needs)
            .map_err(|e| ReviewError::NoModel(e.to_string()))?;
        if let Some(old) = &r.replaced {
            tracing::info!(task = %needs.task_type, requested = %old, chosen = %r.model, reason = %r.reason, "model replaced by scoring");
        }
        Ok(Selected {
            client: self.route(&r.model)?,
            model: r.model,
            replaced: r.replaced,
        })
    }

    /// Choose the verifier's model, steering away from the finders' families. Returns the choice
    /// and whether independence is degraded (only the finders' family was available).
    pub fn select_verifier(
        &self,
        explicit: Option<&str>,
        finder_models: &[String],
    ) -> Result<(Selected, bool), ReviewError> {
        let families: Vec<String> = finder_models
            .iter()
            .map(|m| Backends::family_of(m))
            .collect();
        let degraded_for = |model: &str| {
            families
                .iter()
                .any(|f| models::lineage(f) == models::lineage(&Backends::family_of(model)))
        };
        if let Some(m) = explicit.filter(|m| !m.trim().is_empty()) {
            self.check_local(m)?;
            let sel = Selected {
                client: self.route(m)?,
                model: m.to_string(),
                replaced: None,
            };
            return Ok((sel, degraded_for(m)));
        }
        if !self.is_auto() {
            let m = self.default_model.clone();
            self.check_local(&m)?;
            let d = degraded_for(&m);
            return Ok((
                Selected {
                    client: self.route(&m)?,
                    model: m,
                    replaced: None,
                },
                d,
            ));
        }
        let mut needs = TaskNeeds::new("verifier");
        needs.sensitive = self.sensitive;
        let cards = self.cards();
        let (card, _, degraded) = models::choose_verifier(&cards, &needs, &families)
            .ok_or_else(|| ReviewError::NoModel("no eligible model for the verifier".into()))?;
        let model = card.name.clone();
        Ok((
            Selected {
                client: self.route(&model)?,
                model,
                replaced: None,
            },
            degraded,
        ))
    }

    /// The `n` verifiers of one finding (cross-validation). The first is [`Self::select_verifier`]'s
    /// choice; with automatic selection and no explicit verifier model the others go to other
    /// eligible models, best-scoring first, so the votes are not one model asked `n` times; when
    /// the eligible models run out they repeat in the same order. A pinned or explicit model
    /// answers every vote.
    pub fn select_verifiers(
        &self,
        explicit: Option<&str>,
        finder_models: &[String],
        n: usize,
    ) -> Result<(Vec<Selected>, bool), ReviewError> {
        let (first, degraded) = self.select_verifier(explicit, finder_models)?;
        let n = n.max(1);
        let mut chosen = vec![first];
        let explicit = explicit.is_some_and(|m| !m.trim().is_empty());
        if n > 1 && self.is_auto() && !explicit {
            let families: Vec<String> = finder_models
                .iter()
                .map(|m| Backends::family_of(m))
                .collect();
            let mut needs = TaskNeeds::new("verifier");
            needs.sensitive = self.sensitive;
            let mut cards = self.cards();
            while chosen.len() < n {
                cards.retain(|c| !chosen.iter().any(|s| s.model == c.name));
                let Some((card, _, _)) = models::choose_verifier(&cards, &needs, &families) else {
                    break;
                };
                let model = card.name.clone();
                match self.route(&model) {
                    Ok(client) => chosen.push(Selected {
                        client,
                        model,
                        replaced: None,
                    }),
                    // Listed but not served here: leave it out, keep looking.
                    Err(_) => cards.retain(|c| c.name != model),
                }
            }
        }
        let distinct = chosen.len();
        for k in distinct..n {
            chosen.push(chosen[k % distinct].clone());
        }
        Ok((chosen, degraded))
    }

    /// A pinned model bypasses scoring, so the locality rule is checked here: on a review only
    /// local models may see, a model whose card says `remote` is refused rather than called.
    fn check_local(&self, model: &str) -> Result<(), ReviewError> {
        if !self.sensitive {
            return Ok(());
        }
        let remote = self.cards().iter().any(|c| {
            (c.name == model || strip_tag(&c.name) == model)
                && c.agentic.locality == Some(models::Locality::Remote)
        });
        if remote {
            return Err(ReviewError::NoModel(format!(
                "{model}: remote model on a review limited to local models (sensitive, or a peer's attempt); pin a local model or set allow_peers_remote_backends"
            )));
        }
        Ok(())
    }

    /// The backends a peer's attempt may use: the node's own `sensitive` is a floor the peer can
    /// only raise, and remote (paid) models stay off limits unless the operator allowed them.
    pub fn for_peer(&self, peer_sensitive: bool) -> Backends {
        let mut b = self.clone();
        b.sensitive = self.sensitive || peer_sensitive || !self.allow_peers_remote_backends;
        b
    }

    /// Learn from a finished call (runtime layer of the card).
    pub fn record(
        &self,
        model: &str,
        task_type: &str,
        ok: bool,
        tokens_in: u64,
        tokens_out: u64,
        latency_ms: u64,
    ) {
        if let Ok(mut cards) = self.cards.lock() {
            if let Some(c) = cards.iter_mut().find(|c| c.name == model) {
                c.record(task_type, ok, tokens_in, tokens_out, latency_ms);
            }
        }
    }

    /// The runtime layer of every card: model -> task type -> stats (for persisting).
    pub fn runtime_snapshot(&self) -> BTreeMap<String, BTreeMap<String, models::RuntimeStats>> {
        self.cards()
            .into_iter()
            .filter(|c| !c.runtime.is_empty())
            .map(|c| (c.name, c.runtime))
            .collect()
    }

    /// Restore learned runtime statistics (from the node store) onto the current cards.
    pub fn apply_runtime(
        &self,
        learned: &BTreeMap<String, BTreeMap<String, models::RuntimeStats>>,
    ) {
        if let Ok(mut cards) = self.cards.lock() {
            for c in cards.iter_mut() {
                if let Some(r) = learned.get(&c.name) {
                    c.runtime = r.clone();
                }
            }
        }
    }

    pub fn all_models(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .backends
            .iter()
            .flat_map(|b| b.models.iter().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The planner's view of the models: one line per card.
    pub fn models_list(&self) -> String {
        let mut s = String::new();
        for c in self.cards() {
            let params = c
                .vendor
                .parameter_count
                .map(|p| format!("{p}B"))
                .unwrap_or_else(|| "?".into());
            s.push_str(&format!(
                "- {} (family {}, {params}, tools {}, reasoning {})\n",
                c.name,
                c.family(),
                c.agentic
                    .tool_use
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "?".into()),
                c.agentic
                    .reasoning
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "?".into()),
            ));
        }
        s
    }

    /// A model family key (registry prefix and tag stripped, first name segment):
    /// "qwen2.5-coder:7b" -> "qwen2.5", "meta/llama3.1-8b" -> "llama3.1". Coarse on purpose: two
    /// sizes of one family count as the same family, which is what independence needs.
    pub fn family_of(model: &str) -> String {
        models::family_from_name(model).unwrap_or_else(|| {
            let base = model.rsplit('/').next().unwrap_or(model);
            strip_tag(base)
                .split(['-', '_'])
                .next()
                .unwrap_or(base)
                .to_ascii_lowercase()
        })
    }
}

fn strip_tag(m: &str) -> &str {
    m.split(':').next().unwrap_or(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_extracted() {
        assert_eq!(host_of("http://127.0.0.1:11434"), "127.0.0.1");
        assert_eq!(host_of("https://api.example.com/v1"), "api.example.com");
        assert_eq!(host_of("http://[::1]:8080/v1"), "::1");
        assert_eq!(host_of("http://user@gpu-box:8000/v1"), "gpu-box");
    }

    #[test]
    fn families() {
        assert_eq!(
            models::lineage(&Backends::family_of("qwen2.5-coder:7b")),
            models::lineage(&Backends::family_of("qwen2.5:14b"))
        );
        assert_ne!(
            models::lineage(&Backends::family_of("llama3.1:8b")),
            models::lineage(&Backends::family_of("qwen2.5:14b"))
        );
    }
}
