//! Model cards and automatic selection: vendor parsing from recorded backend replies, the scoring
//! table, runtime learning, the locality guarantee for sensitive reviews, cross-family
//! verification and the replacement of requested models.

use proptest::prelude::*;
use quorum_core::models::{
    choose, choose_verifier, resolve_requested, score, AgenticCard, Locality, ModelCard,
    SelectionError, TaskNeeds, Tier, VendorCard,
};
use serde_json::Value;
use std::path::PathBuf;

fn recorded(file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn assert_close(got: Option<f64>, want: f64, what: &str) {
    let got = got.unwrap_or_else(|| panic!("{what}: missing"));
    assert!((got - want).abs() < 1e-6, "{what}: got {got}, want {want}");
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// vendor layer from recorded replies

#[test]
fn ollama_show_replies_fill_every_vendor_field() {
    // (file, name, family, billions, quantization, context, capabilities)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        f64,
        &'static str,
        u64,
        &'static [&'static str],
    );
    let cases: [Case; 4] = [
        (
            "ollama_show_qwen2.5-coder_7b.json",
            "qwen2.5-coder:7b",
            "qwen2",
            7.6,
            "Q4_K_M",
            32768,
            &["completion", "tools", "insert"],
        ),
        (
            "ollama_show_llama3.1_8b.json",
            "llama3.1:8b",
            "llama",
            8.0,
            "Q4_K_M",
            131072,
            &["completion", "tools"],
        ),
        (
            "ollama_show_gemma2_27b.json",
            "gemma2:27b",
            "gemma2",
            27.2,
            "Q4_0",
            8192,
            &["completion"],
        ),
        (
            "ollama_show_nomic-embed-text.json",
            "nomic-embed-text:latest",
            "nomic-bert",
            0.137,
            "F16",
            2048,
            &["embedding"],
        ),
    ];
    for (file, name, family, params, quant, ctx, caps) in cases {
        let card = VendorCard::from_ollama_show(name, &recorded(file));
        assert_eq!(card.name, name, "{file}");
        assert_eq!(card.family.as_deref(), Some(family), "{file}");
        assert_close(card.parameter_count, params, file);
        assert_eq!(card.quantization.as_deref(), Some(quant), "{file}");
        assert_eq!(card.context_length, Some(ctx), "{file}");
        assert_eq!(card.capabilities, strings(caps), "{file}");
    }
}

#[test]
fn vllm_model_list_fills_context_and_infers_the_rest_from_the_id() {
    let cards = VendorCard::from_openai_models(&recorded("openai_models_vllm.json"));
    assert_eq!(cards.len(), 2);

    let qwen14 = &cards[0];
    assert_eq!(qwen14.name, "Qwen/Qwen2.5-14B-Instruct");
    assert_eq!(qwen14.family.as_deref(), Some("qwen2.5"));
    assert_close(qwen14.parameter_count, 14.0, "qwen14 params");
    assert_eq!(qwen14.quantization, None);
    assert_eq!(qwen14.context_length, Some(32768));
    assert!(qwen14.capabilities.is_empty());

    let qwen32 = &cards[1];
    assert_eq!(qwen32.name, "Qwen/Qwen2.5-32B-Instruct-AWQ");
    assert_eq!(qwen32.family.as_deref(), Some("qwen2.5"));
    assert_close(qwen32.parameter_count, 32.0, "qwen32 params");
    assert_eq!(qwen32.quantization.as_deref(), Some("AWQ"));
    assert_eq!(qwen32.context_length, Some(16384));
    assert!(qwen32.capabilities.is_empty());
}

#[test]
fn llama_server_model_list_reads_its_meta_block() {
    let cards = VendorCard::from_openai_models(&recorded("openai_models_llama_server.json"));
    assert_eq!(cards.len(), 1);
    let card = &cards[0];
    assert_eq!(card.name, "qwen2.5-coder-0.5b");
    assert_eq!(card.family.as_deref(), Some("qwen2.5"));
    // meta.n_params wins over the 0.5 the id suggests.
    assert_close(card.parameter_count, 0.494032768, "n_params");
    assert_eq!(card.quantization, None);
    assert_eq!(card.context_length, Some(32768));
    assert!(card.capabilities.is_empty());
}

