"""Synthetic instruction-following documents in the Alpaca layout, for machines with no network.

This module is an offline stand-in for the Alpaca data set (instruction/response pairs), which
the Manticore paper fine-tunes on and mixes into other sets to make them heterogeneous. It is
NOT Alpaca: every task, word list, table and template below was written for this repo. Nothing
in it is taken from the real data set.

Each document is one task, rendered exactly as `common/data/hub.py` renders real Alpaca rows::

    ### Instruction:
    {instruction}

    ### Input:            <- these two lines and the blank line after them only when
    {input}                  `input` is non-empty

    ### Response:
    {output}

Most task kinds have a response that is computed from the instruction, so a model can learn
them and the genre is far from the stories of `common/data/stories.py`:

- arithmetic: `add`, `subtract`, `multiply`, `sum_list`, and the small word problems
  `word_add`, `word_subtract`;
- list operations on the input: `sort_words`, `reverse_list`, `count_items`, `first_item`,
  `last_item`, `largest_number`, `smallest_number`;
- text operations: `uppercase`, `count_words`, `make_question`, `make_plural` on an input
  sentence, and `count_letters` of a word in the instruction;
- facts from small tables defined here: `opposite`, `plural`, `color_of`, `animal_sound` (one
  entry, or several listed in the input and answered one "key: value" line each), and
  `next_day`, `next_month` (including listing the days or months in order);
- open-ended kinds with templated responses: `tips`, `steps` (how to do something),
  `note` (a thank-you note or an invitation), `describe_place`, `describe_animal`.

Whenever a response of the arithmetic and counting kinds states its answer, the answer is the
last number in the response (a worked explanation, if any, comes first), so it is easy to check.
The words are mostly the child's vocabulary of the stories (several word lists are borrowed from stories.py), so a
tokenizer trained on the stories covers most of this text. Documents run from about 10 to 90
words (median near 27, split on whitespace): one knob per document sets how many optional
sentences (a polite opening, an explanation, a closing remark) appear, as in stories.py.

Determinism: document i of seed s is drawn from its own random.Random seeded by the string
"instructions:{s}:{i}" (str seeds are hashed with SHA-512, independent of PYTHONHASHSEED), so a
document depends only on (seed, i), and generate_instructions(n, seed, start) is the slice
start..start+n-1 of any larger call.

`mix_genres` builds the mixed sets of the paper's heterogeneity experiment (a fixed fraction of
documents from a second genre, e.g. these, among the stories), deterministically in its seed.
"""

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from common.config import bounded, seed_field
from common.data.hub import _alpaca_text
from common.data.stories import BOY_NAMES, GIRL_NAMES, LIKES, OBJECTS, PLACES, TRAITS
from common.errors import DataError

INSTRUCTION_FIELDS = ("text", "instruction", "input", "output", "kind", "doc_id")


def render_alpaca(instruction: str, given: str, output: str) -> str:
    """The Alpaca template, rendered by the very function that renders the Hub's rows."""
    return _alpaca_text({"instruction": [instruction], "input": [given], "output": [output]})[0]


# -----------------------------------------------------------------------------
# word lists and tables

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

# Simple nouns for lists; all single words so that sorting and counting are unambiguous.
LIST_WORDS = (
    "apple", "banana", "cherry", "grape", "lemon", "melon", "pear", "plum", "carrot", "bean",
    "cat", "dog", "fox", "owl", "frog", "duck", "bear", "mouse", "rabbit", "pony", "goat", "pig",
    "kite", "ball", "drum", "boat", "book", "hat", "sock", "shoe", "cup", "spoon", "bell", "key",
    "coin", "shell", "stone", "leaf", "tree", "star", "moon", "sun", "cloud", "rain", "snow",
    "house", "door", "chair", "table", "bed", "lamp", "clock", "train", "bike", "wagon", "sled",
    "cake", "pie", "bread", "cookie", "milk", "honey", "soup", "egg", "nest", "feather", "flower",
)

# noun -> plural, with the irregular ones a child meets early.
PLURALS = {
    "cat": "cats", "dog": "dogs", "bird": "birds", "apple": "apples", "tree": "trees",
    "star": "stars", "book": "books", "ball": "balls", "kite": "kites", "boat": "boats",
    "box": "boxes", "fox": "foxes", "bus": "buses", "dish": "dishes", "brush": "brushes",
    "glass": "glasses", "peach": "peaches", "bench": "benches", "berry": "berries",
    "puppy": "puppies", "bunny": "bunnies", "pony": "ponies", "baby": "babies", "cherry": "cherries",
    "leaf": "leaves", "wolf": "wolves", "loaf": "loaves", "shelf": "shelves", "knife": "knives",
    "mouse": "mice", "goose": "geese", "tooth": "teeth", "foot": "feet", "child": "children",
    "man": "men", "woman": "women", "sheep": "sheep", "fish": "fish", "deer": "deer",
    "tomato": "tomatoes", "potato": "potatoes", "toy": "toys", "day": "days", "key": "keys",
    "shell": "shells", "cookie": "cookies", "flower": "flowers", "frog": "frogs", "duck": "ducks",
}

# Things to count in word problems: (singular, plural).
COUNTABLES = (
    ("apple", "apples"), ("shell", "shells"), ("cookie", "cookies"), ("marble", "marbles"),
    ("sticker", "stickers"), ("balloon", "balloons"), ("crayon", "crayons"), ("egg", "eggs"),
    ("acorn", "acorns"), ("coin", "coins"), ("book", "books"), ("flower", "flowers"),
    ("stone", "stones"), ("cupcake", "cupcakes"), ("feather", "feathers"), ("pear", "pears"),
)

