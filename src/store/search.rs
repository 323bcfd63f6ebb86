//! Hybrid message search and the interleaved context snippets (docs/search.md).
//!
//! One statement answers a search: a vector leg (pgvector cosine over the HNSW index, only when
//! the store has an embedder and the query embeds) and a full-text leg (any of the query's
//! english lexemes, each looked up in the GIN index on its own as an inverted index would, and
//! for a query with symbols the whole query as a case-insensitive substring served by the trigram
//! index; ranked by BM25 with document frequencies the triggers of `search_terms` keep per
//! workspace), each scoped and filtered by the caller's filter DSL *inside* the leg, each cut to
//! `POOL_PER_RESULT · limit` candidates, fused by weighted Reciprocal Rank Fusion. The shape
//! (sea_query builds the exact text, every value bound as a parameter):
//!
//! ```sql
//! WITH "terms" AS MATERIALIZED (                  -- the query's lexemes, their idf, avgdl, bound
//!        SELECT <"t"."t" as a tsquery> AS "query", ln(1 + (N - df + 0.5) / (df + 0.5)) AS "idf", … AS "avgdl",
//!               (k1 + 1) · idf AS "bound", <the rarest, within the budget of postings> AS "first"
//!        FROM unnest(tsvector_to_array(to_tsvector('english', $t))) AS "t"
//!        LEFT JOIN "search_corpus" AS "c" … LEFT JOIN "search_terms" AS "s" …),
//!      "vec_near" AS MATERIALIZED (              -- only with an embedder
//!        SELECT "m"."id", "m"."embedding" FROM "messages" AS "m"
//!        WHERE <scope> AND <filters> AND "m"."embedding" IS NOT NULL AND EXISTS (SELECT 1 FROM "terms")
//!        ORDER BY binary_quantize("m"."embedding")::bit(d) <~> binary_quantize($q)::bit(d)
//!        LIMIT vector_candidates(limit)),
//!      "fts_first" AS (                           -- each message once per rarest lexeme it holds
//!        SELECT "m"."id", "m"."created_at", "t"."idf", "t"."avgdl", <tf> AS "tf", <|m|> AS "dl",
//!               <BM25 of the other lexemes "m" holds, looked up on its row> AS "rest"
//!        FROM "messages" AS "m" INNER JOIN "terms" AS "t" ON "t"."first" AND "m"."content_tsv" @@ "t"."query"
//!        WHERE <scope> AND <filters>
//!        UNION ALL                                -- only for a query with symbols (`a@b.c`)
//!        SELECT "m"."id", "m"."created_at", 0, 1, 0, 0, <rest> FROM "messages" AS "m"
//!        WHERE <scope> AND <filters> AND EXISTS (SELECT 1 FROM "terms") AND "m"."content" ILIKE $pattern),
//!      "fts_first_scored" AS MATERIALIZED (     -- BM25 over all the lexemes, one row per message
//!        SELECT "id", "created_at", <BM25> + max("rest") AS "score" FROM "fts_first" GROUP BY "id", "created_at"),
//!      "later" AS MATERIALIZED (                 -- the other lexemes; skipped: cannot reach the pool
//!        SELECT "query", "idf", "avgdl", COALESCE(sum("bound") OVER (ORDER BY "bound", "lexeme")
//!          < (SELECT "score" FROM "fts_first_scored" ORDER BY "score" DESC OFFSET pool - 1 LIMIT 1), false) AS "skipped"
//!        FROM "terms" WHERE NOT "first"),
//!      "fts_later" AS (                           -- the messages pass 1 did not find
//!        SELECT … <BM25 of the skipped lexemes "m" holds> AS "rest"
//!        FROM "messages" AS "m" INNER JOIN "later" AS "t" ON NOT "t"."skipped" AND "m"."content_tsv" @@ "t"."query"
//!        WHERE <scope> AND <filters> AND NOT EXISTS (SELECT 1 FROM "fts_first_scored" AS "c" WHERE "c"."id" = "m"."id")),
//!      "fts_later_scored" AS MATERIALIZED (<BM25 per message of "fts_later">),
//!      "fts_all" AS (SELECT … FROM "fts_first_scored" UNION ALL SELECT … FROM "fts_later_scored"),
//!      "fts_hits" AS MATERIALIZED (SELECT "id", "created_at", "score" FROM "fts_all"
//!        ORDER BY "score" DESC, "created_at" DESC, "id" DESC LIMIT pool),
//!      "windowed_hits" AS (SELECT "id" FROM "fts_hits" ORDER BY <its order> LIMIT WINDOWED_HITS),
//!      "near_sessions" AS MATERIALIZED (         -- not for a session's search: the nearest sessions
//!        SELECT "session_name" FROM "message_session_sums" WHERE <workspace>
//!          AND EXISTS (SELECT 1 FROM "terms") ORDER BY "vector_sum" <=> $q LIMIT NEAREST_SESSIONS),
//!      "near_blocks" AS MATERIALIZED (           -- the blocks of turns whose summed vectors are nearest
//!        SELECT "session_name", "block" FROM "message_blocks" WHERE <workspace> AND <the session,
//!          or one of "near_sessions"> AND EXISTS (SELECT 1 FROM "terms")
//!          ORDER BY "vector_sum" <=> $q LIMIT NEAREST_BLOCKS),
//!      "vec_candidates" AS (SELECT "id", "embedding" FROM "vec_near"
//!        UNION ALL                                -- the turns around the best text hits
//!        SELECT "m"."id", "m"."embedding" FROM "messages" AS "m"
//!        INNER JOIN "windowed_hits" AS "h" ON true INNER JOIN "messages" AS "x" ON "x"."id" = "h"."id" AND <same session>
//!          AND "m"."seq_in_session" BETWEEN "x"."seq_in_session" - HIT_WINDOW AND "x"."seq_in_session" + HIT_WINDOW
//!        WHERE <scope> AND <filters> AND "m"."embedding" IS NOT NULL
//!        UNION ALL                                -- the turns of the nearest blocks
//!        SELECT "m"."id", "m"."embedding" FROM "messages" AS "m" INNER JOIN "near_blocks" AS "b"
//!          ON <same session> AND "m"."seq_in_session" BETWEEN <the block's first turn and its last>
//!        WHERE <scope> AND <filters> AND "m"."embedding" IS NOT NULL),
//!      "vec_hits" AS MATERIALIZED (
//!        SELECT "id", min("embedding" <=> $q) AS "dist" FROM "vec_candidates" GROUP BY "id" ORDER BY "dist" ASC LIMIT pool),
//!      "ranked" AS (SELECT "id", ROW_NUMBER() OVER (ORDER BY "dist", "id") AS "rank", w_vec AS "w" FROM "vec_hits"
//!        UNION ALL                                -- beside a vector leg, w_text only for a hit
//!        SELECT "h"."id", ROW_NUMBER() OVER (ORDER BY "score" DESC, "created_at" DESC, "id" DESC),
//!               CASE WHEN <the query's lexemes "m" holds> · 3 > <the query's lexemes>
//!                    [OR "m"."content" ILIKE $pattern] THEN w_text ELSE w_text · 0.001 END
//!        FROM "fts_hits" AS "h" INNER JOIN "messages" AS "m" ON "m"."id" = "h"."id"),
//!      "fused" AS (SELECT "id", SUM("w" / (k + "rank")) AS "score" FROM "ranked" GROUP BY "id")
//! SELECT "m".* FROM "fused" AS "f" INNER JOIN "messages" AS "m" ON "m"."id" = "f"."id"
//! ORDER BY "f"."score" * (1 + SPEAKER_WEIGHT when the query names "m"'s author) DESC,
//!   "m"."public_id" ASC LIMIT limit
//! ```
//!
//! With conclusion keys ([`search_keys`]), a third leg joins `"ranked"`: the live explicit
//! conclusions nearest the query, each standing for the messages of the scope it cites.
//!
//! What the full-text leg indexes is the message's content and its author's peer id
//! (`content_tsv`), so a question naming a speaker finds that speaker's turns. Beside the vector
//! leg, a text hit holding a third or less of the query's lexemes (one word of a five-word
//! question, often only that name) counts in the fusion for almost nothing
//! ([`SHARE_FLOOR_DENOMINATOR`]).
//!
//! A speaker's name is also in half of a two-person conversation, and at a million messages
//! the generated vocabulary's lexemes are each in thousands to tens of thousands of messages:
//! scoring every posting of every lexeme was most of a question's cost. So the leg takes
//! MaxScore's cut (Turtle and Flood, 1995) in two passes. It reads the postings of the query's
//! rarest lexemes first (within [`FIRST_POSTINGS_PER_SLOT`] postings per slot of the pool), scores
//! each message they find over all the query's lexemes, and takes the pool-th best score as a
//! threshold. A message holding none of those lexemes scores less than the summed BM25 bounds of
//! the lexemes it holds, so the commonest lexemes whose bounds together stay under the threshold
//! are never read; the others are, for the messages not yet scored. The hits are the same as
//! scoring every message holding a lexeme.
//!
//! The vector leg reads its candidates from the HNSW index over the embeddings' sign bits
//! (`binary_quantize`, Hamming distance: cheap to insert into, see the migration that made it) and
//! ranks them by exact cosine over the stored vectors. It runs in a transaction with `SET LOCAL hnsw.iterative_scan = relaxed_order`
//! (pgvector 0.8), so that filters which reject most of the index's nearest neighbours make the
//! scan go on instead of returning too few rows; the `MATERIALIZED` CTE and the `ROW_NUMBER` over
//! `dist` put the relaxed order right again. Beside those candidates it ranks the turns around
//! the full-text leg's hits ([`HIT_WINDOW`]): where the graph lost its way to a conversation, the
//! text leg still finds it. And beside both it ranks the turns of the blocks of consecutive turns
//! whose summed vectors are nearest the query ([`NEAREST_BLOCKS`]), taken from the sessions
//! whose summed vectors are nearest ([`NEAREST_SESSIONS`]): a conversation the graph links into
//! badly is still where its session's and its blocks' sums point.
//!
//! Decisions (beyond Honcho v3.0.12):
//! - A blank query (empty or whitespace only, after NUL bytes are stripped) is allowed and finds
//!   nothing: it runs no SQL (nor does a filter that can match nothing). Honcho v3.0.12 answers 200 too,
//!   but its `ILIKE '%%'` makes it list the newest messages; that list is `messages(order: DESC)`
//!   here. A query with no lexeme (only stop words and punctuation: "What is it?", "?!") finds
//!   nothing either, in both legs: it names nothing to look for.
//! - Punctuation does not turn the text leg into a substring match only (Honcho v3.0.12's rule): a
//!   question ends with "?", and its words must count. A query holding a symbol (neither
//!   letter, digit, space nor sentence punctuation) is also matched as a substring, so
//!   `user@example.com`, `e_c` or `100%` find what they found before; words alone are not
//!   (`cat` does not find "concatenate"), which keeps the leg on its index.
//! - Ties of the fused score are broken by the message id (`Message.id`, ascending), so one
//!   search always gives one order.
//! - Snippets are ordered by the rank of their best match in `results`, not grouped by session:
//!   the best evidence comes first whichever conversation holds it.