#[test]
fn recorded_ollama_fleet_picks_a_tool_model_and_never_the_embedder() {
    let fleet: Vec<ModelCard> = [
        ("ollama_show_qwen2.5-coder_7b.json", "qwen2.5-coder:7b"),
        ("ollama_show_llama3.1_8b.json", "llama3.1:8b"),
        ("ollama_show_gemma2_27b.json", "gemma2:27b"),
        (
            "ollama_show_nomic-embed-text.json",
            "nomic-embed-text:latest",
        ),
    ]
    .iter()
    .map(|(file, name)| {
        let vendor = VendorCard::from_ollama_show(name, &recorded(file));
        ModelCard::merged(vendor, AgenticCard::default(), Locality::Local)
    })
    .collect();
    let mut needs = TaskNeeds::new("specialist");
    needs.prompt_tokens = 2000;
    let (card, s) = choose(&fleet, &needs).unwrap();
    assert_eq!(card.name, "llama3.1:8b", "{}", s.explain());
    assert_eq!(s.part("tool_use"), Some(3.0));

    let embedder = score(&fleet[3], &needs);
    assert!(!embedder.eligible);
    assert!(embedder
        .why_ineligible
        .unwrap()
        .contains("embedding-only model"));
}

// ---------------------------------------------------------------------------------------------
// the scoring table

fn local(name: &str, family: &str, params: f64, ctx: u64, caps: &[&str]) -> ModelCard {
    local_with(name, family, params, ctx, caps, AgenticCard::default())
}

fn local_with(
    name: &str,
    family: &str,
    params: f64,
    ctx: u64,
    caps: &[&str],
    agentic: AgenticCard,
) -> ModelCard {
    let vendor = VendorCard {
        name: name.to_string(),
        family: Some(family.to_string()),
        parameter_count: Some(params),
        quantization: Some("Q4_K_M".to_string()),
        context_length: Some(ctx),
        capabilities: strings(caps),
    };
    ModelCard::merged(vendor, agentic, Locality::Local)
}

const TOOLS: &[&str] = &["completion", "tools"];

/// A workstation cluster: sizes from 0.1B to 70B, one model without tools, one remote API model
/// the operator rates highly, an embedder, and two operator-annotated cards.
fn fleet() -> Vec<ModelCard> {
    vec![
        local("qwen2.5-coder:14b", "qwen2", 14.8, 32768, TOOLS),
        local("qwen2.5-coder:3b", "qwen2", 3.1, 32768, TOOLS),
        local("qwen2.5:32b", "qwen2", 32.8, 32768, TOOLS),
        local("llama3.1:70b", "llama", 70.6, 131072, TOOLS),
        local("llama3.1:8b", "llama", 8.0, 131072, TOOLS),
        local("gemma2:27b", "gemma2", 27.2, 8192, &["completion"]),
        local(
            "nomic-embed-text",
            "nomic-bert",
            0.137,
            2048,
            &["embedding"],
        ),
        local_with(
            "phi4:14b",
            "phi3",
            14.7,
            16384,
            TOOLS,
            AgenticCard {
                avoid_tasks: strings(&["planner"]),
                weaknesses: strings(&["json output"]),
                ..AgenticCard::default()
            },
        ),
        local_with(
            "auditor:14b",
            "mistral",
            14.0,
            32768,
            TOOLS,
            AgenticCard {
                recommended_tasks: strings(&["security-auditor"]),
                strengths: strings(&["security"]),
                ..AgenticCard::default()
            },
        ),
        ModelCard::merged(
            VendorCard::named("gpt-4o"),
            AgenticCard {
                reasoning: Some(Tier::High),
                tool_use: Some(Tier::High),
                json_compliance: Some(Tier::High),
                cost_tier: Some(Tier::High),
                ..AgenticCard::default()
            },
            Locality::Remote,
        ),
    ]
}

fn needs(task: &str, edit: impl FnOnce(&mut TaskNeeds)) -> TaskNeeds {
    let mut n = TaskNeeds::new(task);
    n.prompt_tokens = 2000;
    edit(&mut n);
    n
}

