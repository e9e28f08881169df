//! `render_badge`: a flat "label | value" badge as an SVG `image` content block.

use gatehouse_sdk::serde_json::json;
use gatehouse_sdk::{Content, ToolError, ToolOutput, log};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RenderBadgeArgs {
    /// Left-hand text, on grey; 1 to [`MAX_TEXT_CHARS`] characters.
    label: String,
    /// Right-hand text, on the color; 1 to [`MAX_TEXT_CHARS`] characters.
    value: String,
    /// A name from [`NAMED_COLORS`] or `#rgb` / `#rrggbb`; green when absent.
    #[serde(default)]
    color: Option<String>,
}

pub(crate) const SVG_MIME: &str = "image/svg+xml";

/// Longest label or value, in characters: a badge is a glance, not a paragraph.
const MAX_TEXT_CHARS: usize = 40;
const HEIGHT: usize = 20;
/// Rough advance of one 11px Verdana character, and padding on each side of a text.
const CHAR_WIDTH: usize = 7;
const PADDING: usize = 6;
const LABEL_FILL: &str = "#555";

const NAMED_COLORS: &[(&str, &str)] = &[
    ("green", "#4c1"),
    ("yellow", "#dfb317"),
    ("orange", "#fe7d37"),
    ("red", "#e05d44"),
    ("blue", "#007ec6"),
    ("grey", "#9f9f9f"),
];

pub(crate) fn render_badge(args: &RenderBadgeArgs) -> Result<ToolOutput, ToolError> {
    check_text("label", &args.label)?;
    check_text("value", &args.value)?;
    let color = color(args.color.as_deref().unwrap_or("green"))?;

    let label_width = text_width(&args.label);
    let value_width = text_width(&args.value);
    let width = label_width + value_width;
    let label = escape(&args.label);
    let value = escape(&args.value);
    let svg = format!(
        concat!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img" aria-label="{label}: {value}">"#,
            r#"<title>{label}: {value}</title>"#,
            r#"<rect width="{lw}" height="{h}" fill="{label_fill}"/>"#,
            r#"<rect x="{lw}" width="{vw}" height="{h}" fill="{color}"/>"#,
            r##"<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">"##,
            r#"<text x="{lx}" y="14">{label}</text><text x="{vx}" y="14">{value}</text></g></svg>"#,
        ),
        width = width,
        h = HEIGHT,
        lw = label_width,
        vw = value_width,
        label_fill = LABEL_FILL,
        color = color,
        lx = label_width / 2,
        vx = label_width + value_width / 2,
        label = label,
        value = value,
    );
    log::debug(format!(
        "render_badge: {width}x{HEIGHT}, {} bytes",
        svg.len()
    ));
    Ok(ToolOutput::new()
        .with_content(Content::image(svg.into_bytes(), SVG_MIME))
        .with_structured(json!({ "width": width, "height": HEIGHT, "color": color })))
}

fn check_text(field: &str, text: &str) -> Result<(), ToolError> {
    let chars = text.chars().count();
    if chars == 0 || chars > MAX_TEXT_CHARS {
        return Err(ToolError::validation(
            "BADGE_TEXT_LENGTH",
            format!("`{field}` has {chars} characters; a badge text has 1 to {MAX_TEXT_CHARS}"),
        )
        .with_remediation(format!("shorten or fill in `{field}`")));
    }
    Ok(())
}

/// The fill for `spec`: a named color's hex value, or `spec` itself if it is `#rgb`/`#rrggbb`.
fn color(spec: &str) -> Result<String, ToolError> {
    if let Some((_, hex)) = NAMED_COLORS.iter().find(|(name, _)| *name == spec) {
        return Ok((*hex).to_owned());
    }
    let is_hex = spec.strip_prefix('#').is_some_and(|digits| {
        matches!(digits.len(), 3 | 6) && digits.chars().all(|c| c.is_ascii_hexdigit())
    });
    if is_hex {
        return Ok(spec.to_ascii_lowercase());
    }
    let names: Vec<&str> = NAMED_COLORS.iter().map(|(name, _)| *name).collect();
    Err(
        ToolError::validation("INVALID_COLOR", format!("`{spec}` is not a badge color"))
            .with_remediation(format!(
                "use one of {} or a hex color like `#4c1` or `#007ec6`",
                names.join(", ")
            )),
    )
}