use std::borrow::Cow;

use clap::Args;
use sea_orm::sea_query::{
    Alias, CommonTableExpression, Condition, Expr, ExprTrait, Func, JoinType, Order,
    PostgresQueryBuilder, Query, SelectStatement, UnionType, Value as SqlValue, WithClause,
    WithQuery,
};
use sea_orm::{ConnectionTrait, DbBackend, EntityTrait, Statement};
use serde_json::Value;

use migration::MESSAGE_BLOCK_TURNS;

use super::filter::{self, Filter, Resource, like_pattern};
use super::message::{Message, MessageScope, SeqRange};
use super::search_keys::{self, SearchKeys};
use super::{IterativeScan, Store, StoreError, StoreResult, TxOptions, stmt};
use crate::entity::message;

/// Which messages a search covers: a workspace, the messages a peer wrote, or one session.
pub type SearchScope<'a> = MessageScope<'a>;

pub const DEFAULT_SEARCH_LIMIT: u64 = 10;
pub const MAX_SEARCH_LIMIT: u64 = 100;
pub const DEFAULT_CONTEXT_WINDOW: i64 = 2;
pub const MAX_CONTEXT_WINDOW: i64 = super::message::MAX_CONTEXT_SIDE;
/// Reciprocal Rank Fusion: a message's score is the sum over the legs that found it of
/// `weight / (RRF_K + rank)`, ranks from 1, each leg cut to `POOL_PER_RESULT · limit` candidates.
/// Chosen by measurement on `make eval`'s two generated corpora (bench/history/2026-12-b.md,
/// "Fusion"): k = 1 against the usual 60 lifts recall@5 by 0.07 on both (0.50 → 0.57, 0.49 → 0.56)
/// and recall@10 by 0.003-0.008; a text weight other than 1 helped on one corpus and hurt on the
/// other.
pub const RRF_K: u32 = 1;
pub const POOL_PER_RESULT: u64 = 2;
pub const VECTOR_WEIGHT: f64 = 1.0;
pub const TEXT_WEIGHT: f64 = 1.0;
/// A message whose author the query names ("What did Caroline say about pottery?") has its fused
/// score multiplied by `1 + SPEAKER_WEIGHT`: in a conversation the other speaker talks about the
/// same things, and since the legs read the query without the names ([`without_names`]) the
/// weight is the only place the name counts. 1.0 until 2026-12-07; 3 once the names were out of
/// the legs: `make eval` r@10 +14 and +7-9 questions of 660 on its two corpora, no kind losing one
/// (docs/search.md, "A question naming a speaker weighs that speaker's turns four times").
/// At 3 a named turn outranks an other speaker's turn that both legs rank first only when its
/// own fused score is over a quarter of that turn's, which at most ten turns can reach in the
/// worst arrangement of the legs' ranks (six at 2, twenty-two at 6). Measured with `make eval`'s
/// second-hand questions (the evidence said by the other speaker), 6 against 3 gains 1-3
/// questions at r@10 and loses 10 at r@5 and 5 of the 60 second-hand ones, on each corpus.
pub const SPEAKER_WEIGHT: f64 = 3.0;

/// The legs read a query without the peers it names ([`without_names`]) only when its scope has
/// at most this many peers: a conversation's two. Among more, the legs' 20 candidates come from
/// every conversation on the question's topic, and the name is what brings the named speaker's
/// turns among them for the weight to raise: `make bench-scale`'s planted questions (three
/// conversations and eight other peers in one workspace) fell from r@10 0.628 / 0.628 / 0.594
/// to 0.550 / 0.350 / 0.233 at 10k / 100k / 1M messages with the names out (docs/search.md,
/// "Among more than two peers the legs keep the names").
pub const NAMES_OUT_MAX_PEERS: i64 = 2;

/// Among more peers, a workspace search still reads a query without the peers it names when
/// their name is in at least this share of the workspace's messages: a name that common selects
/// little, and its words drown the question's, as in a conversation of two. Read from the
/// full-text statistics (the name's lexemes are in every message its peer wrote, and in those
/// that mention it), so it costs a key lookup per lexeme. Measured: docs/search.md, "Names out
/// where a name is common".
pub const NAMES_OUT_MIN_SHARE: f64 = 0.1;

/// The speaker weight when the legs read the names ([`NAMES_OUT_MAX_PEERS`]): the weight the
/// server had with the names in the legs, before 2026-12-07. With the names in the legs as well,
/// 3 counts a name twice over (`make eval`'s `fused, names in the query` reads r@10 0.585 at 3
/// against 0.623 at 1).
pub const SPEAKER_WEIGHT_NAMES_IN: f64 = 1.0;

/// How a search reads the peers its query names. The server's rule is the constants'
/// (`NameRule::default()`); `make eval` serves others beside it on the same stored turns
/// (`Store::with_names`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NameRule {
    /// The legs read the names in every scope, as before 2026-12-07 (docs/search.md, "The legs
    /// read a question without the names").
    pub in_query: bool,
    /// [`NAMES_OUT_MAX_PEERS`].
    pub out_max_peers: i64,
    /// [`NAMES_OUT_MIN_SHARE`].
    pub out_min_share: f64,
    /// [`SPEAKER_WEIGHT`]: the weight of a named speaker's turns where the names are out of the
    /// legs (where they are in, [`SPEAKER_WEIGHT_NAMES_IN`]).
    pub speaker_weight: f64,
}

impl Default for NameRule {
    fn default() -> Self {
        NameRule {
            in_query: false,
            out_max_peers: NAMES_OUT_MAX_PEERS,
            out_min_share: NAMES_OUT_MIN_SHARE,
            speaker_weight: SPEAKER_WEIGHT,
        }
    }
}

/// What a search reaches, read before its legs run.
#[derive(Debug, Default)]
struct Reach {
    /// The workspace's messages, from the count the full-text statistics keep (`search_corpus`,
    /// one row per workspace; 0 for none).
    messages: u64,
    /// The workspace's peers the query names ([`peer_id_candidates`]).
    named: Vec<String>,
    /// The scope's peers, counted up to one more than the names-out bound
    /// ([`NAMES_OUT_MAX_PEERS`], `NameRule::out_max_peers`).
    peers: i64,
    /// The workspace's messages holding a named peer's name, summed over the named peers: for
    /// each, the fewest messages holding one of its name's lexemes ([`NAMES_OUT_MIN_SHARE`]).
    named_messages: i64,
}

impl Reach {
    /// Whether the legs read the query without its names: in a scope of a conversation's peers,
    /// or in a workspace where the named peers' names are common ([`NAMES_OUT_MIN_SHARE`]).
    /// A session of more peers keeps them: the statistics are the workspace's.
    fn names_out(&self, scope: &SearchScope<'_>, rule: &NameRule) -> bool {
        self.peers <= rule.out_max_peers
            || (matches!(scope, SearchScope::Workspace(_))
                && self.messages > 0
                && self.named_messages as f64 >= rule.out_min_share * self.messages as f64)
    }
}

/// Beside the vector leg, a full-text hit counts in the fusion only when it holds more than one
/// in `SHARE_FLOOR_DENOMINATOR` of the query's lexemes (or the whole query as a substring); below
/// that its weight is [`BELOW_SHARE_WEIGHT`]. A hit holding one word of a five-word question
/// (often only the speaker's name, which is in half a conversation's turns) otherwise takes a
/// place in the top 10 from the vector leg's nearest turns. Chosen on `make eval`'s two corpora
/// (bench/history/2026-12-b.md, "Text hits by the share of the query they hold": r@10 +8 and +9
/// questions of 660, no kind losing one); without a vector leg BM25's order stands alone.
pub const SHARE_FLOOR_DENOMINATOR: i64 = 3;
/// The fusion weight of a full-text hit under the share floor: it still fills the results when
/// nothing else does, after every hit of another leg or above the floor (at most
/// `BELOW_SHARE_WEIGHT / (RRF_K + 1)` = 0.0005, under the least any of those scores,
/// `1 / (RRF_K + pool)` with a pool of at most 200).
pub const BELOW_SHARE_WEIGHT: f64 = 0.001;

/// Candidates the vector leg reads from the bit index per hit it keeps after ranking them by exact
/// cosine: the sign bits order neighbours only roughly.
pub const CANDIDATES_PER_VECTOR_HIT: u64 = 5;

/// Turns on each side of a full-text hit, in its session, that the vector leg ranks by exact
/// cosine beside the bit index's candidates. The index is approximate, and it can miss a whole
/// conversation unlike the rest of a large workspace (its speakers in no other message): at a
/// million messages some planted conversations were a fifth reachable (bench/history/2026-12.md,
/// "Scale: islands, not age"). The text leg still finds such a conversation by its words or its
/// speakers' names, and the turns around those hits are where the answer is. At most
/// `(2 · HIT_WINDOW + 1)` rows per text hit, each read through the session's sequence index.
pub const HIT_WINDOW: i64 = 12;

/// The best full-text hits the vector leg looks around ([`HIT_WINDOW`]): the whole pool of a
/// search of 10 results, so what the evaluation measures is unchanged. A larger `limit` widens the
/// pool but not the window: its deeper hits share fewer of the query's words, and each brought
/// 25 rows of about 1.7 kB, so a workspace search of 50 results spent 30% more time on them
/// (bench/history/2026-12-b.md, "Scale: the goals at the margin and the one missed").
pub const WINDOWED_HITS: u64 = 20;

