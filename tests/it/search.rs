//! Hybrid search and interleaved context snippets, through GraphQL.

use std::sync::Arc;

use honcho_graphql::embed::{EmbedError, Embedder};
use honcho_graphql::store::Store;
use honcho_graphql::store::message::Message;
use honcho_graphql::store::search::{NameRule, SearchScope};
use honcho_graphql::store::search_keys::SearchKeys;
use serde_json::{Value, json};

use crate::harness::TestApp;

const CREATE: &str = "mutation($s: ID!, $m: [MessageInput!]!) { createMessages(workspaceId: \"ws\", sessionId: $s, messages: $m) { id } }";

const HITS: &str = "__typename
  ... on MessageHits { results { id seqInSession sessionId peerId content } }
  ... on SnippetHits {
    results { id seqInSession sessionId peerId content }
    snippets { sessionId matched { id seqInSession } context { id seqInSession peerId } }
  }";

fn session_search() -> String {
    format!(
        "query($s: ID!, $q: String!, $f: JSON, $limit: Int, $ctx: Boolean, $w: Int) {{
           workspace(id: \"ws\") {{ session(id: $s) {{
             search(query: $q, filters: $f, limit: $limit, includeContext: $ctx, contextWindow: $w) {{ {HITS} }}
           }} }} }}"
    )
}

fn workspace_search() -> String {
    format!(
        "query($q: String!, $f: JSON, $limit: Int, $ctx: Boolean, $w: Int) {{
           workspace(id: \"ws\") {{
             search(query: $q, filters: $f, limit: $limit, includeContext: $ctx, contextWindow: $w) {{ {HITS} }}
           }} }}"
    )
}

fn peer_search() -> String {
    format!(
        "query($p: ID!, $q: String!, $ctx: Boolean, $w: Int) {{
           workspace(id: \"ws\") {{ peer(id: $p) {{
             search(query: $q, includeContext: $ctx, contextWindow: $w) {{ {HITS} }}
           }} }} }}"
    )
}

/// `store`'s search of `scope` for `q`, unfiltered, `limit` at most.
async fn search_all(store: &Store, scope: SearchScope<'_>, q: &str, limit: u64) -> Vec<Message> {
    store
        .search(scope, q, &Value::Null, limit, SearchKeys::WithConclusions)
        .await
        .unwrap()
}

/// The store with a named speaker's turns weighed `1 + weight` instead of `1 + SPEAKER_WEIGHT`.
fn with_speaker_weight(store: &Store, weight: f64) -> Store {
    store.clone().with_names(NameRule {
        speaker_weight: weight,
        ..NameRule::default()
    })
}

/// Messages by alice in `session`: `content(i)` for each i of 1..=n.
async fn alice_writes(app: &TestApp, session: &str, n: i64, content: impl Fn(i64) -> String) {
    let contents: Vec<String> = (1..=n).map(content).collect();
    let m: Vec<(&str, &str)> = contents.iter().map(|c| ("alice", c.as_str())).collect();
    write(app, session, &m).await;
}

async fn write(app: &TestApp, session: &str, messages: &[(&str, &str)]) {
    let m: Vec<Value> = messages
        .iter()
        .map(|(peer, content)| json!({"peerId": peer, "content": content}))
        .collect();
    app.ok(CREATE, json!({"s": session, "m": m})).await;
}

/// `n` messages in `session`; those at `matches` mention a zebra, the others do not.
async fn conversation(app: &TestApp, session: &str, n: i64, matches: &[i64]) {
    let contents: Vec<String> = (1..=n)
        .map(|i| {
            if matches.contains(&i) {
                format!("we saw a zebra at step {i}")
            } else {
                format!("filler line {i} about the weather")
            }
        })
        .collect();
    let peers = ["alice", "bob"];
    let m: Vec<(&str, &str)> = contents
        .iter()
        .enumerate()
        .map(|(i, c)| (peers[i % 2], c.as_str()))
        .collect();
    write(app, session, &m).await;
}

fn seqs(list: &Value) -> Vec<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|m| m["seqInSession"].as_i64().unwrap())
        .collect()
}

fn sorted(mut v: Vec<i64>) -> Vec<i64> {
    v.sort();
    v
}

/// (sessionId, matched seqs, context seqs) of each snippet, checking on the way that context is
/// in seq order, gapless and contains every matched message.
type Snippet = (String, Vec<i64>, Vec<i64>);

fn snippets(hits: &Value) -> Vec<Snippet> {
    hits["snippets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let matched = seqs(&s["matched"]);
            let context = seqs(&s["context"]);
            assert!(
                context.windows(2).all(|w| w[1] == w[0] + 1),
                "context is in seq order without gaps: {context:?}"
            );
            assert!(
                matched.windows(2).all(|w| w[0] < w[1]),
                "matched in seq order: {matched:?}"
            );
            let ctx_ids: Vec<&Value> = s["context"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| &m["id"])
                .collect();
            for m in s["matched"].as_array().unwrap() {
                assert!(ctx_ids.contains(&&m["id"]), "matched ⊆ context: {s}");
            }
            (
                s["sessionId"].as_str().unwrap().to_owned(),
                matched,
                context,
            )
        })
        .collect()
}

/// One snippet of session "chat" that matched `matched` and holds `context`.
fn chat_snippet(matched: &[i64], context: std::ops::RangeInclusive<i64>) -> Snippet {
    ("chat".to_owned(), matched.to_vec(), context.collect())
}

/// The snippets a search for "zebra" with `window` finds in session "chat" of `app`.
async fn zebra_snippets(app: &TestApp, window: i64) -> Vec<Snippet> {
    snippets(&in_session(app, "zebra", true, window).await)
}

/// A new app whose session "chat" has `n` turns, "zebra" in `matches`.
async fn zebra_chat(n: i64, matches: &[i64]) -> TestApp {
    let app = TestApp::new().await;
    conversation(&app, "chat", n, matches).await;
    app
}

async fn in_session(app: &TestApp, q: &str, ctx: bool, w: i64) -> Value {
    let d = app
        .ok(
            &session_search(),
            json!({"s": "chat", "q": q, "ctx": ctx, "w": w}),
        )
        .await;
    d["workspace"]["session"]["search"].clone()
}

#[tokio::test]
async fn default_search_returns_message_hits() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 20, &[5, 12]).await;
    let d = app
        .ok(&session_search(), json!({"s": "chat", "q": "zebra"}))
        .await;
    let hits = &d["workspace"]["session"]["search"];
    assert_eq!(hits["__typename"], "MessageHits");
    assert_eq!(sorted(seqs(&hits["results"])), [5, 12]);
    assert!(hits.get("snippets").is_none());
    // An explicit null is the default too (`includeContext: Boolean = false`).
    let d = app
        .ok(
            &session_search(),
            json!({"s": "chat", "q": "zebra", "ctx": null, "limit": null, "w": null}),
        )
        .await;
    assert_eq!(
        d["workspace"]["session"]["search"]["__typename"],
        "MessageHits"
    );
}

#[tokio::test]
async fn include_context_returns_snippet_hits_with_results_and_snippets() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 20, &[5, 12]).await;
    let hits = in_session(&app, "zebra", true, 2).await;
    assert_eq!(hits["__typename"], "SnippetHits");
    assert_eq!(sorted(seqs(&hits["results"])), [5, 12]);
    let mut s = snippets(&hits);
    s.sort_by_key(|s| s.1[0]);
    assert_eq!(
        s,
        [
            ("chat".to_owned(), vec![5], vec![3, 4, 5, 6, 7]),
            ("chat".to_owned(), vec![12], vec![10, 11, 12, 13, 14]),
        ]
    );
    // The context is the conversation: both peers, whoever matched.
    let peers: Vec<&str> = hits["snippets"][0]["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["peerId"].as_str().unwrap())
        .collect();
    assert!(peers.contains(&"alice") && peers.contains(&"bob"));
}

