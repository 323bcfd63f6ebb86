//! The labelled conversations of `make eval`, generated from a seed (no download, the same on
//! every machine).
//!
//! Each conversation is many sittings (sessions, a few days to weeks apart) between two named
//! people, shaped like real chat logs: greetings and chit-chat, short reactions ("Wow, that's
//! awesome!"), replies that mean something only after the turn before them ("Yes, last
//! weekend!"), and facts about both people on the same topics, so the other speaker's turns are
//! distractors. Questions name the person, share some words with their evidence and paraphrase
//! others (a question says "ceramics" where the evidence says "pottery" about half the time).
//!
//! Categories:
//! - `single-hop`: one evidence turn states the fact the question asks for.
//! - `temporal`: "When did …?": the evidence turn tells of the event (its date is the session's).
//! - `multi-hop`: two evidence turns in different sessions (e.g. two trips), both needed.
//! - `reply`: the evidence is a context-dependent reply ("Yes, two days ago!") to the other
//!   speaker's question, which holds the topic's words.
//! - `inference`: "Would {P} likely …?", "What might {P} …?": the evidence tells something the
//!   answer follows from, in other words than the question's ("I adopted a rescue greyhound" for
//!   "Would Caroline likely be considered an animal lover?"). Drawn from their own random
//!   stream after the other kinds, so `Shape::inferences = 0` gives the corpus of before.
//! - `second-hand`: the evidence is the *other* speaker's turn about the person the question
//!   names ("Congrats on the new job at the bakery!" for "Where did Caroline get a new job?"), the
//!   case a search that favours the named speaker's turns can lose. Drawn from a stream of their
//!   own after the inference questions, so `Shape::second_hand = 0` gives the corpus of before.

use crate::seed::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Category {
    #[serde(rename = "single-hop")]
    SingleHop,
    #[serde(rename = "temporal")]
    Temporal,
    #[serde(rename = "multi-hop")]
    MultiHop,
    #[serde(rename = "reply")]
    Reply,
    #[serde(rename = "inference")]
    Inference,
    #[serde(rename = "second-hand")]
    SecondHand,
}

impl Category {
    pub const ALL: [Category; 6] = [
        Category::SingleHop,
        Category::Temporal,
        Category::MultiHop,
        Category::Reply,
        Category::Inference,
        Category::SecondHand,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::SingleHop => "single-hop",
            Category::Temporal => "temporal",
            Category::MultiHop => "multi-hop",
            Category::Reply => "reply",
            Category::Inference => "inference",
            Category::SecondHand => "second-hand",
        }
    }
}

pub struct Turn {
    /// 0 or 1: which of the conversation's two people speaks.
    pub speaker: usize,
    pub text: String,
    /// What a deriver would conclude about the speaker from this turn and the one before it
    /// (`--derive`): the facts told, replies in their context, topics mentioned; nothing from
    /// chit-chat. Written from the conversation's words only, never from a question's.
    pub fact: Option<String>,
}

pub struct Session {
    /// Days after the conversation's first sitting.
    pub day: u32,
    pub turns: Vec<Turn>,
}

pub struct Conversation {
    /// Display names; the peer ids are their lowercase forms.
    pub names: [&'static str; 2],
    pub sessions: Vec<Session>,
}

impl Conversation {
    pub fn peer_id(&self, speaker: usize) -> String {
        self.names[speaker].to_lowercase()
    }
}

/// A turn of a conversation: (session index, turn index).
pub type TurnRef = (usize, usize);

pub struct Question {
    pub conversation: usize,
    pub text: String,
    pub category: Category,
    pub evidence: Vec<TurnRef>,
}

/// One kind of fact a person tells of, with the ways to say and to ask it. `{o}` is the object as
/// the evidence says it, `{q}` as a question says it (a synonym about half the time), `{P}` the
/// person's name.
struct Relation {
    /// What a deriver concludes about `{P}` from a turn that tells of the fact, written from
    /// the turn's own words (`{o}` in its evidence form, `my` as `their`), never from a question.
    fact: &'static str,
    /// (evidence form, question form).
    objects: &'static [(&'static str, &'static str)],
    /// Turns that state the fact (with `{o}`).
    tell: &'static [&'static str],
    /// Questions whose answer is the object (without `{o}`).
    what: &'static [&'static str],
    /// "When" questions (with `{q}`); empty when the relation has no date worth asking.
    when: &'static [&'static str],
    /// Questions over two objects (multi-hop).
    both: &'static [&'static str],
    /// The other speaker asks about it (with `{o}`), and the question about the reply.
    ask: &'static [(&'static str, &'static str)],
}

