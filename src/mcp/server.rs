//! The MCP server: one handler for both transports, its tools routed by rmcp's macros. Each tool
//! is a thin shell over a function of [`super::workspaces`], [`super::peers`],
//! [`super::sessions`], [`super::messages`], [`super::metadata`], [`super::memory`],
//! [`super::conclusions`] or [`super::search`] that takes the call's [`Gate`].

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};

use super::args::*;
use super::gate::Gate;
use super::reply::respond;
use super::{
    conclusions, memory, messages, metadata, peers, prompt, resources, search, sessions, workspaces,
};
use crate::access::Services;

/// The revisions this server speaks, oldest first: the current one (stateless, no `initialize`)
/// and the two before it for older clients.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// What the server tells an agent on connecting.
const INSTRUCTIONS: &str = "Long-term memory of conversations between peers (users and agents), \
    grouped in sessions within a workspace. Search before you answer from memory (search, with \
    include_context for the surrounding turns); ask chat for a reasoned answer about a peer; read \
    get_peer_context for what is known of a peer; record turns with add_messages_to_session and \
    facts with create_conclusions; inspect_workspace and inspect_session give an overview. \
    Resources: \
    peer cards, session transcripts and reasoning trees (resources/templates/list). The prompt `use_memory` explains the workflow.";

/// Where a call's key comes from.
#[derive(Clone)]
pub enum Keys {
    /// Each HTTP request's `Authorization` header (and `X-Honcho-Workspace-ID`).
    Http,
    /// The key (and workspace) the stdio process was started with.
    Fixed {
        authorization: Option<String>,
        workspace: Option<String>,
    },
}

#[derive(Clone)]
pub struct Memory {
    services: Services,
    keys: Keys,
    tools: Arc<ToolRouter<Memory>>,
}

impl Memory {
    pub fn new(services: Services, keys: Keys) -> Self {
        Memory {
            services,
            keys,
            tools: Arc::new(Self::tool_router()),
        }
    }

    /// The gate of one call: its key, by transport.
    fn gate(&self, ctx: &RequestContext<RoleServer>) -> Gate {
        match &self.keys {
            Keys::Http => match ctx.extensions.get::<axum::http::request::Parts>() {
                Some(parts) => Gate::from_headers(&self.services, &parts.headers),
                None => Gate::new(&self.services, None, None),
            },
            Keys::Fixed {
                authorization,
                workspace,
            } => Gate::new(&self.services, authorization.as_deref(), workspace.clone()),
        }
    }
}

/// A tool takes its call's gate as it takes its parameters.
impl FromContextPart<ToolCallContext<'_, Memory>> for Gate {
    fn from_context_part(call: &mut ToolCallContext<'_, Memory>) -> Result<Self, ErrorData> {
        Ok(call.service.gate(&call.request_context))
    }
}

