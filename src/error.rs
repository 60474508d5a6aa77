//! The one error type commands return, each kind with its documented exit
//! code (README, "Exit codes"). Library modules have their own thiserror
//! types; commands sort them into these kinds.

pub use patchgrade::exit;

/// Why a command did not complete.
#[derive(Debug, thiserror::Error)]
pub enum ExpectedError {
    /// Nothing was run, or the run stopped at input it cannot use.
    #[error(transparent)]
    BadInput(anyhow::Error),
    /// The machine failed us: a write, the backend, the runtime.
    #[error(transparent)]
    Infra(anyhow::Error),
    /// The command completed and wrote its reports, but some results could
    /// not be reached (the instances and causes are in the message).
    #[error("completed, but some results are inconclusive: {0}")]
    Inconclusive(String),
    /// Ctrl-C: what finished was written; the message was printed then.
    #[error("interrupted")]
    Interrupted,
    /// A bug: a task panicked or an invariant broke.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ExpectedError {
    pub fn bad(e: impl Into<anyhow::Error>) -> ExpectedError {
        ExpectedError::BadInput(e.into())
    }

    pub fn infra(e: impl Into<anyhow::Error>) -> ExpectedError {
        ExpectedError::Infra(e.into())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            ExpectedError::BadInput(_) => exit::BAD_INPUT,
            ExpectedError::Infra(_) => exit::INFRA,
            ExpectedError::Inconclusive(_) => exit::INCONCLUSIVE,
            ExpectedError::Interrupted => exit::INTERRUPTED,
            ExpectedError::Internal(_) => exit::INTERNAL,
        }
    }

    /// Whether main prints it: an interrupt has said so already.
    pub fn is_reported(&self) -> bool {
        matches!(self, ExpectedError::Interrupted)
    }

    /// How main introduces the message: inconclusive results are not an
    /// error of the command.
    pub fn label(&self) -> &'static str {
        match self {
            ExpectedError::Inconclusive(_) => "patchgrade",
            _ => "error",
        }
    }
}

impl From<patchgrade::engine::EngineError> for ExpectedError {
    fn from(e: patchgrade::engine::EngineError) -> ExpectedError {
        if e.is_bad_input() {
            ExpectedError::bad(e)
        } else {
            ExpectedError::infra(e)
        }
    }
}
