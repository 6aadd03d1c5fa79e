//! The node's model backends and the routing of a model name to the client that serves it.

use crate::error::ReviewError;
use quorum_llm::{BackendConfig, LlmClient, ModelInfo};
use std::sync::Arc;

/// One configured backend, its client, and the models it serves (configured or discovered).
#[derive(Debug, Clone)]
pub struct Backend {
    pub config: BackendConfig,
    pub client: LlmClient,
    pub models: Vec<String>,
}

/// All backends this node talks to. Agents only ever reach models through here, which is what
/// keeps "a node talks only to its own host's model servers" true.
#[derive(Debug, Clone, Default)]
pub struct Backends {
    pub backends: Arc<Vec<Backend>>,
    pub default_model: String,
}

impl Backends {
    pub fn new(backends: Vec<Backend>, default_model: impl Into<String>) -> Self {
        Backends {
            backends: Arc::new(backends),
            default_model: default_model.into(),
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
        Ok(Backends::new(out, default_model))
    }

    /// Probe every backend (bounded by its connect timeout) and record discovered models.
    /// Fails with the first unreachable backend's error only when *none* is reachable.
    pub async fn probe(&mut self) -> Result<Vec<(String, Vec<ModelInfo>)>, ReviewError> {
        let mut found = Vec::new();
        let mut first_err = None;
        let mut updated: Vec<Backend> = self.backends.as_ref().clone();
        for b in updated.iter_mut() {
            match b.client.probe().await {
                Ok(models) => {
                    for m in &models {
                        if !b.models.contains(&m.name) {
                            b.models.push(m.name.clone());
                        }
                    }
                    found.push((b.config.url.clone(), models));
                }
                Err(e) => {
                    tracing::warn!(url = %b.config.url, error = %e, "backend unreachable");
                    first_err.get_or_insert(e);
                }
            }
        }
        self.backends = Arc::new(updated);
        match (found.is_empty(), first_err) {
            (true, Some(e)) => Err(ReviewError::Llm(e)),
            _ => Ok(found),
        }
    }

    /// The client for `model` ("auto" or "" = the default model): the first backend listing it,
    /// else the first backend that lists no models (it may serve anything).
    pub fn route(&self, model: Option<&str>) -> Result<(LlmClient, String), ReviewError> {
        let wanted = match model.map(str::trim) {
            None | Some("") | Some("auto") => self.default_model.as_str(),
            Some(m) => m,
        };
        let b = self
            .backends
            .iter()
            .find(|b| b.models.iter().any(|m| m == wanted || strip_tag(m) == wanted))
            .or_else(|| self.backends.iter().find(|b| b.models.is_empty()))
            .or_else(|| {
                // A single backend gets every request: its server reports the real error.
                (self.backends.len() == 1).then(|| &self.backends[0])
            })
            .ok_or_else(|| ReviewError::UnknownModel {
                model: wanted.to_string(),
                available: self.all_models().join(", "),
            })?;
        Ok((b.client.clone(), wanted.to_string()))
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

    /// A model family key for the verifier-independence rule: the first name segment of the
    /// model without registry prefix or tag ("qwen2.5-coder:7b" -> "qwen2.5",
    /// "meta/llama3.1-8b" -> "llama3.1"). Coarse on purpose: two sizes of one family count as
    /// the same family, which is what independence needs.
    pub fn family_of(model: &str) -> String {
        let base = model.rsplit('/').next().unwrap_or(model);
        strip_tag(base)
            .split(['-', '_'])
            .next()
            .unwrap_or(base)
            .to_ascii_lowercase()
    }
}

fn strip_tag(m: &str) -> &str {
    m.split(':').next().unwrap_or(m)
}