const RELATIONS: &[Relation] = &[
    Relation {
        fact: "{P} is learning {o}.",
        objects: &[
            ("pottery", "ceramics"),
            ("violin", "violin"),
            ("Spanish", "Spanish"),
            ("salsa dancing", "salsa"),
            ("photography", "photography"),
            ("coding", "programming"),
            ("sign language", "signing"),
            ("guitar", "guitar"),
            ("watercolor painting", "painting"),
            ("woodworking", "carpentry"),
        ],
        tell: &[
            "I started learning {o} last month, it's harder than it looks!",
            "Guess what, I signed up for {o} lessons!",
            "I've been taking {o} classes on Tuesday nights.",
            "Finally started {o}, something I've wanted to do for years.",
        ],
        what: &[
            "What did {P} start learning?",
            "What lessons did {P} sign up for?",
            "What class has {P} been taking?",
            "What new skill is {P} picking up?",
            "Which hobby did {P} take up recently?",
        ],
        when: &[
            "When did {P} start {q} lessons?",
            "When did {P} begin learning {q}?",
        ],
        both: &[
            "What skills has {P} been learning?",
            "Which classes has {P} taken?",
        ],
        ask: &[
            (
                "How are the {o} lessons going?",
                "How are {P}'s {q} lessons going?",
            ),
            (
                "Did you ever start those {o} classes you mentioned?",
                "When did {P} start the {q} classes?",
            ),
        ],
    },
    Relation {
        fact: "{P} has been researching {o}.",
        objects: &[
            ("adoption agencies", "adopting a child"),
            ("electric cars", "EVs"),
            ("solar panels", "solar energy"),
            ("grad schools", "graduate programs"),
            ("dog breeds", "kinds of dogs"),
            ("retirement plans", "pensions"),
            ("vegan recipes", "plant-based cooking"),
            ("home loans", "mortgages"),
        ],
        tell: &[
            "I've been researching {o} all week.",
            "Spent the whole weekend reading up on {o}.",
            "I'm looking into {o} right now, there are so many options.",
        ],
        what: &[
            "What did {P} research?",
            "What has {P} been reading up on?",
            "What topic was {P} looking into?",
            "What was {P} investigating?",
        ],
        when: &[],
        both: &[
            "What topics has {P} researched?",
            "What has {P} been looking into?",
        ],
        ask: &[(
            "Did you find anything good on {o}?",
            "What did {P} find out about {q}?",
        )],
    },
    Relation {
        fact: "{P} adopted {o}.",
        objects: &[
            ("a puppy", "a dog"),
            ("a kitten", "a cat"),
            ("a rabbit", "a bunny"),
            ("two goldfish", "fish"),
            ("a parrot", "a bird"),
            ("a hamster", "a hamster"),
            ("a turtle", "a tortoise"),
        ],
        tell: &[
            "We adopted {o} from the shelter on Saturday!",
            "Meet the newest member of the family, {o}!",
            "We brought home {o} this week, the kids are thrilled.",
        ],
        what: &[
            "What pet did {P} adopt?",
            "What animal did {P} bring home?",
            "What did {P}'s family adopt from the shelter?",
            "What new pet does {P} have?",
        ],
        when: &["When did {P} adopt {q}?", "When did {P} get {q}?"],
        both: &["What pets does {P} have?", "Which animals did {P} adopt?"],
        ask: &[(
            "How is {o} settling in?",
            "How is {P}'s {q} adjusting to the new home?",
        )],
    },
    Relation {
        fact: "{P} got a job as a {o}.",
        objects: &[
            ("nurse", "nurse"),
            ("graphic designer", "designer"),
            ("teacher", "teacher"),
            ("software engineer", "developer"),
            ("counselor", "therapist"),
            ("chef", "cook"),
            ("accountant", "accountant"),
            ("librarian", "librarian"),
        ],
        tell: &[
            "I got the job! I'm going to be a {o}.",
            "Started my new position as a {o} on Monday.",
            "I accepted an offer to work as a {o}.",
        ],
        what: &[
            "What job did {P} get?",
            "What is {P}'s new position?",
            "What does {P} work as now?",
            "What career did {P} move into?",
        ],
        when: &[
            "When did {P} start working as a {q}?",
            "When did {P} get the {q} job?",
        ],
        both: &[],
        ask: &[(
            "So how's the new {o} job treating you?",
            "How does {P} like working as a {q}?",
        )],
    },
    Relation {
        fact: "{P} traveled to {o}.",
        objects: &[
            ("Paris", "France"),
            ("Tokyo", "Japan"),
            ("the Grand Canyon", "Arizona"),
            ("Lake Tahoe", "Tahoe"),
            ("Barcelona", "Spain"),
            ("the Rocky Mountains", "the Rockies"),
            ("Yellowstone", "the national park"),
            ("Rome", "Italy"),
            ("Iceland", "Iceland"),
            ("New Orleans", "Louisiana"),
        ],
        tell: &[
            "Just got back from {o}, the trip was amazing.",
            "We spent a week in {o}, I didn't want to leave.",
            "Our vacation to {o} was the best time.",
        ],
        what: &[
            "Where did {P} travel?",
            "Where did {P} go on vacation?",
            "What place did {P} visit on the trip?",
            "Where did {P} spend the week away?",
        ],
        when: &[
            "When did {P} go to {q}?",
            "When did {P} travel to {q}?",
            "When was {P}'s trip to {q}?",
        ],
        both: &[
            "Which places has {P} traveled to?",
            "Where has {P} been on vacation?",
        ],
        ask: &[
            ("Did you end up going to {o}?", "When did {P} visit {q}?"),
            (
                "So did the trip to {o} happen after all?",
                "When did {P}'s trip to {q} happen?",
            ),
        ],
    },
    Relation {
        fact: "{P} went to {o}.",
        objects: &[
            ("a 5K race", "a running race"),
            ("a charity run", "a fundraiser run"),
            ("a camping trip", "camping"),
            ("a pottery workshop", "a ceramics workshop"),
            ("a concert", "a live show"),
            ("a support group meeting", "a support group"),
            ("a pride parade", "a parade"),
            ("a book club meeting", "book club"),
            ("a job interview", "an interview"),
            ("a cooking class", "a cooking lesson"),
        ],
        tell: &[
            "I went to {o} yesterday and loved it.",
            "Did {o} last weekend, what a day!",
            "I finally made it to {o} on Sunday.",
        ],
        what: &[
            "What event did {P} attend?",
            "What did {P} go to on the weekend?",
        ],
        when: &[
            "When did {P} go to {q}?",
            "When did {P} attend {q}?",
            "When did {P} take part in {q}?",
        ],
        both: &["What events has {P} been to?"],
        ask: &[
            (
                "Did you make it to {o} after all?",
                "When did {P} go to {q}?",
            ),
            (
                "How was {o}? I know you were nervous.",
                "How did {q} go for {P}?",
            ),
        ],
    },
    Relation {
        fact: "{P} bought {o}.",
        objects: &[
            ("a new bike", "a bicycle"),
            ("a vintage camera", "a camera"),
            ("a used car", "a vehicle"),
            ("a piano", "a keyboard"),
            ("running shoes", "sneakers"),
            ("a tent", "camping gear"),
            ("a sewing machine", "a sewing machine"),
            ("a telescope", "a telescope"),
        ],
        tell: &[
            "I finally bought {o}, been saving up forever.",
            "Treated myself to {o} this week.",
            "Picked up {o} at a great price.",
        ],
        what: &[
            "What did {P} buy?",
            "What did {P} treat themselves to?",
            "What did {P} purchase recently?",
            "What was {P} saving up for?",
        ],
        when: &["When did {P} buy {q}?"],
        both: &["What things has {P} bought?"],
        ask: &[("Have you used {o} yet?", "Has {P} tried out the {q} yet?")],
    },
    Relation {
        fact: "{P} volunteers at {o}.",
        objects: &[
            ("the animal shelter", "a pet shelter"),
            ("a food bank", "a food pantry"),
            ("the children's hospital", "a hospital"),
            ("an LGBTQ youth center", "a youth center"),
            ("the public library", "the library"),
            ("a soup kitchen", "a homeless shelter"),
            ("a senior center", "a retirement home"),
        ],
        tell: &[
            "I've started volunteering at {o} on weekends.",
            "Spent Saturday helping out at {o}.",
            "I signed up to volunteer with {o}.",
        ],
        what: &[
            "Where does {P} volunteer?",
            "Where has {P} been helping out?",
            "What organization did {P} volunteer for?",
        ],
        when: &["When did {P} volunteer at {q}?"],
        both: &["Where has {P} volunteered?"],
        ask: &[(
            "Are you still volunteering at {o}?",
            "Is {P} still volunteering at {q}?",
        )],
    },
    Relation {
        fact: "{P} had a visit from {o}.",
        objects: &[
            ("my mom", "mother"),
            ("my sister", "sister"),
            ("my grandparents", "grandparents"),
            ("my brother", "brother"),
            ("my cousin", "cousin"),
            ("my best friend from college", "college friend"),
            ("my aunt", "aunt"),
        ],
        tell: &[
            "Next week {o} is coming to stay with us.",
            "Guess who flew in for a visit, {o}!",
            "Spent the whole weekend with {o}, it was so good to catch up.",
        ],
        what: &[
            "Who visited {P}?",
            "Which family member came to stay with {P}?",
            "Who did {P} spend the weekend with?",
        ],
        when: &["When did {P}'s {q} visit?"],
        both: &["Who has visited {P}?"],
        ask: &[(
            "How was the visit with {o}?",
            "How did the visit from {P}'s {q} go?",
        )],
    },
    Relation {
        fact: "{P} wants to {o}.",
        objects: &[
            ("run a marathon", "a marathon"),
            ("go back to school", "studying again"),
            ("write a novel", "a book"),
            ("move to Seattle", "relocating"),
            ("open a bakery", "a bakery"),
            ("learn to surf", "surfing"),
            ("start a podcast", "a podcast"),
            ("get a master's degree", "a degree"),
        ],
        tell: &[
            "My big goal this year is to {o}.",
            "I've decided I'm going to {o}.",
            "Thinking seriously about trying to {o} next year.",
        ],
        what: &[
            "What is {P}'s big goal?",
            "What does {P} plan to do next year?",
            "What has {P} decided to do?",
            "What is {P} hoping to achieve?",
        ],
        when: &[],
        both: &["What goals does {P} have?"],
        ask: &[(
            "Are you still planning to {o}?",
            "Is {P} still thinking about {q}?",
        )],
    },
    Relation {
        fact: "{P} {o}.",
        objects: &[
            ("sprained my ankle", "an ankle injury"),
            ("broke my wrist", "a broken wrist"),
            ("caught the flu", "the flu"),
            ("hurt my back", "back pain"),
            ("twisted my knee", "a knee injury"),
        ],
        tell: &[
            "Ugh, I {o} playing soccer.",
            "I {o} last week, so I'm taking it easy.",
        ],
        what: &[
            "What injury did {P} have?",
            "What happened to {P}'s health?",
            "Why has {P} been taking it easy?",
        ],
        when: &["When did {P} get {q}?"],
        both: &[],
        ask: &[(
            "Is your {o} any better now?",
            "How is {P} recovering from {q}?",
        )],
    },
    Relation {
        fact: "{P} made {o}.",
        objects: &[
            ("a painting of a sunset", "a sunset painting"),
            ("a quilt", "a blanket"),
            ("a birdhouse", "a bird house"),
            ("a photo album", "a scrapbook"),
            ("a vegetable garden", "a garden"),
            ("a short film", "a movie"),
            ("a clay bowl", "a bowl"),
        ],
        tell: &[
            "Look what I made this weekend, {o}!",
            "I spent days working on {o}, finally done.",
            "Just finished {o}, I'm pretty proud of it.",
        ],
        what: &[
            "What did {P} make?",
            "What did {P} create this weekend?",
            "What project did {P} finish?",
        ],
        when: &["When did {P} finish {q}?"],
        both: &["What has {P} made?"],
        ask: &[(
            "Where are you going to put {o}?",
            "Where will {P} keep {q}?",
        )],
    },
    Relation {
        fact: "{P} read {o}.",
        objects: &[
            ("Becoming by Michelle Obama", "Becoming"),
            ("a book about mindfulness", "mindfulness"),
            ("Dune", "Dune"),
            ("a biography of Frida Kahlo", "Frida Kahlo"),
            ("The Alchemist", "The Alchemist"),
            ("Charlotte's Web to my kids", "Charlotte's Web"),
        ],
        tell: &[
            "I'm reading {o} right now and can't put it down.",
            "Just finished {o}, highly recommend.",
        ],
        what: &[
            "What book is {P} reading?",
            "What did {P} recommend reading?",
            "Which book did {P} finish?",
        ],
        when: &["When did {P} read {q}?"],
        both: &["What books has {P} read?"],
        ask: &[(
            "Did you like how {o} ended?",
            "What did {P} think of the ending of {q}?",
        )],
    },
];

