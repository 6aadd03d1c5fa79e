//! The two model-server APIs the scripted server speaks, as a request, a rule and a rendered
//! answer name them: Ollama's native one and the OpenAI-compatible one.

use serde::{Deserialize, Serialize};

/// Which backend API a request came in through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// Ollama's native API (`/api/chat`).
    Ollama,
    /// The OpenAI-compatible API (`/v1/chat/completions`).
    OpenAi,
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Api::Ollama => "ollama",
            Api::OpenAi => "openai",
        })
    }
}