/// Six turns each of Caroline and Bob holding none of the questions' words, so that each
/// speaker's name is in half the turns.
fn small_talk_of_caroline_and_bob() -> Vec<(&'static str, &'static str)> {
    (0..6)
        .flat_map(|_| {
            [
                ("Caroline", "the weather is nice today"),
                ("Bob", "the weather is nice today"),
            ]
        })
        .collect()
}

#[tokio::test]
async fn a_question_naming_a_speaker_ranks_their_turn_above_the_other_speakers_on_the_same_topic() {
    let app = TestApp::new().await;
    // Each speaker's name is in half the turns (a turn's search text holds its author), so it
    // weighs little; Bob's turn matches more of the question's other words than Caroline's.
    // Without the speaker's weight Bob's turn comes first for both questions.
    let mut turns = small_talk_of_caroline_and_bob();
    turns.push(("Caroline", "I made a bowl in my pottery class"));
    turns.push((
        "Bob",
        "pottery is great, I make pottery every day, pottery forever",
    ));
    write(&app, "chat", &turns).await;
    let first = |hits: Value| hits["results"][0]["peerId"].as_str().unwrap().to_owned();
    let q = "What did Caroline make in pottery?";
    assert_eq!(first(in_session(&app, q, false, 0).await), "Caroline");
    let q = "What did Bob make in pottery?";
    assert_eq!(first(in_session(&app, q, false, 0).await), "Bob");
}

#[tokio::test]
async fn a_named_speakers_fourth_turn_by_its_words_outranks_the_other_speakers_first() {
    let app = TestApp::new().await;
    // Bob's three turns hold three of the question's words each; Caroline's holds one and her
    // name, which is in half the turns: by the words alone hers is the fourth. Weighed four
    // times (1/5 · 4 against 1/2) it comes first; weighed double, as before 2026-12-07, it
    // did not (1/5 · 2).
    let mut turns = small_talk_of_caroline_and_bob();
    turns.push(("Bob", "I make mugs in my pottery class"));
    turns.push(("Bob", "our pottery class will make vases next"));
    turns.push(("Bob", "we make plates in pottery class"));
    turns.push(("Caroline", "a bowl, from pottery"));
    write(&app, "chat", &turns).await;
    let hers = turns.len() as i64;
    let q = "What did Caroline make in pottery class?";
    let order =
        |found: Vec<Message>| -> Vec<i64> { found.iter().map(|m| m.seq_in_session).collect() };
    let scope = SearchScope::Session("ws", "chat");
    let by_words = with_speaker_weight(&app.store, 0.0);
    let alone = order(search_all(&by_words, scope, q, 5).await);
    assert_eq!(alone[3], hers, "by its words hers is the fourth: {alone:?}");
    let weighed_double = with_speaker_weight(&app.store, 1.0);
    let before = order(search_all(&weighed_double, scope, q, 5).await);
    assert_ne!(before[0], hers, "{before:?}");
    let found = order(search_all(&app.store, scope, q, 5).await);
    assert_eq!(found[0], hers, "{found:?}");
}

#[tokio::test]
async fn among_many_peers_a_question_naming_one_finds_their_turn_past_the_others_on_the_topic() {
    let app = TestApp::with_embedder().await;
    // Caroline's answer sits in a workspace where 24 turns by three other peers ask nearly the
    // question itself: without her name both legs rank those 24 first, past the 20 candidates
    // the speaker weight can raise. Among more than two peers the legs keep the name.
    write(
        &app,
        "chat",
        &[
            ("caroline", "I made a bowl in my pottery class"),
            ("melanie", "That's lovely!"),
        ],
    )
    .await;
    let others = ["dave", "erin", "frank"];
    let mut asked: Vec<(&str, String)> = Vec::new();
    for i in 0..24 {
        let text = format!("What did you make in pottery class on day {i}?");
        asked.push((others[i % 3], text));
    }
    let asked: Vec<(&str, &str)> = asked.iter().map(|(p, t)| (*p, t.as_str())).collect();
    write(&app, "others", &asked).await;
    let found = search_all(
        &app.store,
        SearchScope::Workspace("ws"),
        "What did Caroline make in pottery class?",
        10,
    )
    .await;
    let authors: Vec<&str> = found.iter().map(|m| m.peer_name.as_str()).collect();
    assert_eq!(authors.first(), Some(&"caroline"), "{authors:?}");
    // A session's scope (no members joined: two-person) and a peer's find it too.
    let q = "What did Caroline make in pottery class?";
    for scope in [
        SearchScope::Session("ws", "chat"),
        SearchScope::Peer("ws", "caroline"),
    ] {
        let found = search_all(&app.store, scope, q, 10).await;
        assert_eq!(found[0].peer_name, "caroline", "{scope:?}");
    }
}

#[tokio::test]
async fn a_turn_holding_only_the_speakers_name_no_longer_outranks_the_nearest_turn() {
    let app = TestApp::with_embedder().await;
    // The question has three lexemes (colour, carolin, ador); every Caroline turn holds one
    // (her name), and the short ones hold it with the best BM25. The answer shares no word
    // with the question: only the vector leg finds it, first. Counted whole, the best of the
    // name-only text hits would take the first place from it.
    let mut turns: Vec<(&str, &str)> = vec![("melanie", "How was your weekend?")];
    for short in [
        "Busy.", "Yes.", "Sure.", "Maybe.", "Okay.", "Thanks.", "Right.", "Fine.",
    ] {
        turns.push(("caroline", short));
    }
    turns.push(("melanie", "Any plans for the new flat?"));
    turns.push((
        "caroline",
        "My favorite shade has always been a deep ocean blue, ever since I was little",
    ));
    write(&app, "chat", &turns).await;
    let answer = turns.len() as i64;
    let d = app
        .ok(
            &session_search(),
            json!({"s": "chat", "q": "Which colours does Caroline adore?", "limit": 20}),
        )
        .await;
    let found = seqs(&d["workspace"]["session"]["search"]["results"]);
    assert_eq!(found[0], answer, "{found:?}");
    // Under the share floor a text hit still fills the results: every turn is there.
    assert_eq!(sorted(found), (1..=answer).collect::<Vec<_>>());
}

/// Caroline's chit-chat, full of her name, and then her answer about a greyhound, which shares
/// no word with "Would Caroline likely be considered an animal lover?" but her name.
fn caroline_and_the_greyhound() -> Vec<(&'static str, &'static str)> {
    let mut turns: Vec<(&str, &str)> = Vec::new();
    for (mel, caro) in [
        (
            "Hey Caroline, long time!",
            "Hi Melanie! Caroline here, back from the trip.",
        ),
        (
            "How was it?",
            "Honestly, it was lovely. I'm Caroline the tourist now, haha.",
        ),
        (
            "Did you get any sleep?",
            "Not much, but that's me, Caroline never sleeps.",
        ),
        ("Ha, typical.", "I know, I know."),
    ] {
        turns.push(("melanie", mel));
        turns.push(("caroline", caro));
    }
    turns.push(("melanie", "Anything new at home?"));
    turns.push((
        "caroline",
        "I adopted a rescue greyhound last month, she sleeps on my bed every night.",
    ));
    turns
}