_OPPOSITE_PAIRS = (
    ("big", "small"), ("hot", "cold"), ("happy", "sad"), ("up", "down"), ("fast", "slow"),
    ("day", "night"), ("open", "closed"), ("wet", "dry"), ("full", "empty"), ("light", "dark"),
    ("loud", "quiet"), ("hard", "soft"), ("in", "out"), ("yes", "no"), ("left", "right"),
    ("early", "late"), ("first", "last"), ("top", "bottom"), ("near", "far"), ("clean", "dirty"),
    ("push", "pull"), ("win", "lose"), ("give", "take"), ("black", "white"), ("summer", "winter"),
    ("thick", "thin"), ("high", "low"), ("strong", "weak"), ("long", "short"), ("asleep", "awake"),
    ("inside", "outside"), ("good", "bad"), ("sweet", "sour"), ("laugh", "cry"), ("come", "go"),
    ("float", "sink"), ("front", "back"), ("always", "never"), ("before", "after"),
    ("morning", "evening"), ("remember", "forget"), ("catch", "throw"),
)
# Both directions; no word is in two pairs, so every word has one answer.
OPPOSITES = {**dict(_OPPOSITE_PAIRS), **{b: a for a, b in _OPPOSITE_PAIRS}}

# The color a child would name first; where things come in several colors, this table decides.
COLORS = {
    "the sky": "blue", "grass": "green", "snow": "white", "a banana": "yellow", "a lemon": "yellow",
    "a lime": "green", "a cherry": "red", "a strawberry": "red", "a tomato": "red",
    "a carrot": "orange", "a pumpkin": "orange", "an orange": "orange", "a blueberry": "blue",
    "a plum": "purple", "chocolate": "brown", "milk": "white", "a crow": "black", "coal": "black",
    "a frog": "green", "a pea": "green", "the sun": "yellow", "a fire truck": "red",
    "an acorn": "brown", "a polar bear": "white", "a flamingo": "pink", "the night sky": "black",
}

# (animal, sound, food, home)
ANIMALS = (
    ("cow", "moo", "grass", "on a farm"), ("dog", "woof", "meat and crunchy biscuits", "in a house"),
    ("cat", "meow", "fish", "in a house"), ("duck", "quack", "seeds and little bugs", "by a pond"),
    ("sheep", "baa", "grass", "in a field"), ("pig", "oink", "almost anything", "in a pen on a farm"),
    ("horse", "neigh", "hay and oats", "in a stable"), ("owl", "hoot", "mice", "in a hollow tree"),
    ("frog", "croak", "flies", "by a pond"), ("lion", "roar", "meat", "on the grassy plains"),
    ("bee", "buzz", "nectar from flowers", "in a hive"), ("hen", "cluck", "corn and seeds", "in a coop"),
    ("mouse", "squeak", "cheese and seeds", "in a little hole"), ("snake", "hiss", "mice and eggs",
                                                                  "under rocks"),
    ("wolf", "howl", "meat", "in the forest"), ("donkey", "hee-haw", "hay", "on a farm"),
    ("crow", "caw", "seeds and bugs", "in tall trees"), ("turkey", "gobble", "seeds and bugs", "on a farm"),
    ("bear", "growl", "berries, fish and honey", "in a cave in the forest"),
    ("monkey", "chatter", "bananas and fruit", "in the jungle"),
)

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)

SIMPLE_ADJS = (
    "big", "small", "red", "happy", "wet", "old", "little", "tired", "hungry", "soft", "noisy",
    "clean", "sleepy", "funny", "pretty", "cold", "warm", "shiny",
)

# (topic as a noun phrase, the same as "how can I ...", tips)
TIPS = (
    ("keeping your room tidy", "keep my room tidy", (
        "Put your toys back in their box when you finish playing.",
        "Make your bed every morning.",
        "Keep a basket for dirty clothes.",
        "Clean up a little every day, so the mess never gets big.",
        "Give every book a place on the shelf.",
        "Ask a grown-up to help you sort the things you do not use.",
    )),
    ("making new friends", "make new friends", (
        "Smile and say hello.",
        "Ask the other child what games they like to play.",
        "Share your toys and snacks.",
        "Listen when your new friend talks.",
        "Invite someone who is alone to join your game.",
        "Be kind, even when you do not win.",
    )),
    ("taking care of a puppy", "take care of a puppy", (
        "Give your puppy fresh water every day.",
        "Take your puppy for a walk in the morning and in the evening.",
        "Feed your puppy at the same times each day.",
        "Give your puppy a soft bed in a quiet place.",
        "Be gentle and patient when you teach your puppy new tricks.",
        "Brush your puppy so its fur stays clean.",
    )),
    ("growing a garden", "grow a garden", (
        "Plant your seeds in a sunny spot.",
        "Water the plants when the soil feels dry.",
        "Pull out the weeds every week.",
        "Put a little fence around the garden to keep the rabbits out.",
        "Be patient, because seeds take time to grow.",
        "Write the name of each plant on a little stick.",
    )),
    ("a picnic in the park", "have a good picnic in the park", (
        "Bring a big blanket to sit on.",
        "Pack sandwiches, fruit and plenty of water.",
        "Find a shady spot under a tree.",
        "Bring a ball or a kite to play with after lunch.",
        "Take all your trash home with you.",
        "Check the weather before you go.",
    )),
    ("staying warm in winter", "stay warm in winter", (
        "Wear a hat, a scarf and warm mittens.",
        "Put on a thick coat before you go outside.",
        "Drink warm milk or soup.",
        "Keep your feet dry in good boots.",
        "Wear two pairs of socks on very cold days.",
        "Come inside when your fingers start to feel cold.",
    )),
    ("going to sleep on time", "go to sleep on time", (
        "Go to bed at the same time every night.",
        "Turn off the lights and the screens.",
        "Read a quiet book before bed.",
        "Take a warm bath in the evening.",
        "Do not eat a big snack right before bed.",
        "Keep your room dark and cool.",
    )),
    ("baking cookies", "bake good cookies", (
        "Ask a grown-up to help with the hot oven.",
        "Wash your hands before you start.",
        "Measure the flour and sugar carefully.",
        "Leave space between the cookies on the tray.",
        "Let the cookies cool before you eat them.",
        "Clean the kitchen when you are done.",
    )),
    ("a day at the beach", "have a fun day at the beach", (
        "Wear a hat and put on sun cream.",
        "Bring a bucket and a spade to build a sandcastle.",
        "Always swim where a grown-up can see you.",
        "Drink lots of water, because the sun makes you thirsty.",
        "Look for shells and crabs in the tide pools.",
        "Shake the sand out of your towel before you go home.",
    )),
    ("reading more books", "read more books", (
        "Visit the library every week.",
        "Keep a book in your bag for when you have to wait.",
        "Read a little every night before bed.",
        "Pick books about the things you love.",
        "Read with a friend and talk about the story.",
        "Make a list of the books you have finished.",
    )),
    ("being a good helper at home", "be a good helper at home", (
        "Set the table before dinner.",
        "Feed the pets without being asked.",
        "Help carry the bags after shopping.",
        "Put your dirty dishes in the sink.",
        "Water the plants on the windowsill.",
        "Ask what you can do to help.",
    )),
    ("saving your coins", "save my coins", (
        "Keep your coins in a jar or a piggy bank.",
        "Put in a few coins every week.",
        "Write down what you want to buy and how much it costs.",
        "Wait a day before you spend your coins on something new.",
        "Count your coins at the end of each month.",
        "Be proud of every coin you save.",
    )),
)