/// Blocks of consecutive turns ([`MESSAGE_BLOCK_TURNS`]) whose messages the vector leg ranks
/// beside the bit index's candidates: at most 320 rows. At a million messages, on a graph that
/// reached a third of the planted conversations' turns, recall@10 was 0.533 without them, 0.600
/// with 5, 0.611 with 10 and 0.617 with 20; at 10,000 it did not move (bench/history/2026-12.md,
/// "Scale: blocks of consecutive turns, a prototype"). A large workspace takes more
/// ([`nearest_blocks`]).
pub const NEAREST_BLOCKS: u64 = 10;

/// The blocks a search ranks in a workspace of [`LARGE_WORKSPACE`] messages or more, where the
/// bit graph misses most: once the blocks came from the nearest sessions only
/// ([`NEAREST_SESSIONS`]) their scan was cheap enough for more. On a 1M corpus, 0.606 with 10 and
/// 0.617 with 15 or 20 (within context 0.639 → 0.656); on `make eval`'s corpora of 5,000 turns,
/// where the graph misses little, 20 lost one or two questions of 660 at r@5 and within context
/// (the evaluation's run-to-run spread) and gained none (docs/search.md, "The nearest sessions,
/// then their blocks").
pub const NEAREST_BLOCKS_IN_LARGE_WORKSPACE: u64 = 20;

/// A workspace this large ranks the most blocks ([`nearest_blocks`]).
pub const LARGE_WORKSPACE: u64 = 100_000;

/// The blocks of turns a search ranks in a workspace of `messages` messages.
pub fn nearest_blocks(messages: u64) -> u64 {
    if messages >= LARGE_WORKSPACE {
        NEAREST_BLOCKS_IN_LARGE_WORKSPACE
    } else {
        NEAREST_BLOCKS
    }
}

/// Sessions whose summed vectors (`message_session_sums`) are nearest the query, the only ones
/// whose blocks a search of a workspace or a peer scans. At a million messages the exact scan of
/// every block (31,521 sums) was a quarter of a workspace search; the sessions' sums are a
/// few hundred rows there, and the blocks of 20 sessions of 2,000 turns some 1,260. On that
/// corpus, the 180 planted questions: recall@10 0.606 with 10 sessions (the same blocks' hits but
/// one) and 0.617 with 20 or 30, search p50 102-107 ms before and 84-86 ms after.
pub const NEAREST_SESSIONS: u64 = 20;

/// The narrowest HNSW scan beam (`hnsw.ef_search`) a search uses in a workspace of 10,000
/// messages or more, however few candidates it reads ([`vector_scan_beam`]): a search of the
/// default 10 results' own width. It was pgvector's widest, 1000, while the bit graph alone found
/// the turns of a large workspace, as a narrow scan stops short of neighbours an exact scan
/// finds (recall@10 0.48 at 100 and 0.58 at 1000 at a million messages). Since the nearest
/// sessions' blocks find what the graph misses, every beam from 40 to 1000 read the same
/// recall@10 (0.617) and recall@50 (0.717) on that corpus, and the widest only cost time
/// (docs/search.md, "The scan beam, once the blocks find the islands").
pub const DEFAULT_SEARCH_BEAM: u16 = 100;

/// The server's search settings (docs/configuration.md).
#[derive(Args, Clone, Copy, Debug)]
pub struct SearchArgs {
    /// Live explicit conclusions the deriver drew from messages raise those messages in message
    /// search, for callers who may read conclusions (docs/search.md); false: messages only.
    #[arg(long, env = "HONCHO_SEARCH_CONCLUSION_KEYS", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub search_conclusion_keys: bool,
    /// The narrowest HNSW scan beam of the vector leg (pgvector's `hnsw.ef_search`, 40-1000):
    /// wider finds more of the true neighbours in a large workspace and costs time.
    #[arg(long, env = "HONCHO_SEARCH_BEAM", default_value_t = DEFAULT_SEARCH_BEAM,
          value_parser = clap::value_parser!(u16).range(40..=1000))]
    pub search_beam: u16,
}

/// The rows the vector leg reads from the bit index for a search of `limit` results.
pub fn vector_candidates(limit: u64) -> u64 {
    limit * POOL_PER_RESULT * CANDIDATES_PER_VECTOR_HIT
}

/// Messages of a workspace per slot of the HNSW scan's beam floor: the floor is one slot per
/// this many messages, up to the server's beam (HONCHO_SEARCH_BEAM; [`DEFAULT_SEARCH_BEAM`], which
/// a workspace of 10,000 messages reaches). A wide beam is for recall in large workspaces; at
/// 10,000 messages it changed no recall, and its cost there made the planner prefer an exact
/// scan of the bits over the scope's rows, which reads every vector (with 1536 dimensions each
/// is 6 kB and stored out of line: 65-92 ms of an 84 ms session search, against 6 ms through the
/// index at a beam of 100; bench/README.md, "Against Honcho").
pub const MESSAGES_PER_BEAM_SLOT: u64 = 100;

/// The HNSW scan beam for a search of `limit` results in a workspace of `messages` messages: as
/// wide as the candidates it reads, and no narrower than one slot per
/// [`MESSAGES_PER_BEAM_SLOT`] messages up to the server's `floor` (HONCHO_SEARCH_BEAM).
pub fn vector_scan_beam(limit: u64, floor: u16, messages: u64) -> u64 {
    let floor = std::cmp::min(u64::from(floor), messages / MESSAGES_PER_BEAM_SLOT);
    std::cmp::max(vector_candidates(limit), floor)
}

/// Matched messages of one session with the messages around them.
#[derive(Clone, Debug, PartialEq)]
pub struct Snippet {
    pub workspace: String,
    pub session: String,
    /// The matches of this snippet, in `seq_in_session` order.
    pub matched: Vec<Message>,
    /// Every message of the merged window, in `seq_in_session` order; contains `matched`.
    pub context: Vec<Message>,
}

/// A snippet before its context is fetched: the merged window and its matches.
#[derive(Clone, Debug, PartialEq)]
pub struct SnippetPlan {
    pub range: SeqRange,
    /// In `seq_in_session` order.
    pub matched: Vec<Message>,
    /// Position in the ranked results of the best match.
    pub best: usize,
}

/// Longest search query, in characters. MiniLM reads at most 256 tokens (about this many
/// characters of English) and full text gains nothing from more: past that a query only makes
/// the full-text and substring legs slower.
pub const MAX_QUERY_CHARS: usize = 1000;
/// Most words (runs of letters and digits, which is what becomes a lexeme) in a search query:
/// `plainto_tsquery` ANDs one term per word.
pub const MAX_QUERY_WORDS: usize = 64;

/// Refuses a query text longer than [`MAX_QUERY_CHARS`] or with more than [`MAX_QUERY_WORDS`]
/// words (searches and `queryConclusions`).
pub fn check_query(text: &str) -> StoreResult<()> {
    let chars = if text.len() > MAX_QUERY_CHARS {
        text.chars().count()
    } else {
        0
    };
    if chars > MAX_QUERY_CHARS {
        return Err(StoreError::TooLarge {
            limit: "searchQueryChars",
            max: MAX_QUERY_CHARS,
            message: format!("query is {chars} characters long; the limit is {MAX_QUERY_CHARS}"),
        });
    }
    let words = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .count();
    if words > MAX_QUERY_WORDS {
        return Err(StoreError::TooLarge {
            limit: "searchQueryWords",
            max: MAX_QUERY_WORDS,
            message: format!("query has {words} words; the limit is {MAX_QUERY_WORDS}"),
        });
    }
    Ok(())
}

pub fn check_limit(limit: u64) -> StoreResult<()> {
    if !(1..=MAX_SEARCH_LIMIT).contains(&limit) {
        return Err(StoreError::invalid(format!(
            "limit must be between 1 and {MAX_SEARCH_LIMIT} (got {limit})"
        )));
    }
    Ok(())
}

pub fn check_context_window(window: i64) -> StoreResult<()> {
    if !(0..=MAX_CONTEXT_WINDOW).contains(&window) {
        return Err(StoreError::invalid(format!(
            "contextWindow must be between 0 and {MAX_CONTEXT_WINDOW} (got {window})"
        )));
    }
    Ok(())
}

impl Store {
    /// The `limit` best messages of `scope` for `query` (and the filter DSL), best first.
    /// A workspace or session that does not exist has no messages: the result is empty.
    /// `keys` says whether conclusions may raise the messages they cite (the caller may read
    /// them; the server's setting has the last word, [`Store::with_conclusion_keys`]).
    #[tracing::instrument(name = "store.search", level = "debug", skip_all)]
    pub async fn search(
        &self,
        scope: SearchScope<'_>,
        query: &str,
        filters: &Value,
        limit: u64,
        keys: SearchKeys,
    ) -> StoreResult<Vec<Message>> {
        check_limit(limit)?;
        check_query(query)?;
        let filter = filter::parse(Resource::Message, filters)?;
        let text = query.replace('\0', "");
        if text.trim().is_empty() || filter.matches_nothing() {
            return Ok(Vec::new());
        }
        // Beside a vector, the legs read the query without the peers it names (`without_names`);
        // with no vector (no embedder, or embedding failed) full text answers alone and keeps
        // them, as the name is then the only way to the speaker's turns. Among more peers than a
        // conversation's two the legs keep them too, unless the name is common
        // ([`NAMES_OUT_MAX_PEERS`], [`NAMES_OUT_MIN_SHARE`]).
        let reach = match self.embedder() {
            Some(_) => self.reach(scope, &text).await?,
            None => Reach::default(),
        };
        let rule = self.names();
        let names_in = !reach.names_out(&scope, &rule);
        let (messages, mut named) = (reach.messages, reach.named);
        if rule.in_query || names_in {
            named.clear();
        }
        let speaker_weight = if names_in {
            SPEAKER_WEIGHT_NAMES_IN
        } else {
            rule.speaker_weight
        };
        let unnamed = without_names(&text, &named);
        let vector = self.embed_query(&unnamed).await;
        let with_vector = vector.is_some();
        let legs_text = if with_vector {
            unnamed
        } else {
            Cow::Borrowed(text.as_str())
        };
        let conclusion_keys = keys == SearchKeys::WithConclusions && self.conclusion_keys();
        let (sql, values) = hybrid_query(
            scope,
            SearchText {
                legs: &legs_text,
                asked: &text,
                speaker_weight,
            },
            vector,
            nearest_blocks(messages),
            &filter,
            limit,
            conclusion_keys,
        )
        .build(PostgresQueryBuilder);
        let statement = Statement::from_sql_and_values(DbBackend::Postgres, sql, values);
        let select = || message::Entity::find().from_raw_sql(statement.clone());
        if !with_vector {
            return Ok(select().all(self.reader()).await?);
        }
        let options = TxOptions::default()
            .iterative_scan(IterativeScan::Relaxed)
            .ef_search_for(vector_scan_beam(limit, self.search_beam(), messages));
        let select = &select;
        self.read_transaction(options, |txn| async move { Ok(select().all(&*txn).await?) })
            .await
    }

