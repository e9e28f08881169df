//! What an adapter serves besides its tools (contract 0.6.0): the [`Prompt`] a prompt fills in
//! to, and the [`Completion`] a completion suggests. A resource's contents are
//! [`EmbeddedResource`](crate::EmbeddedResource)s.
//!
//! The manifest declares each resource (`[[resource]]`), resource template
//! (`[[resource_template]]`) and prompt (`[[prompt]]`); the host calls
//! [`Adapter::read_resource`](crate::Adapter::read_resource),
//! [`Adapter::get_prompt`](crate::Adapter::get_prompt) and
//! [`Adapter::complete`](crate::Adapter::complete) only for those, after its gates.

use crate::output::Content;
use crate::wit;

/// Who speaks a prompt's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user.
    User,
    /// The assistant (the model).
    Assistant,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptMessage {
    /// Who speaks it.
    pub role: Role,
    /// What it says.
    pub content: Content,
}

impl PromptMessage {
    /// A message of the user's.
    pub fn user(content: Content) -> Self {
        PromptMessage {
            role: Role::User,
            content,
        }
    }

    /// A message of the assistant's.
    pub fn assistant(content: Content) -> Self {
        PromptMessage {
            role: Role::Assistant,
            content,
        }
    }
}

/// A prompt filled in with its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prompt {
    /// What it is for, if the adapter says.
    pub description: Option<String>,
    /// Its messages, in order.
    pub messages: Vec<PromptMessage>,
}

impl Prompt {
    /// A prompt of `messages`.
    pub fn new(messages: Vec<PromptMessage>) -> Self {
        Prompt {
            description: None,
            messages,
        }
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// What a completion completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionRef {
    /// An argument of the prompt with this id (as the manifest declares it).
    Prompt(String),
    /// A parameter of the resource template with this URI template.
    Resource(String),
}

/// Suggested values for an argument: at most 100 (the host cuts the rest).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completion {
    /// The values.
    pub values: Vec<String>,
    /// How many there are in all, if known.
    pub total: Option<u32>,
    /// Whether there are more than `values`.
    pub has_more: bool,
}

impl Completion {
    /// These values, all there are.
    pub fn of(values: Vec<String>) -> Self {
        Completion {
            total: u32::try_from(values.len()).ok(),
            values,
            has_more: false,
        }
    }
}

impl From<Prompt> for wit::Prompt {
    fn from(prompt: Prompt) -> Self {
        wit::Prompt {
            description: prompt.description,
            messages: (prompt.messages.into_iter())
                .map(|message| wit::PromptMessage {
                    role: match message.role {
                        Role::User => wit::Role::User,
                        Role::Assistant => wit::Role::Assistant,
                    },
                    content: message.content.into(),
                })
                .collect(),
        }
    }
}

impl From<wit::CompletionRef> for CompletionRef {
    fn from(reference: wit::CompletionRef) -> Self {
        match reference {
            wit::CompletionRef::Prompt(id) => Self::Prompt(id),
            wit::CompletionRef::Resource(template) => Self::Resource(template),
        }
    }
}

impl From<Completion> for wit::Completion {
    fn from(completion: Completion) -> Self {
        wit::Completion {
            values: completion.values,
            total: completion.total,
            has_more: completion.has_more,
        }
    }
}