fn text_width(text: &str) -> usize {
    text.chars().count() * CHAR_WIDTH + 2 * PADDING
}

/// Escapes text for XML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use gatehouse_sdk::{Blob, ErrorKind};

    use super::*;

    fn args(label: &str, value: &str, color: Option<&str>) -> RenderBadgeArgs {
        RenderBadgeArgs {
            label: label.into(),
            value: value.into(),
            color: color.map(str::to_owned),
        }
    }

    fn svg_of(out: &ToolOutput) -> String {
        match out.content.as_slice() {
            [Content::Image(Blob { data, mime_type })] => {
                assert_eq!(mime_type, SVG_MIME);
                String::from_utf8(data.clone()).unwrap()
            }
            other => panic!("expected one image block, got {other:?}"),
        }
    }

    #[test]
    fn renders_an_svg_image_block() {
        let out = render_badge(&args("build", "passing", None)).unwrap();
        let svg = svg_of(&out);
        assert!(
            svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="108" height="20""#),
            "{svg}"
        );
        assert!(
            svg.contains(r##"<rect x="47" width="61" height="20" fill="#4c1"/>"##),
            "{svg}"
        );
        assert!(
            svg.contains(">build</text>") && svg.contains(">passing</text>"),
            "{svg}"
        );
        assert!(svg.ends_with("</svg>"));
        assert_eq!(
            out.structured,
            Some(json!({ "width": 108, "height": 20, "color": "#4c1" }))
        );
    }

    #[test]
    fn escapes_markup() {
        let svg = svg_of(&render_badge(&args("<b>", "a&\"b'", None)).unwrap());
        assert!(svg.contains(">&lt;b&gt;</text>"), "{svg}");
        assert!(svg.contains(">a&amp;&quot;b&apos;</text>"), "{svg}");
        assert!(!svg.contains("<b>"));
    }

    #[test]
    fn accepts_named_and_hex_colors() {
        for (spec, fill) in [("red", "#e05d44"), ("#ABC", "#abc"), ("#007ec6", "#007ec6")] {
            let out = render_badge(&args("a", "b", Some(spec))).unwrap();
            assert_eq!(out.structured.unwrap()["color"], json!(fill), "{spec}");
        }
    }

    #[test]
    fn rejects_other_colors_with_remediation() {
        for spec in ["purple", "#12", "#gggggg", "4c1", "url(#x)"] {
            let err = render_badge(&args("a", "b", Some(spec))).unwrap_err();
            assert_eq!(
                (err.kind, err.code.as_str()),
                (ErrorKind::Validation, "INVALID_COLOR")
            );
            assert_eq!(err.message, format!("`{spec}` is not a badge color"));
            assert_eq!(
                err.remediation.as_deref(),
                Some(
                    "use one of green, yellow, orange, red, blue, grey or a hex color like `#4c1` or `#007ec6`"
                )
            );
        }
    }

    #[test]
    fn rejects_empty_and_long_texts() {
        let err = render_badge(&args("", "b", None)).unwrap_err();
        assert_eq!(err.code, "BADGE_TEXT_LENGTH");
        assert_eq!(
            err.message,
            "`label` has 0 characters; a badge text has 1 to 40"
        );
        let err = render_badge(&args("a", &"v".repeat(41), None)).unwrap_err();
        assert_eq!(
            err.message,
            "`value` has 41 characters; a badge text has 1 to 40"
        );
        assert!(render_badge(&args("a", &"v".repeat(40), None)).is_ok());
    }
}