/// The other speaker's reaction right after a fact.
const REACTIONS: &[&str] = &[
    "Wow, that's awesome!",
    "No way, that's so cool!",
    "That's amazing, I'm so happy for you.",
    "Oh nice! How did that go?",
    "Tell me more!",
    "That sounds wonderful.",
    "Congrats, you deserve it!",
    "Haha, that's so you.",
    "Oh wow, I had no idea.",
    "That's great to hear!",
];

/// Replies to a "did you …?" / "how is …?" question: they mean something only after it.
const WHEN_REPLIES: &[&str] = &[
    "Yes, last week! It was so much fun.",
    "Yeah, finally did it on Saturday.",
    "I did! Two days ago actually.",
    "Yep, just got back yesterday.",
    "Yes! Over the weekend, it was amazing.",
    "Mm-hm, on Tuesday. Still thinking about it.",
];
const HOW_REPLIES: &[&str] = &[
    "Really well, I'm getting better every week!",
    "Honestly better than I expected.",
    "Not great, to be honest, but I'm hanging in there.",
    "Pretty good! Slowly but surely.",
    "It's been a bit of a rollercoaster, but mostly good.",
    "So good, I love it more every day.",
];

/// Chit-chat: greetings, small talk, closings.
const OPENINGS: &[&str] = &[
    "Hey! How have you been?",
    "Hi! Long time no talk.",
    "Good morning! Hope your day is going well.",
    "Hey, got a minute to chat?",
    "Hi there! What's new with you?",
    "Hey you! How was your week?",
];
const SMALL_TALK: &[&str] = &[
    "Pretty good, thanks! Busy as always.",
    "I've been so busy with work lately.",
    "The weather has been crazy this week.",
    "Haha, that's so true!",
    "I know, right?",
    "Same here, honestly.",
    "Oh no, I'm sorry to hear that.",
    "Work has been hectic, lots of meetings and deadlines.",
    "I've been trying to get more sleep, not going great.",
    "The kids kept me up all night again.",
    "I can't believe it's already the end of the month.",
    "We should grab coffee sometime soon.",
    "That reminds me, I need to call my landlord.",
    "Traffic was a nightmare this morning.",
    "I made the best pasta last night.",
    "Anyway, enough about me, what's going on with you?",
    "Totally agree with you there.",
    "Hmm, I hadn't thought about it that way.",
    "Thanks for listening, it means a lot.",
    "Lol yes.",
    "Same old, same old.",
    "That's fair.",
    "It's been a long week, but a good one.",
    "I'm trying to be more positive about everything.",
];
const CLOSINGS: &[&str] = &[
    "Talk soon!",
    "Gotta run, catch you later!",
    "Take care, talk to you next week.",
    "Bye for now!",
    "Let's catch up again soon.",
];
/// The other speaker mentions the topic without the fact (with `{o}`).
const DISTRACTORS: &[&str] = &[
    "My cousin is really into {o} too.",
    "I've always wondered about {o}.",
    "{O}? I would never have guessed.",
    "A friend of mine keeps talking about {o}.",
    "I saw a documentary about {o} last night.",
    "Honestly {o} has never been my thing.",
    "My coworker just told me all about {o}, funny timing.",
    "Remind me to tell you a story about {o} sometime.",
];

