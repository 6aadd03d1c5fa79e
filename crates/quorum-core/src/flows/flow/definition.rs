//! A validated [`Flow`]: its stages, parameters and rules, and what the engine asks of it —
//! which roles it has, the stage of a role, the order stages run in, the coverage mode in
//! force, and the personas it names (checked against a catalog).

use super::{
    Consistency, CoverageMode, Dimension, DirectoryCoverage, Exhaustive, FlowParams, FreshEyes,
    FullCoverage, Improve, Probes, Role, Selection, Stage, SynthesisMode, TeamRules,
};
use crate::catalog::Catalog;
use crate::error::FlowError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A validated flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parameters: FlowParams,
    pub stages: Vec<Stage>,
    /// Fixed review dimensions (empty: the planner alone decides what is covered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dimensions: Vec<Dimension>,
    /// Source-directory coverage rule (absent: not enforced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_coverage: Option<DirectoryCoverage>,
    /// Who `--coverage full` gives the files no planned task covers (absent: the
    /// `directory_coverage` persona and mandate, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_coverage: Option<FullCoverage>,
    /// Team members set by the flow rather than the planner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<TeamRules>,
    #[serde(default)]
    pub synthesis: SynthesisMode,
    /// Two-tier persona selection before planning (absent: the planner sees the whole catalog).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// The fresh-eyes lane, when the flow has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_eyes: Option<FreshEyes>,
    /// Exhaustive rounds instead of a planner: every file batched into tasks, rounds until the
    /// findings converge ([`crate::flows::rounds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhaustive: Option<Exhaustive>,
    /// Narrow probes after planning (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<Probes>,
    /// Self-consistency: every open task asked in several passes over its files in another
    /// order, and only what enough passes found kept (absent: one pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<Consistency>,
    /// Review-and-fix cycles (`quorum fix --flow`; absent: a review flow only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub improve: Option<Improve>,
    /// Where the flow came from (not part of the YAML).
    #[serde(skip)]
    pub source: PathBuf,
}

pub(crate) fn invalid(
    path: &Path,
    field: impl Into<String>,
    message: impl Into<String>,
) -> FlowError {
    FlowError::Invalid {
        path: path.to_path_buf(),
        field: field.into(),
        message: message.into(),
    }
}

impl Flow {
    /// The coverage mode in force: the flow's (with any override applied), sampled when unset;
    /// the exhaustive flow reads every file, so it is always full.
    pub fn coverage_mode(&self) -> CoverageMode {
        if self.exhaustive.is_some() {
            return CoverageMode::Full;
        }
        self.parameters.coverage.unwrap_or_default()
    }

    /// The rule `--coverage full` applies: `full_coverage`, else one made from
    /// `directory_coverage`; `None` when the flow names no persona for it.
    pub fn full_coverage_rule(&self) -> Option<FullCoverage> {
        self.full_coverage.clone().or_else(|| {
            self.directory_coverage.as_ref().map(|d| FullCoverage {
                persona: d.persona.clone(),
                mandate: d.mandate.clone(),
                max_files_per_task: None,
                max_tokens_per_task: None,
            })
        })
    }

    /// The batch bounds of `rule`: its own, else the exhaustive block's, else defaults sized to
    /// the flow's window.
    pub fn full_coverage_bounds(&self, rule: &FullCoverage) -> (usize, u32) {
        let files = rule
            .max_files_per_task
            .or(self.exhaustive.as_ref().map(|x| x.max_files_per_task))
            .unwrap_or(40);
        let tokens = rule
            .max_tokens_per_task
            .or(self.exhaustive.as_ref().map(|x| x.max_tokens_per_task))
            .unwrap_or(self.parameters.context_tokens / 5);
        (files.max(1), tokens.max(1))
    }

    /// Set the coverage mode from a flag or configuration, refusing `full` for a flow that
    /// names no persona to read the uncovered files; the error is one line for the user.
    pub fn set_coverage(&mut self, mode: CoverageMode) -> Result<(), String> {
        if mode == CoverageMode::Full
            && self.exhaustive.is_none()
            && self.full_coverage_rule().is_none()
        {
            return Err(format!(
                "flow {:?} cannot run with --coverage full: it names no persona for the files \
                 the plan leaves out; add a full_coverage block (persona, mandate) to the flow, \
                 or use --coverage sampled",
                self.name
            ));
        }
        self.parameters.coverage = Some(mode);
        Ok(())
    }

