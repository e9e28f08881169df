//! `gatehouse.conformance`: the tools the MCP conformance suite
//! (`@modelcontextprotocol/conformance`) calls by fixed name, each answering what its scenario
//! expects. Offline; no capability has an effect.
//!
//! | capability | scenario | returns |
//! |---|---|---|
//! | `test_simple_text` | tools-call-simple-text | one text block |
//! | `test_image_content` | tools-call-image | a 1x1 red PNG |
//! | `test_audio_content` | tools-call-audio | 0.1 s of silence as `audio/wav` |
//! | `test_embedded_resource` | tools-call-embedded-resource | a `text/plain` resource |
//! | `test_multiple_content_types` | tools-call-mixed-content | text, image, JSON resource |
//! | `test_error_handling` | tools-call-error | a tool error |
//! | `json_schema_2020_12_tool` | json-schema-2020-12 | the arguments, as text |
//! | `test_header_param` | http-custom-header-server-validation | `region: <region>` |
//!
//! The suite calls the bare names; gatehouse names tools `gatehouse.conformance.<id>`, so the
//! operator maps them with `[mcp.aliases]` (the `conformance.toml` that
//! `gatehouse demo --export` writes does).

use gatehouse_sdk::{Adapter, Call, CallContext, Content, EmbeddedResource, ToolError, ToolOutput};

/// A 1x1 red pixel, as PNG.
const RED_PIXEL_PNG: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The error `test_error_handling` always returns.
pub const ERROR_MESSAGE: &str = "This tool intentionally returns an error for testing";

struct Conformance;

impl Adapter for Conformance {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "test_simple_text" => Ok(ToolOutput::text(
                "This is a simple text response for testing.",
            )),
            "test_image_content" => {
                Ok(ToolOutput::new().with_content(Content::image(RED_PIXEL_PNG, "image/png")))
            }
            "test_audio_content" => {
                Ok(ToolOutput::new().with_content(Content::audio(silence_wav(), "audio/wav")))
            }
            "test_embedded_resource" => Ok(ToolOutput::new().with_content(Content::Resource(
                EmbeddedResource::text(
                    "test://embedded-resource",
                    "This is an embedded resource content.",
                )
                .with_mime_type("text/plain"),
            ))),
            "test_multiple_content_types" => Ok(ToolOutput::text("Multiple content types test:")
                .with_content(Content::image(RED_PIXEL_PNG, "image/png"))
                .with_content(Content::Resource(
                    EmbeddedResource::text(
                        "test://mixed-content-resource",
                        r#"{"test":"data","value":123}"#,
                    )
                    .with_mime_type("application/json"),
                ))),
            "test_error_handling" => Err(ToolError::internal("TEST_ERROR", ERROR_MESSAGE)),
            "json_schema_2020_12_tool" => Ok(ToolOutput::text(format!(
                "received: {}",
                call.args_value()?
            ))),
            "test_header_param" => {
                let args: RegionArgs = call.args()?;
                Ok(ToolOutput::text(format!("region: {}", args.region)))
            }
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

/// `test_header_param`'s arguments.
#[derive(gatehouse_sdk::serde::Deserialize)]
#[serde(crate = "gatehouse_sdk::serde")]
struct RegionArgs {
    region: String,
}

/// 0.1 s of silence: a RIFF/WAVE file, PCM, mono, 8 kHz, 8 bits per sample.
fn silence_wav() -> Vec<u8> {
    const RATE: u32 = 8000;
    const SAMPLES: u32 = RATE / 10;
    let mut wav = Vec::with_capacity(44 + SAMPLES as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + SAMPLES).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&RATE.to_le_bytes()); // sample rate
    wav.extend_from_slice(&RATE.to_le_bytes()); // byte rate: 1 byte per sample
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&SAMPLES.to_le_bytes());
    // Unsigned 8-bit PCM: 128 is the zero line.
    wav.resize(44 + SAMPLES as usize, 0x80);
    wav
}