const NAMES: &[&str] = &[
    "Caroline", "Melanie", "Joanna", "Nate", "Audrey", "Andrew", "Evan", "Sam", "Maria", "John",
    "Gina", "Jon", "Deborah", "Jolene", "Tim", "Priya", "Marcus", "Lena", "Omar", "Hiro",
];

/// Generator settings.
pub struct Shape {
    pub conversations: usize,
    pub sessions: usize,
    /// Facts (and questions) per conversation.
    pub questions: usize,
    /// Inference questions per conversation, beside `questions` (at most `INFERENCES.len()`).
    pub inferences: usize,
    /// Second-hand questions per conversation, beside the others (at most `SECOND_HAND.len()`).
    pub second_hand: usize,
}

/// Inference questions: (what `{P}` tells, what a deriver concludes from it, the question). The
/// question shares no content word with the turn: its answer follows from the turn.
const INFERENCES: &[(&str, &str, &str)] = &[
    (
        "I adopted a rescue greyhound last month, she sleeps on my bed every night.",
        "{P} adopted a rescue greyhound.",
        "Would {P} likely be considered an animal lover?",
    ),
    (
        "I've been volunteering at the food bank every Saturday morning.",
        "{P} volunteers at a food bank.",
        "Is {P} the kind of person who gives time to their community?",
    ),
    (
        "I'm training for my first marathon, twenty miles this weekend.",
        "{P} is training for a marathon.",
        "Would {P} enjoy an active vacation?",
    ),
    (
        "I finished three novels last week, I just can't put them down.",
        "{P} reads a lot of novels.",
        "What kind of gift might {P} appreciate?",
    ),
    (
        "My parents moved here from Japan when I was little, we still celebrate New Year their way.",
        "{P}'s parents came from Japan.",
        "What language might {P} have grown up hearing at home?",
    ),
    (
        "I just passed my nursing board exams!",
        "{P} passed nursing board exams.",
        "What might {P} do for a living?",
    ),
    (
        "Our twins turned four yesterday and the house is pure chaos.",
        "{P} has four-year-old twins.",
        "Would {P} have much free time in the evenings?",
    ),
    (
        "I've been vegan for six years now, no cheese, no eggs.",
        "{P} is vegan.",
        "What should a friend cook when {P} comes over for dinner?",
    ),
    (
        "I sold my car and I bike to work every day now, rain or shine.",
        "{P} bikes to work.",
        "Does {P} care about the environment?",
    ),
    (
        "I spend most weekends up in the mountains with my tent and my boots.",
        "{P} hikes and camps in the mountains.",
        "Would {P} prefer a city break or a trip to a national park?",
    ),
    (
        "I've been writing poems since high school and I'm finally sending some to journals.",
        "{P} writes poetry.",
        "Would {P} likely pursue a creative career?",
    ),
    (
        "I'm allergic to cats, my eyes swell up if one comes near me.",
        "{P} is allergic to cats.",
        "Would {P} want a kitten as a present?",
    ),
    (
        "I got promoted to lead the accounting team at my firm.",
        "{P} leads an accounting team.",
        "Is {P} good with numbers?",
    ),
    (
        "I moved back in with my grandmother to look after her since her surgery.",
        "{P} looks after their grandmother.",
        "How would {P}'s family describe them?",
    ),
    (
        "I'm saving every penny for a house, no eating out this year.",
        "{P} is saving for a house.",
        "Would {P} splurge on an expensive holiday right now?",
    ),
    (
        "I play chess online every night and just hit a rating of 1800.",
        "{P} plays chess online.",
        "Would {P} enjoy strategy board games?",
    ),
    (
        "I grew up on a dairy farm, up at five every morning to milk the cows.",
        "{P} grew up on a dairy farm.",
        "Is {P} used to waking up early?",
    ),
    (
        "I've started seeing a therapist and I'm learning to say no to people.",
        "{P} sees a therapist.",
        "Is {P} working on their mental health?",
    ),
];