#[tokio::test]
async fn a_question_naming_a_speaker_finds_the_turn_that_answers_it_not_the_turn_nearest_the_name()
{
    let app = TestApp::with_embedder().await;
    // Every turn is embedded with its speaker's id, so a question naming Caroline lies near each
    // of her turns; the answer shares no word with the question but her name. Embedded with the
    // name, the question's nearest turns are her chit-chat; without it, the greyhound.
    let turns = caroline_and_the_greyhound();
    write(&app, "chat", &turns).await;
    let answer = turns.len() as i64;
    let question = "Would Caroline likely be considered an animal lover?";
    let vars = json!({"s": "chat", "q": question, "limit": 3});
    let d = app.ok(&session_search(), vars).await;
    let found = seqs(&d["workspace"]["session"]["search"]["results"]);
    assert_eq!(found[0], answer, "{found:?}");

    // The server before: the same question embedded with the name.
    let before = app.store.clone().with_names(NameRule {
        in_query: true,
        ..NameRule::default()
    });
    let found: Vec<i64> = search_all(&before, SearchScope::Session("ws", "chat"), question, 3)
        .await
        .iter()
        .map(|m| m.seq_in_session)
        .collect();
    assert_ne!(found[0], answer, "{found:?}");
}

#[tokio::test]
async fn among_many_peers_a_question_naming_a_peer_whose_name_is_common_is_read_without_it() {
    let app = TestApp::with_embedder().await;
    // The conversation above beside one of two more peers: four in the workspace, and
    // Caroline's name in 6 of its 16 messages (hers and a greeting), well over
    // NAMES_OUT_MIN_SHARE. The legs read the question without it, as in a conversation of two.
    let turns = caroline_and_the_greyhound();
    write(&app, "chat", &turns).await;
    write(
        &app,
        "other",
        &[
            ("dave", "The bus was late again this morning."),
            ("erin", "Mine too, I walked in the rain."),
            ("dave", "Did the meeting move to Thursday?"),
            ("erin", "Yes, at ten, in the small room."),
            ("dave", "I will bring the slides."),
            ("erin", "Great, see you there."),
        ],
    )
    .await;
    let answer = turns.len() as i64;
    let question = "Would Caroline likely be considered an animal lover?";
    let first = |found: Vec<Message>| (found[0].session_name.clone(), found[0].seq_in_session);
    let scope = SearchScope::Workspace("ws");
    let found = first(search_all(&app.store, scope, question, 3).await);
    assert_eq!(found, ("chat".to_owned(), answer));
    // Counting the peers alone, as before the share was read, the legs keep her name.
    let by_count = app.store.clone().with_names(NameRule {
        out_min_share: f64::INFINITY,
        ..NameRule::default()
    });
    let before = first(search_all(&by_count, scope, question, 3).await);
    assert_ne!(before, ("chat".to_owned(), answer));
}

#[tokio::test]
async fn beside_the_vector_leg_a_substring_match_counts_whole_whatever_lexemes_it_holds() {
    let app = TestApp::with_embedder().await;
    // "e_c" has the lexemes e and c; "snake_case" holds neither, only the query as a substring.
    // The other turns look like the query to the model and hold nothing of it as text.
    write(
        &app,
        "chat",
        &[
            ("bob", "EC"),
            ("alice", "ec2"),
            ("bob", "ecce"),
            ("alice", "we rename it to snake_case tomorrow"),
            ("bob", "Eee cee"),
        ],
    )
    .await;
    let hits = in_session(&app, "e_c", false, 2).await;
    assert_eq!(seqs(&hits["results"])[0], 4, "{hits}");
}

/// Vectors on which the bit index's Hamming order and cosine disagree: the query and every other
/// text have all their sign bits set ("weather" turns all but the last), a "river" turn only its
/// first, yet the "river" turn is the query's nearest by cosine (0.999) after the query's own.
struct SignsDisagree;

#[async_trait::async_trait]
impl Embedder for SignsDisagree {
    fn dims(&self) -> usize {
        384
    }
    fn model_id(&self) -> &str {
        "signs-disagree"
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                // A message is embedded after the turn before it: its own text is the last line.
                let own = t.lines().last().unwrap_or_default();
                let mut v = vec![0.001f32; 384];
                if own.contains("river") {
                    v.fill(-0.001);
                    v[0] = 1.0;
                } else if let Some(n) = own.split("weather ").nth(1) {
                    v[2 + n.trim().parse::<usize>().unwrap()] = 1.0;
                    v[383] = -0.001;
                } else {
                    v[0] = 1.0;
                }
                v
            })
            .collect())
    }
}

#[tokio::test]
async fn a_turn_the_bit_index_never_reads_is_found_beside_a_text_hit_in_its_session() {
    use honcho_graphql::store::search::vector_candidates;

    let app = signs_disagree_app().await;
    // More "weather" turns than the index's candidates for three results, every one nearer the
    // query's sign bits than the "river" turn, which shares no word with the query. The turn
    // before it is the only text hit.
    let weather: Vec<String> = (0..vector_candidates(3) + 2)
        .map(|n| format!("the weather {n}"))
        .collect();
    let mut turns = vec![
        ("alice", "what about the zebra"),
        ("bob", "we walked along the river"),
    ];
    turns.extend(weather.iter().map(|w| ("alice", w.as_str())));
    write(&app, "chat", &turns).await;
    let found = search_all(&app.store, SearchScope::Workspace("ws"), "zebra", 3).await;
    let contents: Vec<&str> = found.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        contents[..2],
        ["what about the zebra", "we walked along the river"],
        "{contents:?}"
    );
}

/// A server whose store embeds with [`SignsDisagree`].
async fn signs_disagree_app() -> TestApp {
    TestApp::embedding_with(Arc::new(SignsDisagree)).await
}

#[tokio::test]
async fn a_turn_the_bit_index_never_reads_and_no_text_hit_is_near_is_found_through_its_session_and_block()
 {
    use honcho_graphql::store::search::{NEAREST_BLOCKS, NEAREST_SESSIONS, vector_candidates};

    let app = signs_disagree_app().await;
    // More sessions of "weather" turns than the sessions and the blocks a search reads, and more
    // of their turns than the index's candidates for three results: the "river" turn is reached
    // neither by the bit index nor by the window of a text hit (nothing holds "zebra"), only by
    // its session's sum and then its block's.
    let sessions = NEAREST_BLOCKS.max(NEAREST_SESSIONS) + 2;
    let per_session = vector_candidates(3) / sessions + 1;
    for s in 0..sessions {
        let weather: Vec<String> = (0..per_session)
            .map(|n| format!("the weather {}", s * per_session + n))
            .collect();
        let turns: Vec<(&str, &str)> = weather.iter().map(|w| ("alice", w.as_str())).collect();
        write(&app, &format!("weather-{s}"), &turns).await;
    }
    write(&app, "walk", &[("bob", "we walked along the river")]).await;
    let found = search_all(&app.store, SearchScope::Workspace("ws"), "zebra", 3).await;
    assert_eq!(found[0].content, "we walked along the river", "{found:?}");
}

/// Blocks whose stored sum or count differs from the messages' (0: `message_blocks` is exact).
const BLOCKS_OFF: &str = "SELECT count(*) FROM message_blocks b FULL JOIN (
      SELECT workspace_name, session_name, seq_in_session / 32 AS block, count(*)::int AS n,
             sum(embedding) AS s
      FROM messages WHERE embedding IS NOT NULL GROUP BY 1, 2, 3) r
    USING (workspace_name, session_name, block)
    WHERE b.vectors IS DISTINCT FROM r.n OR b.vector_sum IS NULL OR r.s IS NULL
       OR (b.vector_sum <-> r.s) > 1e-4";