#[tool_router]
impl Memory {
    #[tool(
        description = "Search the conversation memory: hybrid (semantic and full-text) search over \
        messages, best first. Use it before answering anything that may have come up earlier. \
        Scope: no peer_id or session_id = the whole workspace; peer_id = messages that peer wrote \
        (and that peer's conclusions about itself); session_id = one session. include_context \
        returns each match inside its surrounding turns (merged windows), which is usually what \
        you need to understand a match.",
        annotations(read_only_hint = true)
    )]
    async fn search(Parameters(a): Parameters<SearchArgs>, gate: Gate) -> CallToolResult {
        respond(search::search(&gate, a).await)
    }

    #[tool(
        description = "Ask a natural-language question about a peer and get an answer reasoned \
        from its memory (Honcho's dialectic). Use it for questions that need synthesis (\"what \
        does alice prefer for travel?\"); use search for exact past messages. Returns 'None' when \
        memory holds nothing relevant.",
        annotations(read_only_hint = true)
    )]
    async fn chat(Parameters(a): Parameters<ChatArgs>, gate: Gate) -> CallToolResult {
        respond(memory::chat(&gate, a).await)
    }

    #[tool(
        description = "Get a peer card: a short list of biographical facts about a peer (or what \
        peer_id holds about target_peer_id). Use it for a quick summary of who someone is.",
        annotations(read_only_hint = true)
    )]
    async fn get_peer_card(Parameters(a): Parameters<PeerArgs>, gate: Gate) -> CallToolResult {
        respond(memory::get_peer_card(&gate, a).await)
    }

    #[tool(
        description = "Replace a peer card with the facts given. Use it to establish or correct \
        what is known about a peer at a glance."
    )]
    async fn set_peer_card(
        Parameters(a): Parameters<SetPeerCardArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(memory::set_peer_card(&gate, a).await)
    }

    #[tool(
        description = "Get everything known about a peer in one call: its card and its \
        representation (its conclusions by level). Use it at the start of a conversation to \
        recall who you are talking to.",
        annotations(read_only_hint = true)
    )]
    async fn get_peer_context(
        Parameters(a): Parameters<RepresentationArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(memory::get_peer_context(&gate, a).await)
    }

    #[tool(
        description = "Get a peer's representation: the text built from its stored conclusions \
        (optionally of one session only). Use it when you want the conclusions without the card.",
        annotations(read_only_hint = true)
    )]
    async fn get_representation(
        Parameters(a): Parameters<RepresentationArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(memory::get_representation(&gate, a).await)
    }

    #[tool(
        description = "List the workspaces (paginated; admin keys only). Skip it when the \
        connection sets X-Honcho-Workspace-ID or your key is scoped to a workspace: then you \
        already work in one. If none fits, call create_workspace.",
        annotations(read_only_hint = true)
    )]
    async fn list_workspaces(Parameters(a): Parameters<Paging>, gate: Gate) -> CallToolResult {
        respond(workspaces::list_workspaces(&gate, a).await)
    }

    #[tool(description = "Get or create a workspace by id, with metadata saying what it is for \
        (kept only when the workspace is new). Skip it when the connection already names a \
        workspace (X-Honcho-Workspace-ID).")]
    async fn create_workspace(
        Parameters(a): Parameters<CreateWorkspaceArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(workspaces::create_workspace(&gate, a).await)
    }

    #[tool(
        description = "Inspect a workspace at a glance: its metadata and configuration, and \
        the first page of its peers and of its sessions with their totals. Use it to find your \
        way in a workspace you do not know.",
        annotations(read_only_hint = true)
    )]
    async fn inspect_workspace(
        Parameters(a): Parameters<InWorkspace>,
        gate: Gate,
    ) -> CallToolResult {
        respond(workspaces::inspect_workspace(&gate, a).await)
    }

    #[tool(
        description = "Get the metadata of a session (session_id given), else of a peer \
        (peer_id given), else of the workspace.",
        annotations(read_only_hint = true)
    )]
    async fn get_metadata(Parameters(a): Parameters<MetadataOf>, gate: Gate) -> CallToolResult {
        respond(metadata::get_metadata(&gate, a).await)
    }

    #[tool(description = "Replace the metadata of a session (session_id given), else of a peer \
        (peer_id given), else of the workspace: the object given overwrites the old one whole.")]
    async fn set_metadata(
        Parameters(a): Parameters<SetMetadataArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(metadata::set_metadata(&gate, a).await)
    }

    #[tool(description = "Get or create a peer (a user or an agent) by id, optionally with its \
        configuration (observeMe: whether its messages are derived from). Use it to register a \
        new participant.")]
    async fn create_peer(Parameters(a): Parameters<CreatePeerArgs>, gate: Gate) -> CallToolResult {
        respond(peers::create_peer(&gate, a).await)
    }

    #[tool(
        description = "List the workspace's peers (paginated). Use it to discover which users \
        and agents exist.",
        annotations(read_only_hint = true)
    )]
    async fn list_peers(Parameters(a): Parameters<ListArgs>, gate: Gate) -> CallToolResult {
        respond(peers::list_peers(&gate, a).await)
    }

    #[tool(
        description = "Get or create a session by id. Use it before adding peers or messages to \
        a new conversation."
    )]
    async fn create_session(Parameters(a): Parameters<SessionArgs>, gate: Gate) -> CallToolResult {
        respond(sessions::create_session(&gate, a).await)
    }

    #[tool(
        description = "List the workspace's sessions (paginated). Use it to find a conversation \
        when you do not know its id.",
        annotations(read_only_hint = true)
    )]
    async fn list_sessions(Parameters(a): Parameters<ListArgs>, gate: Gate) -> CallToolResult {
        respond(sessions::list_sessions(&gate, a).await)
    }

    #[tool(
        description = "Delete a session with all its messages and memberships. This cannot be \
        undone.",
        annotations(destructive_hint = true)
    )]
    async fn delete_session(Parameters(a): Parameters<SessionArgs>, gate: Gate) -> CallToolResult {
        respond(sessions::delete_session(&gate, a).await)
    }

    #[tool(description = "Clone a session under a new id, with its peers and its messages (up \
        to and including message_id, or all). Use it to fork a conversation and explore another \
        branch; returns the new session.")]
    async fn clone_session(
        Parameters(a): Parameters<CloneSessionArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(sessions::clone_session(&gate, a).await)
    }

    #[tool(description = "Remove peers from a session: they stop being members (their \
        messages stay).")]
    async fn remove_peers_from_session(
        Parameters(a): Parameters<RemovePeersArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(sessions::remove_peers_from_session(&gate, a).await)
    }

    #[tool(
        description = "Get the peers taking part in a session, with their settings there \
        (observe_me, observe_others; null when not set). Use it to see who is in a conversation.",
        annotations(read_only_hint = true)
    )]
    async fn get_session_peers(
        Parameters(a): Parameters<SessionArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(sessions::get_session_peers(&gate, a).await)
    }

    #[tool(
        description = "Inspect a session at a glance: its metadata, its peers, how many \
        messages it holds and its summaries (short and long, null until written).",
        annotations(read_only_hint = true)
    )]
    async fn inspect_session(Parameters(a): Parameters<SessionArgs>, gate: Gate) -> CallToolResult {
        respond(sessions::inspect_session(&gate, a).await)
    }

    #[tool(description = "Add peers to a session (creating the session and peers when missing). \
        Use it to bring participants into a conversation.")]
    async fn add_peers_to_session(
        Parameters(a): Parameters<AddPeersArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(sessions::add_peers_to_session(&gate, a).await)
    }

    #[tool(description = "Record conversation turns: append messages (each with its author's \
        peer_id) to a session, creating the session and peers when missing. Use it after each \
        exchange worth remembering; what is recorded is searchable at once and feeds the deriver.")]
    async fn add_messages_to_session(
        Parameters(a): Parameters<AddMessagesArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(messages::add_messages_to_session(&gate, a).await)
    }

    #[tool(
        description = "Read a session's messages a page at a time, oldest first (reverse for \
        newest first), optionally filtered. Use it to read a conversation's history.",
        annotations(read_only_hint = true)
    )]
    async fn get_session_messages(
        Parameters(a): Parameters<SessionMessagesArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(messages::get_session_messages(&gate, a).await)
    }

    #[tool(
        description = "Get one message of a session by id (as search and get_session_messages \
        return it). Use it when you know the id and need the exact record.",
        annotations(read_only_hint = true)
    )]
    async fn get_session_message(
        Parameters(a): Parameters<SessionMessageArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(messages::get_session_message(&gate, a).await)
    }

    #[tool(
        description = "Get a session's context within a token budget: its summary (when one \
        is written and fits) and the newest messages after it, oldest first. Use it to build \
        the context window for your next turn in that conversation.",
        annotations(read_only_hint = true)
    )]
    async fn get_session_context(
        Parameters(a): Parameters<SessionContextArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(messages::get_session_context(&gate, a).await)
    }

    #[tool(
        description = "Read the messages of a session from one seqInSession to another (at most \
        100). Use it to read exactly what was said around a message you found (search results \
        carry seq_in_session).",
        annotations(read_only_hint = true)
    )]
    async fn message_range(
        Parameters(a): Parameters<MessageRangeArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(messages::message_range(&gate, a).await)
    }

    #[tool(
        description = "List the conclusions (facts derived from conversations) that peer_id holds \
        about target_peer_id (itself when omitted), newest first, paginated. Use it to see what \
        has been learned.",
        annotations(read_only_hint = true)
    )]
    async fn list_conclusions(
        Parameters(a): Parameters<ListConclusionsArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(conclusions::list_conclusions(&gate, a).await)
    }

    #[tool(
        description = "Semantic search over the conclusions peer_id holds about target_peer_id \
        (itself when omitted). More targeted than list_conclusions; the ids it returns work with \
        delete_conclusion and reasoning_tree.",
        annotations(read_only_hint = true)
    )]
    async fn query_conclusions(
        Parameters(a): Parameters<QueryConclusionsArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(conclusions::query_conclusions(&gate, a).await)
    }

    #[tool(
        description = "Record conclusions (facts) that peer_id holds about target_peer_id, in one \
        all-or-nothing batch. Use it to store knowledge that did not come from a conversation."
    )]
    async fn create_conclusions(
        Parameters(a): Parameters<CreateConclusionsArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(conclusions::create_conclusions(&gate, a).await)
    }

    #[tool(
        description = "Delete a conclusion by id (find it with query_conclusions or \
        list_conclusions first). Use it to remove wrong or outdated knowledge.",
        annotations(destructive_hint = true)
    )]
    async fn delete_conclusion(
        Parameters(a): Parameters<DeleteConclusionArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(conclusions::delete_conclusion(&gate, a).await)
    }

    #[tool(
        description = "Show why a conclusion is held and what follows from it: the conclusions it \
        was drawn from (premises, negative depths) and those drawn from it (consequences, \
        positive depths), to a depth, with the citations between them. Use it to check or \
        explain a conclusion before relying on it.",
        annotations(read_only_hint = true)
    )]
    async fn reasoning_tree(
        Parameters(a): Parameters<ReasoningTreeArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(conclusions::reasoning_tree(&gate, a).await)
    }

    #[tool(
        description = "Get the deriver's queue for the workspace: work units pending, in progress \
        and failed. Use it to tell whether new messages have been turned into conclusions yet.",
        annotations(read_only_hint = true)
    )]
    async fn get_queue_status(
        Parameters(a): Parameters<InWorkspace>,
        gate: Gate,
    ) -> CallToolResult {
        respond(memory::get_queue_status(&gate, a).await)
    }

    #[tool(
        description = "Schedule a dream: memory consolidation of what a peer knows about a peer \
        (itself when target_peer_id is omitted). It merges duplicate conclusions, marks \
        contradictions and draws patterns across sessions. Use it after long conversations."
    )]
    async fn schedule_dream(
        Parameters(a): Parameters<ScheduleDreamArgs>,
        gate: Gate,
    ) -> CallToolResult {
        respond(memory::schedule_dream(&gate, a).await)
    }
}

#[tool_handler(router = self.tools)]
impl ServerHandler for Memory {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new(
            "honcho-graphql",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let gate = self.gate(&context);
        Ok(resources::read(&gate, &request.uri).await?.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompt::prompts()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(prompt::get(&request.name, request.arguments.as_ref())?.into())
    }

    /// Routes the call, counted and timed in the same metrics as GraphQL operations (operation
    /// `mcp.<tool>`).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = format!("mcp.{}", request.name);
        let started = Instant::now();
        let tcc = ToolCallContext::new(self, request, context);
        let outcome = self.tools.call(tcc).await;
        let ok = matches!(&outcome, Ok(CallToolResponse::Complete(r)) if r.is_error != Some(true));
        crate::metrics::observe(Some(&name), ok, started.elapsed());
        outcome
    }
}