    /// What a search of `scope` for `text` reaches ([`Reach`]): one statement, each part an
    /// index lookup.
    async fn reach(&self, scope: SearchScope<'_>, text: &str) -> StoreResult<Reach> {
        // Counting stops one past the most peers for names out: only "more than that" matters.
        let (peers, session) = match scope {
            SearchScope::Workspace(_) => {
                ("SELECT 1 FROM peers WHERE workspace_name = $1 LIMIT $4", "")
            }
            SearchScope::Session(_, s) => (
                "SELECT 1 FROM session_peers WHERE workspace_name = $1 AND session_name = $3 LIMIT $4",
                s,
            ),
            // One author: nobody else's turns to crowd the legs.
            SearchScope::Peer(..) => ("SELECT 1", ""),
        };
        let row = self
            .reader()
            .query_one_raw(stmt(
                &format!(
                    "WITH named AS (SELECT name FROM peers WHERE workspace_name = $1 AND name = ANY($2)) \
                     SELECT (SELECT docs FROM search_corpus WHERE workspace_name = $1) AS docs, \
                     ARRAY(SELECT name FROM named) AS named, \
                     (SELECT count(*) FROM ({peers}) p) AS peers, \
                     (SELECT COALESCE(sum({fewest}), 0)::bigint FROM named n) AS named_messages",
                    fewest = name_messages_sql("n.name", "$1"),
                ),
                [
                    scope.workspace().into(),
                    SqlValue::from(peer_id_candidates(text)),
                    session.into(),
                    self.names().out_max_peers.saturating_add(1).into(),
                ],
            ))
            .await?;
        let Some(row) = row else {
            return Ok(Reach::default());
        };
        let docs: Option<i64> = row.try_get("", "docs")?;
        Ok(Reach {
            messages: u64::try_from(docs.unwrap_or(0)).unwrap_or(0),
            named: row.try_get("", "named")?,
            peers: row.try_get("", "peers")?,
            named_messages: row.try_get("", "named_messages")?,
        })
    }

    /// The query's embedding, or None (no embedder, or it failed: full text answers alone).
    async fn embed_query(&self, text: &str) -> Option<Vec<f32>> {
        let embedder = self.embedder()?;
        match embedder.embed(&[text.to_owned()]).await {
            Ok(mut v) if v.len() == 1 => v.pop(),
            Ok(v) => {
                tracing::warn!(
                    vectors = v.len(),
                    "embedder returned no single vector for the query; searching by full text only"
                );
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "query embedding failed; searching by full text only");
                None
            }
        }
    }
}

/// SQL for the messages of `workspace` holding the name `name` (both SQL expressions), as the
/// full-text statistics count them: the fewest holding one of its lexemes, since a message's text
/// holds its author's id ([`NAMES_OUT_MIN_SHARE`]). NULL when a lexeme is in no message.
pub fn name_messages_sql(name: &str, workspace: &str) -> String {
    format!(
        "(SELECT min(t.docs) FROM unnest(tsvector_to_array({lexemes})) AS l(lexeme) \
         JOIN search_terms t ON t.workspace_name = {workspace} AND t.lexeme = l.lexeme)",
        lexemes = migration::to_tsvector(name),
    )
}

/// Groups ranked results into snippet windows: per session, matches sorted by seq, windows
/// `[max(1, seq − w), seq + w]` merged when `start ≤ previous end + 1` (overlapping or touching),
/// the snippets ordered by the rank of their best match.
pub fn plan_snippets(results: &[Message], window: i64) -> Vec<SnippetPlan> {
    let mut matches: Vec<(usize, &Message)> = results.iter().enumerate().collect();
    matches.sort_by(|(_, a), (_, b)| {
        (&a.workspace_name, &a.session_name, a.seq_in_session).cmp(&(
            &b.workspace_name,
            &b.session_name,
            b.seq_in_session,
        ))
    });
    let mut plans: Vec<SnippetPlan> = Vec::new();
    for (rank, m) in matches {
        let start = std::cmp::max(m.seq_in_session - window, 1);
        let end = m.seq_in_session + window;
        match plans.last_mut() {
            Some(plan)
                if plan.range.workspace == m.workspace_name
                    && plan.range.session == m.session_name
                    && start <= plan.range.to + 1 =>
            {
                plan.range.to = std::cmp::max(plan.range.to, end);
                plan.matched.push(m.clone());
                plan.best = plan.best.min(rank);
            }
            _ => plans.push(SnippetPlan {
                range: SeqRange {
                    workspace: m.workspace_name.clone(),
                    session: m.session_name.clone(),
                    from: start,
                    to: end,
                },
                matched: vec![m.clone()],
                best: rank,
            }),
        }
    }
    plans.sort_by_key(|p| p.best);
    plans
}

/// Turns plans into snippets with `context(range)` (the messages of the range, in seq order).
/// With `window` 0 the context is the matches and `context` is not called. A match missing from
/// its context (it cannot be, short of a concurrent delete) is put back, so `matched ⊆ context`.
pub fn assemble_snippets(
    plans: Vec<SnippetPlan>,
    window: i64,
    mut context: impl FnMut(&SeqRange) -> Vec<Message>,
) -> Vec<Snippet> {
    plans
        .into_iter()
        .map(|plan| {
            let mut ctx = if window == 0 {
                plan.matched.clone()
            } else {
                context(&plan.range)
            };
            for m in &plan.matched {
                if !ctx.iter().any(|c| c.id == m.id) {
                    ctx.push(m.clone());
                }
            }
            ctx.sort_by_key(|m| m.seq_in_session);
            Snippet {
                workspace: plan.range.workspace,
                session: plan.range.session,
                matched: plan.matched,
                context: ctx,
            }
        })
        .collect()
}

pub(super) fn m() -> Alias {
    Alias::new("m")
}

pub(super) fn a(name: &str) -> Alias {
    Alias::new(name)
}

/// `FROM messages AS m WHERE <scope> AND <filters> AND <extra>`.
pub(super) fn leg(scope: SearchScope<'_>, filter: &Filter, extra: Condition) -> SelectStatement {
    let mut cond = Condition::all();
    match scope {
        MessageScope::Workspace(ws) => {
            cond = cond.add(Expr::col((m(), message::Column::WorkspaceName)).eq(ws));
        }
        MessageScope::Session(ws, s) => {
            cond = cond
                .add(Expr::col((m(), message::Column::WorkspaceName)).eq(ws))
                .add(Expr::col((m(), message::Column::SessionName)).eq(s));
        }
        MessageScope::Peer(ws, p) => {
            cond = cond
                .add(Expr::col((m(), message::Column::WorkspaceName)).eq(ws))
                .add(Expr::col((m(), message::Column::PeerName)).eq(p));
        }
    }
    let mut q = Query::select();
    q.from_as(a("messages"), m())
        .cond_where(cond.add(filter.condition("m")).add(extra));
    q
}

pub(super) fn cte(name: &str, query: SelectStatement, materialized: bool) -> CommonTableExpression {
    let mut c = CommonTableExpression::new();
    c.table_name(a(name)).query(query);
    if materialized {
        c.materialized(true);
    }
    c
}