/// Sessions whose stored sum or count differs from the messages' (0: `message_session_sums` is
/// exact).
const SESSIONS_OFF: &str = "SELECT count(*) FROM message_session_sums b FULL JOIN (
      SELECT workspace_name, session_name, count(*)::int AS n, sum(embedding) AS s
      FROM messages WHERE embedding IS NOT NULL GROUP BY 1, 2) r
    USING (workspace_name, session_name)
    WHERE b.vectors IS DISTINCT FROM r.n OR b.vector_sum IS NULL OR r.s IS NULL
       OR (b.vector_sum <-> r.s) > 1e-4";

#[tokio::test]
async fn block_and_session_sums_follow_inserts_vector_writes_deletes_and_session_cascades() {
    use sea_orm::ConnectionTrait;

    let app = signs_disagree_app().await;
    alice_writes(&app, "long", 40, |i| format!("the weather {i}")).await;
    alice_writes(&app, "short", 5, |i| format!("the weather {}", 100 + i)).await;
    let blocks = "SELECT count(*) FROM message_blocks";
    // "long": turns 1-31 and 32-40; "short": one block.
    assert_eq!(app.sql_i64(blocks).await, 3);
    assert_eq!(app.sql_i64(BLOCKS_OFF).await, 0);
    let sessions = "SELECT count(*) FROM message_session_sums";
    assert_eq!(app.sql_i64(sessions).await, 2);
    assert_eq!(app.sql_i64(SESSIONS_OFF).await, 0);

    let db = app.store.db();
    for (write, left, sessions_left) in [
        // A vector written again elsewhere, and one emptied.
        (
            "UPDATE messages SET embedding = (SELECT embedding FROM messages WHERE session_name = 'short' AND seq_in_session = 1)
             WHERE session_name = 'long' AND seq_in_session = 3",
            3,
            2,
        ),
        (
            "UPDATE messages SET embedding = NULL WHERE session_name = 'long' AND seq_in_session = 4",
            3,
            2,
        ),
        // A write that changes no vector.
        ("UPDATE messages SET metadata = '{\"k\": 1}'", 3, 2),
        // The block of turns 32-40 emptied, then a whole session by cascade.
        (
            "DELETE FROM messages WHERE session_name = 'long' AND seq_in_session >= 32",
            2,
            2,
        ),
        ("DELETE FROM sessions WHERE name = 'short'", 1, 1),
    ] {
        db.execute_unprepared(write).await.unwrap();
        assert_eq!(app.sql_i64(blocks).await, left, "{write}");
        assert_eq!(app.sql_i64(BLOCKS_OFF).await, 0, "{write}");
        assert_eq!(app.sql_i64(sessions).await, sessions_left, "{write}");
        assert_eq!(app.sql_i64(SESSIONS_OFF).await, 0, "{write}");
    }
}

#[tokio::test]
async fn the_session_sums_migration_sums_the_vectors_written_before_it_and_goes_down_to_blocks_alone()
 {
    use migration::{Migrator, MigratorTrait};
    use sea_orm::ConnectionTrait;

    let app = signs_disagree_app().await;
    let db = app.store.db();
    Migrator::down(
        db,
        Some(crate::migrations::steps_down_through(
            "_000300_message_session_sums",
        )),
    )
    .await
    .unwrap();
    alice_writes(&app, "before", 35, |i| format!("the weather {i}")).await;
    assert_eq!(app.sql_i64(BLOCKS_OFF).await, 0, "the blocks alone kept");
    Migrator::up(db, None).await.unwrap();
    assert_eq!(
        app.sql_i64("SELECT count(*) FROM message_session_sums")
            .await,
        1
    );
    assert_eq!(app.sql_i64(SESSIONS_OFF).await, 0);
    alice_writes(&app, "after", 3, |i| format!("the weather {}", 200 + i)).await;
    db.execute_unprepared(
        "DELETE FROM messages WHERE session_name = 'before' AND seq_in_session < 3",
    )
    .await
    .unwrap();
    assert_eq!(app.sql_i64(SESSIONS_OFF).await, 0);
    assert_eq!(app.sql_i64(BLOCKS_OFF).await, 0);
}

#[tokio::test]
async fn matches_at_5_and_7_merge_into_one_snippet_spanning_3_to_9() {
    let app = zebra_chat(20, &[5, 7]).await;
    assert_eq!(
        zebra_snippets(&app, 2).await,
        [chat_snippet(&[5, 7], 3..=9)]
    );
}

#[tokio::test]
async fn matches_at_5_and_12_stay_apart() {
    let app = zebra_chat(20, &[5, 12]).await;
    let mut s = zebra_snippets(&app, 2).await;
    s.sort_by_key(|s| s.1[0]); // equal matches: their order is the tie's
    assert_eq!(s, [chat_snippet(&[5], 3..=7), chat_snippet(&[12], 10..=14)]);
}

#[tokio::test]
async fn touching_windows_of_5_and_10_merge() {
    let app = zebra_chat(20, &[5, 10]).await;
    // w=2: [3,7] and [8,12] touch, so they are one snippet.
    assert_eq!(
        zebra_snippets(&app, 2).await,
        [chat_snippet(&[5, 10], 3..=12)]
    );
    // w=1: [4,6] and [9,11] leave 7 and 8 out: two snippets.
    assert_eq!(zebra_snippets(&app, 1).await.len(), 2);
}

#[tokio::test]
async fn context_window_zero_gives_the_matches_as_context() {
    let app = zebra_chat(20, &[5, 6, 12]).await;
    app.take_statements();
    let mut s = zebra_snippets(&app, 0).await;
    s.sort_by_key(|s| s.1[0]);
    // Adjacent matches still merge.
    assert_eq!(
        s,
        [chat_snippet(&[5, 6], 5..=6), chat_snippet(&[12], 12..=12)]
    );
    assert_eq!(
        app.take_statements(),
        2,
        "workspace with its session (one statement), search: no context query for window 0"
    );
}

#[tokio::test]
async fn windows_start_at_the_first_message_and_end_at_the_last() {
    let app = zebra_chat(6, &[1, 6]).await;
    assert_eq!(
        zebra_snippets(&app, 10).await,
        [chat_snippet(&[1, 6], 1..=6)]
    );
}

#[tokio::test]
async fn snippets_are_ordered_by_the_rank_of_their_best_match() {
    let app = TestApp::new().await;
    alice_writes(&app, "chat", 20, |i| match i {
        3 => "a zebra".to_owned(),
        15 => "zebra zebra zebra, nothing but zebra".to_owned(),
        i => format!("filler line {i}"),
    })
    .await;
    let hits = in_session(&app, "zebra", true, 2).await;
    assert_eq!(
        seqs(&hits["results"]),
        [15, 3],
        "ts_rank: more zebras first"
    );
    let s = snippets(&hits);
    assert_eq!(
        s.iter().map(|s| s.1.clone()).collect::<Vec<_>>(),
        [vec![15], vec![3]],
        "snippets follow the results, not seq order"
    );
}

#[tokio::test]
async fn context_window_out_of_range_is_bad_user_input() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 5, &[2]).await;
    for w in [11, -1] {
        let (code, msg) = app
            .err(
                &session_search(),
                json!({"s": "chat", "q": "zebra", "ctx": true, "w": w}),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "contextWindow {w}");
        assert!(msg.contains("contextWindow"), "{msg}");
    }
    let hits = in_session(&app, "zebra", true, 10).await;
    assert_eq!(hits["__typename"], "SnippetHits");
}

