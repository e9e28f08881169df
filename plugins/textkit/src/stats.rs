//! `word_stats`: counts of a text.

use std::collections::BTreeSet;

use gatehouse_sdk::{ToolError, ToolOutput, log};
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WordStatsArgs {
    /// The text to measure.
    text: String,
}

/// The structured result; mirrors the output schema in `manifest.toml`.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct WordStats {
    /// Unicode scalar values.
    characters: usize,
    /// Whitespace-separated words, with surrounding punctuation removed.
    words: usize,
    /// Distinct words, ignoring case.
    unique_words: usize,
    /// Lines, as `str::lines` counts them (a trailing newline adds none).
    lines: usize,
    /// Runs of text ending in `.`, `!` or `?` (or the end) that contain a letter or digit.
    sentences: usize,
    /// The first of the longest words, if there is any word.
    longest_word: Option<String>,
}

pub(crate) fn word_stats(args: &WordStatsArgs) -> Result<ToolOutput, ToolError> {
    let stats = count(&args.text);
    log::debug(format!(
        "word_stats: {} words in {} characters",
        stats.words, stats.characters
    ));
    ToolOutput::json(&stats)
}

fn count(text: &str) -> WordStats {
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    let unique: BTreeSet<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let mut longest: Option<&str> = None;
    for &word in &words {
        if longest.is_none_or(|l| word.chars().count() > l.chars().count()) {
            longest = Some(word);
        }
    }
    WordStats {
        characters: text.chars().count(),
        words: words.len(),
        unique_words: unique.len(),
        lines: text.lines().count(),
        sentences: text
            .split(['.', '!', '?'])
            .filter(|s| s.chars().any(char::is_alphanumeric))
            .count(),
        longest_word: longest.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_sdk::Content;
    use gatehouse_sdk::serde_json::json;

    use super::*;

    #[test]
    fn counts_a_small_text() {
        let stats = count("The gate opens. The gate closes!\nWho keeps it?");
        assert_eq!(
            stats,
            WordStats {
                characters: 46,
                words: 9,
                unique_words: 7,
                lines: 2,
                sentences: 3,
                longest_word: Some("closes".into()),
            }
        );
    }

    #[test]
    fn empty_text_counts_zero() {
        let stats = count("");
        assert_eq!((stats.words, stats.lines, stats.sentences), (0, 0, 0));
        assert_eq!(stats.longest_word, None);
    }

    #[test]
    fn punctuation_alone_is_not_a_word() {
        let stats = count("-- ... !?");
        assert_eq!((stats.words, stats.sentences), (0, 0));
    }

    #[test]
    fn output_is_structured_json_plus_text() {
        let out = word_stats(&WordStatsArgs {
            text: "Hi hi".into(),
        })
        .unwrap();
        let expected = json!({
            "characters": 5, "words": 2, "unique_words": 1, "lines": 1, "sentences": 1,
            "longest_word": "Hi"
        });
        assert_eq!(out.structured, Some(expected.clone()));
        assert_eq!(out.content, [Content::Text(expected.to_string())]);
    }
}
