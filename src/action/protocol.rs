//! The job protocol: what the plan job hands to finalize (its `conclusion` output, finalize's
//! `conclusion` input, and the workflow's `if:`s on it), and how finalize and the conductor
//! end (their `conclusion` output). The wire form is the kebab-case word (`work`,
//! `close-round`, `preflight-failed`, …): [`std::fmt::Display`], [`std::str::FromStr`] and
//! serde all use it, byte for byte what the workflow template compares. An unknown word is an
//! error naming the input it came from. Pure.

use serde::{Deserialize, Serialize};

/// One enum per direction, each with its wire words, parsed and printed the same way.
macro_rules! wire {
    (
        $(#[$meta:meta])*
        $name:ident, $input:literal { $( $(#[$vmeta:meta])* $variant:ident = $word:literal, )+ }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in the order of the wire words' documentation.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire word.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| {
                        let words: Vec<&str> = $name::ALL.iter().map(|v| v.as_str()).collect();
                        format!(
                            "{s:?} is not a {}; it is one of {}",
                            $input,
                            words.join(", ")
                        )
                    })
            }
        }
    };
}

wire! {
    /// What the plan job concluded: work for finalize (a matrix follows), or how the run
    /// ends without any.
    #[derive(Default)]
    PlanConclusion, "conclusion of the plan job (finalize's `conclusion` input)" {
        /// A part of the round as a job matrix.
        #[default]
        Work = "work",
        /// The open round's tasks are all resolved: finalize ends it.
        CloseRound = "close-round",
        /// `schedule: eager`: the conductor job runs instead of the matrix and finalize.
        Conduct = "conduct",
        /// `schedule: eager`: this plan job conducted the run itself (the action's `conduct`
        /// input): neither the conduct job nor finalize runs.
        Conducted = "conducted",
        /// Every task completed (the plan may be archived already).
        Completed = "completed",
        /// Nothing is pending; some tasks failed, were blocked or skipped.
        Incomplete = "incomplete",
        /// Pending tasks that can never become ready.
        Deadlock = "deadlock",
        /// Blocking pre-flight checks failed (a question on the pull request).
        PreflightFailed = "preflight-failed",
        /// The `max-cost` budget is spent.
        Budget = "budget",
        /// Started outside the branch's concurrency group: finalize starts it there.
        Redirect = "redirect",
    }
}

wire! {
    /// How finalize or the conductor ended: their `conclusion` output.
    Conclusion, "conclusion of finalize or the conductor" {
        /// More to run: the next round or part is dispatched.
        Continue = "continue",
        Completed = "completed",
        Incomplete = "incomplete",
        CircuitBreaker = "circuit-breaker",
        Deadlock = "deadlock",
        PreflightFailed = "preflight-failed",
        Budget = "budget",
        /// Questions wait for answers.
        NeedsInput = "needs-input",
        /// `/execute abort` stopped it.
        Aborted = "aborted",
        /// The branch moved past its base: another writer carries on.
        Stale = "stale",
        /// The round was started again in the branch's group.
        Redirect = "redirect",
        /// A successor conductor took over.
        Handover = "handover",
        /// Refused credentials: nothing more is dispatched.
        Halted = "halted",
        /// Finalize after the plan job's `conduct` (the workflow runs none): passed on.
        Conduct = "conduct",
        /// Finalize after a plan job that conducted (the workflow runs none): passed on.
        Conducted = "conducted",
    }
}

impl PlanConclusion {
    /// The conclusion finalize passes on when the plan job planned no work: the plan job's
    /// own, the [`Conclusion`] of the same wire word (`None` for [`PlanConclusion::Work`] and
    /// [`PlanConclusion::CloseRound`], which integrate: no conclusion has their words).
    pub fn passed_on(self) -> Option<Conclusion> {
        self.as_str().parse().ok()
    }
}

impl Conclusion {
    /// The conclusion of a run that stopped at `stop`.
    pub fn of(stop: &crate::action::report::RunStop) -> Conclusion {
        use crate::action::report::RunStop;
        match stop {
            RunStop::Completed => Conclusion::Completed,
            RunStop::CircuitBreaker(_) => Conclusion::CircuitBreaker,
            RunStop::Deadlock(_) => Conclusion::Deadlock,
            RunStop::NeedsInput(_) => Conclusion::NeedsInput,
            RunStop::Budget(_) => Conclusion::Budget,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Conclusion, PlanConclusion};

    /// The action's `conclusion` output names every word a plan job, finalize or the
    /// conductor concludes with, so a workflow that branches on it knows them all.
    #[test]
    fn the_actions_conclusion_output_names_every_word() {
        let action: serde_yaml::Value =
            serde_yaml::from_str(include_str!("../../action.yml")).unwrap();
        let said = action["outputs"]["conclusion"]["description"]
            .as_str()
            .unwrap();
        let words = PlanConclusion::ALL
            .iter()
            .map(ToString::to_string)
            .chain(Conclusion::ALL.iter().map(ToString::to_string));
        for w in words {
            assert!(
                said.split(|c: char| !(c.is_ascii_lowercase() || c == '-'))
                    .any(|x| x == w),
                "{w} is not in: {said}"
            );
        }
    }

    #[test]
    fn the_wire_words_are_the_templates_and_serde_agrees() {
        let words: Vec<String> = PlanConclusion::ALL
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            words,
            [
                "work",
                "close-round",
                "conduct",
                "conducted",
                "completed",
                "incomplete",
                "deadlock",
                "preflight-failed",
                "budget",
                "redirect"
            ]
        );
        for p in PlanConclusion::ALL {
            assert_eq!(p.to_string().parse::<PlanConclusion>(), Ok(*p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        for c in Conclusion::ALL {
            assert_eq!(c.to_string().parse::<Conclusion>(), Ok(*c));
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        assert_eq!(Conclusion::CircuitBreaker.to_string(), "circuit-breaker");
        assert_eq!(Conclusion::NeedsInput.to_string(), "needs-input");
    }

    #[test]
    fn an_unknown_word_names_the_input_and_the_words() {
        for bad in ["", "Work", "done", "work "] {
            let e = bad.parse::<PlanConclusion>().unwrap_err();
            assert!(e.contains("finalize's `conclusion` input"), "{e}");
            assert!(e.contains("work, close-round, conduct"), "{e}");
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn finalize_passes_on_the_plan_jobs_stops() {
        assert_eq!(PlanConclusion::Work.passed_on(), None);
        assert_eq!(PlanConclusion::CloseRound.passed_on(), None);
        for p in PlanConclusion::ALL
            .iter()
            .filter(|p| p.passed_on().is_some())
        {
            assert_eq!(p.passed_on().unwrap().as_str(), p.as_str());
        }
    }
}