struct Row {
    what: &'static str,
    candidates: &'static [&'static str],
    load: &'static [(&'static str, f64)],
    needs: TaskNeeds,
    winner: Option<&'static str>,
    /// (model, part, value): the parts that explain the outcome.
    parts: &'static [(&'static str, &'static str, f64)],
    /// (model, part) that must not apply.
    absent: &'static [(&'static str, &'static str)],
    /// (model, words in why_ineligible).
    ineligible: &'static [(&'static str, &'static str)],
}

const STANDARD: &[&str] = &[
    "qwen2.5-coder:14b",
    "qwen2.5-coder:3b",
    "qwen2.5:32b",
    "llama3.1:70b",
    "llama3.1:8b",
    "gemma2:27b",
    "nomic-embed-text",
    "phi4:14b",
    "gpt-4o",
];

/// The fleet without the persona-annotated card, which ties the 14B coder on generic work.
fn standard_fleet() -> Vec<ModelCard> {
    fleet()
        .into_iter()
        .filter(|c| STANDARD.contains(&c.name.as_str()))
        .collect()
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            what: "the 12-20B band wins ordinary specialist work",
            candidates: STANDARD,
            load: &[],
            needs: needs("specialist", |_| {}),
            winner: Some("qwen2.5-coder:14b"),
            parts: &[
                ("qwen2.5-coder:14b", "size_band", 1.0),
                ("qwen2.5-coder:14b", "tool_use", 3.0),
                ("qwen2.5-coder:14b", "json", 1.5),
                ("qwen2.5-coder:14b", "reasoning", 0.0),
                ("gemma2:27b", "tool_use", 0.0),
                ("llama3.1:8b", "reasoning", -1.5),
                ("phi4:14b", "weaknesses", -0.25),
                ("gpt-4o", "size_band", 0.5),
                ("gpt-4o", "cost", -0.3),
            ],
            absent: &[("llama3.1:8b", "small_model_long_prompt")],
            ineligible: &[("nomic-embed-text", "embedding-only")],
        },
        Row {
            what: "a 70B beats a 3B on reasoning-heavy work although both are outside the band",
            candidates: &["llama3.1:70b", "qwen2.5-coder:3b"],
            load: &[],
            needs: needs("specialist", |n| n.reasoning = Tier::High),
            winner: Some("llama3.1:70b"),
            parts: &[
                ("llama3.1:70b", "reasoning", 0.0),
                ("qwen2.5-coder:3b", "reasoning", -3.0),
            ],
            absent: &[],
            ineligible: &[],
        },
        Row {
            what: "a long tool-using prompt pushes work off a small model",
            candidates: &["llama3.1:8b", "qwen2.5:32b"],
            load: &[],
            needs: needs("dependency-scanner", |n| {
                n.json = false;
                n.reasoning = Tier::Low;
                n.prompt_tokens = 6000;
            }),
            winner: Some("qwen2.5:32b"),
            parts: &[("llama3.1:8b", "small_model_long_prompt", -2.0)],
            absent: &[("qwen2.5:32b", "small_model_long_prompt")],
            ineligible: &[],
        },
        Row {
            what: "the same light task with a short prompt stays on the small, fast model",
            candidates: &["llama3.1:8b", "qwen2.5:32b"],
            load: &[],
            needs: needs("dependency-scanner", |n| {
                n.json = false;
                n.reasoning = Tier::Low;
            }),
            winner: Some("llama3.1:8b"),
            parts: &[("llama3.1:8b", "speed", 0.3), ("qwen2.5:32b", "speed", 0.0)],
            absent: &[("llama3.1:8b", "small_model_long_prompt")],
            ineligible: &[],
        },
        Row {
            what: "deep planning goes to the operator-rated remote model when allowed",
            candidates: &["gpt-4o", "qwen2.5-coder:14b"],
            load: &[],
            needs: needs("planner", |_| {}),
            winner: Some("gpt-4o"),
            parts: &[
                ("qwen2.5-coder:14b", "reasoning", -1.5),
                ("gpt-4o", "reasoning", 0.0),
            ],
            absent: &[("gpt-4o", "size_band"), ("gpt-4o", "tool_use")],
            ineligible: &[],
        },
        Row {
            what: "a sensitive review never leaves the machine",
            candidates: &["gpt-4o", "qwen2.5-coder:14b"],
            load: &[],
            needs: needs("planner", |n| n.sensitive = true),
            winner: Some("qwen2.5-coder:14b"),
            parts: &[],
            absent: &[],
            ineligible: &[("gpt-4o", "remote model on a sensitive review")],
        },
        Row {
            what: "a prompt that does not fit the context rules the model out",
            candidates: &["gemma2:27b", "llama3.1:8b"],
            load: &[],
            needs: needs("scout", |n| n.prompt_tokens = 10_000),
            winner: Some("llama3.1:8b"),
            parts: &[],
            absent: &[],
            ineligible: &[("gemma2:27b", "context of 8192 tokens")],
        },
        Row {
            what: "a prompt that fits but leaves little room costs a little",
            candidates: &["gemma2:27b", "llama3.1:8b"],
            load: &[],
            needs: needs("scout", |n| n.prompt_tokens = 6000),
            winner: Some("gemma2:27b"),
            parts: &[
                ("gemma2:27b", "context_headroom", -0.5),
                ("gemma2:27b", "json", 1.5),
                ("llama3.1:8b", "json", 0.75),
            ],
            absent: &[("llama3.1:8b", "context_headroom")],
            ineligible: &[],
        },
        Row {
            what: "operator avoid_tasks is a hard no",
            candidates: &["phi4:14b", "qwen2.5-coder:3b"],
            load: &[],
            needs: needs("planner", |_| {}),
            winner: Some("qwen2.5-coder:3b"),
            parts: &[("qwen2.5-coder:3b", "reasoning", -3.0)],
            absent: &[],
            ineligible: &[("phi4:14b", "avoids it for planner tasks")],
        },
        Row {
            what: "an embedding model never generates, even when it is all there is",
            candidates: &["nomic-embed-text"],
            load: &[],
            needs: needs("scout", |n| n.prompt_tokens = 100),
            winner: None,
            parts: &[],
            absent: &[],
            ineligible: &[("nomic-embed-text", "embedding-only model")],
        },
        Row {
            what: "recommended tasks and strengths favour the operator's pick for a persona",
            candidates: &["qwen2.5-coder:14b", "auditor:14b"],
            load: &[],
            needs: needs("security-auditor", |_| {}),
            winner: Some("auditor:14b"),
            parts: &[
                ("auditor:14b", "recommended", 1.0),
                ("auditor:14b", "strengths", 0.25),
                ("auditor:14b", "size_band", 1.0),
            ],
            absent: &[
                ("qwen2.5-coder:14b", "recommended"),
                ("qwen2.5-coder:14b", "strengths"),
            ],
            ineligible: &[],
        },
        Row {
            what: "load moves work to an idle peer",
            candidates: &["qwen2.5-coder:14b", "phi4:14b"],
            load: &[("qwen2.5-coder:14b", 0.75)],
            needs: needs("specialist", |_| {}),
            winner: Some("phi4:14b"),
            parts: &[
                ("qwen2.5-coder:14b", "load", -1.5),
                ("phi4:14b", "load", 0.0),
            ],
            absent: &[],
            ineligible: &[],
        },
        Row {
            what: "synthesis wants JSON discipline, not tools or the size band",
            candidates: &["gemma2:27b", "llama3.1:8b"],
            load: &[],
            needs: needs("synthesizer", |_| {}),
            winner: Some("gemma2:27b"),
            parts: &[("gemma2:27b", "json", 1.5), ("llama3.1:8b", "json", 0.75)],
            absent: &[("gemma2:27b", "size_band"), ("gemma2:27b", "tool_use")],
            ineligible: &[],
        },
        Row {
            what: "an avoided family costs a verifier dearly",
            candidates: &["qwen2.5-coder:14b", "llama3.1:8b"],
            load: &[],
            needs: needs("verifier", |n| n.avoid_family = Some("qwen2.5".into())),
            winner: Some("llama3.1:8b"),
            parts: &[("qwen2.5-coder:14b", "same_family", -6.0)],
            absent: &[("llama3.1:8b", "same_family")],
            ineligible: &[],
        },
    ]
}