#[tokio::test]
async fn limit_out_of_range_is_bad_user_input() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 30, &(1..=15).collect::<Vec<_>>()).await;
    for limit in [0, 101, -3] {
        let (code, msg) = app
            .err(
                &session_search(),
                json!({"s": "chat", "q": "zebra", "limit": limit}),
            )
            .await;
        assert_eq!(code, "BAD_USER_INPUT", "limit {limit}");
        assert!(msg.contains("limit"), "{msg}");
    }
    let count = |d: Value| {
        d["workspace"]["session"]["search"]["results"]
            .as_array()
            .unwrap()
            .len()
    };
    let d = app
        .ok(&session_search(), json!({"s": "chat", "q": "zebra"}))
        .await;
    assert_eq!(count(d), 10, "default limit 10");
    for (limit, n) in [(1, 1), (3, 3), (100, 15)] {
        let d = app
            .ok(
                &session_search(),
                json!({"s": "chat", "q": "zebra", "limit": limit}),
            )
            .await;
        assert_eq!(count(d), n, "limit {limit}");
    }
}

#[tokio::test]
async fn a_semantic_only_match_with_the_real_model() {
    let app = TestApp::with_embedder().await;
    write(
        &app,
        "chat",
        &[
            // The colour message comes last: a message's vector holds the turn before it, so
            // the turn after the colour message would carry some of its meaning too.
            ("alice", "The train to Boston leaves at noon"),
            ("bob", "I need to buy groceries after work"),
            ("alice", "My dog loves running in the park"),
            ("bob", "The quarterly report is due on Friday"),
            ("bob", "Can you fix the leaking kitchen sink?"),
            ("alice", "My favorite color is blue"),
        ],
    )
    .await;
    let q = "What colours do you like?";
    // No word in common: full text alone finds nothing.
    let text_only = app.store.clone().with_embedder(None);
    assert!(
        search_all(&text_only, SearchScope::Session("ws", "chat"), q, 10)
            .await
            .is_empty()
    );
    let hits = in_session(&app, q, false, 2).await;
    let results = hits["results"].as_array().unwrap();
    assert_eq!(
        results[0]["content"], "My favorite color is blue",
        "{results:#?}"
    );
    // The workspace and the peer find it first too.
    let d = app
        .ok(&workspace_search(), json!({"q": q, "limit": 3}))
        .await;
    assert_eq!(
        d["workspace"]["search"]["results"][0]["content"],
        "My favorite color is blue"
    );
    let d = app
        .ok(
            &peer_search(),
            json!({"p": "alice", "q": q, "ctx": true, "w": 0}),
        )
        .await;
    let hits = &d["workspace"]["peer"]["search"];
    assert_eq!(hits["results"][0]["content"], "My favorite color is blue");
    // alice wrote seqs 1, 3 and 6: with window 0 three snippets, the best one first.
    let s = snippets(hits);
    assert_eq!(s.len(), 3, "{s:?}");
    assert_eq!(s[0].1, [6], "the best snippet comes first");
}

#[tokio::test]
async fn full_text_alone_without_an_embedder() {
    let app = TestApp::new().await;
    write(
        &app,
        "chat",
        &[
            ("alice", "My favorite color is blue"),
            ("bob", "What colors do you like?"),
            ("alice", "The train leaves at noon"),
            ("bob", "Colorful language"),
        ],
    )
    .await;
    // English stemming: "colours" is not "color", but "colors" and "Colorful" are.
    // Any word of the query matches; the message with both ranks first.
    let hits = in_session(&app, "favorite colors", false, 2).await;
    let found = seqs(&hits["results"]);
    assert_eq!(found[0], 1, "{found:?}");
    assert_eq!(sorted(found), [1, 2, 4]);
    let hits = in_session(&app, "color", false, 2).await;
    assert_eq!(sorted(seqs(&hits["results"])), [1, 2, 4]);
    let hits = in_session(&app, "colours", false, 2).await;
    assert_eq!(seqs(&hits["results"]), Vec::<i64>::new());
}

#[tokio::test]
async fn queries_with_punctuation_match_as_substrings() {
    let app = TestApp::new().await;
    write(
        &app,
        "chat",
        &[
            ("alice", "Write to bob@example.com please"),
            ("bob", "I am 100% sure"),
            ("alice", "There are 1000 reasons"),
            ("bob", "snake_case or axb?"),
            ("alice", "What colors do you like?"),
        ],
    )
    .await;
    for (q, want) in [
        ("bob@example.com", vec![1]),
        ("BOB@EXAMPLE.COM", vec![1]),
        ("100%", vec![2]),
        ("e_c", vec![4]),
        ("a_b", vec![]),
        ("do you like?", vec![5]),
        // The word "like" (the punctuation is no longer a reason to look for a substring only).
        ("like?!", vec![5]),
        ("?!", vec![]),
    ] {
        let hits = in_session(&app, q, false, 2).await;
        assert_eq!(seqs(&hits["results"]), want, "query {q:?}");
    }
}

#[tokio::test]
async fn workspace_search_over_three_sessions_fetches_all_windows_in_one_statement() {
    let app = TestApp::new().await;
    conversation(&app, "s1", 20, &[3, 15]).await;
    conversation(&app, "s2", 20, &[8]).await;
    conversation(&app, "s3", 20, &[10, 12]).await;
    app.take_statements();
    let d = app
        .ok(
            &workspace_search(),
            json!({"q": "zebra", "ctx": true, "w": 2}),
        )
        .await;
    let hits = &d["workspace"]["search"];
    assert_eq!(hits["results"].as_array().unwrap().len(), 5);
    let mut s = snippets(hits);
    s.sort();
    assert_eq!(
        s,
        [
            ("s1".to_owned(), vec![3], vec![1, 2, 3, 4, 5]),
            ("s1".to_owned(), vec![15], vec![13, 14, 15, 16, 17]),
            ("s2".to_owned(), vec![8], vec![6, 7, 8, 9, 10]),
            ("s3".to_owned(), vec![10, 12], (8..=14).collect::<Vec<_>>()),
        ]
    );
    assert_eq!(
        app.take_statements(),
        3,
        "workspace, search (one statement), all 4 windows of 3 sessions (one statement)"
    );

    // Nested lookups on results, matched and context are one batch per kind.
    let d = app
        .ok(
            "{ workspace(id: \"ws\") { search(query: \"zebra\", includeContext: true) {
                ... on SnippetHits {
                  results { id peer { id } session { id } }
                  snippets { matched { peer { id } } context { id peer { id } session { id } } }
                } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["workspace"]["search"]["snippets"][0]["context"][0]["session"]["id"]
            .as_str()
            .map(|s| s.starts_with('s')),
        Some(true)
    );
    assert_eq!(
        app.take_statements(),
        5,
        "workspace, search, windows, peers, sessions"
    );
}

#[tokio::test]
async fn peer_search_returns_only_that_peers_messages() {
    let app = TestApp::new().await;
    write(
        &app,
        "s1",
        &[
            ("alice", "zebra one"),
            ("bob", "zebra two"),
            ("alice", "nothing"),
        ],
    )
    .await;
    write(
        &app,
        "s2",
        &[("bob", "zebra three"), ("alice", "zebra four")],
    )
    .await;
    let d = app
        .ok(
            &peer_search(),
            json!({"p": "alice", "q": "zebra", "ctx": true, "w": 1}),
        )
        .await;
    let hits = &d["workspace"]["peer"]["search"];
    let results = hits["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(
        results.iter().all(|m| m["peerId"] == "alice"),
        "{results:?}"
    );
    // The context around alice's matches is the whole conversation, bob included.
    let mut s = snippets(hits);
    s.sort();
    assert_eq!(
        s,
        [
            ("s1".to_owned(), vec![1], vec![1, 2]),
            ("s2".to_owned(), vec![2], vec![1, 2]),
        ]
    );
}

