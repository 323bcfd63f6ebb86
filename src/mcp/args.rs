//! The tools' arguments: typed structs whose JSON Schema (schemars) is each tool's input schema.
//! Names are those of Honcho v3.0.12's own MCP server where it has the tool, so that prompts written for
//! it work unchanged; each doc comment is the argument's description.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A JSON object of Honcho's filter language.
pub type Filters = Map<String, Value>;

/// The workspace argument every tool takes.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct InWorkspace {
    /// The workspace to work in. Omit it when the connection sets X-Honcho-Workspace-ID, or when
    /// the key is scoped to one workspace (its own is used).
    #[serde(default)]
    pub workspace_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// What to look for (semantic and full-text).
    pub query: String,
    /// Only messages this peer wrote; also searches this peer's conclusions about itself.
    #[serde(default)]
    pub peer_id: Option<String>,
    /// Only messages of this session (takes precedence over peer_id for messages).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Most messages returned, 1 to 100 (10).
    #[serde(default)]
    pub message_limit: Option<u64>,
    /// Filters on the messages, e.g. {"created_at": {"gte": "2026-01-01"}}.
    #[serde(default)]
    pub message_filters: Option<Filters>,
    /// Most conclusions returned, 1 to 100 (10).
    #[serde(default)]
    pub conclusion_top_k: Option<u64>,
    /// Filters on the conclusions, e.g. {"level": ["deductive"]} or {"session_id": "s1"}.
    #[serde(default)]
    pub conclusion_filters: Option<Filters>,
    /// Also return each match's surrounding conversation: windows of context_window messages on
    /// either side, merged where they overlap or touch.
    #[serde(default)]
    pub include_context: Option<bool>,
    /// Messages on either side of a match, 0 to 10 (2).
    #[serde(default)]
    pub context_window: Option<i64>,
    /// Only messages and conclusions of this scope's sessions.
    #[serde(default)]
    pub scope: Option<String>,
}

/// How hard the dialectic may think.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevel {
    Minimal,
    Low,
    Medium,
    High,
    Max,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChatArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The peer whose memory answers (the asker).
    pub peer_id: String,
    /// The question, in natural language.
    pub query: String,
    /// Ask what peer_id knows about this peer instead of about itself.
    #[serde(default)]
    pub target_peer_id: Option<String>,
    /// Show the model this session's latest turns and search its messages.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Recall only inside this scope's sessions (peer cards are left out).
    #[serde(default)]
    pub scope: Option<String>,
    /// Reasoning effort (low): higher answers in more detail, more slowly.
    #[serde(default)]
    pub reasoning_level: Option<ReasoningLevel>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PeerArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The observer peer.
    pub peer_id: String,
    /// The peer observed (peer_id itself when omitted).
    #[serde(default)]
    pub target_peer_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ScheduleDreamArgs {
    #[serde(flatten)]
    pub peer: PeerArgs,
    /// Read and ignored: a dream covers every session of the pair.
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetPeerCardArgs {
    #[serde(flatten)]
    pub peer: PeerArgs,
    /// The facts of the card; they replace the card's.
    pub peer_card: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RepresentationArgs {
    #[serde(flatten)]
    pub peer: PeerArgs,
    /// Only conclusions drawn in this session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Most conclusions, 1 to 100 (25).
    #[serde(default)]
    pub max_conclusions: Option<u64>,
    /// Only conclusions drawn in this scope's sessions (the peer card is then left out).
    #[serde(default)]
    pub scope: Option<String>,
    /// Curates the representation around the conclusions that best answer this.
    #[serde(default)]
    pub search_query: Option<String>,
    /// With `search_query`: how many conclusions the search gives, 1 to 100 (a third).
    #[serde(default)]
    pub search_top_k: Option<u64>,
    /// With `search_query`: cosine distance, 0 to 1, beyond which a conclusion is not found.
    #[serde(default)]
    pub search_max_distance: Option<f64>,
    /// Gives a share to the conclusions derived most often (false for the representation,
    /// true for the peer context, as Honcho v3.0.12's routes).
    #[serde(default)]
    pub include_most_frequent: Option<bool>,
}

impl RepresentationArgs {
    /// The recall asked for; `frequent` is the tool's `include_most_frequent` default.
    pub fn recall(&self, frequent: bool) -> crate::dialectic::representation::Recall {
        crate::dialectic::representation::Recall {
            max: self
                .max_conclusions
                .unwrap_or(crate::dialectic::representation::DEFAULT_MAX_CONCLUSIONS),
            search_query: self.search_query.clone(),
            search_top_k: self.search_top_k,
            search_max_distance: self.search_max_distance,
            include_most_frequent: self.include_most_frequent.unwrap_or(frequent),
        }
    }
}

/// A page of a list.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Paging {
    /// Page number, from 1 (1).
    #[serde(default)]
    pub page: Option<u64>,
    /// Items per page, 1 to 100 (50).
    #[serde(default)]
    pub size: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    #[serde(flatten)]
    pub paging: Paging,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The session.
    pub session_id: String,
}

/// A peer joining a session: its id, or its id with its settings there.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SessionPeer {
    Id(String),
    Configured {
        /// The peer.
        peer_id: String,
        /// Whether this peer's messages are derived from in this session.
        #[serde(default)]
        observe_me: Option<bool>,
        /// Whether this peer forms conclusions about the others in this session.
        #[serde(default)]
        observe_others: Option<bool>,
    },
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddPeersArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// The peers to add: ids, or objects with per-session settings.
    pub peers: Vec<SessionPeer>,
}