#[test]
fn scoring_table() {
    let all = fleet();
    let rows = rows();
    assert!(rows.len() >= 10);
    for row in rows {
        let cards: Vec<ModelCard> = row
            .candidates
            .iter()
            .map(|name| {
                let mut card = all
                    .iter()
                    .find(|c| c.name == *name)
                    .unwrap_or_else(|| panic!("{}: no card {name}", row.what))
                    .clone();
                if let Some((_, load)) = row.load.iter().find(|(n, _)| n == name) {
                    card.load = *load;
                }
                card
            })
            .collect();
        let scores: Vec<_> = cards.iter().map(|c| score(c, &row.needs)).collect();
        let explain = scores
            .iter()
            .map(|s| format!("{}: {}", s.model, s.explain()))
            .collect::<Vec<_>>()
            .join("\n  ");
        let chosen = choose(&cards, &row.needs);
        assert_eq!(
            chosen.as_ref().map(|(c, _)| c.name.as_str()),
            row.winner,
            "{}\n  {explain}",
            row.what
        );
        if let Some((card, s)) = &chosen {
            assert_eq!(s.model, card.name);
            assert!(s.eligible);
            let total: f64 = s.parts.iter().map(|(_, v)| v).sum();
            assert!((total - s.total).abs() < 1e-9, "{}", row.what);
        }
        let by_name = |name: &str| {
            scores
                .iter()
                .find(|s| s.model == name)
                .unwrap_or_else(|| panic!("{}: no score for {name}", row.what))
        };
        for (model, part, want) in row.parts {
            let got = by_name(model).part(part);
            assert!(
                got.is_some_and(|g| (g - want).abs() < 1e-6),
                "{}: {model} {part} = {got:?}, want {want}\n  {explain}",
                row.what
            );
        }
        for (model, part) in row.absent {
            assert_eq!(
                by_name(model).part(part),
                None,
                "{}: {model} {part}",
                row.what
            );
        }
        for (model, why) in row.ineligible {
            let s = by_name(model);
            assert!(!s.eligible, "{}: {model} should be ineligible", row.what);
            let reason = s.why_ineligible.clone().unwrap_or_default();
            assert!(reason.contains(why), "{}: {model}: {reason}", row.what);
        }
        let ineligible_named: Vec<&str> = row.ineligible.iter().map(|(m, _)| *m).collect();
        for s in &scores {
            if !ineligible_named.contains(&s.model.as_str()) {
                assert!(
                    s.eligible,
                    "{}: {} unexpectedly {:?}",
                    row.what, s.model, s.why_ineligible
                );
            }
        }
    }
}

