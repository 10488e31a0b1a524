//! What a command's failure tells a script by its exit status: besides 0
//! (done), 1 (any other error) and clap's 2 (a wrong command line), the
//! failures a script may want to tell apart.

/// Why a command stopped short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// What was asked for is not valid (a study, a setting's value): nothing ran.
    Invalid,
    /// The engine refused a setting.
    Refused,
    /// Interrupted (Ctrl-C, SIGTERM); a study is paused and can go on.
    Interrupted,
}

impl Why {
    pub fn code(self) -> i32 {
        match self {
            Why::Invalid => 3,
            Why::Refused => 4,
            // As shells report a command ended by SIGINT.
            Why::Interrupted => 130,
        }
    }
}

/// A failure with its reason for the exit status; shown as its message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Stopped {
    pub why: Why,
    pub message: String,
}

impl Stopped {
    pub fn error(why: Why, message: impl Into<String>) -> anyhow::Error {
        Stopped { why, message: message.into() }.into()
    }
}

/// The exit status for an error: its [`Stopped`] reason's, else 1.
pub fn code(e: &anyhow::Error) -> i32 {
    e.chain().find_map(|c| c.downcast_ref::<Stopped>()).map_or(1, |s| s.why.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_decides_the_status_even_under_context() {
        let e = Stopped::error(Why::Refused, "setting rejected").context("probing");
        assert_eq!(code(&e), 4);
        assert_eq!(code(&anyhow::anyhow!("disk full")), 1);
        assert_eq!(Stopped::error(Why::Invalid, "bad").to_string(), "bad");
    }
}