# (task, steps in order)
STEPS = (
    ("make a jam sandwich", ("take two slices of bread", "spread butter on one slice",
                             "spread jam on top of the butter", "put the other slice on top",
                             "cut the sandwich in half")),
    ("plant a seed", ("fill a small pot with soil", "make a little hole with your finger",
                      "drop the seed in and cover it with soil", "water it gently",
                      "put the pot in a sunny window")),
    ("wash your hands", ("wet your hands with warm water", "put some soap on them",
                         "rub your hands together while you sing a short song",
                         "rinse off all the soap", "dry your hands on a clean towel")),
    ("brush your teeth", ("put a little toothpaste on your brush", "brush the front of your teeth",
                          "brush the back teeth in small circles", "gently brush your tongue",
                          "rinse your mouth with water")),
    ("build a snowman", ("roll a big ball of snow for the bottom", "roll a smaller ball and put it on top",
                         "roll a small ball for the head", "add two stones for eyes and a carrot for a nose",
                         "wrap a warm scarf around its neck")),
    ("get ready for school", ("wake up and get out of bed", "wash your face", "put on your clothes",
                              "eat a good breakfast", "pack your bag", "put on your shoes and coat")),
    ("fly a kite", ("find an open field on a windy day", "hold the kite up high",
                    "let the wind catch it", "let out the string slowly", "hold on tight and watch it fly")),
    ("feed a cat", ("wash the cat's bowl", "fill it with cat food", "put the bowl in the cat's corner",
                    "give the cat fresh water", "let the cat eat in peace")),
)
STEP_WORDS = ("First", "Next", "Then", "After that", "Then")

# Optional last sentences of a worked answer; no digits, so the answer stays the last number.
CLOSINGS = ("I hope this helps!", "Great job practicing!", "Keep up the good work!",
            "Taking it one step at a time makes it easy.", "You can check it by counting on your fingers.")

