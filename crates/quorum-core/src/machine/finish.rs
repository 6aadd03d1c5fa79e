//! The end of a review: the summary recorded (the synthesizer's, or the deterministic one),
//! the report assembled from what the machine knows, its finish recorded, and the report
//! handed to the driver.

use crate::machine::assemble::{assemble, RunFacts};
use crate::machine::fact::Fact;
use crate::machine::fallback::{fallback_synthesis, gate_sentence};
use crate::machine::job::Synthesis;
use crate::machine::progress::Progress;
use crate::machine::protocol::{Command, Level};
use crate::machine::state::{Phase, ReviewMachine};
use crate::report::ReviewStatus;

impl ReviewMachine {
    /// Record and use the deterministic summary (synthesizer failed, or no budget left), then
    /// finish.
    pub(super) fn finish_with_fallback_summary(&mut self) {
        let gated = self.found.gated.clone().unwrap_or_default();
        let s = fallback_synthesis(&self.review.pack, &gated);
        self.finish_with_summary(s);
    }

    /// Record the summary (model-written or fallback) as a fact, then finish.
    pub(super) fn finish_with_summary(&mut self, s: Synthesis) {
        self.record(Fact::SynthesisCompleted {
            summary: s.summary.clone(),
            action_items: s.action_items.clone(),
            fallback: s.fallback,
        });
        self.synthesis = Some(s);
        self.finish();
    }

    /// Assemble the report, record the finish, and hand the report over.
    pub(super) fn finish(&mut self) {
        if self.is_done() {
            return;
        }
        self.set_phase(Phase::Done);
        let gated = self.found.gated.take().unwrap_or_default();
        let mut synthesis = self
            .synthesis
            .take()
            .unwrap_or_else(|| fallback_synthesis(&self.review.pack, &gated));
        let conformance = self.merge_readiness();
        if let (true, Some(gate)) = (synthesis.fallback, &conformance) {
            // The deterministic summary says what blocks the merge, as a model's would.
            synthesis.summary.push(' ');
            synthesis.summary.push_str(&gate_sentence(gate));
        }
        let adjudication = self.adjudication_of();
        let panel = self.panel_of(&gated);
        let facts = RunFacts {
            panel,
            adjudication,
            selection: self.plan.selection.take(),
            conformance,
            conformance_failure: self.conformance.failure.take(),
            runs: std::mem::take(&mut self.runs),
            classification: self.plan.classification.clone(),
            classification_fallback: self.plan.classification_fallback,
            rejected: std::mem::take(&mut self.plan.rejected),
            reported: self.found.reported.len(),
            gated,
            synthesis,
            verifier_model: self.found.verifier_model.clone(),
            verifier_degraded: self.found.verifier_degraded,
            usage: self.usage.clone(),
            wall_ms: self.now.saturating_sub(self.started_ms.unwrap_or(self.now)),
            failure: self.ending.failure.take(),
            budget: self.ending.budget_spent.clone(),
            cancelled: self.ending.cancelled.clone(),
            ledger: std::mem::take(&mut self.found.ledger),
            rounds: std::mem::take(&mut self.plan.rounds),
        };
        let report = assemble(&self.review, facts, self.now);
        let status = format!("{:?}", report.status).to_lowercase();
        self.record(Fact::FlowFinished {
            status: status.clone(),
            reason: report.status_reason.clone(),
        });
        self.out.push(Command::RecordReport(report.to_json()));
        self.emit_usage();
        self.emit(Progress::Finished { status });
        self.final_report = Some(report.clone());
        self.out.push(Command::Finish(Box::new(report)));
    }

    /// The store refused a fact of the finish (its report, its FlowFinished): the review did
    /// not end durably, so it is handed over failed with the reason — once — and a resume
    /// finishes it from what was stored.
    pub(super) fn store_failed_at_finish(&mut self, reason: String) {
        let Some(mut report) = self.final_report.take() else {
            return;
        };
        self.log(
            Level::Warn,
            format!("cannot record the review's end: {reason}"),
        );
        report.status = ReviewStatus::Failed;
        report.status_reason = reason;
        self.emit(Progress::Finished {
            status: "failed".into(),
        });
        self.out.push(Command::Finish(Box::new(report)));
    }
}