/// BM25's term-frequency saturation and length normalisation (the usual values).
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// `"terms"`: the query's lexemes (english configuration: stemmed, stop words dropped), each as a
/// tsquery of its own, with its inverse document frequency in the workspace,
/// `ln(1 + (N − df + 0.5) / (df + 0.5))` (never negative), and the workspace's mean document
/// length, from the statistics the triggers keep.
fn terms(workspace: &str, text: &str, pool: u64) -> SelectStatement {
    let mut q = Query::select();
    q.expr_as(Expr::cust(LEXEME_QUERY), a("query"))
        .expr_as(
            Expr::cust(
                r#"ln(1 + (GREATEST(COALESCE("c"."docs", 0) - COALESCE("s"."docs", 0), 0) + 0.5) / (COALESCE("s"."docs", 0) + 0.5))"#,
            ),
            a("idf"),
        )
        .expr_as(
            Expr::cust(r#"COALESCE("c"."lexemes"::float8 / NULLIF("c"."docs", 0), 1)"#),
            a("avgdl"),
        )
        .expr_as(
            Expr::cust(format!(
                r#"{k1p1:?} * ln(1 + (GREATEST(COALESCE("c"."docs", 0) - COALESCE("s"."docs", 0), 0) + 0.5) / (COALESCE("s"."docs", 0) + 0.5))"#,
                k1p1 = BM25_K1 + 1.0
            )),
            a("bound"),
        )
        .expr_as(Expr::cust(r#""t"."t""#), a("lexeme"))
        .expr_as(
            // The postings up to this lexeme, rarest first, within the budget; or only its own
            // (the rarest lexeme with postings is read whatever its size).
            Expr::cust(format!(
                r#"sum(COALESCE("s"."docs", 0)) OVER (ORDER BY COALESCE("s"."docs", 0), "t"."t" ROWS UNBOUNDED PRECEDING) <= GREATEST({budget}, COALESCE("s"."docs", 0))"#,
                budget = first_class_postings(pool)
            )),
            a("first"),
        )
        .from_function(
            Func::cust("unnest").arg(Expr::cust_with_values(
                format!("tsvector_to_array({})", migration::to_tsvector("$1")),
                [text.to_owned()],
            )),
            a("t"),
        )
        .join_as(
            JoinType::LeftJoin,
            a("search_corpus"),
            a("c"),
            Expr::cust_with_values(r#""c"."workspace_name" = $1"#, [workspace.to_owned()]),
        )
        .join_as(
            JoinType::LeftJoin,
            a("search_terms"),
            a("s"),
            Expr::cust_with_values(
                r#""s"."workspace_name" = $1 AND "s"."lexeme" = "t"."t""#,
                [workspace.to_owned()],
            ),
        );
    q
}

/// How many postings the full-text leg reads before it knows its pool's threshold, per slot of
/// the pool: the query's rarest lexemes are read whole until their postings (their document
/// frequencies in the workspace, smallest first) would pass `pool · FIRST_POSTINGS_PER_SLOT`,
/// and at least the rarest one is. The budget decides speed, never results (see
/// [`full_text_leg`]). 50 is the one value measured: with it the 180 planted questions of
/// `make bench-scale` at a million messages took a third of the time of the two fixed classes
/// before it, with the same hits (bench/history/2026-12.md, "Scale: MaxScore in two passes").
pub const FIRST_POSTINGS_PER_SLOT: u64 = 50;

fn first_class_postings(pool: u64) -> u64 {
    pool * FIRST_POSTINGS_PER_SLOT
}

/// The query has at least one lexeme (a query of stop words and punctuation only finds nothing).
pub(super) const HAS_TERMS: &str = r#"EXISTS (SELECT 1 FROM "terms")"#;

/// One lexeme as a tsquery of its own, quoted so that no lexeme is read as an operator: the
/// full-text leg joins each lexeme to the messages holding it through the GIN index, the way an
/// inverted index answers a disjunction.
const LEXEME_QUERY: &str =
    r#"('''' || replace(replace("t"."t", E'\\', E'\\\\'), '''', '''''') || '''')::tsquery"#;

/// How often the lexeme `t` occurs in the message `m`: its cover density with every weight 1,
/// which for a one-lexeme query counts its positions, read without unnesting the whole tsvector
/// (unnesting every candidate's tsvector was most of a search's time).
const TERM_FREQUENCY: &str = r#"ts_rank_cd('{1,1,1,1}', "m"."content_tsv", "t"."query")::float8"#;

/// BM25 of a message over the pairs (message, lexeme) grouped into one row: for each,
/// `idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · |m| / avgdl))`, |m| its number of lexemes.
fn bm25() -> String {
    format!(
        "sum({})",
        bm25_term(r#""idf""#, r#""avgdl""#, r#""tf""#, r#""dl""#)
    )
}

/// One lexeme's BM25 term, from SQL expressions for its parts.
fn bm25_term(idf: &str, avgdl: &str, tf: &str, dl: &str) -> String {
    format!(
        "{idf} * {tf} * {k1p1:?} / ({tf} + {k1:?} * (1 - {b:?} + {b:?} * {dl} / {avgdl}))",
        k1 = BM25_K1,
        k1p1 = BM25_K1 + 1.0,
        b = BM25_B,
    )
}

/// The BM25 terms of the lexemes of the CTE `lexemes` that `which` selects and the message `m`
/// holds (0 if none), evaluated on its row: for the messages a rarer lexeme found, reading the
/// commoner lexemes' postings (half the conversation for a speaker's name) would cost more than
/// looking at each message.
fn looked_up_terms_of_m(lexemes: &str, which: &str) -> String {
    format!(
        r#"(SELECT COALESCE(sum({}), 0) FROM "{lexemes}" AS "t" WHERE {which} AND "m"."content_tsv" @@ "t"."query")"#,
        bm25_term(
            r#""t"."idf""#,
            r#""t"."avgdl""#,
            TERM_FREQUENCY,
            r#"length("m"."content_tsv")::float8"#
        )
    )
}

/// Whether the full-text leg also takes the whole query as a case-insensitive substring: when it
/// holds a character that is neither a letter, a digit, a space nor sentence punctuation
/// (`user@example.com`, `snake_case`, `100%`, `a/b`), which lexemes do not capture. Words and
/// questions are served by their lexemes alone, through the index.
fn wants_substring(text: &str) -> bool {
    text.chars()
        .any(|c| !(c.is_alphanumeric() || c.is_whitespace() || ".,;:!?'\"()-\u{2019}".contains(c)))
}

/// Joins `select` (over `messages AS m`) to the lexemes of the CTE `lexemes` that `m` holds among
/// those `which` selects, one row per (message, lexeme) with what BM25 needs of the pair, and in
/// `rest` the BM25 terms of the lexemes `rest` selects, looked up on the message.
fn lexeme_pairs(select: &mut SelectStatement, lexemes: &str, which: &str, rest: &str) {
    select
        .join_as(
            JoinType::InnerJoin,
            a(lexemes),
            a("t"),
            Expr::cust(format!(r#"{which} AND "m"."content_tsv" @@ "t"."query""#)),
        )
        .column((m(), message::Column::Id))
        .column((m(), message::Column::CreatedAt))
        .column((a("t"), a("idf")))
        .column((a("t"), a("avgdl")))
        .expr_as(Expr::cust(TERM_FREQUENCY), a("tf"))
        .expr_as(Expr::cust(r#"length("m"."content_tsv")::float8"#), a("dl"))
        .expr_as(Expr::cust(looked_up_terms_of_m(lexemes, rest)), a("rest"));
}

/// `name`: the BM25 score of each message of the pairs in the CTE `pairs`, one row per message:
/// its pairs' terms plus what was looked up on it (the same in each of its rows).
fn bm25_per_message(with: &mut WithClause, name: &str, pairs: &str) {
    let mut scored = Query::select();
    scored
        .column(a("id"))
        .column(a("created_at"))
        .expr_as(
            Expr::cust(format!(r#"{} + max("rest")"#, bm25())),
            a("score"),
        )
        .from(a(pairs))
        .group_by_col(a("id"))
        .group_by_col(a("created_at"));
    with.cte(cte(name, scored, true));
}

/// A leg's hits from the CTE `hits`, ranked from 1 in `order`, with the leg's fusion weight.
pub(super) fn ranked(hits: &str, order: &str, weight: f64) -> SelectStatement {
    let mut r = Query::select();
    r.column(a("id"))
        .expr_as(
            Expr::cust(format!("ROW_NUMBER() OVER (ORDER BY {order})")),
            a("rank"),
        )
        .expr_as(Expr::cust(format!("{weight:?}::float8")), a("w"))
        .from(a(hits));
    r
}

/// `SELECT "id", "created_at", "score" FROM <cte>`.
fn scores_of(cte: &str) -> SelectStatement {
    let mut q = Query::select();
    q.column(a("id"))
        .column(a("created_at"))
        .column(a("score"))
        .from(a(cte));
    q
}

/// The vector leg: its CTEs go into `with`; the answer ranks its hits.
fn vector_leg(
    with: &mut WithClause,
    scope: SearchScope<'_>,
    filter: &Filter,
    q: &SqlValue,
    dims: usize,
    limit: u64,
    blocks: u64,
) -> SelectStatement {
    let pool = limit * POOL_PER_RESULT;
    let candidates = vector_candidates(limit);
    // Candidates from the index over the vectors' sign bits, in Hamming order (the expression
    // is the index's, so the planner can use it), then ranked by exact cosine.
    let mut near = leg(
        scope,
        filter,
        Condition::all()
            .add(Expr::col((m(), a("embedding"))).is_not_null())
            .add(Expr::cust(HAS_TERMS)),
    );
    near.column((m(), message::Column::Id))
        .column((m(), a("embedding")))
        .order_by_expr(
            Expr::cust_with_values(
                format!(
                    r#"binary_quantize("m"."embedding")::bit({dims}) <~> binary_quantize($1)::bit({dims})"#
                ),
                [q.clone()],
            ),
            Order::Asc,
        )
        .limit(candidates);
    with.cte(cte("vec_near", near, true));
    // The turns around the full-text leg's hits are ranked by their exact distance too
    // ([`HIT_WINDOW`]). More candidates never rank a farther message above a nearer one; a
    // message both ways keeps its one distance.
    let mut windowed = Query::select();
    windowed.column(a("id")).from(a("fts_hits"));
    best_text_hits_first(&mut windowed).limit(WINDOWED_HITS);
    with.cte(cte("windowed_hits", windowed, false));
    let mut around = vectors_in_scope(scope, filter);
    around
        .join_as(
            JoinType::InnerJoin,
            a("windowed_hits"),
            a("h"),
            Expr::cust("true"),
        )
        .join_as(
            JoinType::InnerJoin,
            a("messages"),
            a("x"),
            Expr::cust(format!(
                r#""x"."id" = "h"."id" AND "m"."workspace_name" = "x"."workspace_name" AND "m"."session_name" = "x"."session_name" AND "m"."seq_in_session" BETWEEN "x"."seq_in_session" - {HIT_WINDOW} AND "x"."seq_in_session" + {HIT_WINDOW}"#
            )),
        );
    let mut candidates = Query::select();
    candidates
        .column(a("id"))
        .column(a("embedding"))
        .from(a("vec_near"));
    candidates.union(UnionType::All, around);
    candidates.union(
        UnionType::All,
        blocks_nearest(with, scope, filter, q, blocks),
    );
    with.cte(cte("vec_candidates", candidates, false));
    let mut hits = Query::select();
    hits.column(a("id"))
        .expr_as(
            Expr::cust_with_values(r#"min("embedding" <=> $1)"#, [q.clone()]),
            a("dist"),
        )
        .from(a("vec_candidates"))
        .group_by_col(a("id"))
        .order_by(a("dist"), Order::Asc)
        .limit(pool);
    with.cte(cte("vec_hits", hits, true));
    ranked("vec_hits", r#""dist", "id""#, VECTOR_WEIGHT)
}

/// `SELECT "m"."id", "m"."embedding"` of the messages in scope and filter that have a vector.
fn vectors_in_scope(scope: SearchScope<'_>, filter: &Filter) -> SelectStatement {
    let mut q = leg(
        scope,
        filter,
        Condition::all().add(Expr::col((m(), a("embedding"))).is_not_null()),
    );
    q.column((m(), message::Column::Id))
        .column((m(), a("embedding")));
    q
}

/// The messages of the `blocks` blocks of consecutive turns whose summed vectors are
/// nearest the query (`message_blocks`, an exact scan of the blocks of the session searched, or
/// of the [`NEAREST_SESSIONS`] sessions nearest it), for the vector leg to rank by exact cosine:
/// where the bit graph reaches a conversation badly, its blocks still point at it. The CTEs go
/// into `with`.
fn blocks_nearest(
    with: &mut WithClause,
    scope: SearchScope<'_>,
    filter: &Filter,
    q: &SqlValue,
    blocks: u64,
) -> SelectStatement {
    let mut near = nearest_sums(
        scope,
        "message_blocks",
        &["session_name", "block"],
        q,
        blocks,
    );
    if let MessageScope::Session(_, session) = scope {
        near.and_where(Expr::col(a("session_name")).eq(session));
    } else {
        let sessions = nearest_sums(
            scope,
            "message_session_sums",
            &["session_name"],
            q,
            NEAREST_SESSIONS,
        );
        with.cte(cte("near_sessions", sessions, true));
        near.and_where(Expr::cust(
            r#""session_name" IN (SELECT "session_name" FROM "near_sessions")"#,
        ));
    }
    with.cte(cte("near_blocks", near, true));
    let mut in_blocks = vectors_in_scope(scope, filter);
    in_blocks
        .join_as(
            JoinType::InnerJoin,
            a("near_blocks"),
            a("b"),
            Expr::cust(format!(
                r#""m"."session_name" = "b"."session_name" AND "m"."seq_in_session" BETWEEN "b"."block" * {MESSAGE_BLOCK_TURNS} AND "b"."block" * {MESSAGE_BLOCK_TURNS} + {}"#,
                MESSAGE_BLOCK_TURNS - 1
            )),
        );
    in_blocks
}

/// The `n` rows of the summed vectors' table `sums` in the scope's workspace nearest the query
/// `q` (an exact scan), as their `columns`.
fn nearest_sums(
    scope: SearchScope<'_>,
    sums: &str,
    columns: &[&str],
    q: &SqlValue,
    n: u64,
) -> SelectStatement {
    let mut near = Query::select();
    near.columns(columns.iter().map(|c| a(c)))
        .from(a(sums))
        .and_where(Expr::col(a("workspace_name")).eq(scope.workspace()))
        .and_where(Expr::cust(HAS_TERMS))
        .order_by_expr(
            Expr::cust_with_values(r#""vector_sum" <=> $1"#, [q.clone()]),
            Order::Asc,
        )
        .limit(n);
    near
}

/// The full-text leg's order: BM25, then the newest, then the id, so one search gives one order.
fn best_text_hits_first(q: &mut SelectStatement) -> &mut SelectStatement {
    q.order_by(a("score"), Order::Desc)
        .order_by(a("created_at"), Order::Desc)
        .order_by(a("id"), Order::Desc)
}

/// The full-text leg: its CTEs go into `with`; the answer ranks its hits.
fn full_text_leg(
    with: &mut WithClause,
    scope: SearchScope<'_>,
    text: &str,
    filter: &Filter,
    pool: u64,
    weigh_by_share: bool,
) -> SelectStatement {
    // The leg scores what a disjunction over an inverted index would, and skips postings that
    // cannot reach the pool (MaxScore): a message scores less than the sum of the BM25 bounds
    // (`idf · (k1 + 1)`) of the lexemes it holds. Two passes:
    // 1. "fts_first": the postings of the query's rarest lexemes (`"terms"."first"`, within a
    //    budget), each message completed with the other lexemes by looking at its row. The
    //    pool's threshold is the pool-th best of those scores.
    // 2. "later": the other lexemes, commonest first; those whose bounds summed from the commonest
    //    stay under the threshold are *skipped*: a message holding only them cannot enter the
    //    pool. The rest are read for the messages pass 1 did not find, each completed with the
    //    skipped lexemes it holds.
    // The hits are those of scoring every message holding a lexeme, whatever the budget.
    //
    // Pass 1 also takes, for a query with symbols, every message holding the whole query as a
    // substring, with nothing that scores (BM25 0) but what it holds.
    let not_first = r#"NOT "t"."first""#;
    let mut first = leg(scope, filter, Condition::all());
    lexeme_pairs(&mut first, "terms", r#""t"."first""#, not_first);
    if wants_substring(text) {
        let mut substring = leg(
            scope,
            filter,
            Condition::all()
                .add(Expr::cust(HAS_TERMS))
                .add(Expr::cust_with_values(
                    r#""m"."content" ILIKE $1"#,
                    [like_pattern(text)],
                )),
        );
        substring
            .column((m(), message::Column::Id))
            .column((m(), message::Column::CreatedAt))
            .expr_as(Expr::cust("0::float8"), a("idf"))
            .expr_as(Expr::cust("1::float8"), a("avgdl"))
            .expr_as(Expr::cust("0::float8"), a("tf"))
            .expr_as(Expr::cust("0::float8"), a("dl"))
            .expr_as(
                Expr::cust(looked_up_terms_of_m("terms", not_first)),
                a("rest"),
            );
        first.union(UnionType::All, substring);
    }
    with.cte(cte("fts_first", first, false));
    bm25_per_message(with, "fts_first_scored", "fts_first");

    let mut later = Query::select();
    later
        .column(a("query"))
        .column(a("idf"))
        .column(a("avgdl"))
        .expr_as(
            Expr::cust(format!(
                r#"COALESCE(sum("bound") OVER (ORDER BY "bound", "lexeme" ROWS UNBOUNDED PRECEDING) < (SELECT "score" FROM "fts_first_scored" ORDER BY "score" DESC OFFSET {} LIMIT 1), false)"#,
                pool.saturating_sub(1)
            )),
            a("skipped"),
        )
        .from(a("terms"))
        .and_where(Expr::cust(r#"NOT "first""#));
    with.cte(cte("later", later, true));
    let mut rest = leg(
        scope,
        filter,
        Condition::all().add(Expr::cust(
            r#"NOT EXISTS (SELECT 1 FROM "fts_first_scored" AS "c" WHERE "c"."id" = "m"."id")"#,
        )),
    );
    lexeme_pairs(
        &mut rest,
        "later",
        r#"NOT "t"."skipped""#,
        r#""t"."skipped""#,
    );
    with.cte(cte("fts_later", rest, false));
    bm25_per_message(with, "fts_later_scored", "fts_later");

    let mut all = scores_of("fts_first_scored");
    all.union(UnionType::All, scores_of("fts_later_scored"));
    with.cte(cte("fts_all", all, false));
    let mut hits = Query::select();
    hits.column(a("id"))
        .column(a("created_at"))
        .column(a("score"))
        .from(a("fts_all"));
    best_text_hits_first(&mut hits).limit(pool);
    // Materialized: the vector leg reads it too.
    with.cte(cte("fts_hits", hits, true));
    if !weigh_by_share {
        return ranked(
            "fts_hits",
            r#""score" DESC, "created_at" DESC, "id" DESC"#,
            TEXT_WEIGHT,
        );
    }
    share_weighted(text)
}

/// The full-text leg's hits ranked by BM25 as [`ranked`] would, each weighted by the share of the
/// query's lexemes it holds ([`SHARE_FLOOR_DENOMINATOR`]), looked up on the pool's rows only.
fn share_weighted(text: &str) -> SelectStatement {
    let held = r#"(SELECT count(*) FROM "terms" AS "t" WHERE "m"."content_tsv" @@ "t"."query")"#;
    let above = format!(r#"{held} * {SHARE_FLOOR_DENOMINATOR} > (SELECT count(*) FROM "terms")"#);
    let weight = |above: String| {
        format!(
            "(CASE WHEN {above} THEN {TEXT_WEIGHT:?} ELSE {:?} END)::float8",
            TEXT_WEIGHT * BELOW_SHARE_WEIGHT
        )
    };
    let weight = if wants_substring(text) {
        Expr::cust_with_values(
            weight(format!(r#"{above} OR "m"."content" ILIKE $1"#)),
            [like_pattern(text)],
        )
    } else {
        Expr::cust(weight(above))
    };
    let mut r = Query::select();
    r.column((a("h"), a("id")))
        .expr_as(
            Expr::cust(
                r#"ROW_NUMBER() OVER (ORDER BY "h"."score" DESC, "h"."created_at" DESC, "h"."id" DESC)"#,
            ),
            a("rank"),
        )
        .expr_as(weight, a("w"))
        .from_as(a("fts_hits"), a("h"))
        .join_as(
            JoinType::InnerJoin,
            a("messages"),
            m(),
            Expr::col((m(), message::Column::Id)).equals((a("h"), a("id"))),
        );
    r
}

/// A query as the legs read it and as it was asked: beside a vector the legs read it without the
/// peers it names ([`without_names`]); the speaker weight reads it as asked. A `&str` is both.
#[derive(Clone, Copy, Debug)]
pub struct SearchText<'a> {
    pub legs: &'a str,
    pub asked: &'a str,
    /// How much a peer `asked` names weighs ([`SPEAKER_WEIGHT`] but in `make eval`'s comparison).
    pub speaker_weight: f64,
}

impl<'a> From<&'a str> for SearchText<'a> {
    fn from(text: &'a str) -> Self {
        SearchText {
            legs: text,
            asked: text,
            speaker_weight: SPEAKER_WEIGHT,
        }
    }
}

/// The whole search as one statement (see the module documentation for its shape), the vector
/// leg ranking the turns of the `blocks` nearest blocks ([`nearest_blocks`]). With
/// `conclusion_keys`, the conclusions citing messages are a third leg ([`search_keys`]).
pub fn hybrid_query<'t>(
    scope: SearchScope<'_>,
    text: impl Into<SearchText<'t>>,
    vector: Option<Vec<f32>>,
    blocks: u64,
    filter: &Filter,
    limit: u64,
    conclusion_keys: bool,
) -> WithQuery {
    let SearchText {
        legs: text,
        asked,
        speaker_weight,
    } = text.into();
    let pool = limit * POOL_PER_RESULT;
    let mut with = WithClause::new();
    let mut leg_ranks: Vec<SelectStatement> = Vec::new();
    with.cte(cte("terms", terms(scope.workspace(), text, pool), true));

    let vector = vector.map(|v| (v.len(), SqlValue::from(pgvector::Vector::from(v))));
    // The full-text leg's CTEs come first: the vector leg ranks its hits too.
    let text_ranks = full_text_leg(&mut with, scope, text, filter, pool, vector.is_some());
    if let Some((dims, q)) = &vector {
        leg_ranks.push(vector_leg(
            &mut with, scope, filter, q, *dims, limit, blocks,
        ));
    }
    leg_ranks.push(text_ranks);
    if conclusion_keys {
        let vector = vector.as_ref().map(|(dims, q)| (q, *dims));
        leg_ranks.push(search_keys::key_leg(
            &mut with, scope, text, vector, filter, pool,
        ));
    }

    let mut legs = leg_ranks.into_iter();
    let mut union = legs.next().expect("the full-text leg is always there");
    for other in legs {
        union.union(UnionType::All, other);
    }
    with.cte(cte("ranked", union, false));

    let mut fused = Query::select();
    fused
        .column(a("id"))
        .expr_as(
            Expr::cust(format!(r#"SUM("w" / ({RRF_K} + "rank"))"#)),
            a("score"),
        )
        .from(a("ranked"))
        .group_by_col(a("id"));
    with.cte(cte("fused", fused, false));

    let mut out = Query::select();
    for c in [
        message::Column::Id,
        message::Column::PublicId,
        message::Column::WorkspaceName,
        message::Column::SessionName,
        message::Column::PeerName,
        message::Column::SeqInSession,
        message::Column::Content,
        message::Column::Metadata,
        message::Column::InternalMetadata,
        message::Column::TokenCount,
        message::Column::CreatedAt,
    ] {
        out.column((m(), c));
    }
    out.from_as(a("fused"), a("f"))
        .join_as(
            JoinType::InnerJoin,
            a("messages"),
            m(),
            Expr::col((m(), message::Column::Id)).equals((a("f"), a("id"))),
        )
        .order_by_expr(speaker_weighted(asked, speaker_weight), Order::Desc)
        .order_by((m(), message::Column::PublicId), Order::Asc)
        .limit(limit);
    out.with(with)
}

/// A word of a query as a peer's id would be written: the punctuation around it and an English
/// possessive taken off ("Caroline's?" → "Caroline"). Ids hold `-`, `_` and `.` inside them, so
/// those stay.
fn id_like(word: &str) -> &str {
    let w = word.trim_matches(|c: char| !c.is_alphanumeric());
    w.strip_suffix("'s")
        .or_else(|| w.strip_suffix("’s"))
        .unwrap_or(w)
}

/// The query's words as ids would be written ([`id_like`]), those left empty dropped.
fn id_words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace()
        .map(id_like)
        .filter(|w| !w.is_empty())
}

/// The words of a query that could be a peer's id, lower-cased ([`id_like`]).
pub fn named_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = id_words(text).map(str::to_lowercase).collect();
    words.sort();
    words.dedup();
    words
}

/// The ids a query's words could be, as written and lower-cased, for an index lookup of the
/// workspace's peers (an id is matched as stored; the speaker weight compares lower-cased).
fn peer_id_candidates(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = id_words(text)
        .flat_map(|w| [w.to_owned(), w.to_lowercase()])
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The query as the legs read it: without the words naming one of `peers`. Messages are embedded
/// with their speaker's id (`embed::message_text`), so a question naming a speaker lies near
/// every turn of theirs whatever it says, and the name outweighs the words that carry the
/// question; in full text the name is in half a conversation's turns. The speaker weight reads
/// the names instead ([`SPEAKER_WEIGHT`]). A query that is only names keeps them (a query of
/// nothing would find nothing). The caller passes no peers for a scope of more than
/// [`NAMES_OUT_MAX_PEERS`] whose named peers' names are rare ([`NAMES_OUT_MIN_SHARE`]).
/// Measured: docs/search.md, "The legs read a question without the names".
pub fn without_names<'a>(text: &'a str, peers: &[String]) -> Cow<'a, str> {
    if peers.is_empty() {
        return Cow::Borrowed(text);
    }
    let peers: Vec<String> = peers.iter().map(|p| p.to_lowercase()).collect();
    let kept: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !peers.contains(&id_like(w).to_lowercase()))
        .collect();
    if kept.iter().any(|w| w.chars().any(char::is_alphanumeric)) {
        Cow::Owned(kept.join(" "))
    } else {
        Cow::Borrowed(text)
    }
}

/// The fused score, raised for the messages of a speaker the query names ([`SPEAKER_WEIGHT`]).
fn speaker_weighted(text: &str, speaker_weight: f64) -> Expr {
    Expr::cust_with_values(
        format!(
            r#""f"."score" * CASE WHEN lower("m"."peer_name") = ANY($1) THEN {} ELSE 1 END"#,
            1.0 + speaker_weight
        ),
        [SqlValue::from(named_words(text))],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use sea_orm::sea_query::Values;
    use serde_json::json;

    #[test]
    fn among_more_than_two_peers_only_a_workspace_search_for_a_common_name_reads_it_out() {
        let reach = |peers, named_messages| Reach {
            messages: 1000,
            named: Vec::new(),
            peers,
            named_messages,
        };
        let rule = NameRule::default();
        let workspace = SearchScope::Workspace("w");
        assert!(reach(2, 0).names_out(&workspace, &rule));
        assert!(!reach(3, 99).names_out(&workspace, &rule));
        assert!(reach(3, 100).names_out(&workspace, &rule));
        // A session's statistics are its workspace's: a group chat keeps the names.
        let group = SearchScope::Session("w", "s");
        assert!(!reach(3, 500).names_out(&group, &rule));
        assert!(reach(2, 0).names_out(&group, &rule));
        let empty = Reach {
            messages: 0,
            ..reach(3, 0)
        };
        assert!(!empty.names_out(&workspace, &rule));
    }

    /// The search's statement with no filter, ranking the blocks of a small workspace.
    fn unfiltered(
        scope: MessageScope<'_>,
        text: &str,
        vector: Option<Vec<f32>>,
        limit: u64,
        conclusion_keys: bool,
    ) -> (String, Values) {
        let none = filter::parse(Resource::Message, &Value::Null).unwrap();
        hybrid_query(
            scope,
            text,
            vector,
            NEAREST_BLOCKS,
            &none,
            limit,
            conclusion_keys,
        )
        .build(PostgresQueryBuilder)
    }

    #[test]
    fn the_vector_scan_is_never_narrower_than_the_server_beam_nor_than_its_candidates() {
        let large = 1_000_000;
        assert_eq!(vector_scan_beam(10, 1000, large), 1000);
        assert_eq!(vector_scan_beam(1, DEFAULT_SEARCH_BEAM, large), 100);
        assert_eq!(vector_scan_beam(10, 40, large), vector_candidates(10));
        assert_eq!(vector_scan_beam(100, 300, large), vector_candidates(100));
        assert_eq!(vector_scan_beam(1, 300, large), 300);
    }

    #[test]
    fn the_beam_floor_grows_with_the_workspace_up_to_the_server_beam() {
        // A server beam of 1000: reached at 100,000 messages; at 10,000, the candidates' width.
        assert_eq!(vector_scan_beam(10, 1000, 10_000), 100);
        assert_eq!(vector_scan_beam(1, 1000, 10_000), 100);
        assert_eq!(vector_scan_beam(1, 1000, 0), vector_candidates(1));
        assert_eq!(vector_scan_beam(10, 1000, 50_000), 500);
        assert_eq!(vector_scan_beam(10, 1000, 100_000), 1000);
        assert_eq!(vector_scan_beam(10, 1000, 10_000_000), 1000);
    }

    #[test]
    fn by_default_a_search_of_ten_or_more_scans_at_its_candidates_width_at_any_size() {
        for messages in [0, 10_000, 1_000_000, 10_000_000] {
            assert_eq!(vector_scan_beam(10, DEFAULT_SEARCH_BEAM, messages), 100);
            assert_eq!(vector_scan_beam(50, DEFAULT_SEARCH_BEAM, messages), 500);
        }
        assert_eq!(
            vector_scan_beam(1, DEFAULT_SEARCH_BEAM, 1_000),
            vector_candidates(1)
        );
        assert_eq!(vector_scan_beam(1, DEFAULT_SEARCH_BEAM, 1_000_000), 100);
    }

    #[test]
    fn a_workspace_of_100k_messages_or_more_ranks_twice_the_blocks() {
        assert_eq!(LARGE_WORKSPACE, 100_000);
        assert_eq!(nearest_blocks(0), NEAREST_BLOCKS);
        assert_eq!(nearest_blocks(99_999), NEAREST_BLOCKS);
        assert_eq!(nearest_blocks(100_000), NEAREST_BLOCKS_IN_LARGE_WORKSPACE);
        assert_eq!(nearest_blocks(10_000_000), 2 * NEAREST_BLOCKS);
    }

    #[test]
    fn named_words_drop_punctuation_and_possessives_and_keep_inner_id_characters() {
        assert_eq!(
            named_words("What did Caroline's friend tell user_7 and agent-b.v2?"),
            [
                "agent-b.v2",
                "and",
                "caroline",
                "did",
                "friend",
                "tell",
                "user_7",
                "what"
            ]
        );
        assert_eq!(named_words("  ?! "), Vec::<String>::new());
    }

    #[test]
    fn the_query_is_embedded_without_the_peers_it_names_unless_it_is_only_names() {
        let peers = ["caroline".to_owned(), "Agent-B".to_owned()];
        assert_eq!(
            without_names("What did Caroline's friend tell agent-b?", &peers),
            "What did friend tell"
        );
        // A word that only looks like a peer's id stays ("Carolines" is no possessive).
        assert_eq!(
            without_names("Carolines and Melanie", &peers),
            "Carolines and Melanie"
        );
        assert_eq!(without_names("Caroline?", &peers), "Caroline?");
        assert_eq!(
            without_names("caroline agent-b", &peers),
            "caroline agent-b"
        );
        assert!(matches!(
            without_names("Does Caroline swim?", &[]),
            Cow::Borrowed("Does Caroline swim?")
        ));
    }

    #[test]
    fn peer_ids_are_looked_up_as_written_and_lower_cased() {
        assert_eq!(
            peer_id_candidates("Did Caroline's cat meet caroline?"),
            ["Caroline", "Did", "caroline", "cat", "did", "meet"]
        );
    }

    fn msg(session: &str, seq: i64) -> Message {
        Message {
            id: seq + 1000 * session.len() as i64,
            public_id: format!("{session}-{seq}"),
            workspace_name: "ws".into(),
            session_name: session.into(),
            peer_name: "p".into(),
            seq_in_session: seq,
            content: String::new(),
            metadata: json!({}),
            internal_metadata: json!({}),
            token_count: 0,
            created_at: Utc::now(),
        }
    }

    fn spans(plans: &[SnippetPlan]) -> Vec<(String, i64, i64, Vec<i64>)> {
        plans
            .iter()
            .map(|p| {
                (
                    p.range.session.clone(),
                    p.range.from,
                    p.range.to,
                    p.matched.iter().map(|m| m.seq_in_session).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn overlapping_and_touching_windows_merge() {
        let s = |v: &[(i64, i64, Vec<i64>)]| -> Vec<(String, i64, i64, Vec<i64>)> {
            v.iter()
                .map(|(a, b, c)| ("s".to_owned(), *a, *b, c.clone()))
                .collect()
        };
        // 5 and 7, w=2: [3,7] and [5,9] overlap.
        let p = plan_snippets(&[msg("s", 7), msg("s", 5)], 2);
        assert_eq!(spans(&p), s(&[(3, 9, vec![5, 7])]));
        // 5 and 10: [3,7] and [8,12] touch.
        let p = plan_snippets(&[msg("s", 5), msg("s", 10)], 2);
        assert_eq!(spans(&p), s(&[(3, 12, vec![5, 10])]));
        // 5 and 11: a gap of one message.
        let p = plan_snippets(&[msg("s", 5), msg("s", 11)], 2);
        assert_eq!(spans(&p), s(&[(3, 7, vec![5]), (9, 13, vec![11])]));
        // Window 0: adjacent matches still merge, others do not.
        let p = plan_snippets(&[msg("s", 6), msg("s", 5), msg("s", 9)], 0);
        assert_eq!(spans(&p), s(&[(5, 6, vec![5, 6]), (9, 9, vec![9])]));
        // Windows start at seq 1.
        let p = plan_snippets(&[msg("s", 1)], 3);
        assert_eq!(spans(&p), s(&[(1, 4, vec![1])]));
    }

    #[test]
    fn snippets_follow_the_rank_of_their_best_match() {
        // Ranked: b/20, a/3, b/2, a/30. Snippets: b[18,22] (rank 0), a[1,5] (1), b[1,4] (2), a[28,32] (3).
        let results = [msg("b", 20), msg("a", 3), msg("b", 2), msg("a", 30)];
        let p = plan_snippets(&results, 2);
        let order: Vec<(String, i64)> = p
            .iter()
            .map(|p| (p.range.session.clone(), p.range.from))
            .collect();
        assert_eq!(
            order,
            [
                ("b".to_owned(), 18),
                ("a".to_owned(), 1),
                ("b".to_owned(), 1),
                ("a".to_owned(), 28)
            ]
        );
        assert!(plan_snippets(&[], 2).is_empty());
    }

    #[test]
    fn assembled_context_is_sorted_and_contains_the_matches() {
        let plans = plan_snippets(&[msg("s", 5), msg("s", 7)], 2);
        let snippets = assemble_snippets(plans, 2, |r| {
            // Pretend the context query lost seq 7.
            (r.from..=r.to)
                .filter(|s| *s != 7)
                .rev()
                .map(|s| msg("s", s))
                .collect()
        });
        let seqs: Vec<i64> = snippets[0]
            .context
            .iter()
            .map(|m| m.seq_in_session)
            .collect();
        assert_eq!(seqs, [3, 4, 5, 6, 7, 8, 9]);
        let zero = assemble_snippets(plan_snippets(&[msg("s", 5)], 0), 0, |_| {
            panic!("window 0 needs no query")
        });
        assert_eq!(zero[0].context, zero[0].matched);
    }

    #[test]
    fn only_queries_with_symbols_are_matched_as_substrings() {
        for q in [
            "What did Caroline research?",
            "favorite color",
            "don't, (really) - yes!",
            "l'été dernier",
        ] {
            assert!(!wants_substring(q), "{q}");
        }
        for q in ["bob@example.com", "e_c", "100%", "a/b", "#rust", "x+y"] {
            assert!(wants_substring(q), "{q}");
        }
    }

    #[test]
    fn a_search_of_fifty_looks_around_its_best_twenty_text_hits_only() {
        let (sql, values) = unfiltered(
            MessageScope::Workspace("ws"),
            "favorite color",
            Some(vec![0.5; 3]),
            50,
            false,
        );
        // The first mention of a CTE is its definition; its LIMIT is bound as a parameter.
        let bound_limit = |cte: &str| {
            let at = sql.find(&format!(r#""{cte}" AS "#)).unwrap();
            let definition = &sql[at..at + sql[at..].find(')').unwrap()];
            let n: usize = definition
                .rsplit("LIMIT $")
                .next()
                .unwrap()
                .parse()
                .unwrap();
            values.0[n - 1].clone()
        };
        assert_eq!(
            bound_limit("windowed_hits"),
            SqlValue::BigUnsigned(Some(20))
        );
        // The text leg itself still keeps its whole pool of 100.
        assert_eq!(bound_limit("fts_hits"), SqlValue::BigUnsigned(Some(100)));
    }

    #[test]
    fn a_workspace_search_scans_the_blocks_of_its_nearest_sessions_and_a_session_search_its_own() {
        let build = |scope| unfiltered(scope, "zebra", Some(vec![0.5; 3]), 10, false).0;
        let nearest = r#"IN (SELECT "session_name" FROM "near_sessions")"#;
        for scope in [
            MessageScope::Workspace("ws"),
            MessageScope::Peer("ws", "alice"),
        ] {
            let sql = build(scope);
            assert!(
                sql.contains(r#""near_sessions" AS  MATERIALIZED (SELECT "session_name" FROM "message_session_sums""#)
                    && sql.contains(nearest),
                "{sql}"
            );
        }
        let sql = build(MessageScope::Session("ws", "s"));
        assert!(
            !sql.contains("message_session_sums") && !sql.contains(nearest),
            "{sql}"
        );
    }

    #[test]
    fn one_statement_with_both_legs_and_the_fusion() {
        let (sql, values) = unfiltered(
            MessageScope::Session("ws", "s"),
            "favorite color",
            Some(vec![0.5; 3]),
            10,
            false,
        );
        let fusion = format!(r#"SUM("w" / ({RRF_K} + "rank"))"#);
        for part in [
            r#"WITH "terms" AS  MATERIALIZED (SELECT"#,
            r#""vec_hits" AS  MATERIALIZED (SELECT"#,
            r#""embedding" <=> $"#,
            r#"binary_quantize("m"."embedding")::bit(3) <~> binary_quantize($"#,
            r#""m"."embedding" IS NOT NULL"#,
            r#"ORDER BY "dist" ASC LIMIT"#,
            r#""fts_hits" AS  MATERIALIZED (SELECT"#,
            // The turns around the text leg's hits are ranked by their cosine too.
            r#"INNER JOIN "windowed_hits" AS "h" ON true INNER JOIN "messages" AS "x" ON "x"."id" = "h"."id""#,
            r#""m"."seq_in_session" BETWEEN "x"."seq_in_session" - 12 AND "x"."seq_in_session" + 12"#,
            r#"min("embedding" <=> $"#,
            r#"FROM "vec_candidates" GROUP BY "id" ORDER BY "dist" ASC"#,
            // And the turns of the blocks whose summed vectors are nearest.
            r#"FROM "message_blocks" WHERE "workspace_name" = $"#,
            r#""vector_sum" <=> $"#,
            r#"INNER JOIN "near_blocks" AS "b" ON "m"."session_name" = "b"."session_name" AND "m"."seq_in_session" BETWEEN "b"."block" * 32 AND "b"."block" * 32 + 31"#,
            "tsvector_to_array(to_tsvector('english',",
            r#""m"."content_tsv" @@ "t"."query""#,
            "::tsquery",
            // MaxScore's cut: the rarest lexemes first, the rest read only if they can reach
            // the pool's threshold.
            r#""t"."first" AND "m"."content_tsv" @@ "t"."query""#,
            r#"NOT "t"."skipped" AND "m"."content_tsv" @@ "t"."query""#,
            r#""score" FROM "fts_first_scored" ORDER BY "score" DESC OFFSET 19 LIMIT 1"#,
            "UNION ALL",
            fusion.as_str(),
            // The speaker named in the question weighs four times.
            r#"ORDER BY "f"."score" * CASE WHEN lower("m"."peer_name") = ANY("#,
            r#"THEN 4 ELSE 1 END DESC, "m"."public_id" ASC LIMIT"#,
            // Beside the vector leg a text hit counts by the share of the query it holds.
            r#"FROM "terms" AS "t" WHERE "m"."content_tsv" @@ "t"."query") * 3 > (SELECT count(*) FROM "terms")"#,
        ] {
            assert!(sql.contains(part), "{part} missing from {sql}");
        }
        // Scope values are bound, never spliced.
        assert!(!sql.contains("'ws'") && !sql.contains("favorite"), "{sql}");
        assert!(values.0.len() >= 8, "{values:?}");
        // Words need no substring match; a symbol does.
        assert!(!sql.contains("ILIKE"), "{sql}");
        let (sql, _) = unfiltered(
            MessageScope::Session("ws", "s"),
            "bob@example.com",
            None,
            10,
            false,
        );
        assert!(sql.contains(r#""m"."content" ILIKE $"#), "{sql}");

        // Without an embedder: the full-text leg alone.
        let (sql, _) = unfiltered(MessageScope::Workspace("ws"), "a.b", None, 10, false);
        assert!(
            !sql.contains("vec_hits") && sql.contains("fts_hits") && !sql.contains("key_hits"),
            "{sql}"
        );
        // ... ranked by BM25 alone, whatever share of the query a hit holds.
        assert!(!sql.contains(" * 3 > "), "{sql}");
    }

    #[test]
    fn conclusion_keys_are_a_third_leg_over_live_explicit_conclusions_in_scope() {
        let scope = MessageScope::Peer("ws", "alice");
        let (sql, _) = unfiltered(scope, "pottery", Some(vec![0.5; 3]), 10, true);
        for part in [
            r#""key_near" AS  MATERIALIZED (SELECT"#,
            r#""c"."deleted_at" IS NULL AND "c"."level" = 'explicit'"#,
            r#""c"."embedding" <=> $"#,
            r#""cm"."conclusion_id" = "c"."id""#,
            r#""key_hits" AS  MATERIALIZED (SELECT"#,
            r#""m"."peer_name" = $"#,
            r#"min("k"."dist")"#,
        ] {
            assert!(sql.contains(part), "{part} missing from {sql}");
        }
        assert!(
            !sql.contains("'alice'") && !sql.contains("pottery"),
            "{sql}"
        );
        // Without a vector the conclusions are ranked by full text.
        let (sql, _) = unfiltered(scope, "pottery", None, 10, true);
        assert!(
            sql.contains(r#""c"."content_tsv" @@ replace(plainto_tsquery"#)
                && !sql.contains(r#""c"."embedding""#),
            "{sql}"
        );
    }
}