gatehouse_sdk::export_adapter!(Conformance);

#[cfg(test)]
mod tests {
    use gatehouse_sdk::ErrorKind;
    use gatehouse_sdk::serde_json::json;
    use gatehouse_sdk::testing::check_args;

    use super::*;

    const MANIFEST: &str = include_str!("../manifest.toml");

    fn call(capability: &str, args: &str) -> Result<ToolOutput, ToolError> {
        Conformance::invoke(&CallContext::default(), &Call::new(capability, args))
    }

    #[test]
    fn each_content_tool_returns_its_kind() {
        let text = call("test_simple_text", "{}").unwrap();
        assert_eq!(
            text.content,
            [Content::text("This is a simple text response for testing.")]
        );
        let image = call("test_image_content", "{}").unwrap();
        assert_eq!(image.content, [Content::image(RED_PIXEL_PNG, "image/png")]);
        let resource = call("test_embedded_resource", "{}").unwrap();
        let [Content::Resource(resource)] = resource.content.as_slice() else {
            panic!("{resource:?}");
        };
        assert_eq!(resource.uri, "test://embedded-resource");
        assert_eq!(resource.mime_type.as_deref(), Some("text/plain"));
        let mixed = call("test_multiple_content_types", "{}").unwrap();
        assert!(matches!(
            mixed.content.as_slice(),
            [Content::Text(_), Content::Image(_), Content::Resource(_)]
        ));
    }

    #[test]
    fn the_audio_is_a_well_formed_wav() {
        let out = call("test_audio_content", "{}").unwrap();
        let [Content::Audio(blob)] = out.content.as_slice() else {
            panic!("{out:?}");
        };
        assert_eq!(blob.mime_type, "audio/wav");
        let wav = &blob.data;
        assert_eq!((&wav[0..4], &wav[8..16]), (&b"RIFF"[..], &b"WAVEfmt "[..]));
        let riff_len = u32::from_le_bytes(wav[4..8].try_into().unwrap()) as usize;
        assert_eq!(riff_len + 8, wav.len());
        let data_len = u32::from_le_bytes(wav[40..44].try_into().unwrap()) as usize;
        assert_eq!((&wav[36..40], data_len + 44), (&b"data"[..], wav.len()));
    }

    #[test]
    fn the_error_tool_always_fails() {
        let err = call("test_error_handling", "{}").unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (ErrorKind::Internal, ERROR_MESSAGE)
        );
    }

    #[test]
    fn the_2020_12_schema_resolves_its_defs() {
        let args = json!({
            "name": "Ada",
            "address": { "street": "1 Main St", "city": "Springfield" },
            "contactMethod": "email",
            "email": "ada@example.com"
        });
        let checked: gatehouse_sdk::serde_json::Value =
            check_args(MANIFEST, "json_schema_2020_12_tool", &args);
        let out = call("json_schema_2020_12_tool", &checked.to_string()).unwrap();
        assert_eq!(out.content, [Content::text(format!("received: {args}"))]);
        // if/then: a phone contact must carry the phone number.
        let phone_missing = json!({ "name": "Ada", "contactMethod": "phone", "email": "a@b.c" });
        let refused = gatehouse_sdk::testing::try_check_args::<gatehouse_sdk::serde_json::Value>(
            MANIFEST,
            "json_schema_2020_12_tool",
            &phone_missing,
        );
        assert!(refused.is_err(), "{refused:?}");
    }

    #[test]
    fn the_header_tool_returns_its_region() {
        let args = json!({ "region": "eu-west-1" });
        let checked: gatehouse_sdk::serde_json::Value =
            check_args(MANIFEST, "test_header_param", &args);
        let out = call("test_header_param", &checked.to_string()).unwrap();
        assert_eq!(out.content, [Content::text("region: eu-west-1")]);
    }
}