#[test]
fn choice_does_not_depend_on_card_order() {
    let mut cards = vec![
        local("beta:14b", "granite", 14.0, 32768, TOOLS),
        local("alpha:14b", "mistral", 14.0, 32768, TOOLS),
    ];
    let needs = needs("specialist", |_| {});
    assert_eq!(choose(&cards, &needs).unwrap().0.name, "alpha:14b");
    cards.reverse();
    assert_eq!(choose(&cards, &needs).unwrap().0.name, "alpha:14b");
    assert!(choose(&[], &needs).is_none());
}

// ---------------------------------------------------------------------------------------------
// runtime learning

#[test]
fn recorded_failures_move_the_next_choice() {
    let mut cards = vec![
        local("alpha:14b", "mistral", 14.0, 32768, TOOLS),
        local("beta:14b", "granite", 14.0, 32768, TOOLS),
    ];
    let specialist = needs("specialist", |_| {});
    let planner = needs("planner", |_| {});
    assert_eq!(choose(&cards, &specialist).unwrap().0.name, "alpha:14b");

    // Two calls are not yet evidence.
    cards[0].record("specialist", false, 3000, 200, 9000);
    cards[0].record("specialist", false, 3000, 200, 9000);
    let (card, s) = choose(&cards, &specialist).unwrap();
    assert_eq!(card.name, "alpha:14b");
    assert_eq!(s.part("success_rate"), None);

    cards[0].record("specialist", false, 3000, 200, 9000);
    cards[0].record("specialist", true, 3000, 200, 9000);
    let alpha = score(&cards[0], &specialist);
    assert_close(
        alpha.part("success_rate"),
        5.0 * (0.25 - 0.8),
        "alpha success",
    );
    assert_close(
        alpha.part("latency"),
        -0.5 * 9000.0 / 60000.0,
        "alpha latency",
    );
    let (card, s) = choose(&cards, &specialist).unwrap();
    assert_eq!(card.name, "beta:14b", "{}", s.explain());

    // What was learned about specialist work says nothing about planning.
    assert_eq!(choose(&cards, &planner).unwrap().0.name, "alpha:14b");

    // A proven record beats an unknown one.
    for _ in 0..5 {
        cards[0].record("planner", true, 1000, 500, 4000);
    }
    cards[1].record("planner", true, 1000, 500, 4000);
    let (card, s) = choose(&cards, &planner).unwrap();
    assert_eq!(card.name, "alpha:14b");
    assert_close(s.part("success_rate"), 1.0, "alpha planner success");
}

