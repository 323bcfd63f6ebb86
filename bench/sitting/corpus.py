"""The sitting's corpus and queries: the same texts for every server, run and machine.

A message is one line of small talk between two people, 10-22 words (14 on average), built
from the word lists below by a SplitMix64 generator (the one bench/src/seed.rs uses), so the
sequence does not depend on Python's `random` module or its version. A query is two content
words, the way a person looks something up in a chat history ("cracked kettle", "kettle
harbour").

Each content word of a list of n appears in about 1/n of the messages: on 10,000 messages a
query's words are in 7-12% of them, and both of its words in about 0.1%, so the full-text leg
has a few hundred candidates to score and the vector leg a clear ranking to find.
"""

MASK = (1 << 64) - 1


class SplitMix64:
    """Small, fast, and the same stream for a seed everywhere."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform in 0..n (modulo bias is negligible for lists this short)."""
        return self.next() % n

    def pick(self, words: tuple[str, ...]) -> str:
        return words[self.below(len(words))]

    def chance(self, percent: int) -> bool:
        return self.below(100) < percent


OPENERS = ("honestly", "so", "well", "anyway", "apparently", "luckily", "sadly", "remember",
           "guess what", "by the way", "funny thing", "okay")
SUBJECTS = ("I", "we", "my aunt", "the kids", "our neighbour", "my cousin", "the landlord",
            "my partner", "the new intern", "grandpa", "the twins", "my flatmate")
VERBS = ("repaired", "painted", "borrowed", "misplaced", "ordered", "returned", "photographed",
         "sold", "cleaned", "wrapped", "measured", "delivered", "tested", "hid", "carried",
         "polished", "weighed", "unpacked", "labelled", "swapped")
ADJECTIVES = ("rusty", "velvet", "enormous", "tiny", "crooked", "shiny", "wobbly", "antique",
              "purple", "striped", "dusty", "fragile", "spare", "brass", "waterproof",
              "handmade", "secondhand", "noisy", "lopsided", "cracked", "folding", "electric",
              "ceramic", "woollen", "plastic", "leather")
NOUNS = ("kettle", "bicycle", "ladder", "umbrella", "piano", "lantern", "suitcase", "teapot",
         "armchair", "telescope", "typewriter", "canoe", "accordion", "wardrobe", "hammock",
         "mailbox", "toaster", "compass", "saddle", "birdcage", "scarf", "notebook", "kayak",
         "chandelier", "wheelbarrow", "thermos", "skateboard", "microscope", "easel", "banjo",
         "doormat", "stopwatch", "hairdryer", "projector", "drone", "aquarium")
PREPOSITIONS = ("near", "behind", "inside", "beside", "under", "across from", "outside",
                "next to")
PLACES = ("harbour", "bakery", "garage", "attic", "library", "station", "pharmacy", "orchard",
          "cathedral", "laundrette", "greenhouse", "stadium", "ferry", "market", "museum",
          "campsite", "vineyard", "warehouse", "depot", "lighthouse", "barbershop",
          "playground")
TIMES = ("last Tuesday", "this morning", "after lunch", "on Sunday", "before the storm",
         "at midnight", "during the holidays", "yesterday evening", "two weeks ago",
         "on my birthday", "in the rain", "before breakfast")
TAILS = ("which felt odd", "and nobody noticed", "so we laughed about it", "but it worked",
         "and then it rained", "for the third time", "without asking anyone",
         "and it smelled of pine", "while the dog barked", "as usual")


def message(rng: SplitMix64) -> str:
    """One line of the conversation."""
    words = []
    if rng.chance(60):
        words.append(rng.pick(OPENERS) + ",")
    words += [rng.pick(SUBJECTS), rng.pick(VERBS), "the"]
    if rng.chance(35):
        words.append(rng.pick(ADJECTIVES))
    words += [rng.pick(ADJECTIVES), rng.pick(NOUNS), rng.pick(PREPOSITIONS), "the",
              rng.pick(PLACES), rng.pick(TIMES)]
    line = " ".join(words)
    if rng.chance(50):
        line += ", " + rng.pick(TAILS)
    return line[0].upper() + line[1:] + "."


def messages(seed: int, n: int) -> list[str]:
    rng = SplitMix64(seed)
    return [message(rng) for _ in range(n)]


def queries(seed: int, n: int) -> list[str]:
    """`n` two-word queries: an adjective and a noun, a noun and a place, or a verb and a noun."""
    rng = SplitMix64(seed ^ 0x5157)  # a stream of its own, apart from the messages'
    out = []
    for _ in range(n):
        kind = rng.below(3)
        if kind == 0:
            out.append(f"{rng.pick(ADJECTIVES)} {rng.pick(NOUNS)}")
        elif kind == 1:
            out.append(f"{rng.pick(NOUNS)} {rng.pick(PLACES)}")
        else:
            out.append(f"{rng.pick(VERBS)} {rng.pick(NOUNS)}")
    return out


if __name__ == "__main__":
    for line in messages(42, 5):
        print(line)
    print(queries(42, 8))
