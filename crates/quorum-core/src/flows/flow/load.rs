//! Reading a flow file — found by name or path, parsed, then held to every rule a flow must
//! satisfy (parameter bounds, one stage per role, the optional roles single and in their
//! place, the capability rules well formed) before anything runs. Flows that arrive as data
//! (a peer's attempt) pass the same [`Flow::validate`].

use super::definition::invalid;
use super::params::PARAM_BOUNDS;
use super::{CoverageMode, Flow, Role, FILE_KINDS};
use crate::catalog::{KNOWN_TOOLS, TEAM_TOOLS};
use crate::error::FlowError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

impl Flow {
    /// Resolve `name_or_file`: an existing file path, else `flows_dir/<name>.yaml`.
    pub fn locate(name_or_file: &str, flows_dir: &Path) -> Result<PathBuf, FlowError> {
        let as_path = Path::new(name_or_file);
        if as_path.is_file() {
            return Ok(as_path.to_path_buf());
        }
        for ext in ["yaml", "yml"] {
            let candidate = flows_dir.join(format!("{name_or_file}.{ext}"));
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        Err(FlowError::NotFound {
            name: name_or_file.to_string(),
            searched: flows_dir.display().to_string(),
        })
    }

    pub fn load(path: &Path) -> Result<Flow, FlowError> {
        let text = std::fs::read_to_string(path).map_err(|source| FlowError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Flow::parse(&text, path)
    }

    /// Parse and validate flow YAML; `path` is used in error messages only.
    pub fn parse(text: &str, path: &Path) -> Result<Flow, FlowError> {
        let mut flow: Flow = serde_yaml::from_str(text).map_err(|e| FlowError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        flow.source = path.to_path_buf();
        flow.validate()?;
        Ok(flow)
    }

    /// Check every rule a flow must satisfy. Public because flows also arrive as data (a peer's
    /// attempt carries one): those are validated with the same rules before use.
    pub fn validate(&self) -> Result<(), FlowError> {
        let path = self.source.as_path();
        if self.name.trim().is_empty() {
            return Err(invalid(path, "name", "must not be empty"));
        }
        let p = &self.parameters;
        // Upper bounds first: parameters are multiplied into deadlines and token budgets, and a
        // submitted flow is untrusted input. Far above any real use, far below any overflow.
        for (field, value, max) in PARAM_BOUNDS.iter().map(|(f, get, max)| (*f, get(p), *max)) {
            if value > max {
                return Err(invalid(
                    path,
                    format!("parameters.{field}"),
                    format!("{value} is above the limit of {max}"),
                ));
            }
        }
        if p.call_timeout_secs == 0 {
            return Err(invalid(
                path,
                "parameters.call_timeout_secs",
                "must be at least 1",
            ));
        }
        if p.max_concurrent == 0 {
            return Err(invalid(
                path,
                "parameters.max_concurrent",
                "must be at least 1",
            ));
        }
        if !(0.0..=1.0).contains(&p.confidence_gate) {
            return Err(invalid(
                path,
                "parameters.confidence_gate",
                "must be within 0..=1",
            ));
        }
        if p.min_tasks == 0 || p.max_tasks < p.min_tasks {
            return Err(invalid(
                path,
                "parameters.max_tasks",
                "need 1 <= min_tasks <= max_tasks",
            ));
        }
        if p.max_iterations == 0 || p.task_attempts == 0 {
            return Err(invalid(
                path,
                "parameters.max_iterations",
                "max_iterations and task_attempts must be at least 1",
            ));
        }
        if p.adjudication_batch == 0 {
            return Err(invalid(
                path,
                "parameters.adjudication_batch",
                "must be at least 1",
            ));
        }
        if p.conformance_batch == 0 {
            return Err(invalid(
                path,
                "parameters.conformance_batch",
                "must be at least 1",
            ));
        }
        if p.verify_batch == 0 {
            return Err(invalid(
                path,
                "parameters.verify_batch",
                "must be at least 1",
            ));
        }
        if p.verifiers == 0 {
            return Err(invalid(path, "parameters.verifiers", "must be at least 1"));
        }
        if !(1..=crate::judging::panel::MAX_JUDGES_PER_AXIS).contains(&p.panel_judges) {
            return Err(invalid(
                path,
                "parameters.panel_judges",
                format!(
                    "must be within 1..={} (one judge per perspective)",
                    crate::judging::panel::MAX_JUDGES_PER_AXIS
                ),
            ));
        }
        if p.panel_axes.is_empty() {
            return Err(invalid(
                path,
                "parameters.panel_axes",
                "must name at least one axis",
            ));
        }
        for (i, a) in p.panel_axes.iter().enumerate() {
            if !crate::catalog::JUDGE_AXES.contains(&a.as_str()) || p.panel_axes[..i].contains(a) {
                return Err(invalid(
                    path,
                    format!("parameters.panel_axes[{i}]"),
                    format!(
                        "{a:?} is unknown or repeated; axes: {}",
                        crate::catalog::JUDGE_AXES.join(", ")
                    ),
                ));
            }
        }
        if p.circular_fix_repeats < 2
            || (p.task_attempts > 1 && p.circular_fix_repeats > p.task_attempts)
        {
            return Err(invalid(
                path,
                "parameters.circular_fix_repeats",
                "need 2 <= circular_fix_repeats <= task_attempts, or it could never fire",
            ));
        }
        if p.max_output_tokens < 64
            || u64::from(p.context_tokens) < u64::from(p.max_output_tokens) * 2
        {
            return Err(invalid(
                path,
                "parameters.context_tokens",
                "need max_output_tokens >= 64 and context_tokens >= 2 x max_output_tokens",
            ));
        }
        if !(0.1..=1.0).contains(&p.persona_share) {
            return Err(invalid(
                path,
                "parameters.persona_share",
                "must be between 0.1 and 1.0 (a share of the input window)",
            ));
        }
        if p.max_tool_calls_per_turn == 0 || p.max_tool_result_tokens < 64 {
            return Err(invalid(
                path,
                "parameters.max_tool_calls_per_turn",
                "need max_tool_calls_per_turn >= 1 and max_tool_result_tokens >= 64",
            ));
        }
        let mut ids = BTreeSet::new();
        for (i, s) in self.stages.iter().enumerate() {
            if s.id.trim().is_empty() || !ids.insert(s.id.as_str()) {
                return Err(invalid(
                    path,
                    format!("stages[{i}].id"),
                    format!("{:?} is empty or duplicated", s.id),
                ));
            }
            if s.role != Role::Specialist && s.instructions.trim().is_empty() {
                return Err(invalid(
                    path,
                    format!("stages[{i}].instructions"),
                    format!("the {} stage needs instructions", s.role.as_str()),
                ));
            }
            for (j, t) in s.tools.iter().enumerate() {
                if !KNOWN_TOOLS.contains(&t.as_str()) && !TEAM_TOOLS.contains(&t.as_str()) {
                    return Err(invalid(
                        path,
                        format!("stages[{i}].tools[{j}]"),
                        format!("unknown tool {t:?}; known: {}", KNOWN_TOOLS.join(", ")),
                    ));
                }
            }
        }
        for (i, s) in self.stages.iter().enumerate() {
            for (j, n) in s.needs.iter().enumerate() {
                if !ids.contains(n.as_str()) {
                    return Err(invalid(
                        path,
                        format!("stages[{i}].needs[{j}]"),
                        format!("no stage {n:?}"),
                    ));
                }
            }
        }
        for role in Role::ALL {
            let n = self.stages.iter().filter(|s| s.role == role).count();
            if n != 1 {
                return Err(invalid(
                    path,
                    "stages",
                    format!("needs exactly one {} stage, found {n}", role.as_str()),
                ));
            }
        }
        for role in [
            Role::Criteria,
            Role::Conformance,
            Role::Adjudicator,
            Role::Panel,
        ] {
            let n = self.stages.iter().filter(|s| s.role == role).count();
            if n > 1 {
                return Err(invalid(
                    path,
                    "stages",
                    format!("at most one {} stage, found {n}", role.as_str()),
                ));
            }
        }
        if self.has(Role::Criteria) != self.has(Role::Conformance) {
            return Err(invalid(
                path,
                "stages",
                "a criteria stage and a conformance stage come together (one reads the spec's criteria, the other judges them)",
            ));
        }
        self.validate_capability_rules()?;
        let order = self.topological_order()?;
        // The data each role consumes must exist before it runs.
        let pos: BTreeMap<Role, usize> =
            order.iter().enumerate().map(|(i, s)| (s.role, i)).collect();
        let consultants = self
            .stages
            .iter()
            .filter(|s| s.role == Role::Consultant)
            .count();
        if consultants > 1 {
            return Err(invalid(
                path,
                "stages",
                format!("takes at most one consultant stage, found {consultants}"),
            ));
        }
        // The consultant re-scores verified findings before the summary is written.
        let mut chain: Vec<Role> = Role::ALL.to_vec();
        if pos.contains_key(&Role::Consultant) {
            chain.insert(4, Role::Consultant);
        }
        for w in chain.windows(2) {
            if pos[&w[0]] > pos[&w[1]] {
                return Err(invalid(
                    path,
                    "stages",
                    format!(
                        "the {} stage must run before the {} stage",
                        w[0].as_str(),
                        w[1].as_str()
                    ),
                ));
            }
        }
        // Conformance judges the reviewed target after verification, so its verdicts are in
        // the report the synthesizer sees; its criteria are read before it.
        if let (Some(c), Some(j)) = (pos.get(&Role::Criteria), pos.get(&Role::Conformance)) {
            if c > j || j < &pos[&Role::Verifier] || j > &pos[&Role::Synthesizer] {
                return Err(invalid(
                    path,
                    "stages",
                    "the criteria stage must run before the conformance stage, which runs after the verifier and before the synthesizer",
                ));
            }
        }
        // The adjudicator rules on the prior findings after this review's own findings are
        // verified (the new ones are set apart from them) and before the summary.
        if let Some(a) = pos.get(&Role::Adjudicator) {
            if a < &pos[&Role::Verifier] || a > &pos[&Role::Synthesizer] {
                return Err(invalid(
                    path,
                    "stages",
                    "the adjudicator stage runs after the verifier and before the synthesizer",
                ));
            }
        }
        // The panel scores what survived verification (and the consultant's scores), and its
        // verdict is known before the summary is written.
        if let Some(p) = pos.get(&Role::Panel) {
            let after = pos.get(&Role::Consultant).unwrap_or(&pos[&Role::Verifier]);
            if p < after || p > &pos[&Role::Synthesizer] {
                return Err(invalid(
                    path,
                    "stages",
                    "the panel stage runs after the verifier (and the consultant) and before the synthesizer",
                ));
            }
        }
        Ok(())
    }

    fn validate_capability_rules(&self) -> Result<(), FlowError> {
        let path = self.source.as_path();
        if let Some(c) = &self.full_coverage {
            if c.mandate.trim().is_empty() {
                return Err(invalid(path, "full_coverage.mandate", "must not be empty"));
            }
            if c.max_files_per_task == Some(0) || c.max_tokens_per_task == Some(0) {
                return Err(invalid(
                    path,
                    "full_coverage",
                    "max_files_per_task and max_tokens_per_task must be at least 1",
                ));
            }
        }
        if self.parameters.coverage == Some(CoverageMode::Full)
            && self.exhaustive.is_none()
            && self.full_coverage_rule().is_none()
        {
            return Err(invalid(
                path,
                "parameters.coverage",
                "full needs a full_coverage (or directory_coverage) block naming the persona",
            ));
        }
        if let Some(x) = &self.exhaustive {
            if x.personas.is_empty() {
                return Err(invalid(
                    path,
                    "exhaustive.personas",
                    "must name at least one persona",
                ));
            }
            if x.mandate.trim().is_empty() {
                return Err(invalid(path, "exhaustive.mandate", "must not be empty"));
            }
            if x.max_rounds == 0 || x.max_files_per_task == 0 || x.max_tokens_per_task == 0 {
                return Err(invalid(
                    path,
                    "exhaustive",
                    "max_rounds, max_files_per_task and max_tokens_per_task must be at least 1",
                ));
            }
        }
        let mut names = BTreeSet::new();
        for (i, d) in self.dimensions.iter().enumerate() {
            if d.name.trim().is_empty() || !names.insert(d.name.as_str()) {
                return Err(invalid(
                    path,
                    format!("dimensions[{i}].name"),
                    format!("{:?} is empty or duplicated", d.name),
                ));
            }
            if d.personas.is_empty() {
                return Err(invalid(
                    path,
                    format!("dimensions[{i}].personas"),
                    "must name at least one persona",
                ));
            }
            for (j, k) in d.kinds.iter().enumerate() {
                if !FILE_KINDS.contains(&k.as_str()) {
                    return Err(invalid(
                        path,
                        format!("dimensions[{i}].kinds[{j}]"),
                        format!("{k:?} is not one of {}", FILE_KINDS.join(", ")),
                    ));
                }
            }
        }
        if let Some(sel) = &self.selection {
            if sel.instructions.trim().is_empty() {
                return Err(invalid(
                    path,
                    "selection.instructions",
                    "the interest poll needs its question",
                ));
            }
            if !(1..=500).contains(&sel.max_files_per_task) {
                return Err(invalid(
                    path,
                    "selection.max_files_per_task",
                    "must be between 1 and 500",
                ));
            }
            if sel.max_output_tokens < 16 {
                return Err(invalid(
                    path,
                    "selection.max_output_tokens",
                    "must be at least 16",
                ));
            }
        }
        if let Some(i) = &self.improve {
            if !(1..=10).contains(&i.cycles) {
                return Err(invalid(path, "improve.cycles", "must be between 1 and 10"));
            }
            if i.min_kept == 0 {
                return Err(invalid(
                    path,
                    "improve.min_kept",
                    "must be at least 1 (a cycle that keeps no fix always ends the run)",
                ));
            }
            if crate::review::finding::Severity::parse_lenient(&i.min_severity).is_none() {
                return Err(invalid(
                    path,
                    "improve.min_severity",
                    "must be P0, P1, P2 or P3",
                ));
            }
            if i.max_files == 0 || i.max_lines == 0 {
                return Err(invalid(
                    path,
                    "improve.max_files",
                    "max_files and max_lines must be at least 1",
                ));
            }
        }
        if let Some(c) = &self.consistency {
            if !(2..=9).contains(&c.passes) {
                return Err(invalid(
                    path,
                    "consistency.passes",
                    "must be between 2 and 9 (one pass is the default: leave consistency out)",
                ));
            }
            if !(1..=c.passes).contains(&c.needed()) {
                return Err(invalid(
                    path,
                    "consistency.min_votes",
                    format!("must be between 1 and passes ({})", c.passes),
                ));
            }
            if !(0.0..=2.0).contains(&c.temperature) {
                return Err(invalid(
                    path,
                    "consistency.temperature",
                    "must be between 0 and 2",
                ));
            }
        }
        if let Some(f) = &self.fresh_eyes {
            if f.mandate.trim().is_empty() {
                return Err(invalid(
                    path,
                    "fresh_eyes.mandate",
                    "the fresh-eyes lane needs its neutral mandate",
                ));
            }
            for (j, k) in f.kinds.iter().enumerate() {
                if !FILE_KINDS.contains(&k.as_str()) {
                    return Err(invalid(
                        path,
                        format!("fresh_eyes.kinds[{j}]"),
                        format!("{k:?} is not one of {}", FILE_KINDS.join(", ")),
                    ));
                }
            }
        }
        if let Some(team) = &self.team {
            for (i, m) in team.always.iter().enumerate() {
                if m.signals.is_some() {
                    return Err(invalid(
                        path,
                        format!("team.always[{i}].signals"),
                        "an always-on member takes no signals; move it to team.conditional",
                    ));
                }
            }
            for (i, m) in team.conditional.iter().enumerate() {
                let Some(s) = &m.signals else {
                    return Err(invalid(
                        path,
                        format!("team.conditional[{i}].signals"),
                        "a conditional member needs the signals that call it",
                    ));
                };
                if s.keywords.is_empty() && s.headings.is_empty() && s.extensions.is_empty() {
                    return Err(invalid(
                        path,
                        format!("team.conditional[{i}].signals"),
                        "needs at least one keyword, heading or extension",
                    ));
                }
                if s.min_matches == 0 {
                    return Err(invalid(
                        path,
                        format!("team.conditional[{i}].signals.min_matches"),
                        "must be at least 1, or the member would always join",
                    ));
                }
            }
            for (i, m) in team.always.iter().chain(&team.conditional).enumerate() {
                if m.mandate.trim().is_empty() {
                    return Err(invalid(
                        path,
                        format!("team member {i} ({})", m.persona),
                        "needs a mandate",
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name: t
parameters: { max_concurrent: 2 }
stages:
  - { id: scout, role: scout, instructions: "look" }
  - { id: plan, role: planner, needs: [scout], instructions: "plan" }
  - { id: work, role: specialist, needs: [plan], tools: [file_read] }
  - { id: verify, role: verifier, needs: [work], instructions: "check" }
  - { id: synth, role: synthesizer, needs: [verify], instructions: "sum" }
"#;

    fn parse(s: &str) -> Result<Flow, FlowError> {
        Flow::parse(s, Path::new("flows/t.yaml"))
    }

    #[test]
    fn good_flow_parses_with_defaults() {
        let f = parse(GOOD).unwrap();
        assert_eq!(f.parameters.max_concurrent, 2);
        assert_eq!(f.parameters.confidence_gate, 0.5);
        let order: Vec<_> = f
            .topological_order()
            .unwrap()
            .iter()
            .map(|s| s.id.clone())
            .collect();
        assert_eq!(order, ["scout", "plan", "work", "verify", "synth"]);
    }

    #[test]
    fn errors_name_file_and_field() {
        let bad_tool = GOOD.replace("[file_read]", "[shell_exec]");
        let e = parse(&bad_tool).unwrap_err().to_string();
        assert!(
            e.contains("flows/t.yaml") && e.contains("stages[2].tools[0]"),
            "{e}"
        );

        let bad_need = GOOD.replace("needs: [work]", "needs: [nope]");
        let e = parse(&bad_need).unwrap_err().to_string();
        assert!(e.contains("stages[3].needs[0]"), "{e}");

        let no_instr = GOOD.replace("instructions: \"check\"", "instructions: \"\"");
        let e = parse(&no_instr).unwrap_err().to_string();
        assert!(e.contains("stages[3].instructions"), "{e}");

        let unknown_field = GOOD.replace("name: t", "name: t\nbogus: 1");
        let e = parse(&unknown_field).unwrap_err().to_string();
        assert!(e.contains("flows/t.yaml") && e.contains("bogus"), "{e}");
    }

    #[test]
    fn cycles_and_wrong_order_are_rejected() {
        let cyc = GOOD.replace("needs: [scout]", "needs: [synth]");
        assert!(parse(&cyc).unwrap_err().to_string().contains("cycle"));
        let missing = GOOD.replace("role: verifier", "role: specialist");
        assert!(parse(&missing)
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
    }

    #[test]
    fn the_adjudicator_is_optional_single_and_between_verifier_and_synthesizer() {
        assert!(!parse(GOOD).unwrap().uses_prior());
        let fin = GOOD.replace(
            "  - { id: synth, role: synthesizer, needs: [verify], instructions: \"sum\" }",
            "  - { id: adjudicate, role: adjudicator, needs: [verify], instructions: \"rule\" }\n  - { id: synth, role: synthesizer, needs: [adjudicate], instructions: \"sum\" }",
        );
        let f = parse(&fin).unwrap();
        assert!(f.uses_prior() && !f.uses_spec());
        assert_eq!(f.parameters.adjudication_batch, 5);
        let late = fin
            .replace(
                "role: adjudicator, needs: [verify]",
                "role: adjudicator, needs: [synth]",
            )
            .replace(
                "needs: [adjudicate], instructions: \"sum\"",
                "needs: [verify], instructions: \"sum\"",
            );
        let e = parse(&late).unwrap_err().to_string();
        assert!(
            e.contains("adjudicator stage runs after the verifier"),
            "{e}"
        );
        let zero = fin.replace("{ max_concurrent: 2 }", "{ adjudication_batch: 0 }");
        assert!(parse(&zero)
            .unwrap_err()
            .to_string()
            .contains("adjudication_batch"));
    }

    #[test]
    fn conformance_roles_are_optional_paired_and_ordered() {
        let f = parse(GOOD).unwrap();
        assert!(!f.uses_spec() && !f.has(Role::Criteria));
        let conf = GOOD.replace(
            "  - { id: synth, role: synthesizer, needs: [verify], instructions: \"sum\" }",
            "  - { id: criteria, role: criteria, needs: [verify], instructions: \"read\" }\n  - { id: judge, role: conformance, needs: [criteria], instructions: \"judge\" }\n  - { id: synth, role: synthesizer, needs: [judge], instructions: \"sum\" }",
        );
        let f = parse(&conf).unwrap();
        assert!(f.uses_spec());
        assert_eq!(f.parameters.conformance_batch, 5);
        let alone = conf
            .replace(
                "  - { id: criteria, role: criteria, needs: [verify], instructions: \"read\" }\n",
                "",
            )
            .replace("needs: [criteria]", "needs: [verify]");
        let e = parse(&alone).unwrap_err().to_string();
        assert!(e.contains("come together"), "{e}");
        let after = conf
            .replace(
                "needs: [verify], instructions: \"read\"",
                "needs: [synth], instructions: \"read\"",
            )
            .replace(
                "needs: [judge], instructions: \"sum\"",
                "needs: [verify], instructions: \"sum\"",
            );
        let e = parse(&after).unwrap_err().to_string();
        assert!(e.contains("before the synthesizer"), "{e}");
        let no_instr = conf.replace("instructions: \"judge\"", "instructions: \"\"");
        assert!(parse(&no_instr)
            .unwrap_err()
            .to_string()
            .contains("conformance stage needs instructions"));
        let zero = conf.replace("{ max_concurrent: 2 }", "{ conformance_batch: 0 }");
        assert!(parse(&zero)
            .unwrap_err()
            .to_string()
            .contains("conformance_batch"));
    }

    #[test]
    fn a_panel_is_optional_single_after_verification_and_bounded() {
        let f = parse(GOOD).unwrap();
        assert!(!f.has(Role::Panel));
        assert_eq!(f.parameters.panel_axes.len(), 4);
        assert_eq!(f.parameters.panel_judges, 3);
        let with = GOOD.replace(
            "  - { id: synth, role: synthesizer, needs: [verify], instructions: \"sum\" }",
            "  - { id: judge, role: panel, needs: [verify], instructions: \"score\" }\n  \
             - { id: synth, role: synthesizer, needs: [judge], instructions: \"sum\" }",
        );
        assert!(parse(&with).unwrap().has(Role::Panel));
        let late = with
            .replace(
                "role: panel, needs: [verify]",
                "role: panel, needs: [synth]",
            )
            .replace(
                "needs: [judge], instructions",
                "needs: [verify], instructions",
            );
        let e = parse(&late).unwrap_err().to_string();
        assert!(e.contains("the panel stage runs after the verifier"), "{e}");
        let early = with
            .replace("role: panel, needs: [verify]", "role: panel, needs: [plan]")
            .replace(
                "role: specialist, needs: [plan]",
                "role: specialist, needs: [judge]",
            )
            .replace(
                "role: synthesizer, needs: [judge]",
                "role: synthesizer, needs: [verify]",
            );
        let e = parse(&early).unwrap_err().to_string();
        assert!(e.contains("the panel stage runs after the verifier"), "{e}");
        let two = with.replace(
            "  - { id: synth,",
            "  - { id: judge2, role: panel, needs: [verify], instructions: \"score\" }\n  - { id: synth,",
        );
        let e = parse(&two).unwrap_err().to_string();
        assert!(e.contains("at most one panel stage, found 2"), "{e}");
        let silent = with.replace("instructions: \"score\"", "instructions: \"\"");
        assert!(parse(&silent)
            .unwrap_err()
            .to_string()
            .contains("the panel stage needs instructions"));
        for (params, field) in [
            ("{ panel_judges: 0 }", "parameters.panel_judges"),
            ("{ panel_judges: 4 }", "parameters.panel_judges"),
            ("{ panel_axes: [] }", "parameters.panel_axes"),
            (
                "{ panel_axes: [grounding, style] }",
                "parameters.panel_axes[1]",
            ),
            (
                "{ panel_axes: [coverage, coverage] }",
                "parameters.panel_axes[1]",
            ),
        ] {
            let e = parse(&with.replace("{ max_concurrent: 2 }", params))
                .expect_err(params)
                .to_string();
            assert!(e.contains(field), "{params}: {e}");
        }
        let p = parse(&with.replace(
            "{ max_concurrent: 2 }",
            "{ panel_axes: [coverage, grounding], panel_judges: 2 }",
        ))
        .unwrap();
        assert_eq!(p.parameters.panel_axes, ["coverage", "grounding"]);
        assert_eq!(p.parameters.panel_judges, 2);
    }

    #[test]
    fn parameter_bounds() {
        let g = GOOD.replace("{ max_concurrent: 2 }", "{ confidence_gate: 1.5 }");
        assert!(parse(&g)
            .unwrap_err()
            .to_string()
            .contains("confidence_gate"));
        let g = GOOD.replace("{ max_concurrent: 2 }", "{ min_tasks: 9, max_tasks: 3 }");
        assert!(parse(&g).is_err());
        for share in ["0.05", "1.5"] {
            let g = GOOD.replace(
                "{ max_concurrent: 2 }",
                &format!("{{ persona_share: {share} }}"),
            );
            assert!(
                parse(&g).unwrap_err().to_string().contains("persona_share"),
                "{share}"
            );
        }
        let g = GOOD.replace("{ max_concurrent: 2 }", "{ persona_share: 0.25 }");
        assert_eq!(parse(&g).unwrap().parameters.persona_share, 0.25);
    }

    #[test]
    fn a_consultant_is_optional_single_and_between_verifier_and_synthesizer() {
        assert!(parse(GOOD)
            .unwrap()
            .optional_stage(Role::Consultant)
            .is_none());
        let with = GOOD.replace(
            "  - { id: synth, role: synthesizer, needs: [verify], instructions: \"sum\" }",
            "  - { id: rate, role: consultant, needs: [verify], instructions: \"rate\" }\n  \
             - { id: synth, role: synthesizer, needs: [rate], instructions: \"sum\" }",
        );
        let f = parse(&with).unwrap();
        assert_eq!(f.optional_stage(Role::Consultant).unwrap().id, "rate");
        let late = GOOD.replace(
            "  - { id: synth, role: synthesizer, needs: [verify], instructions: \"sum\" }",
            "  - { id: synth, role: synthesizer, needs: [verify], instructions: \"sum\" }\n  \
             - { id: rate, role: consultant, needs: [synth], instructions: \"rate\" }",
        );
        let e = parse(&late).unwrap_err().to_string();
        assert!(
            e.contains("the consultant stage must run before the synthesizer stage"),
            "{e}"
        );
        let two = with.replace(
            "  - { id: synth,",
            "  - { id: rate2, role: consultant, needs: [verify], instructions: \"rate\" }\n  - { id: synth,",
        );
        let e = parse(&two).unwrap_err().to_string();
        assert!(e.contains("at most one consultant stage, found 2"), "{e}");
        let silent = with.replace("instructions: \"rate\"", "instructions: \"\"");
        assert!(parse(&silent)
            .unwrap_err()
            .to_string()
            .contains("the consultant stage needs instructions"));
        let p = parse(&GOOD.replace("{ max_concurrent: 2 }", "{ verifiers: 0 }"));
        assert!(p.unwrap_err().to_string().contains("parameters.verifiers"));
        let p = parse(&GOOD.replace("{ max_concurrent: 2 }", "{ verify_threshold: most }"));
        assert!(p.is_err());
        let p = parse(&GOOD.replace(
            "{ max_concurrent: 2 }",
            "{ verifiers: 3, verify_threshold: majority }",
        ))
        .unwrap();
        assert_eq!(
            (p.parameters.verifiers, p.parameters.verify_threshold),
            (3, crate::review::vote::Threshold::Majority)
        );
    }

    #[test]
    fn improve_takes_bounded_cycles_a_threshold_and_a_severity() {
        let with = |body: &str| format!("{GOOD}improve: {body}\n");
        let i = parse(&with("{cycles: 3}")).unwrap().improve.unwrap();
        assert_eq!(
            (
                i.cycles,
                i.min_kept,
                i.min_severity.as_str(),
                i.max_files,
                i.max_lines
            ),
            (3, 1, "P2", 3, 60)
        );
        for bad in [
            "{cycles: 0}",
            "{cycles: 11}",
            "{cycles: 2, min_kept: 0}",
            "{cycles: 2, min_severity: urgent}",
            "{cycles: 2, max_lines: 0}",
        ] {
            let e = parse(&with(bad)).unwrap_err();
            assert!(e.to_string().contains("improve."), "{bad}: {e}");
        }
        assert!(parse(&with("{cycles: 2, threshold: 1}")).is_err());
    }

    #[test]
    fn consistency_takes_two_to_nine_passes_and_votes_within_them() {
        let with = |body: &str| format!("{GOOD}consistency: {body}\n");
        let f = parse(&with("{passes: 3}")).unwrap();
        assert_eq!(
            f.consistency.as_ref().unwrap().needed(),
            2,
            "a majority of 3"
        );
        let f = parse(&with("{passes: 4, min_votes: 1}")).unwrap();
        assert_eq!(f.consistency.unwrap().needed(), 1);
        for bad in [
            "{passes: 1}",
            "{passes: 10}",
            "{passes: 3, min_votes: 4}",
            "{passes: 3, min_votes: 0}",
            "{passes: 3, temperature: 3}",
        ] {
            let e = parse(&with(bad)).unwrap_err();
            assert!(e.to_string().contains("consistency."), "{bad}: {e}");
        }
        let e = parse(&with("{passes: 3, votes: 2}")).unwrap_err();
        assert!(e.to_string().contains("votes"), "{e}");
    }

    #[test]
    fn a_fresh_eyes_lane_needs_a_mandate_and_known_kinds_and_names_its_persona() {
        let lane = |body: &str| format!("{GOOD}fresh_eyes: {body}\n");
        let f = parse(&lane("{ persona: p, mandate: \"look\", kinds: [code] }")).unwrap();
        assert_eq!(f.fresh_eyes.as_ref().unwrap().persona, "p");
        assert!(f
            .named_personas()
            .iter()
            .any(|(field, p)| field == "fresh_eyes.persona" && *p == "p"));
        let e = parse(&lane("{ persona: p, mandate: \" \" }")).unwrap_err();
        assert!(e.to_string().contains("fresh_eyes.mandate"), "{e}");
        let e = parse(&lane("{ persona: p, mandate: m, kinds: [video] }")).unwrap_err();
        assert!(e.to_string().contains("fresh_eyes.kinds[0]"), "{e}");
    }

    #[test]
    fn parameters_that_would_overflow_are_errors_naming_the_field() {
        for (params, field) in [
            (
                "{ max_output_tokens: 4294967295 }",
                "parameters.max_output_tokens",
            ),
            (
                "{ call_timeout_secs: 18446744073709551615 }",
                "parameters.call_timeout_secs",
            ),
            ("{ call_timeout_secs: 0 }", "parameters.call_timeout_secs"),
            (
                "{ max_iterations: 4294967295 }",
                "parameters.max_iterations",
            ),
            (
                "{ planner_retries: 4294967295 }",
                "parameters.planner_retries",
            ),
            (
                "{ max_wall_secs: 18446744073709551615 }",
                "parameters.max_wall_secs",
            ),
            (
                "{ context_tokens: 4294967295 }",
                "parameters.context_tokens",
            ),
            (
                "{ max_concurrent: 18446744073709551615 }",
                "parameters.max_concurrent",
            ),
        ] {
            let g = GOOD.replace("{ max_concurrent: 2 }", params);
            let e = parse(&g).expect_err(params).to_string();
            assert!(
                e.contains(&format!("field `{field}`")) && e.contains("flows/t.yaml"),
                "{params}: {e}"
            );
        }
        // Large but sane values still parse: the bounds are far above real use.
        let g = GOOD.replace(
            "{ max_concurrent: 2 }",
            "{ context_tokens: 1000000, max_output_tokens: 32768, call_timeout_secs: 3600 }",
        );
        parse(&g).unwrap();
    }

    #[test]
    fn shipped_flows_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../flows");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().and_then(|x| x.to_str()) == Some("yaml") {
                Flow::load(&p).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n >= 1);
        let p = Flow::locate("review", &dir).unwrap();
        assert!(p.ends_with("review.yaml"));
    }
}
