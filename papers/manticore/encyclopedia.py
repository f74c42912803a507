"""Synthetic encyclopedia entries: a third genre, neither the stories nor the instructions.

The Manticore paper pretrains its projectors on general web text (FineWeb) that is none of the
fine-tuning tasks. The `specialists` stage fine-tunes on stories and instructions, so projector
text drawn from those two genres trains the hybrid on text its components alone never read
(the README's same-text control). These entries stand in for the paper's general text: short
reference articles about made-up towns, rivers, animals, inventions and people, in the flat,
factual register of an encyclopedia, with numbers, dates and proper names, so that neither the
stories' child vocabulary and dialogue nor the instructions' task layout appears. Every word
list and template below was written for this repo.

Determinism: entry i of seed s is drawn from its own random.Random seeded by the string
"encyclopedia:{s}:{i}", so an entry depends only on (seed, i), and `generate_entries(n, seed,
start)` is the slice start..start+n-1 of any larger call.
"""

from __future__ import annotations

import random
from collections.abc import Callable

ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s", "st", "t", "tr",
          "v", "w", "z")
VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
CODAS = ("", "n", "r", "l", "s", "th", "nd", "rk", "m", "st")

REGIONS = ("north", "south", "east", "west", "centre", "north-east", "south-west", "interior")
TRADES = ("wool", "timber", "salt", "copper", "glass", "grain", "cheese", "paper", "leather", "clocks")
LANDMARKS = ("a stone bridge", "a covered market", "a clock tower", "a botanical garden", "an old mill",
             "a lighthouse", "an observatory", "a railway museum", "a cathedral", "a city wall")
HABITATS = ("wetlands", "pine forests", "dry grasslands", "rocky coasts", "mountain valleys", "river banks",
            "lowland heaths", "coastal dunes")
FOODS = ("seeds", "insects", "small fish", "roots", "berries", "snails", "grasses", "worms", "fruit")
ANIMAL_CLASSES = ("bird", "beetle", "frog", "lizard", "bat", "moth", "fish", "shrew", "snail")
FIELDS = ("chemistry", "mapmaking", "astronomy", "engineering", "botany", "mathematics", "medicine",
          "architecture", "music theory", "shipbuilding")
MATERIALS = ("brass", "iron", "oak", "glass", "copper wire", "cast steel", "porcelain", "waxed cloth")
PURPOSES = ("measure the depth of rivers", "keep time at sea", "weigh letters", "pump water from mines",
            "record rainfall", "spin flax", "print maps", "cool storerooms", "signal between hills")
CENTURY_WORDS = {17: "seventeenth", 18: "eighteenth", 19: "nineteenth", 20: "twentieth"}


def name(rng: random.Random, syllables: int | None = None) -> str:
    """A made-up proper name of two or three syllables."""
    count = syllables or rng.choice((2, 3))
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(count)).capitalize()


def some(rng: random.Random, sentences: list[str]) -> str:
    """An entry of the first three sentences and, or not, the ones after (each entry's length varies)."""
    return " ".join(sentences[:rng.randint(3, len(sentences))])


def town(rng: random.Random) -> str:
    place, country, river = name(rng), name(rng), name(rng, 2)
    founded, people = rng.randint(1100, 1850), rng.randrange(1_200, 250_000, 100)
    sentences = [f"{place} is a town in the {rng.choice(REGIONS)} of {country}.",
                 f"It lies on the river {river}, about {rng.randint(5, 180)} kilometres from the capital.",
                 f"The town was first recorded in {founded} and grew as a centre of the {rng.choice(TRADES)} trade.",
                 f"Its best-known building is {rng.choice(LANDMARKS)}, completed in {founded + rng.randint(20, 300)}.",
                 f"At the census of {rng.randint(1990, 2020)} it had {people:,} inhabitants."]
    return " ".join(sentences[:3] + rng.sample(sentences[3:], rng.randint(1, 2)))


def river(rng: random.Random) -> str:
    label, country, sea = name(rng, 2), name(rng), name(rng)
    length = rng.randint(40, 1900)
    return some(rng, [
        f"The {label} is a river in {country}, {length} kilometres long.",
        f"It rises in the hills of the {rng.choice(REGIONS)} at a height of {rng.randint(300, 2800)} metres and flows "
        f"into the {sea} Sea.",
        f"Its basin covers about {rng.randint(2, 90) * 1000:,} square kilometres.",
        f"The river is navigable for {rng.randint(10, max(11, length // 2))} kilometres and has "
        f"{rng.randint(2, 40)} locks.",
    ])


def animal(rng: random.Random) -> str:
    kind, label, country = rng.choice(ANIMAL_CLASSES), name(rng), name(rng)
    return some(rng, [
        f"The {label} {kind} is a species of {kind} found in the {rng.choice(HABITATS)} of {country}.",
        f"Adults measure {rng.randint(2, 60)} centimetres and weigh up to {rng.randint(5, 900)} grams.",
        f"It feeds mainly on {rng.choice(FOODS)} and, in winter, on {rng.choice(FOODS)}.",
        f"The species was first described in {rng.randint(1750, 1990)} and is listed as "
        f"{rng.choice(('common', 'near threatened', 'vulnerable', 'of least concern'))}.",
    ])


def invention(rng: random.Random) -> str:
    device, inventor, year = name(rng, 2).lower(), f"{name(rng)} {name(rng)}", rng.randint(1650, 1950)
    century = CENTURY_WORDS[year // 100 + 1]
    return some(rng, [
        f"The {device} is an instrument used to {rng.choice(PURPOSES)}.",
        f"It was devised in {year} by {inventor} and came into wide use in the {century} century.",
        f"Early models were made of {rng.choice(MATERIALS)} and {rng.choice(MATERIALS)}.",
        f"A working example is kept in the national collection of {name(rng)}.",
    ])


def person(rng: random.Random) -> str:
    full, born = f"{name(rng)} {name(rng)}", rng.randint(1600, 1920)
    died, field = born + rng.randint(35, 95), rng.choice(FIELDS)
    return some(rng, [
        f"{full} ({born}-{died}) was a scholar of {field} from {name(rng)}.",
        f"After studies at the academy of {name(rng)}, {full.split()[0]} taught there for {rng.randint(3, 40)} years.",
        f"The best-known work, published in {born + rng.randint(25, 34)}, set out a new method of {field}.",
        f"A street and a prize for young {field} scholars bear the name.",
    ])


KINDS: dict[str, Callable[[random.Random], str]] = {
    "town": town, "river": river, "animal": animal, "invention": invention, "person": person}


def generate_entries(n: int, seed: int, start: int = 0) -> list[str]:
    """Entries start..start+n-1 of `seed`, each of a kind drawn uniformly. Deterministic in (seed, i)."""
    entries = []
    for i in range(start, start + n):
        rng = random.Random(f"encyclopedia:{seed}:{i}")
        entries.append(KINDS[rng.choice(sorted(KINDS))](rng))
    return entries