/// XORed into the corpus seed (with the conversation's index) to seed the inference questions'
/// own random stream; any constant would do.
const INFERENCE_STREAM: u64 = 0x01fe_2ece;

/// Second-hand questions: (what the other speaker says to `{P}`, what a deriver concludes about
/// that speaker `{S}` from it, the question about `{P}`). A deriver observes a turn's speaker, so
/// the fact is about `{S}`. About half the questions share a word with the turn, as the other
/// kinds' do.
const SECOND_HAND: &[(&str, &str, &str)] = &[
    (
        "Congrats on the new job at the bakery!",
        "{S} congratulated {P} on a new job at a bakery.",
        "Where did {P} get a new job?",
    ),
    (
        "How is your sister Anna settling into college?",
        "{S} asked about {P}'s sister Anna at college.",
        "What is the name of {P}'s sister?",
    ),
    (
        "Happy birthday! Thirty looks good on you.",
        "{S} wished {P} a happy thirtieth birthday.",
        "How old did {P} turn on their birthday?",
    ),
    (
        "Your garden looked amazing when I drove by, those sunflowers are taller than you!",
        "{S} admired the sunflowers in {P}'s garden.",
        "What flowers does {P} grow?",
    ),
    (
        "I still can't believe you swam across the whole lake last summer!",
        "{S} recalled {P} swimming across a lake.",
        "What did {P} swim across?",
    ),
    (
        "Give Biscuit a belly rub from me, he's the cutest beagle.",
        "{S} is fond of {P}'s beagle Biscuit.",
        "What is {P}'s dog called?",
    ),
    (
        "How was the move to Denver? Is the new apartment unpacked yet?",
        "{S} asked about {P}'s move to Denver.",
        "Which city did {P} move to?",
    ),
    (
        "Your lasagna at the party was the best thing I've eaten all year.",
        "{S} praised {P}'s lasagna at a party.",
        "What dish did {P} bring to the party?",
    ),
    (
        "Good luck with the driving test tomorrow, you've got this!",
        "{S} wished {P} luck on a driving test.",
        "What test was {P} about to take?",
    ),
    (
        "Did your mom like the scarf you knitted for her?",
        "{S} asked about the scarf {P} knitted for their mom.",
        "What did {P} knit for their mother?",
    ),
    (
        "Your band sounded great at the open mic night!",
        "{S} heard {P}'s band at an open mic night.",
        "Where did {P}'s band play?",
    ),
    (
        "Thanks again for fixing my laptop, you're a genius with computers.",
        "{S}'s laptop was fixed by {P}.",
        "What did {P} repair for a friend?",
    ),
];

/// What the person says back to a second-hand turn.
const THANKS: &[&str] = &[
    "Aw, thank you!",
    "Haha, thanks so much!",
    "Thanks, that means a lot.",
    "Oh stop, you're too kind!",
    "Thank you, it's been a lot of work.",
];

/// The second-hand questions' stream, as [`INFERENCE_STREAM`] is the inference questions'.
const SECOND_HAND_STREAM: u64 = 0x5ec0_44d0;

fn fill(template: &str, o: &str, q: &str, person: &str) -> String {
    let mut cap = o.to_owned();
    if let Some(first) = cap.get(..1) {
        let up = first.to_uppercase();
        cap.replace_range(..1, &up);
    }
    template
        .replace("{o}", o)
        .replace("{O}", &cap)
        .replace("{q}", q)
        .replace("{P}", person)
}

/// A question before its evidence is placed: (category, text, (session, episode) of each
/// evidence).
type Pending = (Category, String, Vec<(usize, usize)>);

