//! Identifiers and W3C trace context: the ids the host mints (tool calls, decisions, traces)
//! and the `traceparent` header it reads from callers and writes to upstreams.
//!
//! A `traceparent` is `<version>-<trace id>-<parent id>-<flags>`: 2, 32, 16 and 2 lowercase
//! hex digits; the trace and parent ids are never all zeros, and version `ff` is invalid
//! (<https://www.w3.org/TR/trace-context/#traceparent-header>).

/// `bytes` random bytes as lowercase hex, never all zeros (an all-zero trace or span id is
/// invalid in W3C trace context). From the thread's CSPRNG (ChaCha, seeded from the OS and
/// reseeded periodically), not a system call per id.
pub fn random_hex(bytes: usize) -> String {
    use rand::Rng as _;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    if buf.iter().all(|b| *b == 0)
        && let Some(first) = buf.first_mut()
    {
        *first = 1;
    }
    hex::encode(buf)
}

/// A fresh tool call id, `call_<12 hex: Unix time in ms><12 hex random>`. Ids minted later
/// sort later, so the audit log's index of call ids grows at its end: a commit of many calls
/// touches one or two of its pages instead of a random page per call (read from disk once the
/// log outgrows the cache, and written again at every commit).
pub fn tool_call_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis());
    // 48 bits of milliseconds last until the year 10889.
    format!("call_{:012x}{}", ms & 0xffff_ffff_ffff, random_hex(6))
}

/// A fresh policy decision id, `pol_<16 hex>`.
pub fn decision_id() -> String {
    format!("pol_{}", random_hex(8))
}

/// A fresh W3C trace id.
pub fn trace_id() -> String {
    random_hex(16)
}

/// Whether `id` is a valid W3C trace id: 32 lowercase hex digits, not all zeros.
pub fn is_trace_id(id: &str) -> bool {
    is_hex_id(id, 32)
}

fn is_hex_id(id: &str, len: usize) -> bool {
    id.len() == len
        && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && id.bytes().any(|b| b != b'0')
}

/// The trace id of a valid `traceparent`, or `None` for anything malformed.
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let mut fields = traceparent.split('-');
    let (version, trace, parent, flags) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let valid = version.len() == 2
        && version != "ff"
        && version.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && is_trace_id(trace)
        && is_hex_id(parent, 16)
        && flags.len() == 2
        && flags.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        // Version 00 has exactly four fields; later versions may append more.
        && (version != "00" || fields.next().is_none());
    valid.then_some(trace)
}

/// A `traceparent` continuing `trace_id` with a fresh span id (a new trace if `trace_id` is
/// not a valid one), sampled: `00-<trace id>-<span id>-01`.
pub fn traceparent(trace_id: &str) -> String {
    let trace = if is_trace_id(trace_id) {
        trace_id.to_owned()
    } else {
        self::trace_id()
    };
    format!("00-{trace}-{}-01", random_hex(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    #[test]
    fn fresh_ids_are_valid() {
        assert!(is_trace_id(&trace_id()));
        let (first, second) = (tool_call_id(), tool_call_id());
        assert!(first.starts_with("call_") && first.len() == 29, "{first}");
        assert!(
            first[5..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(first, second);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(tool_call_id() > second, "later ids sort later");
        assert_ne!(decision_id(), decision_id());
    }

    #[test]
    fn traceparent_round_trips_and_starts_a_trace_when_needed() {
        let header = traceparent(TRACE);
        assert_eq!(trace_id_of(&header), Some(TRACE));
        let fresh = traceparent("not-a-trace");
        let id = trace_id_of(&fresh).unwrap();
        assert!(is_trace_id(id) && id != TRACE);
    }

    #[test]
    fn parses_only_valid_traceparents() {
        let good = format!("00-{TRACE}-00f067aa0ba902b7-01");
        assert_eq!(trace_id_of(&good), Some(TRACE));
        // A later version may carry more fields.
        assert_eq!(
            trace_id_of(&format!("01-{TRACE}-00f067aa0ba902b7-01-extra")),
            Some(TRACE)
        );
        for bad in [
            String::new(),
            format!("00-{TRACE}-00f067aa0ba902b7"),
            format!("00-{TRACE}-00f067aa0ba902b7-01-extra"),
            format!("ff-{TRACE}-00f067aa0ba902b7-01"),
            format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32)),
            format!("00-{TRACE}-0000000000000000-01"),
            format!("00-{}-00f067aa0ba902b7-01", TRACE.to_uppercase()),
            format!("00-{TRACE}-00f067aa0ba902b7-1"),
            format!("0-{TRACE}-00f067aa0ba902b7-01"),
        ] {
            assert_eq!(trace_id_of(&bad), None, "{bad}");
        }
    }
}