#[tokio::test]
async fn session_search_is_scoped_to_the_session() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 10, &[2, 4]).await;
    conversation(&app, "other", 10, &[1, 2, 3]).await;
    let hits = in_session(&app, "zebra", true, 1).await;
    let results = hits["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|m| m["sessionId"] == "chat"));
    assert!(snippets(&hits).iter().all(|s| s.0 == "chat"));
    let d = app.ok(&workspace_search(), json!({"q": "zebra"})).await;
    assert_eq!(
        d["workspace"]["search"]["results"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
}

#[tokio::test]
async fn filters_apply_inside_both_legs_of_search() {
    let app = TestApp::with_embedder().await;
    // Messages 1..=9 are the best matches; a filter applied after ranking would leave at most
    // one of the 10 candidates of a limit-5 search.
    alice_writes(&app, "chat", 30, |i| {
        if i < 10 {
            format!("zebra zebra zebra stripes {i}")
        } else {
            format!("a zebra was seen at {i}")
        }
    })
    .await;
    for f in [
        json!({"seq_in_session": {"gte": 10}}),
        json!({"seqInSession": {"gte": 10}}),
    ] {
        let d = app
            .ok(
                &session_search(),
                json!({"s": "chat", "q": "zebra", "f": f, "limit": 5, "ctx": true, "w": 2}),
            )
            .await;
        let hits = &d["workspace"]["session"]["search"];
        let results = seqs(&hits["results"]);
        assert_eq!(results.len(), 5, "{results:?}");
        assert!(results.iter().all(|s| *s >= 10), "{results:?}");
        assert!(snippets(hits).iter().all(|s| s.0 == "chat"));
    }
    // A filter that can match nothing answers without a search statement.
    app.take_statements();
    let d = app
        .ok(
            &session_search(),
            json!({"s": "chat", "q": "zebra", "f": {"peer_id": {"in": []}}}),
        )
        .await;
    assert_eq!(d["workspace"]["session"]["search"]["results"], json!([]));
    assert_eq!(
        app.take_statements(),
        1,
        "the workspace-with-session lookup only"
    );
    // Context is not re-filtered by the DSL: the window of seq 10 reaches back to 8.
    let d = app
        .ok(
            &session_search(),
            json!({"s": "chat", "q": "zebra", "f": {"seq_in_session": 10}, "ctx": true, "w": 2}),
        )
        .await;
    let hits = &d["workspace"]["session"]["search"];
    assert_eq!(seqs(&hits["results"]), [10]);
    assert_eq!(
        snippets(hits),
        [("chat".to_owned(), vec![10], (8..=12).collect::<Vec<_>>())]
    );
    // Semantic leg alone (punctuation makes the text leg a substring match that finds nothing).
    let d = app
        .ok(
            &workspace_search(),
            json!({"q": "striped animal?", "f": {"seq_in_session": {"lte": 3}}, "limit": 10}),
        )
        .await;
    let results = seqs(&d["workspace"]["search"]["results"]);
    assert_eq!(sorted(results), [1, 2, 3]);
}

#[tokio::test]
async fn invalid_filters_are_bad_user_input() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 3, &[1]).await;
    let (code, _) = app
        .err(
            &session_search(),
            json!({"s": "chat", "q": "zebra", "f": {"no_such_field": 1}}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
}

#[tokio::test]
async fn nonexistent_session_or_workspace_gives_empty_results() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 5, &[1, 2]).await;
    for scope in [
        SearchScope::Session("ws", "nope"),
        SearchScope::Workspace("nope"),
        SearchScope::Peer("ws", "nobody"),
    ] {
        let results = search_all(&app.store, scope, "zebra", 10).await;
        assert!(results.is_empty(), "{scope:?}");
    }
    // Through GraphQL an unknown session is null, and a search matching nothing is empty.
    let d = app
        .ok(&session_search(), json!({"s": "nope", "q": "zebra"}))
        .await;
    assert_eq!(d["workspace"]["session"], Value::Null);
    let d = app
        .ok(&workspace_search(), json!({"q": "okapi", "ctx": true}))
        .await;
    assert_eq!(d["workspace"]["search"]["results"], json!([]));
    assert_eq!(d["workspace"]["search"]["snippets"], json!([]));
}

#[tokio::test]
async fn a_blank_query_finds_nothing_and_runs_no_search() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 5, &[1]).await;
    for q in ["", "   ", "\u{0}"] {
        app.take_statements();
        let d = app
            .ok(&workspace_search(), json!({"q": q, "ctx": true}))
            .await;
        assert_eq!(d["workspace"]["search"]["__typename"], "SnippetHits");
        assert_eq!(d["workspace"]["search"]["results"], json!([]));
        assert_eq!(d["workspace"]["search"]["snippets"], json!([]));
        assert_eq!(app.take_statements(), 1, "only the workspace lookup");
    }
}

/// An embedder that always fails, as a provider that is down would.
struct Broken;

#[async_trait::async_trait]
impl Embedder for Broken {
    fn dims(&self) -> usize {
        384
    }
    fn model_id(&self) -> &str {
        "broken"
    }
    async fn embed(&self, _texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Inference("down".into()))
    }
}

#[tokio::test]
async fn a_failing_query_embedding_falls_back_to_full_text() {
    let app = TestApp::new().await;
    conversation(&app, "chat", 10, &[4]).await;
    let store = app.store.clone().with_embedder(Some(Arc::new(Broken)));
    let results = search_all(&store, SearchScope::Session("ws", "chat"), "zebra", 10).await;
    assert_eq!(
        results.iter().map(|m| m.seq_in_session).collect::<Vec<_>>(),
        [4]
    );
}

#[tokio::test]
async fn hybrid_ranking_is_deterministic_and_keeps_full_text_hits() {
    let app = TestApp::with_embedder().await;
    conversation(&app, "chat", 30, &[3, 9, 17, 25]).await;
    let search =
        || async { search_all(&app.store, SearchScope::Workspace("ws"), "zebra", 10).await };
    let run = || async {
        search()
            .await
            .into_iter()
            .map(|m| m.public_id)
            .collect::<Vec<_>>()
    };
    let first = run().await;
    assert_eq!(first.len(), 10);
    for _ in 0..3 {
        assert_eq!(run().await, first);
    }
    // Found by both legs, the zebra messages are all among the fused results, and one leads.
    let top: Vec<i64> = search().await.iter().map(|m| m.seq_in_session).collect();
    assert!([3, 9, 17, 25].contains(&top[0]), "{top:?}");
    for seq in [3, 9, 17, 25] {
        assert!(top.contains(&seq), "{seq} missing from {top:?}");
    }
}

#[tokio::test]
async fn natural_language_questions_hit_the_full_text_leg() {
    let app = TestApp::new().await;
    write(
        &app,
        "chat",
        &[
            ("melanie", "Hey! How have you been?"),
            (
                "caroline",
                "I started learning pottery last month, it's harder than it looks!",
            ),
            ("melanie", "Wow, that's awesome!"),
            ("caroline", "The weather has been crazy this week."),
            ("melanie", "My cousin went camping at the lake."),
        ],
    )
    .await;
    // Full text alone (no embedder): the question shares two words with the evidence, not all.
    let hits = in_session(&app, "What did Caroline start learning?", false, 2).await;
    assert_eq!(seqs(&hits["results"])[0], 2, "{hits}");
    let hits = in_session(&app, "When did Melanie's cousin go camping?", false, 2).await;
    assert_eq!(seqs(&hits["results"])[0], 5, "{hits}");
}