fn pick(rng: &mut Rng, xs: &[&'static str]) -> &'static str {
    rng.pick::<&'static str>(xs)
}

/// What a deriver concludes about `person` from a turn telling of `o` (the relation's `fact`, in
/// the third person).
fn concluded(rel: &Relation, o: &str, person: &str) -> String {
    fill(rel.fact, &o.replace("my ", "their "), "", person)
}

/// Real turns mix topics: half the time a fact comes with small talk before or after it.
fn chatty(rng: &mut Rng, fact: String) -> String {
    match rng.range(0, 3) {
        0 => format!("{} {fact}", rng.pick(SMALL_TALK)),
        1 => format!("{fact} {}", rng.pick(SMALL_TALK)),
        _ => fact,
    }
}

/// One fact episode planned for a session: the turns it adds and, once placed, its questions.
struct Episode {
    /// (speaker, text, what a deriver concludes from it).
    turns: Vec<(usize, String, Option<String>)>,
    /// Which of `turns` are evidence.
    evidence: Vec<usize>,
}

/// `n` turns of small talk, each by either speaker.
fn small_talk(rng: &mut Rng, turns: &mut Vec<Turn>, n: usize) {
    for _ in 0..n {
        let speaker = rng.range(0, 1);
        turns.push(Turn {
            speaker,
            text: rng.pick(SMALL_TALK).to_string(),
            fact: None,
        });
    }
}

impl Episode {
    /// `speaker` telling `tell`, from which a deriver concludes `fact` (the evidence), and the
    /// other speaker's reaction.
    fn told(rng: &mut Rng, speaker: usize, tell: String, fact: String) -> Episode {
        let reaction = rng.pick(REACTIONS).to_string();
        Episode {
            turns: vec![(speaker, tell, Some(fact)), (1 - speaker, reaction, None)],
            evidence: vec![0],
        }
    }
}

/// A question placed after the layout, with its one evidence turn.
type Placed = (Category, String, TurnRef);

/// A conversation's laid-out sessions, while blocks of turns go in between their episodes.
struct Layout<'a> {
    sessions: &'a mut [Session],
    /// Per session and episode, where its evidence turns are.
    placed: &'a mut [Vec<Vec<usize>>],
    /// Per session, the points between episodes where a block may go in.
    between: &'a mut [Vec<usize>],
    extra: &'a mut Vec<Placed>,
}

impl Layout<'_> {
    /// Where the next block goes, drawn from `rng`: a session, a point between its episodes, and
    /// the small talk (0-2 turns) that opens the block.
    fn spot(&self, rng: &mut Rng) -> (usize, usize, Vec<Turn>) {
        let s = rng.range(0, self.sessions.len() - 1);
        let at = *rng.pick(&self.between[s]);
        let mut block = Vec::new();
        let n = rng.range(0, 2);
        small_talk(rng, &mut block, n);
        (s, at, block)
    }

    /// Puts `block` into session `s` before turn `at`, moving every turn placed after it. The
    /// point `at` itself stays, so a later block at the same point goes before this one.
    fn insert(&mut self, s: usize, at: usize, block: Vec<Turn>) {
        let k = block.len();
        let shift = |t: &mut usize| {
            if *t >= at {
                *t += k;
            }
        };
        self.placed[s].iter_mut().flatten().for_each(shift);
        self.between[s]
            .iter_mut()
            .filter(|b| **b > at)
            .for_each(|b| *b += k);
        for (_, _, (es, t)) in self.extra.iter_mut() {
            if *es == s {
                shift(t);
            }
        }
        self.sessions[s].turns.splice(at..at, block);
    }
}

