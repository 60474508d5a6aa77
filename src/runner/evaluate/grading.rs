//! The last step of an evaluation: the test log parsed and graded, and a
//! gradable run with a candidate audited.

use super::EvalSteps;
use crate::grade;
use crate::outcome::Outcome;
use crate::spec::ResolvedSpec;

impl EvalSteps<'_> {
    /// The log parsed and graded; a gradable run with a candidate is audited.
    pub(super) fn grade(
        &mut self,
        rs: &ResolvedSpec,
        text: &str,
        candidate: Option<&str>,
        checkout: Option<&std::path::Path>,
    ) -> (Outcome, Option<String>) {
        let inst = &self.job.instance;
        let graded = grade::grade_log(
            rs.spec.log_parser,
            text,
            &inst.fail_to_pass,
            &inst.pass_to_pass,
        );
        self.record.test_exit_code = graded.test_exit_code;
        let detail = graded.detail(text);
        let outcome = if graded.resolved() {
            Outcome::Resolved
        } else {
            Outcome::Unresolved
        };
        let (map, g) = match graded.graded {
            Ok(graded) => graded,
            Err(u) => {
                self.record.ungradable = Some(u);
                return (outcome, detail);
            }
        };
        self.record.statuses = Some(map);
        if !g.unmatched.is_empty() {
            self.line(format!(
                "expected test ids that matched nothing in the log: {}",
                g.unmatched.join(", ")
            ));
        }
        self.record.grade = Some(g);
        if let Some(patch) = candidate.filter(|_| self.job.overrides.audit) {
            let mut input = crate::audit::AuditInput::new(inst, patch);
            input.test_log = Some(text);
            input.log_parser = Some(rs.spec.log_parser);
            input.checkout = checkout;
            input.base_time = self.base_time;
            let mirror = self.runner.repos.existing_mirror(&inst.repo);
            input.mirror = mirror.as_deref();
            input.of_gold = crate::audit::AuditInput::is_gold(
                inst,
                &self.job.prediction.model_name_or_path,
                patch,
            );
            let audit = crate::audit::audit_static(&input);
            if audit.is_suspect() {
                let kinds: Vec<String> = audit
                    .reasons
                    .iter()
                    .map(|r| format!("{:?}", r.kind))
                    .collect();
                self.line(format!("audit: suspect ({})", kinds.join(", ")));
            }
            self.record.audit = Some(audit);
        }
        (outcome, detail)
    }
}
