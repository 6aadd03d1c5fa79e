//! The weaver: assembles a persona and dynamic context into prompts under a token budget.