#[tokio::test]
async fn rare_words_outweigh_common_ones() {
    let app = TestApp::new().await;
    // "weather" is in every message, "zebra" in one: BM25 weighs a word by its rarity.
    alice_writes(&app, "chat", 12, |i| match i {
        7 => "a zebra crossed, nice weather".to_owned(),
        i => format!("weather weather report number {i}"),
    })
    .await;
    let hits = in_session(&app, "weather zebra", false, 2).await;
    assert_eq!(seqs(&hits["results"])[0], 7, "{hits}");
}

#[tokio::test]
async fn a_query_of_stop_words_only_finds_nothing() {
    let app = TestApp::with_embedder().await;
    write(
        &app,
        "chat",
        &[("alice", "What is it?"), ("bob", "It is what it is.")],
    )
    .await;
    for q in ["What is it?", "it", "?!"] {
        let hits = in_session(&app, q, true, 2).await;
        assert_eq!(hits["results"], json!([]), "{q:?}");
        assert_eq!(hits["snippets"], json!([]), "{q:?}");
    }
}

/// Caroline's turns 1 and 3, Melanie's 2 and 4; both speak of pottery (1 and 2).
async fn pottery_chat(app: &TestApp) {
    write(
        app,
        "chat",
        &[
            ("caroline", "I went to a pottery class yesterday"),
            ("melanie", "I tried pottery once, not for me"),
            ("caroline", "The weather is lovely"),
            ("melanie", "Lunch was great"),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_speakers_name_finds_their_turns() {
    let app = TestApp::new().await;
    pottery_chat(&app).await;
    let hits = in_session(&app, "Caroline", false, 2).await;
    assert_eq!(sorted(seqs(&hits["results"])), [1, 3]);
    // Name and topic together: Caroline's pottery turn before Melanie's.
    let hits = in_session(&app, "What did Caroline say about pottery?", false, 2).await;
    assert_eq!(seqs(&hits["results"])[0], 1, "{hits}");
}

#[tokio::test]
async fn with_an_embedder_a_query_of_only_a_speakers_name_keeps_it_and_finds_their_turns() {
    let app = TestApp::with_embedder().await;
    pottery_chat(&app).await;
    // The legs read a question without the names it holds, but a query of names only keeps them:
    // her turns first (the vector leg fills the rest with Melanie's).
    let hits = in_session(&app, "Caroline's?", false, 2).await;
    let found = seqs(&hits["results"]);
    assert_eq!(sorted(found[..2].to_vec()), [1, 3], "{hits}");
    let hits = in_session(&app, "What did Caroline say about pottery?", false, 2).await;
    assert_eq!(seqs(&hits["results"])[0], 1, "{hits}");
}

/// The vector leg must order by exactly the expression the messages' bit index is built on, or
/// PostgreSQL sorts every vector of the scope instead, which no result would show.
#[tokio::test]
async fn the_vector_leg_reads_candidates_from_the_bit_index() {
    use honcho_graphql::store::filter::{self, Resource};
    use honcho_graphql::store::search::{NEAREST_BLOCKS, hybrid_query};
    use sea_orm::sea_query::PostgresQueryBuilder;
    use sea_orm::{ConnectionTrait, TransactionTrait};

    let app = TestApp::new().await;
    write(&app, "s", &[("alice", "the first message")]).await;
    app.store
        .db()
        .execute_unprepared(
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content, embedding)
             SELECT lpad(g::text, 21, 'x'), 'ws', 's', 'alice', g, 'filler ' || g,
                    (SELECT array_agg(random() - 0.5)::vector(384) FROM generate_series(1, 384) d WHERE g > 0)
             FROM generate_series(2, 5001) g;
             ANALYZE messages;",
        )
        .await
        .unwrap();
    let none = filter::parse(Resource::Message, &Value::Null).unwrap();
    let (sql, values) = hybrid_query(
        SearchScope::Session("ws", "s"),
        "filler",
        Some(vec![0.05; 384]),
        NEAREST_BLOCKS,
        &none,
        10,
        true,
    )
    .build(PostgresQueryBuilder);
    let txn = app.store.db().begin().await.unwrap();
    txn.execute_unprepared("SET LOCAL hnsw.iterative_scan = relaxed_order")
        .await
        .unwrap();
    let plan = crate::harness::explain(&txn, &sql, values).await;
    assert!(plan.contains("ix_messages_embedding_hnsw"), "plan:\n{plan}");
}

#[tokio::test]
async fn the_full_text_leg_looks_each_lexeme_up_in_the_index() {
    use honcho_graphql::store::filter::{self, Resource};
    use honcho_graphql::store::search::{NEAREST_BLOCKS, hybrid_query};
    use sea_orm::ConnectionTrait;
    use sea_orm::sea_query::PostgresQueryBuilder;

    let app = TestApp::new().await;
    write(&app, "s", &[("alice", "the first message")]).await;
    // 5,000 messages over 500 distinct words: each word is in ten of them.
    app.store
        .db()
        .execute_unprepared(
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
             SELECT lpad(g::text, 21, 'x'), 'ws', 's', 'alice', g, 'filler word' || (g % 500) || ' and more'
             FROM generate_series(2, 5001) g;
             ANALYZE messages;",
        )
        .await
        .unwrap();
    app.store.flush_gin_pending_lists().await.unwrap();
    let none = filter::parse(Resource::Message, &Value::Null).unwrap();
    let (sql, values) = hybrid_query(
        SearchScope::Session("ws", "s"),
        "What about word7 and word9?",
        None,
        NEAREST_BLOCKS,
        &none,
        10,
        true,
    )
    .build(PostgresQueryBuilder);
    let plan = crate::harness::explain(app.store.db(), &sql, values).await;
    assert!(plan.contains("ix_messages_content_tsv"), "plan:\n{plan}");
    assert!(!plan.contains("Seq Scan on messages"), "plan:\n{plan}");
    // No embedder here: these are the full-text leg's hits, all of them holding a word asked for.
    let hits = search_all(
        &app.store,
        SearchScope::Session("ws", "s"),
        "What about word7 and word9?",
        20,
    )
    .await;
    assert_eq!(hits.len(), 20);
    assert!(
        hits.iter()
            .all(|m| m.content.contains("word7 ") || m.content.contains("word9 ")),
        "{hits:?}"
    );
}

/// 2,000 turns of alice and bob (`word<g % 200>`), and `rare` turns of alice's holding `word`.
async fn two_speakers_and_a_rare_word(app: &TestApp, word: &str, rare: i64) {
    use sea_orm::ConnectionTrait;
    write(
        app,
        "s",
        &[("alice", "the first message"), ("bob", "the second")],
    )
    .await;
    app.store
        .db()
        .execute_unprepared(&format!(
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
             SELECT lpad(g::text, 21, 'x'), 'ws', 's', CASE WHEN g % 2 = 0 THEN 'alice' ELSE 'bob' END, g,
                    CASE WHEN g % 2 = 0 AND (g - 2) / 2 <= {rare} THEN 'we talked about {word} and word' || (g % 200)
                         ELSE 'filler word' || (g % 200) || ' and more' END
             FROM generate_series(3, 2002) g;
             ANALYZE messages;"
        ))
        .await
        .unwrap();
    app.store.flush_gin_pending_lists().await.unwrap();
}

#[tokio::test]
async fn a_question_naming_a_speaker_reads_only_the_turns_holding_its_rarer_words() {
    use honcho_graphql::store::filter::{self, Resource};
    use honcho_graphql::store::search::{NEAREST_BLOCKS, hybrid_query};
    use sea_orm::sea_query::PostgresQueryBuilder;

    let app = TestApp::new().await;
    // alice is in half the turns (a common lexeme); pottery in 30 of them.
    two_speakers_and_a_rare_word(&app, "pottery", 30).await;
    let question = "What did alice say about pottery?";
    let none = filter::parse(Resource::Message, &Value::Null).unwrap();
    let (sql, values) = hybrid_query(
        SearchScope::Session("ws", "s"),
        question,
        None,
        NEAREST_BLOCKS,
        &none,
        10,
        true,
    )
    .build(PostgresQueryBuilder);
    let plan = crate::harness::explain_with(
        app.store.db(),
        "ANALYZE, COSTS OFF, TIMING OFF",
        &sql,
        values,
    )
    .await;
    // The pool of 20 is full of pottery turns, which outscore any turn holding only "alice": the
    // index is never asked for alice's 1,000 turns.
    let later: Vec<&str> = plan
        .lines()
        .skip_while(|l| !l.contains("CTE fts_later_scored"))
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with("CTE "))
        .filter(|l| l.contains(" on messages"))
        .collect();
    assert!(!later.is_empty(), "no second pass in the plan:\n{plan}");
    assert!(
        later.iter().all(|l| l.contains("never executed")),
        "plan:\n{plan}"
    );
    let hits = search_all(&app.store, SearchScope::Session("ws", "s"), question, 10).await;
    assert_eq!(hits.len(), 10);
    assert!(
        hits.iter()
            .all(|m| m.peer_name == "alice" && m.content.contains("pottery")),
        "{hits:?}"
    );
}

#[tokio::test]
async fn turns_holding_only_common_words_fill_the_results_when_rarer_words_are_too_few() {
    let app = TestApp::new().await;
    // Three turns hold "kiln": the other seven results are alice's turns, found by her name.
    two_speakers_and_a_rare_word(&app, "kiln", 3).await;
    let hits = search_all(
        &app.store,
        SearchScope::Session("ws", "s"),
        "alice kiln",
        10,
    )
    .await;
    assert_eq!(hits.len(), 10, "{hits:?}");
    assert!(
        hits[..3].iter().all(|m| m.content.contains("kiln")),
        "{hits:?}"
    );
    assert!(
        hits[3..]
            .iter()
            .all(|m| m.peer_name == "alice" && !m.content.contains("kiln")),
        "{hits:?}"
    );
}

/// 4,000 turns in sessions `s` and `t` of 4-12 words each, `wq1`..`wq299` drawn log-uniformly:
/// `wq1` is in most turns and the words past `wq150` in a few dozen, as a real vocabulary spreads.
/// Every 97th turn repeats four common words three times: it holds no rare word and outscores
/// the turns that hold one, which a cut skipping those words' postings would miss.
async fn a_spread_vocabulary(app: &TestApp) {
    use sea_orm::ConnectionTrait;
    write(app, "s", &[("alice", "the first message")]).await;
    write(app, "t", &[("bob", "the first message")]).await;
    app.store
        .db()
        .execute_unprepared(
            "SELECT setseed(0.42);
             INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content)
             SELECT lpad(g::text, 21, 'x'), 'ws', CASE WHEN g % 3 = 0 THEN 't' ELSE 's' END,
                    CASE WHEN g % 2 = 0 THEN 'alice' ELSE 'bob' END, g,
                    CASE WHEN g % 97 = 0 THEN repeat('wq2 wq3 wq4 wq5 ', 3)
                    ELSE (SELECT string_agg('wq' || floor(exp(random() * ln(300)))::int, ' ')
                          FROM generate_series(1, 4 + g % 9) w WHERE g > 0) END
             FROM generate_series(2, 4001) g;
             ANALYZE messages;",
        )
        .await
        .unwrap();
    app.store.flush_gin_pending_lists().await.unwrap();
}

