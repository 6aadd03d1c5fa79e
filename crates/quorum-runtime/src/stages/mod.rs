//! The work of each stage: prompt construction, the model call, and normalisation of the answer.
//!
//! Each function is one task attempt's body; the review machine decides when it runs, how often
//! it is retried and what happens to its result. Prompts are assembled here and nowhere else,
//! which is what the prompt-construction tests pin down. One room per stage (a specialist task
//! that is a narrow [`probe`] is asked there), over [`call`] (what
//! every call shares) and [`scope`] (the review's scope as prompts carry it); the judging stages
//! share [`judge_batch`].

pub mod adjudication;
pub mod call;
pub mod conformance;
pub mod consult;
pub mod judge_batch;
pub mod panel;
pub mod plan;
pub mod probe;
pub mod scope;
pub mod scout;
pub mod selection;
pub mod specialist;
pub mod synthesize;
pub mod verify;

pub use adjudication::AdjudicationOutput;
pub use call::{window_budget, StageStats};
pub use conformance::ConformanceOutput;
pub use consult::{apply_rescore, consult, consultant_prompt_in};
pub use panel::{JudgeOutput, MetaOutput};
pub use plan::{plan, planner_prompt, planner_prompt_in, Plan};
pub use probe::probe_prompt;
pub use scope::{
    analyzer_leads_section, planner_scope_section, specialist_scope_sections,
    specialist_scope_sections_in,
};
pub use scout::{scout, scout_prompt, scout_prompt_in};
pub use selection::select_round_files;
pub use specialist::{specialist, specialist_prompt, specialist_prompt_in, SpecialistOutput};
pub use synthesize::{synthesize, synthesizer_prompt, synthesizer_prompt_in};
pub use verify::{ask_verifier, judge_by_votes, verifier_prompt, verifier_prompt_in, verify_one};
