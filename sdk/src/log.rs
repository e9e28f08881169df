//! Structured log lines into the call's trace.
//!
//! On wasm32 each function calls the host's `gatehouse:plugin/log` import, which bounds the
//! number and size of lines per call. Natively (unit tests) the line goes to stderr instead,
//! because the generated import cannot be called outside a component.

use crate::adapter::bindings::gatehouse::plugin::log::Level;

/// Logs at trace level.
pub fn trace(message: impl AsRef<str>) {
    emit(Level::Trace, message.as_ref());
}

/// Logs at debug level.
pub fn debug(message: impl AsRef<str>) {
    emit(Level::Debug, message.as_ref());
}

/// Logs at info level.
pub fn info(message: impl AsRef<str>) {
    emit(Level::Info, message.as_ref());
}

/// Logs at warn level.
pub fn warn(message: impl AsRef<str>) {
    emit(Level::Warn, message.as_ref());
}

/// Logs at error level.
pub fn error(message: impl AsRef<str>) {
    emit(Level::Error, message.as_ref());
}

#[cfg(target_arch = "wasm32")]
fn emit(level: Level, message: &str) {
    crate::adapter::bindings::gatehouse::plugin::log::log(level, message);
}

#[cfg(not(target_arch = "wasm32"))]
fn emit(level: Level, message: &str) {
    let level = match level {
        Level::Trace => "TRACE",
        Level::Debug => "DEBUG",
        Level::Info => "INFO",
        Level::Warn => "WARN",
        Level::Error => "ERROR",
    };
    eprintln!("[plugin {level}] {message}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn logging_natively_does_not_need_a_host() {
        super::trace("t");
        super::debug(String::from("d"));
        super::info("i");
        super::warn("w");
        super::error("e");
    }
}
