//! Reading and writing the top-level custom sections gatehouse keeps in a component.
//!
//! A component binary is an 8-byte header followed by sections, each `id: u8`, `size: u32
//! (LEB128)` and `size` bytes of payload; a custom section (id 0) starts its payload with its
//! name. We walk that framing directly (with wasmparser's reader for the LEB128 and name
//! decoding) because signing needs exact byte ranges, which the full parser does not expose.

use std::ops::Range;

use wasm_encoder::Encode;
use wasmparser::BinaryReader;

/// Custom section holding the manifest, as JSON.
pub const MANIFEST_SECTION: &str = "gatehouse:manifest";
/// Custom section holding the signature block, as JSON.
pub const SIGNATURE_SECTION: &str = "gatehouse:signature";

const WASM_MAGIC: [u8; 4] = *b"\0asm";
/// Version and layer of a component binary (a core module has layer 0).
const COMPONENT_VERSION_LAYER: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];
const CUSTOM_SECTION_ID: u8 = 0;

/// Why the bytes are not a component we can read.
#[derive(Debug, thiserror::Error)]
pub enum SectionError {
    /// Wrong magic number or version.
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(&'static str),
    /// The section framing is broken.
    #[error("malformed component at byte {offset}: {message}")]
    Malformed {
        /// Where it broke.
        offset: usize,
        /// What broke.
        message: String,
    },
}

/// One top-level section.
#[derive(Debug, Clone)]
pub struct Section<'a> {
    /// The custom section's name, `None` for other sections.
    pub name: Option<&'a str>,
    /// Byte range of the whole section, header included.
    pub range: Range<usize>,
    /// The payload after the name (custom sections) or the whole payload.
    pub data: &'a [u8],
}

/// Lists the top-level sections of a component.
pub fn sections(bytes: &[u8]) -> Result<Vec<Section<'_>>, SectionError> {
    if bytes.len() < 8 || bytes[..4] != WASM_MAGIC {
        return Err(SectionError::NotAComponent("missing the \\0asm header"));
    }
    if bytes[4..8] != COMPONENT_VERSION_LAYER {
        return Err(SectionError::NotAComponent(
            "this is a core module or an unsupported version; build for wasm32-wasip2 to get a component",
        ));
    }
    let mut out = Vec::new();
    let mut reader = BinaryReader::new(&bytes[8..], 8);
    while !reader.eof() {
        let start = reader.original_position();
        let malformed = |e: wasmparser::BinaryReaderError| SectionError::Malformed {
            offset: e.offset(),
            message: e.message().to_owned(),
        };
        let id = reader.read_u8().map_err(malformed)?;
        let size = reader.read_var_u32().map_err(malformed)? as usize;
        let payload_start = reader.original_position();
        let end = payload_start
            .checked_add(size)
            .filter(|&end| end <= bytes.len())
            .ok_or(SectionError::Malformed {
                offset: start,
                message: format!("section of {size} bytes runs past the end of the file"),
            })?;
        let payload = &bytes[payload_start..end];
        let (name, data) = if id == CUSTOM_SECTION_ID {
            let mut inner = BinaryReader::new(payload, payload_start);
            let name = inner.read_string().map_err(malformed)?;
            let name_end = inner.original_position() - payload_start;
            (Some(name), &payload[name_end..])
        } else {
            (None, payload)
        };
        out.push(Section {
            name,
            range: start..end,
            data,
        });
        reader.read_bytes(size).map_err(malformed)?;
    }
    Ok(out)
}

/// All custom sections called `name`.
pub fn custom<'a>(sections: &[Section<'a>], name: &str) -> Vec<&'a [u8]> {
    sections
        .iter()
        .filter(|s| s.name == Some(name))
        .map(|s| s.data)
        .collect()
}

/// The component without the custom sections named in `names`.
pub fn without(bytes: &[u8], sections: &[Section<'_>], names: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(&bytes[..8]);
    for section in sections {
        if !section.name.is_some_and(|n| names.contains(&n)) {
            out.extend_from_slice(&bytes[section.range.clone()]);
        }
    }
    out
}

/// Appends a custom section to a component.
pub fn append_custom(bytes: &mut Vec<u8>, name: &str, data: &[u8]) {
    bytes.push(CUSTOM_SECTION_ID);
    wasm_encoder::CustomSection {
        name: name.into(),
        data: data.into(),
    }
    .encode(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_component() -> Vec<u8> {
        let mut bytes = b"\0asm".to_vec();
        bytes.extend_from_slice(&COMPONENT_VERSION_LAYER);
        bytes
    }

    #[test]
    fn appended_sections_read_back_and_strip_cleanly() {
        let mut bytes = empty_component();
        append_custom(&mut bytes, "a", b"one");
        append_custom(&mut bytes, "b", &vec![7; 300]);
        let list = sections(&bytes).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(custom(&list, "a"), vec![&b"one"[..]]);
        assert_eq!(custom(&list, "b")[0].len(), 300);
        let stripped = without(&bytes, &list, &["b"]);
        let mut expected = empty_component();
        append_custom(&mut expected, "a", b"one");
        assert_eq!(stripped, expected);
    }

    #[test]
    fn rejects_core_modules_and_garbage() {
        let core = [0, b'a', b's', b'm', 1, 0, 0, 0];
        assert!(matches!(
            sections(&core),
            Err(SectionError::NotAComponent(_))
        ));
        assert!(matches!(
            sections(b"hello"),
            Err(SectionError::NotAComponent(_))
        ));
    }

    #[test]
    fn rejects_a_section_running_past_the_end() {
        let mut bytes = empty_component();
        bytes.extend_from_slice(&[0, 50, 1, b'x']);
        assert!(matches!(
            sections(&bytes),
            Err(SectionError::Malformed { offset: 8, .. })
        ));
    }
}
