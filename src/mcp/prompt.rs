//! The one prompt: how an agent should use this memory.

use rmcp::ErrorData;
use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};

pub const NAME: &str = "use_memory";

pub fn prompts() -> Vec<Prompt> {
    vec![Prompt::new(
        NAME,
        Some("How to use this memory server: what to read before answering, what to record after."),
        Some(vec![
            PromptArgument::new("peer_id")
                .with_description("The peer (user) you are talking to, if known."),
            PromptArgument::new("workspace_id")
                .with_description("The workspace, when the connection does not fix one."),
        ]),
    )]
}

fn text(peer: Option<&str>, workspace: Option<&str>) -> String {
    let who = peer.map_or("the user".to_owned(), |p| format!("the peer `{p}`"));
    let ws = workspace.map_or(String::new(), |w| {
        format!(" Pass workspace_id \"{w}\" to every tool.")
    });
    format!(
        "You have long-term memory of past conversations through this server's tools.{ws}\n\
         \n\
         1. At the start, recall who you talk to: get_peer_context for {who} (its card and \
         what has been concluded about it).\n\
         2. Before answering anything that may have come up before, search (with \
         include_context: true to read each match inside its surrounding turns). Use \
         message_range with a result's session_id and seq_in_session to read further around it.\n\
         3. For questions that need synthesis across many conversations, ask chat (add \
         reasoning_level \"high\" for harder ones).\n\
         4. Before relying on a conclusion, reasoning_tree shows what it was drawn from.\n\
         5. Record durable facts you learn with create_conclusions, correct the card with \
         set_peer_card, and delete_conclusion what turned out wrong.\n\
         \n\
         Quote what memory says rather than guessing; when memory has nothing, say so. A tool \
         refused with FORBIDDEN means your key may not see that data: do not retry with other \
         ids."
    )
}

pub fn get(name: &str, args: Option<&JsonObject>) -> Result<GetPromptResult, ErrorData> {
    if name != NAME {
        return Err(ErrorData::invalid_params(
            format!("no prompt named {name:?} (there is {NAME:?})"),
            None,
        ));
    }
    let arg = |k: &str| args.and_then(|a| a.get(k)).and_then(|v| v.as_str());
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        text(arg("peer_id"), arg("workspace_id")),
    )])
    .with_description("How to use this memory server"))
}