// ---------------------------------------------------------------------------------------------
// the locality guarantee

fn arb_tier() -> impl Strategy<Value = Option<Tier>> {
    prop_oneof![
        Just(None),
        Just(Some(Tier::Low)),
        Just(Some(Tier::Medium)),
        Just(Some(Tier::High)),
    ]
}

const TASKS: [&str; 6] = [
    "scout",
    "planner",
    "specialist",
    "verifier",
    "synthesizer",
    "security-auditor",
];

prop_compose! {
    fn arb_card()(
        family in prop::sample::select(vec!["qwen2", "llama", "gemma2", "phi3", "mistral"]),
        params in prop::option::of(0.05f64..400.0),
        ctx in prop::option::of(256u64..200_000),
        caps in prop::sample::subsequence(vec!["completion", "tools", "embedding", "vision"], 0..=4),
        host in prop_oneof![Just(Locality::Local), Just(Locality::Remote)],
        operator_locality in prop::option::of(prop_oneof![Just(Locality::Local), Just(Locality::Remote)]),
        (reasoning, tool_use, json, cost, speed) in (arb_tier(), arb_tier(), arb_tier(), arb_tier(), arb_tier()),
        avoid in prop::sample::subsequence(TASKS.to_vec(), 0..=2),
        recommended in prop::sample::subsequence(TASKS.to_vec(), 0..=2),
        load in 0.0f64..3.0,
        node in prop::sample::select(vec!["n1", "n2"]),
        runs in prop::collection::vec((prop::sample::select(TASKS.to_vec()), any::<bool>(), 0u64..120_000), 0..8),
    ) -> ModelCard {
        let vendor = VendorCard {
            name: format!("{family}-{}", params.map(|p| format!("{p:.1}b")).unwrap_or_default()),
            family: Some(family.to_string()),
            parameter_count: params,
            quantization: None,
            context_length: ctx,
            capabilities: strings(&caps),
        };
        let agentic = AgenticCard {
            locality: operator_locality,
            reasoning,
            tool_use,
            json_compliance: json,
            cost_tier: cost,
            speed_tier: speed,
            avoid_tasks: strings(&avoid),
            recommended_tasks: strings(&recommended),
            ..AgenticCard::default()
        };
        let mut card = ModelCard::merged(vendor, agentic, host);
        card.node = node.to_string();
        card.load = load;
        for (task, ok, latency) in runs {
            card.record(task, ok, 1000, 100, latency);
        }
        card
    }
}

prop_compose! {
    fn arb_sensitive_needs()(
        task in prop::sample::select(TASKS.to_vec()),
        tool_use in any::<bool>(),
        json in any::<bool>(),
        reasoning in prop_oneof![Just(Tier::Low), Just(Tier::Medium), Just(Tier::High)],
        prompt_tokens in 0u64..60_000,
        avoid_family in prop::option::of(prop::sample::select(vec!["qwen2.5", "llama3.1", "gemma"])),
    ) -> TaskNeeds {
        TaskNeeds {
            task_type: task.to_string(),
            tool_use,
            json,
            reasoning,
            prompt_tokens,
            sensitive: true,
            avoid_family: avoid_family.map(str::to_string),
        }
    }
}

