//! How a command fails: a message and the exit code it maps to, 2 for bad usage (arguments,
//! unreadable files, invalid config) and 1 for a refusal (a component refused, a call or a
//! decision that failed).

/// A failure with the exit code it maps to.
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: u8,
    /// What went wrong, for the user.
    pub(crate) message: String,
}

/// Bad usage: exit code 2.
pub(crate) fn usage(message: impl std::fmt::Display) -> Failure {
    Failure {
        code: 2,
        message: message.to_string(),
    }
}

/// A refusal: exit code 1.
pub(crate) fn refused(message: impl std::fmt::Display) -> Failure {
    Failure {
        code: 1,
        message: message.to_string(),
    }
}