/// Every message of `session` (all sessions: None) holding one of the query's lexemes, with its
/// BM25 over all of them and no cut, best first: what the full-text leg ranks.
async fn bm25_of_every_message(
    app: &TestApp,
    session: Option<&str>,
    q: &str,
) -> Vec<(String, f64)> {
    use sea_orm::{ConnectionTrait, DbBackend, Statement};
    let sql = "WITH q AS (
          SELECT t AS lexeme, ('''' || t || '''')::tsquery AS query
          FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS t),
        w AS (
          SELECT q.query, ln(1 + (greatest(c.docs - coalesce(s.docs, 0), 0) + 0.5) / (coalesce(s.docs, 0) + 0.5)) AS idf,
                 c.lexemes::float8 / c.docs AS avgdl
          FROM q JOIN search_corpus c ON c.workspace_name = 'ws'
          LEFT JOIN search_terms s ON s.workspace_name = 'ws' AND s.lexeme = q.lexeme)
        SELECT m.public_id, sum(w.idf * ts_rank_cd('{1,1,1,1}', m.content_tsv, w.query) * 2.2
                   / (ts_rank_cd('{1,1,1,1}', m.content_tsv, w.query)
                      + 1.2 * (1 - 0.75 + 0.75 * length(m.content_tsv) / w.avgdl))) AS score
        FROM messages m JOIN w ON m.content_tsv @@ w.query
        WHERE m.workspace_name = 'ws' AND ($2::text IS NULL OR m.session_name = $2)
        GROUP BY m.id, m.public_id
        ORDER BY score DESC";
    app.store
        .db()
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql,
            [q.into(), session.map(str::to_owned).into()],
        ))
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                r.try_get::<String>("", "public_id").unwrap(),
                r.try_get::<f64>("", "score").unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn maxscores_cut_finds_what_scoring_every_message_finds() {
    let app = TestApp::new().await;
    a_spread_vocabulary(&app).await;
    let queries = [
        "wq1 wq2 wq150",
        "wq1 wq2 wq3",
        "wq1",
        "wq3 wq40 wq250 wq7",
        "wq299 wq1 wq5 wq12",
        "wq60 wq61 wq62 wq2",
        "wq180 wq190 wq1 wq2 wq3 wq4",
        "wq9 wq10 wq11",
        "wq2 wq3 wq4 wq5 wq150",
        "wq2 wq3 wq4 wq5 wq230 wq240",
        "wq3 wq5 wq77",
    ];
    // Equal scores may be summed in another order by the two, so they are compared to 1e-9.
    let eps = 1e-9;
    for q in queries {
        for limit in [3, 10, 40] {
            for (scope, session) in [
                (SearchScope::Workspace("ws"), None),
                (SearchScope::Session("ws", "t"), Some("t")),
            ] {
                let every = bm25_of_every_message(&app, session, q).await;
                let score: std::collections::HashMap<&str, f64> =
                    every.iter().map(|(id, s)| (id.as_str(), *s)).collect();
                let found: Vec<f64> = search_all(&app.store, scope, q, limit as u64)
                    .await
                    .iter()
                    .map(|m| {
                        score
                            .get(m.public_id.as_str())
                            .copied()
                            .unwrap_or(f64::NEG_INFINITY)
                    })
                    .collect();
                let why = format!("{q:?}, limit {limit}, session {session:?}: {found:?}");
                assert_eq!(found.len(), limit.min(every.len()), "{why}");
                let last = every[found.len() - 1].1;
                assert!(found.iter().all(|&s| s >= last - eps), "{why}");
                assert!(found.windows(2).all(|p| p[0] >= p[1] - eps), "{why}");
            }
        }
    }
}