fn is_remote(card: &ModelCard) -> bool {
    card.agentic.locality == Some(Locality::Remote)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn sensitive_reviews_only_ever_get_local_models(
        cards in prop::collection::vec(arb_card(), 0..8),
        needs in arb_sensitive_needs(),
    ) {
        // Unique names, so a resolved name points at exactly one card.
        let cards: Vec<ModelCard> = cards
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                c.name = format!("{}#{i}", c.name);
                c
            })
            .collect();
        let chosen = choose(&cards, &needs);
        if let Some((card, s)) = &chosen {
            prop_assert!(!is_remote(card), "remote {} chosen: {}", card.name, s.explain());
            prop_assert!(s.eligible);
        }
        if cards.iter().all(is_remote) {
            prop_assert!(chosen.is_none());
        }

        let verifier = choose_verifier(&cards, &needs, &["qwen2".to_string()]);
        if let Some((card, _, _)) = verifier {
            prop_assert!(!is_remote(card));
        }

        for requested in cards.iter().map(|c| Some(c.name.as_str())).chain([None, Some("auto"), Some("nope")]) {
            match resolve_requested(&cards, requested, &needs) {
                Ok(res) => {
                    let card = cards.iter().find(|c| c.name == res.model && c.node == res.node);
                    prop_assert!(card.is_some_and(|c| !is_remote(c)), "resolved to {:?}", res);
                }
                Err(SelectionError::NoEligibleModel { .. }) => prop_assert!(chosen.is_none()),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// cross-family verification

#[test]
fn verifier_prefers_another_family() {
    let cards = vec![
        local("qwen2.5-coder:14b", "qwen2", 14.8, 32768, TOOLS),
        local("qwen2.5-coder:3b", "qwen2", 3.1, 32768, TOOLS),
        local("llama3.1:8b", "llama", 8.0, 131072, TOOLS),
    ];
    let verifier = needs("verifier", |_| {});
    // Without the rule the finder's own 14B would verify.
    assert_eq!(
        choose(&cards, &verifier).unwrap().0.name,
        "qwen2.5-coder:14b"
    );

    // The finder's family as read from its name (qwen2.5) is the same lineage as Ollama's qwen2.
    let (card, s, degraded) = choose_verifier(&cards, &verifier, &strings(&["qwen2.5"])).unwrap();
    assert_eq!(card.name, "llama3.1:8b");
    assert!(!degraded);
    assert_eq!(s.part("same_family"), None);
}

#[test]
fn verifier_reports_degraded_when_only_the_finders_family_is_there() {
    let cards = vec![
        local("qwen2.5-coder:14b", "qwen2", 14.8, 32768, TOOLS),
        local("qwen2.5-coder:3b", "qwen2", 3.1, 32768, TOOLS),
    ];
    let verifier = needs("verifier", |_| {});
    let (card, s, degraded) = choose_verifier(&cards, &verifier, &strings(&["qwen2"])).unwrap();
    assert_eq!(card.name, "qwen2.5-coder:14b");
    assert!(degraded);
    assert_eq!(s.part("same_family"), Some(-6.0));
}

#[test]
fn verifier_avoids_every_finder_family() {
    let cards = vec![
        local("qwen2.5-coder:14b", "qwen2", 14.8, 32768, TOOLS),
        local("llama3.1:8b", "llama", 8.0, 131072, TOOLS),
        local("gemma2:27b", "gemma2", 27.2, 8192, &["completion"]),
    ];
    let verifier = needs("verifier", |_| {});
    let finders = strings(&["qwen2", "llama3.1"]);
    let (card, _, degraded) = choose_verifier(&cards, &verifier, &finders).unwrap();
    assert_eq!(card.name, "gemma2:27b");
    assert!(!degraded);

    // Every family found something: the best model verifies, flagged as degraded.
    let best = choose(&cards, &verifier).unwrap().0.name.clone();
    let finders = strings(&["qwen2", "llama3.1", "gemma2"]);
    let (card, s, degraded) = choose_verifier(&cards, &verifier, &finders).unwrap();
    assert_eq!(card.name, best);
    assert!(degraded);
    assert_eq!(s.part("same_family"), Some(-6.0));

    let (card, _, degraded) = choose_verifier(&cards, &verifier, &[]).unwrap();
    assert_eq!(card.name, best);
    assert!(!degraded);

    let sensitive = needs("verifier", |n| n.sensitive = true);
    let remote_only = vec![ModelCard::merged(
        VendorCard::named("gpt-4o"),
        AgenticCard::default(),
        Locality::Remote,
    )];
    assert!(choose_verifier(&remote_only, &sensitive, &finders).is_none());
}

// ---------------------------------------------------------------------------------------------
// resolving the planner's or a persona's requested model

#[test]
fn a_known_eligible_model_is_kept() {
    let mut cards = standard_fleet();
    if let Some(card) = cards.iter_mut().find(|c| c.name == "llama3.1:8b") {
        card.node = "ws-2".into();
    }
    let specialist = needs("specialist", |_| {});
    let res = resolve_requested(&cards, Some("llama3.1:8b"), &specialist).unwrap();
    assert_eq!(res.model, "llama3.1:8b");
    assert_eq!(res.node, "ws-2");
    assert_eq!(res.replaced, None);
    assert_eq!(res.reason, "requested");

    // Case and Ollama's implicit :latest do not make a name unknown.
    let res = resolve_requested(&cards, Some("Qwen2.5-Coder:14B"), &specialist).unwrap();
    assert_eq!(
        (res.model.as_str(), res.replaced),
        ("qwen2.5-coder:14b", None)
    );
    let res = resolve_requested(
        &cards,
        Some("nomic-embed-text:latest"),
        &needs("scout", |n| {
            n.prompt_tokens = 0;
        }),
    )
    .unwrap();
    assert_ne!(res.model, "nomic-embed-text");
    assert_eq!(res.replaced.as_deref(), Some("nomic-embed-text:latest"));
    assert!(res.reason.contains("embedding-only"), "{}", res.reason);
}

#[test]
fn an_unknown_model_is_replaced_and_said_so() {
    let cards = standard_fleet();
    let specialist = needs("specialist", |_| {});
    let res = resolve_requested(&cards, Some("gpt-5-ultra"), &specialist).unwrap();
    assert_eq!(res.model, "qwen2.5-coder:14b");
    assert_eq!(res.replaced.as_deref(), Some("gpt-5-ultra"));
    assert!(
        res.reason
            .starts_with("unknown model \"gpt-5-ultra\"; chose qwen2.5-coder:14b"),
        "{}",
        res.reason
    );
}

#[test]
fn a_remote_model_on_a_sensitive_review_is_replaced() {
    let cards = standard_fleet();
    let planner = needs("planner", |_| {});
    let res = resolve_requested(&cards, Some("gpt-4o"), &planner).unwrap();
    assert_eq!((res.model.as_str(), res.replaced), ("gpt-4o", None));

    let sensitive = needs("planner", |n| n.sensitive = true);
    let res = resolve_requested(&cards, Some("gpt-4o"), &sensitive).unwrap();
    assert_ne!(res.model, "gpt-4o");
    assert_eq!(res.replaced.as_deref(), Some("gpt-4o"));
    assert!(
        res.reason.contains("remote model on a sensitive review"),
        "{}",
        res.reason
    );
}

#[test]
fn auto_selects_and_nothing_eligible_is_an_error() {
    let cards = standard_fleet();
    let specialist = needs("specialist", |_| {});
    for requested in [None, Some("auto"), Some(" AUTO "), Some("")] {
        let res = resolve_requested(&cards, requested, &specialist).unwrap();
        assert_eq!(res.model, "qwen2.5-coder:14b", "{requested:?}");
        assert_eq!(res.replaced, None);
        assert!(
            res.reason
                .starts_with("auto: chose qwen2.5-coder:14b for specialist (total "),
            "{}",
            res.reason
        );
    }

    let sensitive = needs("specialist", |n| n.sensitive = true);
    let remote_only: Vec<ModelCard> = cards.into_iter().filter(|c| c.name == "gpt-4o").collect();
    let err = resolve_requested(&remote_only, Some("gpt-4o"), &sensitive).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no model can run specialist tasks: gpt-4o: remote model on a sensitive review"
    );
    let err = resolve_requested(&[], None, &specialist).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no model can run specialist tasks: no models are configured"
    );
}
