//! The vendor layer of a model card: what a backend says about a model (Ollama's `/api/show`,
//! an OpenAI-compatible `/v1/models` entry), with the gaps filled from the model's name
//! (`Qwen2.5-Coder-0.5B-Instruct` is a 0.5B `qwen2.5`), and a family's lineage.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::OnceLock;

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
}