/// One message to record.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NewMessage {
    /// The peer who wrote it.
    pub peer_id: String,
    /// What was said.
    pub content: String,
    /// Any JSON object kept with the message.
    #[serde(default)]
    pub metadata: Option<Filters>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddMessagesArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// The messages, in the order they were said (1 to 100).
    pub messages: Vec<NewMessage>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionMessagesArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// Filters on the messages, e.g. {"peer_id": "alice"}.
    #[serde(default)]
    pub filters: Option<Filters>,
    #[serde(flatten)]
    pub paging: Paging,
    /// Newest first.
    #[serde(default)]
    pub reverse: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionContextArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// Token budget of the messages, 1 to 100000 (100000).
    #[serde(default)]
    pub tokens: Option<i64>,
    /// Open with the session's summary when one fits 40% of the budget (true).
    #[serde(default)]
    pub summary: Option<bool>,
    /// Recall inside this scope: no messages unless the session is one of its sessions.
    #[serde(default)]
    pub scope: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MessageRangeArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// The first message's seqInSession (messages are numbered from 1 in each session).
    pub from_seq: i64,
    /// The last message's seqInSession (at most 100 messages from from_seq).
    pub to_seq: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListConclusionsArgs {
    #[serde(flatten)]
    pub peer: PeerArgs,
    #[serde(flatten)]
    pub paging: Paging,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueryConclusionsArgs {
    #[serde(flatten)]
    pub peer: PeerArgs,
    /// What to look for, in natural language.
    pub query: String,
    /// Most conclusions returned, 1 to 100 (10).
    #[serde(default)]
    pub top_k: Option<u64>,
    /// More filters, e.g. {"level": ["deductive", "inductive"]}.
    #[serde(default)]
    pub filters: Option<Filters>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateConclusionsArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The observer peer.
    pub peer_id: String,
    /// The peer the conclusions are about.
    pub target_peer_id: String,
    /// The conclusions' contents, 1 to 100.
    pub conclusions: Vec<String>,
    /// The session they were drawn in.
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteConclusionArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The conclusion to delete.
    pub conclusion_id: String,
}

/// Which way a reasoning tree grows from its conclusion.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TreeWay {
    /// The conclusions it was drawn from, and theirs.
    Premises,
    /// The conclusions drawn from it, and from those.
    Consequences,
    /// Both.
    #[default]
    Both,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReasoningTreeArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The conclusion at the root.
    pub conclusion_id: String,
    /// premises, consequences or both (both).
    #[serde(default)]
    pub direction: Option<TreeWay>,
    /// Steps from the root, 1 to 20 (3).
    #[serde(default)]
    pub max_depth: Option<i32>,
    /// Most conclusions each way, 1 to 10000 (200).
    #[serde(default)]
    pub max_nodes: Option<i32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateWorkspaceArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// Any JSON object kept with a new workspace (what it is for, e.g. {"project": "x"}); an
    /// existing workspace keeps its own.
    #[serde(default)]
    pub metadata: Option<Filters>,
}

/// Whose metadata: the session's when session_id is given, else the peer's when peer_id is,
/// else the workspace's.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MetadataOf {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The peer whose metadata (when no session_id is given).
    #[serde(default)]
    pub peer_id: Option<String>,
    /// The session whose metadata (takes precedence over peer_id).
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetMetadataArgs {
    #[serde(flatten)]
    pub of: MetadataOf,
    /// The new metadata, a JSON object: it replaces the old one whole.
    pub metadata: Filters,
}

/// A peer's own settings.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct PeerConfiguration {
    /// Whether this peer's messages are derived from (true when never set).
    #[serde(default, rename = "observeMe", alias = "observe_me")]
    pub observe_me: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreatePeerArgs {
    #[serde(flatten)]
    pub ws: InWorkspace,
    /// The peer: a user or an agent.
    pub peer_id: String,
    /// Settings that replace the peer's (an existing peer keeps its own when omitted).
    #[serde(default)]
    pub configuration: Option<PeerConfiguration>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CloneSessionArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// Copy the messages up to and including this one (all when omitted).
    #[serde(default)]
    pub message_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RemovePeersArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// The peers that leave the session; their messages stay.
    pub peer_ids: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionMessageArgs {
    #[serde(flatten)]
    pub session: SessionArgs,
    /// The message (its id, as search and get_session_messages give it).
    pub message_id: String,
}