# Optional openings for any instruction; none holds a digit, so numbers in an instruction
# always belong to the task.
PREAMBLES = (
    "I have a question for you.", "Please help me with my homework.", "Here is a little task.",
    "My little brother asked me this and I am not sure.", "Let us practice.",
    "This is for my school work.", "Can you help me?", "I am learning new things today.",
    "Here is something to try.", "Please answer carefully.",
)
# Prefixes for a response that is a list or a sentence; they never contain the list's separator.
HERE_IS = ("Here is the answer:", "Sure!", "Here you go:", "Of course!", "Here it is:")


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _count(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def _close(rng: random.Random, extra: float, answer: str) -> str:
    return f"{answer} {rng.choice(CLOSINGS)}" if rng.random() < 0.5 * extra else answer


def _name(rng: random.Random) -> tuple[str, str]:
    """A name and its subject pronoun."""
    if rng.random() < 0.5:
        return rng.choice(GIRL_NAMES), "she"
    return rng.choice(BOY_NAMES), "he"


def _sentence(rng: random.Random) -> str:
    """A short story-like sentence, the input of the text operations."""
    name, _ = _name(rng)
    noun, verb, past, adjs, _, _ = rng.choice(OBJECTS)
    prep, place, _, _ = rng.choice(PLACES)
    return rng.choice((
        f"{name} {past} {_a(rng.choice(adjs))} {noun} {prep} {place}.",
        f"The little {rng.choice(('cat', 'dog', 'fox', 'owl', 'pig', 'duck'))} wanted to {verb} the {noun}.",
        f"One day {name} went to {place} with a friend.",
        f"{name} likes to {rng.choice(LIKES)}.",
        f"We saw {_a(rng.choice(adjs))} {noun} {prep} {place} today.",
    ))


# -----------------------------------------------------------------------------
# task kinds. Each takes (rng, extra) and returns (instruction, input, output); `extra` in
# [0, 1) is the document's knob for optional sentences.

Task = tuple[str, str, str]


def _arith(rng: random.Random, extra: float, a: int, b: int, word: str, sym: str, c: int,
           asks: tuple[str, ...], input_asks: tuple[str, ...], explain: str) -> Task:
    if rng.random() < 0.2:  # the numbers as input, the operation in the instruction
        instruction = rng.choice(input_asks)
        given = rng.choice((f"{a}, {b}", f"{a} and {b}"))
    else:
        instruction, given = rng.choice(asks), ""
    if rng.random() < 0.25:
        instruction += rng.choice((" Answer with just the number.", " Give only the number."))
        return instruction, given, str(c)
    answer = rng.choice((f"{a} {word} {b} is {c}.", f"The answer is {c}.", f"{a} {sym} {b} = {c}."))
    if rng.random() < extra:
        answer = f"{explain} {answer}"
    return instruction, given, _close(rng, extra, answer)


def _add(rng: random.Random, extra: float) -> Task:
    a, b = rng.randint(0, 50), rng.randint(0, 50)
    asks = (f"What is {a} plus {b}?", f"Add {a} and {b}.", f"What do you get when you add {a} and {b}?",
            f"Find the sum of {a} and {b}.", f"What is {a} + {b}?")
    return _arith(rng, extra, a, b, "plus", "+", a + b, asks,
                  ("Add these two numbers.", "What is the first number plus the second?"),
                  f"Start at {a} and count up {b} more.")


def _subtract(rng: random.Random, extra: float) -> Task:
    a = rng.randint(1, 60)
    b = rng.randint(0, a)  # no negative numbers in a child's sums
    asks = (f"What is {a} minus {b}?", f"Take {b} away from {a}.", f"Subtract {b} from {a}.",
            f"What is {a} - {b}?", f"If you have {a} and take away {b}, what is left?")
    return _arith(rng, extra, a, b, "minus", "-", a - b, asks,
                  ("Take the second number away from the first.", "What is the first number minus the second?"),
                  f"Start at {a} and count back {b}.")


def _multiply(rng: random.Random, extra: float) -> Task:
    a, b = rng.randint(1, 12), rng.randint(1, 12)
    asks = (f"What is {a} times {b}?", f"Multiply {a} by {b}.", f"What is {a} x {b}?",
            f"How much is {a} groups of {b}?")
    explain = f"{a} times {b} means {a} groups of {b}"
    if a <= 6:  # short enough to write out as repeated adding
        explain += ": " + " + ".join([str(b)] * a) + f" = {a * b}"
    return _arith(rng, extra, a, b, "times", "x", a * b, asks,
                  ("Multiply these two numbers.", "What is the first number times the second?"),
                  explain + ".")


def _word_add(rng: random.Random, extra: float) -> Task:
    name, he = _name(rng)
    one, many = rng.choice(COUNTABLES)
    a, b = rng.randint(2, 20), rng.randint(1, 20)
    c = a + b
    instruction = rng.choice((
        f"{name} has {a} {many}. {_cap(he)} finds {b} more. How many {many} does {he} have now?",
        f"There are {a} {many} in a basket. {name} puts in {b} more. How many {many} are in the basket now?",
        f"{name} found {a} {many} in the morning and {_count(b, one, many)} in the afternoon. "
        f"How many {many} did {he} find in all?",
    ))
    answer = rng.choice((f"The answer is {_count(c, one, many)}.", f"There are {_count(c, one, many)} in all.",
                         f"{_cap(_count(c, one, many))}."))
    if rng.random() < 0.3 + extra:
        answer = f"{a} + {b} = {c}, so the answer is {_count(c, one, many)}."
    return instruction, "", _close(rng, extra, answer)


def _word_subtract(rng: random.Random, extra: float) -> Task:
    name, he = _name(rng)
    friend, _ = _name(rng)
    one, many = rng.choice(COUNTABLES)
    a = rng.randint(2, 20)
    b = rng.randint(1, a)
    c = a - b
    instruction = rng.choice((
        f"{name} has {a} {many}. {_cap(he)} gives {b} to {friend}. How many {many} does {he} have left?",
        f"There are {a} {many} on the table. {name} takes {b} away. How many {many} are left?",
        f"{name} had {a} {many}, but {he} lost {b} of them on the way home. How many {many} are left?",
    ))
    left = _count(c, one, many)
    answer = rng.choice((f"There {'is' if c == 1 else 'are'} {left} left.", f"The answer is {left}.",
                         f"{_cap(left)} {'is' if c == 1 else 'are'} left."))
    if rng.random() < 0.3 + extra:
        answer = f"{a} - {b} = {c}, so the answer is {_count(c, one, many)}."
    return instruction, "", _close(rng, extra, answer)


def _numbers(rng: random.Random) -> list[int]:
    return rng.sample(range(1, 100), rng.randint(3, 10))


def _join(rng: random.Random, items: list) -> tuple[str, str]:
    """Render a list as an input and return it with its separator, which the answer reuses."""
    sep = "\n" if rng.random() < 0.25 else ", "
    return sep.join(map(str, items)), sep


def _sum_list(rng: random.Random, extra: float) -> Task:
    nums = _numbers(rng)[:rng.randint(3, 5)]
    given = ", ".join(map(str, nums))
    total = sum(nums)
    instruction = rng.choice(("Add up these numbers.", "What is the total of these numbers?",
                              "Find the sum of the numbers below."))
    if rng.random() < 0.3 + extra:  # running totals, so the answer is reached step by step
        steps, running = [], nums[0]
        for n in nums[1:]:
            steps.append(f"{running} + {n} = {running + n}")
            running += n
        return instruction, given, _close(rng, extra, ". ".join(steps) + f". The total is {total}.")
    return instruction, given, rng.choice((f"The total is {total}.", f"The sum is {total}.", str(total)))


def _list_task(rng: random.Random, extra: float, items: list, asks: tuple[str, ...],
               result: list, says: tuple[str, ...], explain: Callable[[random.Random], str]) -> Task:
    given, sep = _join(rng, items)
    answer = sep.join(map(str, result))
    explained = rng.random() < extra * 0.6
    # After an explanation the bare list would read as part of it, so it gets an introduction.
    if sep == "\n":
        if explained or rng.random() < 0.5:
            answer = f"{rng.choice(HERE_IS)}\n{answer}"
    elif explained or rng.random() < 0.6:
        answer = rng.choice(says).format(answer)
    if explained:
        answer = f"{explain(rng)} {answer}"
    return rng.choice(asks), given, answer


def _sort_words(rng: random.Random, extra: float) -> Task:
    words = rng.sample(LIST_WORDS, rng.randint(3, 10))
    return _list_task(
        rng, extra, words,
        ("Sort these words in alphabetical order.", "Put these words in ABC order.",
         "Sort the words below from A to Z.", "Write these words in the order they would come in a dictionary."),
        sorted(words),
        ("Here are the words in alphabetical order: {}", "In ABC order: {}"),
        lambda rng: rng.choice((
            "I looked at the first letter of each word, and then the next letter when two were the same.",
            "Words that start with an earlier letter of the alphabet come first.",
            "The words start with the letters " + " ".join(w[0] for w in words) + ".")),
    )


def _reverse_list(rng: random.Random, extra: float) -> Task:
    items = rng.sample(LIST_WORDS, rng.randint(3, 10)) if rng.random() < 0.6 else _numbers(rng)
    return _list_task(
        rng, extra, items,
        ("Reverse this list.", "Write this list backwards.", "Put the items in the opposite order.",
         "Write the list starting from the last item."),
        items[::-1],
        ("Here is the list in reverse order: {}", "Backwards, the list is: {}"),
        lambda rng: "The last item comes first and the first item comes last.",
    )


def _count_items(rng: random.Random, extra: float) -> Task:
    items = rng.sample(LIST_WORDS, rng.randint(2, 10)) if rng.random() < 0.6 else _numbers(rng)
    given, _ = _join(rng, items)
    n = len(items)
    instruction = rng.choice(("How many items are in this list?", "Count the items in the list.",
                              "How many things are in the list below?"))
    answer = rng.choice((f"There are {n} items.", f"The list has {n} items.", str(n)))
    if rng.random() < 0.3 + extra:
        answer = "Counting them one by one: " + ", ".join(map(str, range(1, n + 1))) + f". There are {n} items."
    return instruction, given, answer


def _first_item(rng: random.Random, extra: float) -> Task:
    items = rng.sample(LIST_WORDS, rng.randint(3, 10))
    given, _ = _join(rng, items)
    instruction = rng.choice(("What is the first item in this list?", "Which word comes first in the list?",
                              "Tell me the first word of this list."))
    return instruction, given, rng.choice((f"The first item is {items[0]}.", items[0],
                                           f"The list starts with {items[0]}."))


def _last_item(rng: random.Random, extra: float) -> Task:
    items = rng.sample(LIST_WORDS, rng.randint(3, 10))
    given, _ = _join(rng, items)
    instruction = rng.choice(("What is the last item in this list?", "Which word comes last in the list?",
                              "Tell me the last word of this list."))
    return instruction, given, rng.choice((f"The last item is {items[-1]}.", items[-1],
                                           f"The list ends with {items[-1]}."))


def _extreme(rng: random.Random, extra: float, largest: bool) -> Task:
    nums = _numbers(rng)
    given, _ = _join(rng, nums)
    word, fn = ("largest", max) if largest else ("smallest", min)
    alt = "biggest" if largest else "lowest"
    instruction = rng.choice((f"Which is the {word} number?", f"Find the {alt} number in this list.",
                              f"What is the {word} number in the list below?"))
    answer = rng.choice((f"The {word} number is {fn(nums)}.", str(fn(nums)), f"It is {fn(nums)}."))
    if rng.random() < extra * 0.6:  # the running record, which ends at the answer
        record = [nums[0]]
        for n in nums[1:]:
            if fn(n, record[-1]) != record[-1]:
                record.append(n)
        answer = (f"Going through the list, the {word} so far is {', then '.join(map(str, record))}. "
                  f"The {word} number is {fn(nums)}.")
    return instruction, given, answer


def _largest_number(rng: random.Random, extra: float) -> Task:
    return _extreme(rng, extra, largest=True)


def _smallest_number(rng: random.Random, extra: float) -> Task:
    return _extreme(rng, extra, largest=False)


def _uppercase(rng: random.Random, extra: float) -> Task:
    given = _sentence(rng)
    instruction = rng.choice(("Write this sentence in capital letters.", "Change every letter in this "
                              "sentence to a capital letter.", "Rewrite the sentence using only capital letters."))
    return instruction, given, given.upper()


def _count_words(rng: random.Random, extra: float) -> Task:
    given = _sentence(rng)
    n = len(given.split())
    instruction = rng.choice(("How many words are in this sentence?", "Count the words in the sentence below.",
                              "Tell me how many words this sentence has."))
    answer = rng.choice((f"There are {n} words in this sentence.", f"The sentence has {n} words.", str(n)))
    if rng.random() < extra * 0.6:
        answer = ("Counting them: " + ", ".join(f"{w.strip('.')} {i}" for i, w in enumerate(given.split(), 1))
                  + f". There are {n} words in this sentence.")
    return instruction, given, answer


def _count_letters(rng: random.Random, extra: float) -> Task:
    word = rng.choice(LIST_WORDS + tuple(PLURALS.values()))
    n = len(word)
    instruction = rng.choice((f'How many letters are in the word "{word}"?', f'Count the letters in "{word}".',
                              f'How long is the word "{word}"? Count its letters.'))
    answer = rng.choice((f'The word "{word}" has {n} letters.', f"It has {n} letters.", str(n)))
    if rng.random() < extra * 0.5:
        answer = "Spelling it out: " + "-".join(word) + f'. The word "{word}" has {n} letters.'
    return instruction, "", answer


def _make_question(rng: random.Random, extra: float) -> Task:
    name, _ = _name(rng)
    friend = rng.choice(GIRL_NAMES + BOY_NAMES)
    noun, verb, _, _, _, _ = rng.choice(OBJECTS)
    prep, place, _, _ = rng.choice(PLACES)
    trait = rng.choice(TRAITS)[0]
    animal = rng.choice(("cat", "dog", "fox", "owl", "bear", "duck", "rabbit", "robot"))
    like = rng.choice(LIKES)
    given, answer = rng.choice((
        (f"{name} is {trait}.", f"Is {name} {trait}?"),
        (f"The {animal} can {verb} the {noun}.", f"Can the {animal} {verb} the {noun}?"),
        (f"{name} likes to {like}.", f"Does {name} like to {like}?"),
        (f"{name} and {friend} are {prep} {place}.", f"Are {name} and {friend} {prep} {place}?"),
        (f"We will {verb} the {noun} tomorrow.", f"Will we {verb} the {noun} tomorrow?"),
    ))
    instruction = rng.choice(("Turn this sentence into a question.", "Rewrite the sentence as a question.",
                              "Change this sentence so that it asks a question."))
    return instruction, given, answer


def _make_plural(rng: random.Random, extra: float) -> Task:
    noun = rng.choice(tuple(PLURALS))
    adj = rng.choice(SIMPLE_ADJS)
    given, answer = rng.choice((
        (f"The {noun} is {adj}.", f"The {PLURALS[noun]} are {adj}."),
        (f"This {noun} is {adj}.", f"These {PLURALS[noun]} are {adj}."),
        (f"That {noun} was {adj}.", f"Those {PLURALS[noun]} were {adj}."),
        (f"The {noun} was very {adj}.", f"The {PLURALS[noun]} were very {adj}."),
    ))
    instruction = rng.choice(("Make this sentence about more than one.", "Rewrite the sentence in the plural.",
                              "Change the sentence so it talks about many, not one."))
    return instruction, given, answer


def _lookup(rng: random.Random, table: dict[str, str], single: Task, asks: tuple[str, ...]) -> Task:
    """Half the time ask for one entry (`single`), else for several at once: the input lists
    the keys and the response has one "key: value" line per key, in the same order."""
    if rng.random() < 0.5:
        return single
    keys = rng.sample(tuple(table), rng.randint(3, 6))
    given = "\n".join(keys) if rng.random() < 0.5 else ", ".join(keys)
    return rng.choice(asks), given, "\n".join(f"{k}: {table[k]}" for k in keys)


def _opposite(rng: random.Random, extra: float) -> Task:
    word = rng.choice(tuple(OPPOSITES))
    instruction = rng.choice((f'What is the opposite of "{word}"?', f"Give the opposite of the word {word}.",
                              f"What word means the opposite of {word}?"))
    answer = rng.choice((f'The opposite of "{word}" is "{OPPOSITES[word]}".', OPPOSITES[word],
                         f"The opposite of {word} is {OPPOSITES[word]}."))
    return _lookup(rng, OPPOSITES, (instruction, "", answer),
                   ("Write the opposite of each word.", "Give the opposites of these words."))


def _plural(rng: random.Random, extra: float) -> Task:
    noun = rng.choice(tuple(PLURALS))
    instruction = rng.choice((f'What is the plural of "{noun}"?', f"Write the plural of the word {noun}.",
                              f"One {noun}, two what?"))
    answer = rng.choice((f'The plural of "{noun}" is "{PLURALS[noun]}".', PLURALS[noun],
                         f"One {noun}, two {PLURALS[noun]}."))
    return _lookup(rng, PLURALS, (instruction, "", answer),
                   ("Write the plural of each word.", "What is the plural of each of these words?"))


def _color_of(rng: random.Random, extra: float) -> Task:
    thing = rng.choice(tuple(COLORS))
    color = COLORS[thing]
    instruction = rng.choice((f"What color is {thing}?", f"Name the color of {thing}.",
                              f"Tell me the color of {thing}."))
    answer = rng.choice((f"{_cap(thing)} is {color}.", _cap(color) + ".", f"It is {color}."))
    return _lookup(rng, COLORS, (instruction, "", answer),
                   ("Name the color of each of these things.", "What color is each thing in the list?"))


_SOUNDS = {animal: sound for animal, sound, _, _ in ANIMALS}


def _animal_sound(rng: random.Random, extra: float) -> Task:
    animal, sound, _, _ = rng.choice(ANIMALS)
    instruction = rng.choice((f"What sound does {_a(animal)} make?", f"What does {_a(animal)} say?"))
    answer = rng.choice((f"{_cap(_a(animal))} says {sound}.", f"{_cap(sound)}!",
                         f"{_cap(_a(animal))} goes {sound}, {sound}."))
    return _lookup(rng, _SOUNDS, (instruction, "", answer),
                   ("What sound does each animal make?", "Write the sound of each animal."))


def _next_day(rng: random.Random, extra: float) -> Task:
    i = rng.randrange(7)
    day = WEEKDAYS[i]
    form = rng.random()
    if form < 0.25:
        return (rng.choice((f"List the days of the week, starting with {day}.",
                            f"Write all seven days of the week in order, beginning on {day}.")), "",
                ", ".join(WEEKDAYS[i:] + WEEKDAYS[:i]) + ".")
    if form < 0.6:
        k = rng.randint(1, 3)
        after = rng.random() < 0.7
        when = "after" if after else "before"
        target = WEEKDAYS[(i + k if after else i - k) % 7]
        span = "the day" if k == 1 else f"{NUMBER_WORDS[k]} days"
        return (f"What day is it {span} {when} {day}?", "",
                f"{_cap(span)} {when} {day} is {target}.")
    instruction = rng.choice((f"What day comes after {day}?", f"Which day of the week follows {day}?"))
    return instruction, "", rng.choice((f"The day after {day} is {WEEKDAYS[(i + 1) % 7]}.",
                                        f"{WEEKDAYS[(i + 1) % 7]} comes after {day}."))


def _next_month(rng: random.Random, extra: float) -> Task:
    i = rng.randrange(12)
    month = MONTHS[i]
    form = rng.random()
    if form < 0.3:
        j = rng.randint(i + 1, min(i + 8, 11)) if i < 11 else 11
        if j > i:
            return (f"List the months from {month} to {MONTHS[j]}.", "", ", ".join(MONTHS[i:j + 1]) + ".")
    if form < 0.5:
        return (f"What month comes before {month}?", "",
                f"The month before {month} is {MONTHS[i - 1]}.")
    instruction = rng.choice((f"What month comes after {month}?", f"Which month follows {month}?"))
    answer = f"The month after {month} is {MONTHS[(i + 1) % 12]}."
    if i == 11 and rng.random() < extra:
        answer += " A new year starts then."
    return instruction, "", answer


def _tips(rng: random.Random, extra: float) -> Task:
    topic, how, tips = rng.choice(TIPS)
    k = rng.randint(2, len(tips))
    instruction = rng.choice((f"Give {NUMBER_WORDS[k]} tips for {topic}.", f"How can I {how}? Give me "
                              f"{NUMBER_WORDS[k]} tips.", f"List {NUMBER_WORDS[k]} tips for {topic}."))
    lines = [f"{j}. {tip}" for j, tip in enumerate(rng.sample(tips, k), 1)]
    if rng.random() < 0.5:
        lines.insert(0, rng.choice(("Here are some tips:", f"Here are {NUMBER_WORDS[k]} tips for {topic}:",
                                    "Good question! Try these:")))
    return instruction, "", "\n".join(lines)


def _describe_place(rng: random.Random, extra: float) -> Task:
    prep, place, _, (s1, s2, s3) = rng.choice(PLACES)
    instruction = rng.choice((f"Describe {place} in one sentence.", f"Write one sentence about {place}.",
                              f"What can you see {prep} {place}? Answer in one sentence."))
    answer = rng.choice((f"{_cap(place)} is a place with {s1}, {s2}, and {s3}.",
                         f"{_cap(prep)} {place} you can see {s1}, {s2}, and {s3}."))
    if rng.random() < 0.4:
        instruction = rng.choice((f"Tell me about {place}.", f"Write a few sentences about {place}."))
        answer = (f"{_cap(place)} is a fun place to visit. There you can see {s1} and {s2}. "
                  f"If you look closely, you will also find {s3}. It is a good place to {rng.choice(LIKES)}.")
    return instruction, "", answer


def _describe_animal(rng: random.Random, extra: float) -> Task:
    animal, sound, food, home = rng.choice(ANIMALS)
    instruction = rng.choice((f"Describe {_a(animal)} in one sentence.",
                              f"Write a short sentence about {_a(animal)}."))
    answer = rng.choice((f"{_cap(_a(animal))} is an animal that lives {home}, eats {food}, and says {sound}.",
                         f"{_cap(_a(animal))} lives {home}, likes to eat {food}, and goes {sound}."))
    if rng.random() < 0.4:
        instruction = rng.choice((f"Tell me about {_a(animal)}.", f"Write three sentences about {_a(animal)}."))
        answer = (f"{_cap(_a(animal))} is an animal that lives {home}. It likes to eat {food}. "
                  f"When it wants to talk, it says {sound}.")
    return instruction, "", answer


def _steps(rng: random.Random, extra: float) -> Task:
    task, steps = rng.choice(STEPS)
    instruction = rng.choice((f"Explain how to {task} step by step.", f"How do you {task}?",
                              f"Tell a child how to {task}."))
    if rng.random() < 0.5:
        lines = [f"Step {j}: {_cap(step)}." for j, step in enumerate(steps, 1)]
        return instruction, "", "\n".join(lines)
    words = list(STEP_WORDS[:len(steps) - 1]) + ["Finally"]
    return instruction, "", " ".join(f"{w}, {step}." for w, step in zip(words, steps))


def _note(rng: random.Random, extra: float) -> Task:
    name, _ = _name(rng)
    friend = rng.choice(GIRL_NAMES + BOY_NAMES)
    while friend == name:
        friend = rng.choice(GIRL_NAMES + BOY_NAMES)
    noun, verb, _, adjs, _, _ = rng.choice(OBJECTS)
    prep, place, _, (s1, _, _) = rng.choice(PLACES)
    if rng.random() < 0.5:
        gift = f"the {rng.choice(adjs)} {noun}"
        instruction = f"Write a short thank-you note from {name} to {friend} for {gift}."
        body = [f"Thank you so much for {gift}!", f"I took it to {place} and showed it to everyone."]
        if rng.random() < 0.3 + extra:
            body.append(f"Maybe next time we can {verb} {_a(rng.choice(adjs))} {noun} together.")
        body.append("You are a wonderful friend.")
        sign = rng.choice(("Love", "Your friend", "With a big hug"))
    else:
        day = rng.choice(WEEKDAYS)
        instruction = f"Write a short note from {name} inviting {friend} to {place} on {day}."
        body = [f"Would you like to come {prep} {place} with me on {day}?",
                f"We can {rng.choice(LIKES)} and look at {s1}."]
        if rng.random() < 0.3 + extra:
            body.append("I will bring a snack for both of us.")
        body.append("Please tell me if you can come.")
        sign = rng.choice(("Your friend", "See you soon", "Love"))
    return instruction, "", f"Dear {friend},\n" + " ".join(body) + f"\n{sign},\n{name}"


KINDS: dict[str, Callable[[random.Random, float], Task]] = {
    "add": _add, "subtract": _subtract, "multiply": _multiply, "sum_list": _sum_list,
    "word_add": _word_add, "word_subtract": _word_subtract,
    "sort_words": _sort_words, "reverse_list": _reverse_list, "count_items": _count_items,
    "first_item": _first_item, "last_item": _last_item,
    "largest_number": _largest_number, "smallest_number": _smallest_number,
    "uppercase": _uppercase, "count_words": _count_words, "count_letters": _count_letters,
    "make_question": _make_question, "make_plural": _make_plural,
    "opposite": _opposite, "plural": _plural, "color_of": _color_of, "animal_sound": _animal_sound,
    "next_day": _next_day, "next_month": _next_month,
    "tips": _tips, "steps": _steps, "note": _note,
    "describe_place": _describe_place, "describe_animal": _describe_animal,
}
KIND_NAMES = tuple(KINDS)


def _make_document(seed: int, doc_id: int) -> dict:
    rng = random.Random(f"instructions:{seed}:{doc_id}")
    kind = rng.choice(KIND_NAMES)
    extra = rng.random()
    instruction, given, output = KINDS[kind](rng, extra)
    if rng.random() < 0.6 * extra:
        instruction = f"{rng.choice(PREAMBLES)} {instruction}"
    return {
        "text": render_alpaca(instruction, given, output), "instruction": instruction,
        "input": given, "output": output, "kind": kind, "doc_id": doc_id,
    }


def iter_instructions(n: int, seed: int, start: int = 0) -> Iterator[dict]:
    """Yield the records of documents start..start+n-1 one at a time (keys: INSTRUCTION_FIELDS)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return (_make_document(seed, i) for i in range(start, start + n))


def generate_instructions(n: int, seed: int, start: int = 0) -> dict[str, list]:
    """Columns: 'text' (the rendered document), 'instruction', 'input' ('' when the task has
    none), 'output', 'kind' (one of KIND_NAMES), 'doc_id' (int, = start + i) for documents
    start..start+n-1. Deterministic in (seed, doc_id)."""
    columns = {f: [] for f in INSTRUCTION_FIELDS}
    for record in iter_instructions(n, seed, start):
        for f in INSTRUCTION_FIELDS:
            columns[f].append(record[f])
    return columns


def distinct_instructions(n: int, start: int, exclude: set[str] = frozenset(), seed: int = 0) -> list[str]:
    """`n` distinct generated instructions from id `start` on, none of them in `exclude` (short
    templated tasks repeat: "What comes after Monday?" is one document however often it is drawn)."""
    docs, batch = [], 2 * n
    while True:
        docs = [d for d in dict.fromkeys(generate_instructions(batch, seed, start)["text"]) if d not in exclude]
        if len(docs) >= n:
            return docs[:n]
        if batch >= 64 * n:
            raise DataError(f"the instruction generator gives only {len(docs)} distinct documents in {batch}; "
                            f"{n} are needed")
        batch *= 2


@dataclass
class InstructionTextConfig:
    """The `instruction_text` section: the documents a specialist component pretrains on. Here, not
    in the stage, because `specialists` reads it too: its held-out instructions leave these out."""
    seed: int = seed_field()
    start: int = bounded(1_000_000, ge=0)
    n_train: int = bounded(20_000, ge=1)
    n_validation: int = bounded(1_000, ge=1)
    block_size: int = bounded(256, ge=2)


def pretraining_documents(cfg: InstructionTextConfig) -> dict[str, list[str]]:
    """`instruction_text`'s documents. train: ids `start .. start + n_train - 1` as generated (a
    repeat is one more pass over a short task, not a leak); validation: `n_validation` distinct
    documents from the next ids on, none of them in train (the margin check scores them)."""
    train = generate_instructions(cfg.n_train, cfg.seed, cfg.start)["text"]
    validation = distinct_instructions(cfg.n_validation, cfg.start + cfg.n_train, exclude=set(train), seed=cfg.seed)
    return {"train": train, "validation": validation}


def mix_genres(a: list[str], b: list[str], fraction_b: float, n: int, seed: int) -> list[str]:
    """n documents, round(n * fraction_b) of them (Python's round) drawn from `b` and the rest
    from `a`, in a shuffled order that depends only on the pools and `seed`. No document appears
    twice: each pool is drawn without replacement, duplicates within a pool count once, and a
    document found in both pools belongs to `a`."""
    if not 0 <= fraction_b <= 1:  # also rejects NaN
        raise ValueError(f"fraction_b must be in [0, 1], got {fraction_b}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    a = list(dict.fromkeys(a))
    in_a = set(a)
    b = [doc for doc in dict.fromkeys(b) if doc not in in_a]
    n_b = round(n * fraction_b)
    n_a = n - n_b
    for name, pool, need in (("a", a, n_a), ("b", b, n_b)):
        if len(pool) < need:
            raise ValueError(f"pool {name} has {len(pool)} distinct documents, but n={n} with "
                             f"fraction_b={fraction_b} needs {need} from it")
    rng = random.Random(f"mix_genres:{seed}")
    mixed = rng.sample(a, n_a) + rng.sample(b, n_b)
    rng.shuffle(mixed)
    return mixed