/// Builds every conversation and question.
pub fn generate(seed: u64, shape: &Shape) -> (Vec<Conversation>, Vec<Question>) {
    let mut rng = Rng::new(seed);
    let mut conversations = Vec::new();
    let mut questions = Vec::new();
    for c in 0..shape.conversations {
        let a = rng.range(0, NAMES.len() - 1);
        let mut b = rng.range(0, NAMES.len() - 2);
        if b >= a {
            b += 1;
        }
        let names = [NAMES[a], NAMES[b]];
        // Session skeletons: opening chit-chat, then slots for episodes among small talk.
        let mut day = 0;
        let mut sessions: Vec<Session> = Vec::new();
        let mut slots: Vec<Vec<Episode>> = Vec::new();
        for _ in 0..shape.sessions {
            sessions.push(Session {
                day,
                turns: Vec::new(),
            });
            slots.push(Vec::new());
            day += rng.range(3, 20) as u32;
        }
        // Objects already used in this conversation, per relation (each fact is unique).
        let mut used: Vec<Vec<usize>> = vec![Vec::new(); RELATIONS.len()];
        let mut pending: Vec<Pending> = Vec::new();
        for i in 0..shape.questions {
            let category = match rng.range(0, 19) {
                0..=7 => Category::SingleHop,
                8..=11 => Category::Temporal,
                12..=14 => Category::MultiHop,
                _ => Category::Reply,
            };
            let person = i % 2;
            let other = 1 - person;
            let name = names[person];
            let candidates: Vec<usize> = (0..RELATIONS.len())
                .filter(|&r| {
                    let rel = &RELATIONS[r];
                    let free = rel.objects.len() - used[r].len();
                    match category {
                        Category::SingleHop => free >= 1,
                        Category::Temporal => free >= 1 && !rel.when.is_empty(),
                        Category::MultiHop => free >= 2 && !rel.both.is_empty(),
                        Category::Reply => free >= 1 && !rel.ask.is_empty(),
                        Category::Inference | Category::SecondHand => {
                            unreachable!("drawn after the layout")
                        }
                    }
                })
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let r = *rng.pick(&candidates);
            let rel = &RELATIONS[r];
            let mut take = |rng: &mut Rng| {
                let free: Vec<usize> = (0..rel.objects.len())
                    .filter(|o| !used[r].contains(o))
                    .collect();
                let o = *rng.pick(&free);
                used[r].push(o);
                let (ev, syn) = rel.objects[o];
                // The question says the evidence's word or its synonym, half and half.
                let q = if rng.range(0, 1) == 0 { ev } else { syn };
                (ev, q)
            };
            let session = rng.range(0, shape.sessions - 1);
            match category {
                Category::SingleHop | Category::Temporal => {
                    let (o, q) = take(&mut rng);
                    let tell = fill(pick(&mut rng, rel.tell), o, q, name);
                    let tell = chatty(&mut rng, tell);
                    let text = if category == Category::SingleHop {
                        fill(pick(&mut rng, rel.what), o, q, name)
                    } else {
                        fill(pick(&mut rng, rel.when), o, q, name)
                    };
                    let fact = concluded(rel, o, name);
                    slots[session].push(Episode::told(&mut rng, person, tell, fact));
                    pending.push((category, text, vec![(session, slots[session].len() - 1)]));
                }
                Category::MultiHop => {
                    let mut refs = Vec::new();
                    let first = session;
                    let mut second = rng.range(0, shape.sessions - 1);
                    if second == first {
                        second = (first + 1 + rng.range(0, shape.sessions - 2)) % shape.sessions;
                    }
                    for s in [first, second] {
                        let (o, q) = take(&mut rng);
                        let tell = fill(pick(&mut rng, rel.tell), o, q, name);
                        let tell = chatty(&mut rng, tell);
                        let fact = concluded(rel, o, name);
                        slots[s].push(Episode::told(&mut rng, person, tell, fact));
                        refs.push((s, slots[s].len() - 1));
                    }
                    let text = fill(pick(&mut rng, rel.both), "", "", name);
                    pending.push((category, text, refs));
                }
                Category::Reply => {
                    let (o, q) = take(&mut rng);
                    let (ask, question) = *rng.pick(rel.ask);
                    let asked = fill(ask, o, q, name);
                    let replies = if question.starts_with("When") {
                        WHEN_REPLIES
                    } else {
                        HOW_REPLIES
                    };
                    let reply = rng.pick(replies).to_string();
                    let follow = rng.pick(SMALL_TALK).to_string();
                    slots[session].push(Episode {
                        // The reply in the context of the question it answers.
                        turns: vec![
                            (other, asked, None),
                            (person, reply, Some(concluded(rel, o, name))),
                            (other, follow, None),
                        ],
                        evidence: vec![1],
                    });
                    pending.push((
                        category,
                        fill(question, o, q, name),
                        vec![(session, slots[session].len() - 1)],
                    ));
                }
                Category::Inference | Category::SecondHand => {
                    unreachable!("drawn after the layout")
                }
            }
            // Up to two distractors on the same topic, by either speaker, somewhere else.
            for _ in 0..rng.range(0, 2) {
                let s = rng.range(0, shape.sessions - 1);
                let (o, _) = rel.objects[rng.range(0, rel.objects.len() - 1)];
                let line = fill(pick(&mut rng, DISTRACTORS), o, o, name);
                let speaker = rng.range(0, 1);
                let fact = format!("{} mentioned {o}.", names[speaker]);
                slots[s].push(Episode {
                    turns: vec![(speaker, line, Some(fact))],
                    evidence: vec![],
                });
            }
        }
        // Lay out each session: opening, episodes among small talk, closing. Record where each
        // episode's turns landed.
        let mut placed: Vec<Vec<Vec<usize>>> = Vec::new();
        // Per session, where a block of turns may go in: before each episode's small talk, and
        // before the closing small talk.
        let mut between: Vec<Vec<usize>> = Vec::new();
        for (s, episodes) in slots.into_iter().enumerate() {
            let turns = &mut sessions[s].turns;
            let first = rng.range(0, 1);
            turns.push(Turn {
                speaker: first,
                text: rng.pick(OPENINGS).to_string(),
                fact: None,
            });
            turns.push(Turn {
                speaker: 1 - first,
                text: rng.pick(SMALL_TALK).to_string(),
                fact: None,
            });
            let mut where_: Vec<Vec<usize>> = Vec::new();
            let mut bounds = Vec::new();
            for ep in episodes {
                bounds.push(turns.len());
                let n = rng.range(0, 3);
                small_talk(&mut rng, turns, n);
                let start = turns.len();
                for (speaker, text, fact) in ep.turns {
                    turns.push(Turn {
                        speaker,
                        text,
                        fact,
                    });
                }
                where_.push(ep.evidence.iter().map(|e| start + e).collect());
            }
            bounds.push(turns.len());
            let n = rng.range(1, 3);
            small_talk(&mut rng, turns, n);
            turns.push(Turn {
                speaker: rng.range(0, 1),
                text: rng.pick(CLOSINGS).to_string(),
                fact: None,
            });
            placed.push(where_);
            between.push(bounds);
        }
        // Inference and second-hand questions, each kind from its own stream and placed after
        // the layout (between two episodes), so every other draw and question is the one without
        // them.
        let mut extra: Vec<Placed> = Vec::new();
        let mut layout = Layout {
            sessions: &mut sessions,
            placed: &mut placed,
            between: &mut between,
            extra: &mut extra,
        };
        let mut irng = Rng::new(seed ^ INFERENCE_STREAM ^ ((c as u64) << 8));
        let mut free: Vec<usize> = (0..INFERENCES.len()).collect();
        for i in 0..shape.inferences.min(INFERENCES.len()) {
            let (tell, fact, question) =
                INFERENCES[free.swap_remove(irng.range(0, free.len() - 1))];
            let person = i % 2;
            let name = names[person];
            let (s, at, mut block) = layout.spot(&mut irng);
            let evidence = (s, at + block.len());
            let tell = chatty(&mut irng, tell.to_owned());
            let told = Episode::told(&mut irng, person, tell, fill(fact, "", "", name));
            block.extend(told.turns.into_iter().map(|(speaker, text, fact)| Turn {
                speaker,
                text,
                fact,
            }));
            layout.insert(s, at, block);
            let question = fill(question, "", "", name);
            layout.extra.push((Category::Inference, question, evidence));
        }
        let mut srng = Rng::new(seed ^ SECOND_HAND_STREAM ^ ((c as u64) << 8));
        let mut free: Vec<usize> = (0..SECOND_HAND.len()).collect();
        for i in 0..shape.second_hand.min(SECOND_HAND.len()) {
            let (said, fact, question) =
                SECOND_HAND[free.swap_remove(srng.range(0, free.len() - 1))];
            let person = i % 2;
            let other = 1 - person;
            let name = names[person];
            let (s, at, mut block) = layout.spot(&mut srng);
            let evidence = (s, at + block.len());
            let said = chatty(&mut srng, said.to_owned());
            block.push(Turn {
                speaker: other,
                text: said,
                fact: Some(fill(fact, "", "", name).replace("{S}", names[other])),
            });
            block.push(Turn {
                speaker: person,
                text: srng.pick(THANKS).to_string(),
                fact: None,
            });
            layout.insert(s, at, block);
            let question = fill(question, "", "", name);
            layout
                .extra
                .push((Category::SecondHand, question, evidence));
        }
        for (category, text, refs) in pending {
            let evidence = refs
                .iter()
                .flat_map(|&(s, ep)| placed[s][ep].iter().map(move |&t| (s, t)))
                .collect();
            questions.push(Question {
                conversation: c,
                text,
                category,
                evidence,
            });
        }
        for (category, text, evidence) in extra {
            questions.push(Question {
                conversation: c,
                text,
                category,
                evidence: vec![evidence],
            });
        }
        conversations.push(Conversation { names, sessions });
    }
    (conversations, questions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(inferences: usize, second_hand: usize) -> Shape {
        Shape {
            conversations: 3,
            sessions: 12,
            questions: 60,
            inferences,
            second_hand,
        }
    }

    /// Whether `text` holds `name` as a word ("Jon" is not in "John's").
    fn names(text: &str, name: &str) -> bool {
        text.split(|c: char| !c.is_alphanumeric())
            .any(|w| w == name)
    }

    #[test]
    fn the_same_seed_gives_the_same_corpus_and_evidence_points_at_the_person() {
        let (a, qa) = generate(7, &shape(6, 6));
        let (b, qb) = generate(7, &shape(6, 6));
        assert_eq!(qa.len(), qb.len());
        for (x, y) in qa.iter().zip(&qb) {
            assert_eq!((&x.text, &x.evidence), (&y.text, &y.evidence));
        }
        assert_eq!(a[0].sessions[3].turns.len(), b[0].sessions[3].turns.len());
        for q in &qa {
            let c = &a[q.conversation];
            assert!(!q.evidence.is_empty());
            for &(s, t) in &q.evidence {
                let turn = &c.sessions[s].turns[t];
                let (speaker, other) = (c.names[turn.speaker], c.names[1 - turn.speaker]);
                if q.category == Category::SecondHand {
                    // Said to the person the question names, by the other.
                    assert!(
                        names(&q.text, other) && !names(&q.text, speaker),
                        "{}",
                        q.text
                    );
                    assert!(turn.fact.as_deref().is_some_and(|f| f.starts_with(speaker)));
                } else {
                    // Said by the person the question names.
                    assert!(names(&q.text, speaker), "{}", q.text);
                }
            }
            if q.category == Category::MultiHop {
                assert_eq!(q.evidence.len(), 2);
            }
        }
        let second_hand = qa.iter().filter(|q| q.category == Category::SecondHand);
        assert_eq!(second_hand.count(), 18);
    }

    /// The questions of `questions` whose kind is `kept` are `before`'s, in order, and their evidence
    /// turns say the same.
    fn assert_kept(
        (turns, questions): (&[Conversation], &[Question]),
        (before_turns, before): (&[Conversation], &[Question]),
        kept: impl Fn(Category) -> bool,
    ) {
        let kept: Vec<&Question> = questions.iter().filter(|q| kept(q.category)).collect();
        assert_eq!(
            kept.iter().map(|q| &q.text).collect::<Vec<_>>(),
            before.iter().map(|q| &q.text).collect::<Vec<_>>()
        );
        for (q, b) in kept.iter().zip(before) {
            for (&(s, t), &(s0, t0)) in q.evidence.iter().zip(&b.evidence) {
                let c = q.conversation;
                assert_eq!(
                    turns[c].sessions[s].turns[t].text,
                    before_turns[c].sessions[s0].turns[t0].text
                );
            }
        }
    }

    #[test]
    fn the_kinds_drawn_after_the_layout_leave_the_earlier_questions_as_they_were() {
        let (plain, without) = generate(7, &shape(0, 0));
        let (corpus, with) = generate(7, &shape(6, 6));
        let (inferred, with_inferences) = generate(7, &shape(6, 0));
        let earlier = |c| c != Category::Inference && c != Category::SecondHand;
        assert_kept((&corpus, &with), (&plain, &without), earlier);
        assert_kept((&corpus, &with), (&inferred, &with_inferences), |c| {
            c != Category::SecondHand
        });
        let inferences: Vec<&Question> = with
            .iter()
            .filter(|q| q.category == Category::Inference)
            .collect();
        assert_eq!(inferences.len(), 18);
        for q in inferences {
            let [(s, t)] = q.evidence[..] else {
                panic!("one evidence turn: {:?}", q.evidence)
            };
            let turn = &corpus[q.conversation].sessions[s].turns[t];
            // The evidence tells it (a fact a deriver draws), in other words than the question's.
            assert!(turn.fact.is_some());
            let words = |t: &str| -> Vec<String> {
                t.split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 4)
                    .map(str::to_lowercase)
                    .collect()
            };
            let said = words(&turn.text);
            assert!(
                words(&q.text).iter().all(|w| !said.contains(w)),
                "{} / {}",
                q.text,
                turn.text
            );
        }
    }
}