    /// Whether the flow has a stage of `role` (the optional roles may be absent).
    pub fn has(&self, role: Role) -> bool {
        self.stages.iter().any(|s| s.role == role)
    }

    /// A conformance flow: it needs a spec (`--spec`) and writes `merge-readiness.json`.
    pub fn uses_spec(&self) -> bool {
        self.has(Role::Conformance)
    }

    /// A finish review: it needs a prior report (`--prior`) and adjudicates its findings.
    pub fn uses_prior(&self) -> bool {
        self.has(Role::Adjudicator)
    }

    /// Every persona the flow names (dimensions, directory coverage, team).
    pub fn named_personas(&self) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        for (i, d) in self.dimensions.iter().enumerate() {
            for (j, p) in d.personas.iter().enumerate() {
                out.push((format!("dimensions[{i}].personas[{j}]"), p.as_str()));
            }
        }
        if let Some(c) = &self.directory_coverage {
            out.push(("directory_coverage.persona".to_string(), c.persona.as_str()));
        }
        if let Some(c) = &self.full_coverage {
            out.push(("full_coverage.persona".to_string(), c.persona.as_str()));
        }
        if let Some(f) = &self.fresh_eyes {
            out.push(("fresh_eyes.persona".to_string(), f.persona.as_str()));
        }
        if let Some(x) = &self.exhaustive {
            for (i, p) in x.personas.iter().enumerate() {
                out.push((format!("exhaustive.personas[{i}]"), p.as_str()));
            }
        }
        if let Some(t) = &self.team {
            for (i, m) in t.always.iter().enumerate() {
                out.push((format!("team.always[{i}].persona"), m.persona.as_str()));
            }
            for (i, m) in t.conditional.iter().enumerate() {
                out.push((format!("team.conditional[{i}].persona"), m.persona.as_str()));
            }
        }
        out
    }

    /// Check the personas the flow names against a catalog: each must exist and be a reviewer;
    /// a panel flow needs a judge for each of its axes and a meta-judge.
    pub fn check_personas(&self, catalog: &Catalog) -> Result<(), FlowError> {
        if self.has(Role::Panel) {
            let panel = catalog.judge_panel();
            for (i, a) in self.parameters.panel_axes.iter().enumerate() {
                if panel.axes.get(a.as_str()).is_none_or(|j| j.is_empty()) {
                    return Err(invalid(
                        &self.source,
                        format!("parameters.panel_axes[{i}]"),
                        format!("the catalog has no judge (kind: judge) with axis {a:?}"),
                    ));
                }
            }
            if panel.meta.is_empty() {
                return Err(invalid(
                    &self.source,
                    "stages",
                    "a panel stage needs a meta-judge (kind: meta_judge) in the catalog",
                ));
            }
        }
        for (field, name) in self.named_personas() {
            match catalog.personas.get(name) {
                None => {
                    return Err(invalid(
                        &self.source,
                        field,
                        format!("no persona {name:?} in the catalog"),
                    ))
                }
                Some(p) if !p.is_reviewer() => {
                    return Err(invalid(
                        &self.source,
                        field,
                        format!("{name:?} is a {} and takes no review task", p.kind.as_str()),
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Stages in dependency order (Kahn's algorithm, ties broken by declaration order).
    pub fn topological_order(&self) -> Result<Vec<&Stage>, FlowError> {
        let mut done: BTreeSet<&str> = BTreeSet::new();
        let mut out = Vec::with_capacity(self.stages.len());
        while out.len() < self.stages.len() {
            let next = self.stages.iter().find(|s| {
                !done.contains(s.id.as_str()) && s.needs.iter().all(|n| done.contains(n.as_str()))
            });
            match next {
                Some(s) => {
                    done.insert(s.id.as_str());
                    out.push(s);
                }
                None => {
                    return Err(invalid(
                        &self.source,
                        "stages",
                        "dependency cycle among stages",
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The stage of an optional role ([`Role::Consultant`]), when the flow has one.
    pub fn optional_stage(&self, role: Role) -> Option<&Stage> {
        self.stages.iter().find(|s| s.role == role)
    }

    pub fn stage(&self, role: Role) -> &Stage {
        // validate() guarantees exactly one stage per role.
        self.stages
            .iter()
            .find(|s| s.role == role)
            .unwrap_or(&self.stages[0])
    }
}
