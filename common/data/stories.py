"""Synthetic children's stories with one-sentence summaries, for machines with no network.

This module stands in for the TinyStories data set (short stories in the vocabulary of a
young child) when it cannot be downloaded. It is NOT TinyStories: every word list and
template below was written for this repo, a small grammar of our own. Nothing in it is
taken from the real data set.

Each story is made in two steps:
  1. sample a latent plot: a hero (name, kind, trait), a place, an object and what the hero
     wants to do with it, an obstacle, a named helper, feelings, an ending type, and a
     time-of-day/weather opening;
  2. render the plot as text, choosing one of several templates for each beat and adding a
     random number of optional sentences (attempts, dialogue, a moral, ...), so stories run
     from about 60 to 350 words. Paragraphs are separated by "\\n".

The summary is one sentence rendered from the same plot. It always names the hero, the
object and the place, but names come from a pool of 50, so a name alone matches many
stories and finding a story from its summary takes more than string matching on the name.

Determinism: story i of seed s is drawn from its own random.Random seeded by the string
"stories:{s}:{i}" (str seeds are hashed with SHA-512, independent of PYTHONHASHSEED), so a
story depends only on (seed, i), and generate_stories(n, seed, start) is the slice
start..start+n-1 of any larger call.
"""

import random
from collections.abc import Iterator

STORY_FIELDS = (
    "story_id", "text", "summary",
    "hero", "hero_kind", "trait", "helper", "helper_kind", "place", "object", "want",
    "obstacle", "feeling_before", "feeling_after", "ending",
)

# -----------------------------------------------------------------------------
# characters

# Names are split by gender only so that girl/boy heroes get a fitting name and pronoun.
# 50 names in all: small enough that each one is shared by many stories.
GIRL_NAMES = (
    "Lily", "Mia", "Zoe", "Ella", "Ava", "Ruby", "Nora", "Rosa", "Ivy", "Luna",
    "Daisy", "Olive", "Hazel", "Maya", "Poppy", "Clara", "Bella", "Wren", "Tess", "June",
    "Lucy", "Nina", "Sophie", "Tilly", "Greta",
)
BOY_NAMES = (
    "Ben", "Tom", "Sam", "Max", "Leo", "Finn", "Jack", "Theo", "Milo", "Oscar",
    "Hugo", "Felix", "Pip", "Jasper", "Toby", "Eli", "Noah", "Otto", "Rex", "Arlo",
    "Kai", "Omar", "Abe", "Gus", "Jonah",
)
SHE = ("she", "her", "her", "herself")
HE = ("he", "him", "his", "himself")

ANIMAL_KINDS = (
    "cat", "dog", "rabbit", "bear", "fox", "mouse", "duck", "owl", "frog", "squirrel",
    "pig", "lamb", "turtle", "hedgehog", "puppy", "kitten", "bunny", "pony", "goat",
    "raccoon", "otter", "penguin", "chick", "elephant", "dragon", "robot", "cub",
)
HELPER_KINDS = (
    "owl", "badger", "deer", "squirrel", "beaver", "mole", "bear", "rabbit", "fox",
    "tortoise", "hedgehog", "crow", "mouse", "horse", "giraffe", "elephant", "dog", "cat",
    "farmer", "baker", "gardener", "teacher", "painter", "neighbor", "sailor", "librarian",
    "builder", "fisher",
)
HELPER_ADJS = (
    "wise", "kind", "old", "friendly", "clever", "gentle", "tall", "strong", "cheerful",
    "helpful", "patient", "quiet", "smiling", "jolly", "brave", "sensible", "humble",
)
# What a character holds things with; anything not listed has paws.
BODY = {
    "girl": "hands", "boy": "hands", "robot": "hands", "farmer": "hands", "baker": "hands",
    "gardener": "hands", "teacher": "hands", "painter": "hands", "neighbor": "hands",
    "sailor": "hands", "librarian": "hands", "builder": "hands", "fisher": "hands",
    "duck": "wings", "owl": "wings", "penguin": "wings", "chick": "wings", "crow": "wings",
    "pony": "hooves", "goat": "hooves", "horse": "hooves", "deer": "hooves",
    "giraffe": "hooves", "dragon": "claws", "elephant": "trunk",
}

# (trait, a sentence that shows it)
TRAITS = (
    ("curious", "{He} always wanted to know how things worked and why the sky was blue."),
    ("brave", "{He} was not afraid of the dark, or of thunder, or even of big barking dogs."),
    ("shy", "{He} often hid behind a tree when someone new came to say hello."),
    ("kind", "{He} liked to help anyone who looked sad or lonely."),
    ("clever", "{He} could solve riddles faster than anyone else in the neighborhood."),
    ("cheerful", "{He} hummed a merry tune wherever {he} went."),
    ("gentle", "{He} held every flower and beetle as softly as a feather."),
    ("playful", "{He} turned every chore into a game of chase."),
    ("stubborn", "Once {he} decided to do something, nothing could change {his} mind."),
    ("careful", "{He} always looked both ways and checked everything twice."),
    ("clumsy", "{He} tripped over {his} own feet at least three times a day."),
    ("sleepy", "{He} yawned a lot and loved long naps in sunny spots."),
    ("busy", "{He} was always rushing from one little job to the next."),
    ("friendly", "{He} waved hello to everyone, even the grumpy old crow on the fence."),
    ("silly", "{He} loved making funny faces until everyone giggled."),
    ("hungry", "{His} tummy rumbled from breakfast until bedtime."),
    ("bouncy", "{He} could never stand still for more than a moment."),
    ("quiet", "{He} liked soft sounds, like rain on leaves and the ticking of clocks."),
    ("helpful", "{He} was the first to carry baskets and sweep floors without being asked."),
    ("patient", "{He} could wait a very long time without grumbling."),
    ("impatient", "{He} hated waiting, even for a single minute."),
    ("dreamy", "{He} spent hours staring at clouds and imagining castles in the sky."),
    ("chatty", "{He} talked and talked from morning until night."),
    ("tidy", "{He} kept {his} room neat, with every toy in its proper place."),
    ("messy", "{His} room was a jumble of socks, crayons, and crumbs."),
    ("giggly", "{He} laughed at almost everything, especially at {his} own jokes."),
    ("adventurous", "{He} dreamed of sailing to faraway lands and climbing tall mountains."),
    ("thoughtful", "{He} always remembered birthdays and made little gifts for friends."),
    ("grumpy", "{He} frowned a lot, but deep down {he} had a warm heart."),
    ("creative", "{He} could make a fine castle out of a cardboard box and some string."),
    ("honest", "{He} always told the truth, even when it was hard."),
    ("nervous", "{His} knees wobbled whenever something new happened."),
    ("hardworking", "{He} never gave up on a job until it was done."),
    ("generous", "{He} always shared {his} snacks and toys with others."),
    ("polite", "{He} said please and thank you to everyone {he} met."),
    ("cheeky", "{He} loved to play little tricks and then grin from ear to ear."),
    ("lazy", "{He} liked to lie in the grass and do nothing at all."),
    ("noisy", "{He} sang and stomped and banged pots wherever {he} went."),
    ("daring", "{He} loved to try things that nobody else would try."),
    ("forgetful", "{He} often forgot where {he} had left {his} things."),
    ("sensible", "{He} always wore a coat when it was cold and a hat when it was sunny."),
    ("loyal", "{He} stuck by {his} friends no matter what."),
    ("eager", "{He} was always the first to say yes to any adventure."),
    ("sweet", "{He} left little flowers on the doorsteps of {his} neighbors."),
    ("restless", "{He} wiggled and fidgeted even at dinner time."),
    ("timid", "{He} jumped at every squeak and rustle."),
    ("bright", "{He} learned new things as quickly as a bird learns to fly."),
    ("lonely", "{He} did not have many friends and often played alone."),
    ("fussy", "{He} only ate food that was exactly the right color."),
    ("jolly", "{His} laugh was so loud that it made the windows rattle."),
)

# Things the hero likes to do; they fill the optional "likes" sentence.
LIKES = (
    "collect smooth pebbles", "count the clouds", "hum little songs", "draw pictures of boats",
    "splash in puddles", "chase butterflies", "build forts out of blankets",
    "listen to the rain", "read books about dragons", "dig for worms", "play hide and seek",
    "stack wooden blocks", "look for clovers with four leaves", "watch the ants march",
    "jump over cracks in the sidewalk", "make mud pies", "blow dandelion seeds",
    "roll down grassy hills", "pretend to be a pirate", "make daisy chains", "feed the ducks",
    "whistle old tunes", "tell riddles", "spin around until the world wobbled",
    "collect bright autumn leaves", "sing to the moon", "search for hidden treasure",
    "paint with big brushes", "juggle apples", "race paper boats", "skip stones on the water",
    "bake muffins", "visit the old lighthouse", "ride a wobbly scooter", "hunt for beetles",
    "listen to bedtime stories", "play the tambourine", "plant seeds in little pots",
    "fly paper airplanes", "peek into birds' nests", "swing on the garden gate",
    "play marbles in the dust", "make shadow puppets", "learn new words",
)

# -----------------------------------------------------------------------------
# setting

# (preposition, place, "in"/"out", three things to see there)
PLACES = (
    ("at", "the park", "out", ("tall swings", "a pond full of ducks", "green benches under the oak trees")),
    ("on", "the farm", "out", ("a red barn", "fields of golden wheat", "noisy hens in their coop")),
    ("in", "the forest", "out", ("tall pine trees", "mossy logs", "a babbling brook")),
    ("at", "the beach", "out", ("soft white sand", "rolling waves", "tide pools full of crabs")),
    ("by", "the lake", "out", ("a wooden dock", "floating lily pads", "reeds that whispered in the wind")),
    ("in", "the garden", "out", ("rows of carrots and beans", "bright tulips", "a little stone birdbath")),
    ("in", "the meadow", "out", ("tall grass", "wildflowers of every color", "hopping grasshoppers")),
    ("on", "the hill", "out", ("a lonely apple tree", "a view of the whole valley", "patches of soft clover")),
    ("in", "the village", "out", ("crooked little houses", "a fountain in the square", "a bakery that smelled of bread")),
    ("at", "the market", "out", ("stalls piled with fruit", "a cart selling balloons", "baskets of fresh eggs")),
    ("in", "the library", "in", ("shelves stacked with books", "cozy reading chairs", "a big globe in the corner")),
    ("at", "school", "in", ("tiny desks", "a chalkboard full of numbers", "a hamster in a cage")),
    ("in", "the kitchen", "in", ("a warm oven", "jars of flour and sugar", "a table covered in crumbs")),
    ("in", "the attic", "in", ("dusty trunks", "old paintings", "a round window above the rooftops")),
    ("at", "the zoo", "out", ("giraffes with long necks", "a splashing seal pool", "a parrot that said hello")),
    ("at", "the playground", "out", ("a twisty slide", "a sandbox", "a wobbly seesaw")),
    ("by", "the river", "out", ("smooth gray stones", "a family of otters", "willows dipping their branches")),
    ("in", "the snowy woods", "out", ("pines covered in snow", "icicles like glass", "tiny footprints everywhere")),
    ("at", "the harbor", "out", ("bobbing fishing boats", "seagulls crying overhead", "piles of tangled nets")),
    ("in", "the orchard", "out", ("rows of pear trees", "ladders leaning on branches", "baskets of ripe plums")),
    ("at", "the fair", "out", ("a spinning carousel", "stands selling sticky candy", "a big striped tent")),
    ("in", "the backyard", "out", ("a vegetable patch", "a creaky old swing", "a sandbox with a red bucket")),
    ("at", "the bakery", "in", ("trays of warm buns", "a big stone oven", "fancy cakes in the window")),
    ("in", "the toy shop", "in", ("shelves of dolls and trains", "a rocking horse", "jars of colorful marbles")),
    ("at", "the museum", "in", ("giant dinosaur bones", "glittering gems in glass cases", "paintings in golden frames")),
    ("in", "the cave", "in", ("sparkly crystals", "dripping puddles", "bats sleeping upside down")),
    ("on", "the mountain", "out", ("rocky paths", "mountain goats", "a cold, clear stream")),
    ("in", "the jungle", "out", ("hanging vines", "chattering monkeys", "flowers as big as umbrellas")),
    ("in", "the desert", "out", ("golden sand dunes", "prickly cactus plants", "a little oasis with palm trees")),
    ("on", "the island", "out", ("coconut palms", "a sandy cove", "colorful shells along the shore")),
    ("at", "the pond", "out", ("croaking frogs", "darting dragonflies", "a mossy old rowboat")),
    ("in", "the castle", "in", ("tall towers", "long hallways lined with armor", "a great hall with a huge fireplace")),
    ("at", "the train station", "out", ("puffing steam engines", "a big round clock", "people hurrying with suitcases")),
    ("in", "the barn", "in", ("bales of hay", "sleepy cows", "a ladder up to the hayloft")),
    ("in", "the playroom", "in", ("a box of blocks", "a tent made of blankets", "crayons scattered everywhere")),
    ("at", "the campsite", "out", ("a crackling campfire", "a green tent", "a sky full of stars")),
    ("in", "the flower field", "out", ("rows of sunflowers", "buzzing bees", "butterflies dancing in the air")),
    ("in", "the big city", "out", ("tall buildings", "honking taxis", "a busy sidewalk")),
    ("at", "the lighthouse", "out", ("a winding staircase", "a huge glowing lamp", "rocks with crashing waves")),
    ("in", "the swamp", "out", ("twisted trees", "bubbling mud", "a grumpy old alligator")),
    ("at", "the circus", "out", ("a juggling clown", "a striped tent", "a tightrope high above the ground")),
    ("in", "the greenhouse", "in", ("tomato vines", "tiny seedlings in pots", "warm, damp air that smelled green")),
    ("at", "grandma's house", "in", ("a squeaky rocking chair", "a cookie jar", "a cat asleep by the fire")),
    ("in", "the valley", "out", ("a winding road", "sheep grazing on the slopes", "a quiet stone bridge")),
)

# (weather word for the opening, a sentence describing it)
WEATHERS = (
    ("sunny", "The sun was warm, and the sky was a clear and perfect blue."),
    ("rainy", "Soft rain pattered on the roofs and made the leaves shine."),
    ("windy", "The wind whistled and tugged at every hat and scarf."),
    ("snowy", "Fat white snowflakes drifted down and covered everything like sugar."),
    ("foggy", "A gray fog hung low, so the trees looked like sleepy giants."),
    ("chilly", "The air was crisp, and every breath made a little cloud."),
    ("cloudy", "Big puffy clouds sailed slowly across the sky like ships."),
    ("bright", "Everything sparkled, from the dewdrops to the windows."),
    ("stormy", "Dark clouds rumbled far away over the hills."),
    ("breezy", "A gentle breeze carried the smell of fresh flowers."),
    ("frosty", "Frost had painted silver patterns on every window and leaf."),
    ("warm", "Bees buzzed lazily in the warm, golden air."),
    ("misty", "A thin mist curled around the fence posts like a soft scarf."),
    ("quiet", "Everything was so still that you could hear a leaf fall."),
    ("golden", "The light was soft and golden, like honey in a jar."),
)
TIMES = (
    "morning", "afternoon", "evening", "day", "Saturday morning", "Sunday afternoon",
    "spring morning", "summer day", "autumn afternoon", "winter morning", "holiday",
)
# Openings with no weather; "{time}" openings are built from WEATHERS x TIMES.
PLAIN_OPENINGS = (
    "Once upon a time", "One day", "Long ago", "Not so long ago", "Once",
    "A long time ago",
)

SOUNDS = (
    "a robin was singing", "the leaves were rustling", "a woodpecker tapped on a tree",
    "a dog barked twice", "the wind hummed softly", "a bell rang far away",
    "crickets chirped", "a stream gurgled over the rocks", "bees hummed among the flowers",
    "a train whistle tooted in the distance", "someone was laughing", "a cow mooed",
    "a frog croaked in the reeds", "a kettle whistled", "raindrops tapped on a roof",
    "an owl hooted", "a rooster crowed", "a squirrel chattered", "a clock ticked",
    "waves whooshed against the shore", "a wind chime tinkled", "a cart rattled by",
)

# -----------------------------------------------------------------------------
# the goal

# (noun, verb, past tense, adjectives, "in"/"out"/"any", portable)
# Portable objects are already the hero's, so obstacles may knock them away or break them.
OBJECTS = (
    ("kite", "fly", "flew", ("red", "striped", "paper", "diamond"), "out", True),
    ("ball", "kick", "kicked", ("bouncy", "rubber", "spotted"), "out", True),
    ("shell", "find", "found", ("pink", "spiral", "shiny"), "out", False),
    ("cake", "bake", "baked", ("chocolate", "strawberry", "birthday"), "in", False),
    ("tower", "build", "built", ("tall", "wobbly", "block"), "any", False),
    ("sandcastle", "build", "built", ("huge", "grand", "sandy"), "out", False),
    ("boat", "sail", "sailed", ("toy", "wooden", "little"), "out", True),
    ("song", "sing", "sang", ("happy", "silly", "brand new"), "any", False),
    ("picture", "paint", "painted", ("bright", "colorful", "giant"), "any", False),
    ("book", "read", "read", ("old", "thick", "magic"), "any", True),
    ("drum", "play", "played", ("small", "loud", "painted"), "any", True),
    ("flute", "play", "played", ("silver", "wooden", "tiny"), "any", True),
    ("puzzle", "finish", "finished", ("giant", "tricky", "jigsaw"), "in", False),
    ("hat", "wear", "wore", ("fancy", "woolly", "purple"), "any", True),
    ("scarf", "knit", "knitted", ("warm", "long", "rainbow"), "in", False),
    ("treehouse", "build", "built", ("secret", "cozy", "little"), "out", False),
    ("sunflower", "grow", "grew", ("tall", "giant", "golden"), "out", False),
    ("pumpkin", "grow", "grew", ("giant", "orange", "round"), "out", False),
    ("apple", "pick", "picked", ("juicy", "red", "crisp"), "out", False),
    ("pie", "bake", "baked", ("apple", "cherry", "warm"), "in", False),
    ("sandwich", "make", "made", ("cheese", "tasty", "tall"), "in", False),
    ("bike", "ride", "rode", ("blue", "shiny", "new"), "out", True),
    ("sled", "ride", "rode", ("fast", "wooden", "red"), "out", True),
    ("star", "catch", "caught", ("falling", "twinkly", "bright"), "out", False),
    ("butterfly", "see", "saw", ("rare", "orange", "spotted"), "out", False),
    ("rainbow", "see", "saw", ("bright", "double", "huge"), "out", False),
    ("balloon", "win", "won", ("red", "shiny", "heart-shaped"), "any", True),
    ("medal", "win", "won", ("gold", "shiny", "big"), "any", False),
    ("ribbon", "win", "won", ("blue", "silky", "prize"), "any", False),
    ("snowman", "build", "built", ("jolly", "huge", "round"), "out", False),
    ("fort", "build", "built", ("pillow", "cardboard", "secret"), "any", False),
    ("robot", "fix", "fixed", ("toy", "broken", "little"), "in", True),
    ("clock", "fix", "fixed", ("old", "ticking", "cuckoo"), "in", True),
    ("bell", "ring", "rang", ("silver", "tiny", "brass"), "any", True),
    ("map", "follow", "followed", ("old", "treasure", "crinkly"), "any", True),
    ("key", "find", "found", ("golden", "rusty", "tiny"), "any", False),
    ("coin", "find", "found", ("lucky", "shiny", "silver"), "any", False),
    ("egg", "find", "found", ("speckled", "blue", "golden"), "out", False),
    ("acorn", "find", "found", ("fat", "brown", "perfect"), "out", False),
    ("feather", "find", "found", ("long", "soft", "peacock"), "any", False),
    ("stone", "find", "found", ("smooth", "round", "sparkly"), "out", False),
    ("fish", "catch", "caught", ("silver", "big", "speedy"), "out", False),
    ("letter", "send", "sent", ("long", "secret", "cheerful"), "any", True),
    ("card", "make", "made", ("birthday", "glittery", "folded"), "in", False),
    ("necklace", "make", "made", ("bead", "shell", "pretty"), "any", False),
    ("crown", "make", "made", ("paper", "golden", "sparkly"), "any", False),
    ("mask", "make", "made", ("tiger", "funny", "feathered"), "any", False),
    ("cookie", "bake", "baked", ("sugar", "oatmeal", "ginger"), "in", False),
    ("soup", "cook", "cooked", ("vegetable", "hot", "carrot"), "in", False),
    ("lantern", "light", "lit", ("paper", "glowing", "little"), "any", True),
    ("garden", "plant", "planted", ("small", "vegetable", "flower"), "out", False),
    ("seed", "plant", "planted", ("magic", "tiny", "mysterious"), "out", False),
    ("tree", "climb", "climbed", ("tall", "old", "crooked"), "out", False),
    ("race", "win", "won", ("big", "long", "sack"), "out", False),
    ("game", "win", "won", ("board", "card", "silly"), "any", False),
    ("dance", "learn", "learned", ("new", "twirly", "tricky"), "any", False),
    ("trick", "learn", "learned", ("magic", "card", "clever"), "any", False),
    ("poem", "write", "wrote", ("short", "funny", "rhyming"), "any", False),
    ("story", "write", "wrote", ("spooky", "long", "exciting"), "any", False),
    ("wagon", "pull", "pulled", ("heavy", "wooden", "squeaky"), "out", True),
    ("bridge", "build", "built", ("little", "stick", "rope"), "out", False),
    ("nest", "build", "built", ("cozy", "twiggy", "soft"), "out", False),
    ("teddy", "find", "found", ("old", "fluffy", "brown"), "any", False),
    ("umbrella", "open", "opened", ("yellow", "spotty", "big"), "out", True),
    ("milkshake", "make", "made", ("pink", "cold", "banana"), "in", False),
    ("loaf", "bake", "baked", ("warm", "crusty", "brown"), "in", False),
    ("cupcake", "decorate", "decorated", ("vanilla", "lemon", "tiny"), "in", False),
    ("present", "wrap", "wrapped", ("surprise", "secret", "birthday"), "any", True),
    ("telescope", "look through", "looked through", ("brass", "old", "long"), "any", True),
    ("piano", "play", "played", ("old", "grand", "shiny"), "in", False),
    ("guitar", "play", "played", ("small", "red", "wooden"), "any", True),
    ("violin", "play", "played", ("shiny", "tiny", "old"), "any", True),
    ("whistle", "blow", "blew", ("tin", "loud", "silver"), "any", True),
    ("bubble", "blow", "blew", ("giant", "rainbow", "wobbly"), "any", False),
    ("pancake", "flip", "flipped", ("fluffy", "golden", "big"), "in", False),
    ("pony", "ride", "rode", ("spotted", "little", "gentle"), "out", False),
    ("train", "ride", "rode", ("steam", "little", "red"), "out", False),
    ("quilt", "sew", "sewed", ("patchwork", "warm", "colorful"), "in", False),
    ("snowball", "throw", "threw", ("huge", "perfect", "round"), "out", False),
    ("marble", "win", "won", ("glass", "swirly", "blue"), "any", True),
    ("basket", "weave", "wove", ("straw", "little", "picnic"), "any", False),
    ("jigsaw", "solve", "solved", ("huge", "puzzling", "thousand piece"), "in", False),
    ("mural", "paint", "painted", ("enormous", "cheerful", "sunny"), "any", False),
)

# -----------------------------------------------------------------------------
# the obstacle

# (setting, needs a portable object, summary clause, story sentences, ways the helper fixes it)
# Summary clauses must hold no sentence-final punctuation: the summary is one sentence.
OBSTACLES = (
    ("out", True, "a gust of wind blew the {obj} into a tall tree",
     ("Suddenly, a gust of wind snatched the {obj} and carried it up into the branches of a tall tree.",
      "Whoosh! A strong wind blew the {obj} right out of {his} {hands}, and it got stuck high in a tall tree."),
     ("{Helper} found a long, bendy stick and gently poked the branches until the {obj} tumbled down.",
      "{Helper} climbed the tree, branch by branch, and carefully brought the {obj} back down.")),
    ("out", True, "the {obj} fell into deep water",
     ("Then {hero} slipped on a wet stone, and the {obj} fell with a splash into the deep water.",
      "Plop! The {obj} slid out of {his} {hands} and began to float away on the water."),
     ("{Helper} held out a long fishing net and scooped the {obj} out of the water.",
      "{Helper} waded in up to {hhis} knees and grabbed the {obj} before it drifted too far.")),
    ("in", True, "the {obj} was on a shelf far too high to reach",
     ("But the {obj} was sitting on the very top shelf, far above {his} head.",
      "Someone had put the {obj} up on a high shelf, and {hero} could not reach it at all."),
     ("{Helper} pulled over a sturdy wooden stool and held it steady while {hero} climbed up.",
      "{Helper} lifted {hero} up onto {hhis} shoulders, and {hero} reached the {obj} at last.")),
    ("any", True, "{he} lost the {obj}",
     ("But when {hero} looked around, the {obj} was gone! {He} had lost it.",
      "{Hero} reached for the {obj}, but it was not there. {He} searched {his} pockets and {his} bag, but it was nowhere to be found."),
     ("{Helper} asked {hero} to think back, and together they retraced every step until they found the {obj} hiding in a corner.",
      "{Helper} had sharp eyes, and soon {hhe} spotted the {obj} peeking out from under a pile of leaves.")),
    ("any", True, "the {obj} broke into pieces",
     ("Then there was a loud crack. The {obj} had broken into pieces!",
      "{Hero} dropped the {obj}, and it broke into three sad pieces."),
     ("{Helper} brought some glue and string, and they fixed the {obj} together, piece by piece.",
      "{Helper} knew how to mend things, and with a little tape and a lot of care, the {obj} was as good as new.")),
    ("out", False, "a heavy rain started to fall",
     ("But then dark clouds rolled in, and heavy rain began to pour down.",
      "Drip, drop, splash! Suddenly it started to rain so hard that {hero} was soaked in a moment."),
     ("{Helper} opened a big umbrella, and they waited under it until the rain stopped and the sun came out again.",
      "{Helper} showed {hero} a dry spot under a wide old tree, and soon the rain passed.")),
    ("out", False, "a grumpy goose blocked the path",
     ("But a big, grumpy goose stood in the middle of the path, hissing and flapping its wings.",
      "Honk! A cross old goose blocked the way and would not let anyone pass."),
     ("{Helper} offered the goose some bread crumbs, and the goose waddled happily away.",
      "{Helper} spoke to the goose very politely, and to everyone's surprise, the goose stepped aside.")),
    ("out", False, "a huge muddy puddle was in the way",
     ("But a huge, muddy puddle stretched right across the path, much too wide to jump.",
      "In front of {him} lay the biggest, muddiest puddle {he} had ever seen."),
     ("{Helper} laid some flat stones across the puddle, and they hopped over it one stone at a time.",
      "{Helper} knew a secret path around the puddle, through a gap in the hedge.")),
    ("any", False, "the gate was locked",
     ("But when {hero} got there, the gate was locked tight with a big iron lock.",
      "{Hero} pushed on the door, but it was locked, and the key was nowhere in sight."),
     ("{Helper} remembered that the key was hidden under a flowerpot, and soon the gate swung open.",
      "{Helper} knew the owner, and {hhe} went to ask politely for the key.")),
    ("any", False, "{he} felt too shy to ask for help",
     ("But {hero} needed to ask someone for help, and {he} felt far too shy to say a single word.",
      "{Hero} wanted to ask the others for help, but {his} voice got small and {his} cheeks turned pink."),
     ('{Helper} stood right beside {hero} and said, "I will come with you." With a friend nearby, {hero} found {his} voice.',
      "{Helper} practiced the words with {hero} three times, until {he} felt ready.")),
    ("any", False, "{he} did not know how to do it",
     ("But there was one problem. {Hero} did not know how to do it, not even a little bit.",
      "{Hero} tried to remember how it was done, but {his} mind was as blank as a fresh sheet of paper."),
     ("{Helper} showed {hero} how, one small step at a time, and {hero} copied every step.",
      "{Helper} drew a simple picture in the dust to explain, and suddenly it all made sense.")),
    ("out", False, "a loud thunderstorm frightened {him}",
     ("Then a great clap of thunder boomed across the sky, and {hero} jumped with fright.",
      "Lightning flashed and thunder rumbled, and {hero} was too scared to move."),
     ("{Helper} explained that thunder is only the sky clearing its throat, and they counted the seconds until the storm rolled away.",
      "{Helper} wrapped {hero} in a warm blanket, and they waited together until the storm was over.")),
    ("any", False, "the only way forward was through a dark tunnel",
     ("But the only way forward was through a long, dark tunnel, and {hero} was afraid of the dark.",
      "{Hero} came to a narrow, dark tunnel. Strange echoes came from inside, and {his} knees began to shake."),
     ("{Helper} lit a little lantern, and they walked through the tunnel side by side.",
      "{Helper} stayed close to {hero} and sang a brave song, and the tunnel did not seem so scary anymore.")),
    ("out", True, "a naughty magpie snatched the {obj}",
     ("Suddenly, a naughty magpie swooped down, grabbed the {obj}, and flew off to its nest.",
      "Whoosh! A cheeky bird snatched the {obj} in its beak and flapped away."),
     ("{Helper} traded the magpie a shiny button for the {obj}, and the magpie happily agreed.",
      "{Helper} knew where the magpie lived, and {hhe} asked the bird kindly to give the {obj} back.")),
    ("any", True, "the {obj} was too heavy to carry",
     ("But the {obj} was much heavier than {hero} expected. {He} could barely lift it.",
      "{Hero} tried to pick up the {obj}, but it was as heavy as a sack of stones."),
     ("{Helper} took one end while {hero} took the other, and together they carried it easily.",
      "{Helper} found an old wheelbarrow, and they rolled the {obj} along with no trouble at all.")),
    ("out", False, "the little bridge had fallen down",
     ("But when {hero} reached the stream, {he} saw that the little bridge had fallen down.",
      "The wooden bridge across the creek was broken, and the water rushed fast below."),
     ("{Helper} found a long, flat log, and they laid it across the stream to make a new bridge.",
      "{Helper} knew where the water was shallow, and they crossed on stepping stones.")),
    ("any", False, "{he} got lost on the way",
     ("But the paths twisted and turned, and soon {hero} did not know where {he} was.",
      "After a while, {hero} looked around and realized that {he} was lost."),
     ("{Helper} knew every path by heart and led {hero} the right way.",
      "{Helper} climbed a little hill, spotted the way, and called for {hero} to follow.")),
    ("out", False, "it began to get dark",
     ("But the sun was sinking fast, and the shadows grew long and dark.",
      "Before long, the sky turned orange, then purple, and it grew too dark to see."),
     ("{Helper} brought a jar of glowing fireflies, and their soft light showed the way.",
      "{Helper} had a small flashlight, and its bright beam lit up everything around them.")),
    ("out", False, "the snow was too deep",
     ("But the snow was so deep that {hero} sank in right up to {his} middle.",
      "Heavy snow had fallen in the night, and every step was a struggle."),
     ("{Helper} brought a sled, and {hero} rode on it while {helper} pulled.",
      "{Helper} dug a path with a big shovel, one scoop at a time.")),
    ("out", False, "a buzzing bee would not leave {him} alone",
     ("Then a fat, fuzzy bee began to buzz around {hero}'s head, and {he} could not think of anything else.",
      "Bzzz! A bee zoomed around {hero} again and again, and {he} was too nervous to go on."),
     ("{Helper} explained that bees only want flowers, and {hhe} led the bee gently to a patch of clover.",
      "{Helper} told {hero} to stand very still, and soon the bee flew away to find some flowers.")),
    ("any", False, "{he} did not have the things {he} needed",
     ("But when {hero} looked in {his} basket, {he} saw that {he} did not have everything {he} needed.",
      "{Hero} had forgotten some important things at home, and {he} did not know what to do."),
     ("{Helper} opened {hhis} bag, which was full of useful things, and shared everything {hero} needed.",
      "{Helper} helped {hero} find what {he} needed nearby, and soon they had plenty.")),
    ("out", True, "the {obj} got tangled in a thorny bush",
     ("Oh no! The {obj} flew into a thorny bush and got all tangled up in the prickly branches.",
      "The {obj} rolled down the slope and landed deep inside a bush full of sharp thorns."),
     ("{Helper} put on thick gloves and carefully untangled the {obj} from the thorns.",
      "{Helper} held the thorny branches apart so {hero} could reach in safely.")),
    ("out", False, "a thick fog rolled in",
     ("Then a thick, white fog rolled in, and {hero} could not see past {his} own nose.",
      "Slowly, a cold fog crept over everything, until the whole world looked gray and blurry."),
     ("{Helper} rang a little bell as {hhe} walked, and {hero} followed the sound through the fog.",
      "{Helper} knew the way even in the fog, and {hhe} kept {hero} close the whole time.")),
    ("any", False, "the others laughed at {his} idea",
     ("But when {hero} told the others {his} plan, they laughed and said it was a silly idea.",
      "Some older neighbors pointed and giggled, and {hero} felt {his} face grow hot."),
     ("{Helper} said that the idea was not silly at all, and {hhe} helped {hero} show everyone how good it could be.",
      "{Helper} stood by {hero} and reminded {him} that brave ideas often sound silly at first.")),
    ("out", False, "a tall fence stood in the way",
     ("But a tall wooden fence stood in the way, and {hero} was much too small to climb it.",
      "A high fence blocked the way, with no gate anywhere in sight."),
     ("{Helper} knew about a loose board at the bottom of the fence, and they wiggled through.",
      "{Helper} made a step with {hhis} {hhands}, and {hero} climbed right over.")),
    ("any", False, "{he} tripped and hurt {his} knee",
     ("Then {hero} tripped over a rock and scraped {his} knee. It stung, and {he} began to cry.",
      "Bump! {Hero} fell down hard and hurt {his} knee."),
     ("{Helper} cleaned the scrape, put on a bandage, and gave {hero} a gentle hug.",
      "{Helper} helped {hero} up and let {him} lean on {hhim} until the knee felt better.")),
    ("out", False, "a sleepy bear was snoring across the path",
     ("But a huge brown bear was fast asleep right across the path, snoring like thunder.",
      "Blocking the way was a giant, sleepy bear, curled up and snoring loudly."),
     ("{Helper} tiptoed up and whispered into the bear's ear, and the bear yawned, rolled over, and made room.",
      "{Helper} knew a quiet way around the bear, and they crept past without a sound.")),
    ("out", True, "the {obj} got stuck in thick mud",
     ("Squelch! The {obj} fell into a patch of thick, sticky mud and got stuck fast.",
      "The {obj} slid down the bank and sank into the deep, gooey mud."),
     ("{Helper} tied a rope around the {obj}, and they pulled and pulled until it popped out with a loud slurp.",
      "{Helper} found a long branch and pried the {obj} free from the mud.")),
    ("any", False, "{he} was too small to manage it alone",
     ("But {hero} was very small, and the job was very big.",
      "Everyone else was taller and stronger, and {hero} felt much too little to manage."),
     ("{Helper} said that being small can be useful, and {hhe} showed {hero} a clever way that only a small one could do.",
      "{Helper} did the tall parts, and {hero} did the tiny, tricky parts.")),
    ("any", False, "a big crowd was in the way",
     ("But a big, noisy crowd had gathered, and {hero} could not squeeze through.",
      "So many others were there that {hero} could not see anything but backs and elbows."),
     ('{Helper} said "Excuse us, please," in a loud, polite voice, and the crowd made a path.',
      "{Helper} lifted {hero} up high so {he} could see over everyone.")),
    ("in", True, "the {obj} rolled under a heavy cupboard",
     ("Oops! The {obj} slipped and rolled far under a heavy cupboard.",
      "The {obj} bounced off the table and disappeared under the big, heavy cupboard."),
     ("{Helper} reached under with a long broom and swept the {obj} out.",
      "{Helper} and {hero} pushed the cupboard together, and there was the {obj}, covered in dust.")),
    ("in", False, "the lights went out",
     ("Then, with a flicker, all the lights went out, and everything was dark.",
      "Suddenly the lamps blinked and went dark, and {hero} could not see a thing."),
     ("{Helper} found a candle and a match, and soon a warm glow filled the room.",
      "{Helper} opened the curtains wide, and the moonlight shone in.")),
    ("in", False, "a mischievous kitten made a terrible mess",
     ("Just then, a mischievous kitten raced through and knocked everything onto the floor.",
      "Crash! A playful kitten chased its tail across the table, and everything went flying."),
     ("{Helper} helped {hero} tidy up, and they put everything back in its place.",
      "{Helper} gave the kitten a ball of yarn to play with, and then helped {hero} start over.")),
    ("any", False, "{he} was too tired to keep going",
     ("But after a while, {hero}'s legs felt heavy, and {he} was too tired to keep going.",
      "{Hero} yawned a huge yawn. {He} was so tired that {he} wanted to give up."),
     ("{Helper} shared a sweet snack and some cool water, and soon {hero} felt full of energy again.",
      "{Helper} said they should rest for a little while, and after a short nap, {hero} felt strong again.")),
    ("out", True, "a playful goat ran off with the {obj}",
     ("Suddenly, a playful goat trotted up, grabbed the {obj} in its mouth, and ran away.",
      "A frisky goat thought the {obj} was a snack and galloped off with it."),
     ("{Helper} offered the goat a crunchy apple, and the goat dropped the {obj} right away.",
      "{Helper} knew how to whistle for the goat, and it trotted back with the {obj}.")),
)

# -----------------------------------------------------------------------------
# feelings, small talk and the ending

EAGER = ("excited", "hopeful", "thrilled", "eager", "bubbly", "cheerful", "happy", "giddy")
BAD_FEELINGS = (
    "sad", "worried", "frustrated", "upset", "grumpy", "lonely", "scared", "nervous",
    "disappointed", "cross", "gloomy", "anxious", "confused", "helpless", "discouraged",
    "glum", "miserable", "uneasy",
)
GOOD_FEELINGS = (
    "happy", "proud", "glad", "joyful", "thankful", "excited", "calm", "delighted",
    "cheerful", "grateful", "relieved", "content", "peaceful", "brave", "wonderful",
)
HAPPY_ADVS = ("happily", "brightly", "cheerfully", "eagerly", "proudly", "gladly", "excitedly")
SAD_ADVS = ("sadly", "softly", "quietly", "glumly", "shakily", "with a sniff", "in a tiny voice")
KIND_ADVS = ("kindly", "gently", "softly", "calmly", "warmly", "patiently", "with a smile")

SNACKS = (
    "a crunchy carrot", "a slice of warm bread", "a handful of blueberries", "a honey biscuit",
    "a juicy pear", "some cheese and crackers", "a bowl of berries and cream", "a sticky bun",
    "a piece of corn bread", "a boiled egg", "a crisp green apple", "a little jam tart",
    "a warm muffin", "some sunflower seeds", "a ripe banana", "a handful of nuts",
    "a piece of cheese", "a bowl of oatmeal", "a slice of melon", "a cinnamon roll",
)

MORALS = (
    "it is good to ask for help", "being patient pays off", "friends make hard things easier",
    "trying again is how you learn", "kindness always comes back to you",
    "it is okay to feel scared", "sharing makes everyone happier",
    "small steps can take you a long way", "listening carefully can solve many problems",
    "every problem has a way around it", "working together is better than working alone",
    "a calm mind finds good ideas", "being brave does not mean never being afraid",
    "mistakes help us grow", "being gentle is a kind of strength",
    "saying thank you really matters", "a good friend is the best treasure",
    "you can do more than you think", "waiting your turn is fair to everyone",
    "telling the truth keeps friendships strong",
)

SURPRISES = (
    "a nest of tiny blue eggs", "a family of baby ducks", "a secret door covered in ivy",
    "an old treasure chest full of buttons", "a sleepy baby hedgehog",
    "a ring of glowing mushrooms", "a hidden waterfall", "a lost puppy looking for a friend",
    "a tiny note that said thank you", "a huge patch of wild strawberries",
    "a music box that still played a tune", "a mother cat with four kittens",
    "a beetle with rainbow wings", "a friendly turtle wearing a crown of moss",
    "a little pool full of silver fish", "a cave that sparkled like a starry sky",
    "a picnic basket with their names on it", "a message in a bottle",
    "a kite that someone had lost long ago", "a baby owl that had fallen from its nest",
    "a secret tunnel to the other side of the hill", "giant footprints in the mud",
    "a box of old photographs", "a garden gnome with a painted smile",
)

# -----------------------------------------------------------------------------
# templates, one tuple per story beat. Keys: see ctx in _make_story.

INTROS = (
    "{Opening}, there was {a_trait} {kind} named {hero} who loved to visit {place}.",
    "{Opening}, {a_trait} {kind} called {hero} went to {place}.",
    "{Opening}, {hero} the {kind} was playing {prep} {place}.",
    "{Opening}, {a_trait} little {kind} named {hero} set off for {place}.",
    "{Opening}, {hero}, {a_trait} {kind}, spent the day {prep} {place}.",
)
TRAIT_LINES = (
    "{Hero} was very {trait}.", "Everyone knew that {hero} was {trait}.",
    "{Hero} had always been {a_trait} {kind}.", "{He} was {trait}, and everybody loved {him} for it.",
)
LIKE_LINES = (
    "{He} liked to {like}.", "Most of all, {hero} loved to {like}.",
    "When {he} was not busy, {he} liked to {like} and {like2}.", "{His} favorite thing was to {like}.",
)
PLACE_LINES = (
    "{Place} had {s1}, {s2}, and {s3}.",
    "{Prep} {place}, {hero} could see {s1} and {s2}.",
    "There were {s1} and {s3} everywhere {he} looked.",
    "{Hero} loved {place}, with its {s2bare} and its {s3bare}.",
)
SOUND_LINES = ("Somewhere close by, {sound}.", "All around, {sound}.", "{Hero} listened: {sound}.")

WANT_LINES = (
    "More than anything, {hero} wanted {want}.",
    "Today, {hero} had a big plan: {he} wanted {want}.",
    "{Hero} had been dreaming for weeks about a chance {want}.",
    "{He} had one wish for the day, and that was {want}.",
    "{Hero} woke up with a happy idea. {He} would try {want}!",
    "All week long, {hero} had hoped {want}.",
    "There was one thing {hero} wanted to do {prep} {place}, and it was {want}.",
)
WANT_TALK = (
    '"Today I am going {want}!" {hero} said {happy_adv}.',
    '"I wish I could {verb} {a_obj}," {hero} whispered.',
    '"Wouldn\'t it be wonderful {want}?" {hero} asked {self}.',
    '"Just wait and see," {hero} told everyone. "I am going {want}."',
)
EAGER_LINES = (
    "{He} felt so {eager} that {he} did a little dance.",
    "{Hero} was {eager} and could hardly wait.",
    "{His} heart went thump, thump, thump, because {he} was so {eager}.",
)

TROUBLE_STARTS = (
    "But there was a problem.", "Uh oh.", "Then something went wrong.",
    "But things did not go as planned.", "Everything was going well, until it was not.",
)
BAD_LINES = (
    "{Hero} felt {bad}.", "Now {hero} was {bad}, and {his} eyes filled with tears.",
    "{His} smile faded, and {he} felt very {bad}.", "{Hero} sat down on the ground, feeling {bad}.",
    "Oh no! Poor {hero} felt so {bad}.",
)
ATTEMPTS = (
    "{He} tried as hard as {he} could, but it did not work.",
    "{He} jumped up and down, but that did not help one bit.",
    "{He} stretched out {his} {hands} as far as they would go, but it was not enough.",
    "{He} had an idea and tried it right away, but it went wrong.",
    "{He} took a deep breath and tried again, but nothing changed.",
    "{He} walked around to the other side to look for another way, but there was none.",
    "{He} called out for help, but only an echo called back.",
    "{He} pushed and pulled and huffed and puffed, but nothing moved.",
    "{He} tried to be patient and wait, but the problem did not go away.",
    "{He} counted to ten and tried once more, and still it did not work.",
    "{He} asked a passing beetle for advice, but the beetle only shrugged.",
    "{He} stood very still and thought very hard, scratching {his} head.",
    "{He} tried a clever trick with a piece of string, but the string snapped.",
    "{He} tried using a stick, but the stick was far too short.",
    "{He} made a wobbly pile of stones to stand on, but it tumbled over.",
    "{He} closed {his} eyes and hoped for luck, but luck did not come.",
    "{He} sang a little song for courage and tried again, but it was still too hard.",
    "{He} tried to drag over a ladder, but it was much too heavy.",
    "{He} asked a busy squirrel, but the squirrel was in too much of a hurry to listen.",
    "{He} drew a plan on a scrap of paper, but the plan had a big hole in it.",
)
ATTEMPT_TAILS = (
    "{He} sighed.", "{His} ears drooped.", "{He} kicked a little pebble.",
    "{He} felt even more {bad}.", "It was harder than {he} thought.",
    "Maybe it was impossible after all.", "{He} did not want to give up.",
)
LAMENTS = (
    '"What will I do now?" {hero} said {sad_adv}.',
    '"This is the worst day ever," {hero} mumbled.',
    '"I will never {verb} the {obj}," {hero} said {sad_adv}.',
)
SNACK_LINES = (
    "{Hero} sat down and had {snack} to feel better.",
    "{He} stopped for a moment to munch {snack}.",
    "To feel braver, {he} nibbled on {snack}.",
)

ARRIVALS = (
    "Just then, {helper} the {hkind} came along the path.",
    "At that very moment, {a_hadj} {hkind} named {helper} came by.",
    "Suddenly, {hero} heard a friendly voice. It was {helper} the {hadj} {hkind}.",
    "Along came {helper}, {a_hadj} {hkind} who lived nearby.",
    "Then {helper} the {hkind} peeked out from behind a bush.",
    "Soon {helper}, {a_hadj} {hkind}, wandered over to see what was wrong.",
)
HELPER_ASKS = (
    '"Why do you look so {bad}, {hero}?" asked {helper}.',
    '"What is the matter?" {helper} asked {kind_adv}.',
    '"Hello, {hero}! Is something wrong?" said {helper}.',
)
EXPLAINS = (
    "{Hero} told {helper} all about the {obj} and the trouble.",
    '"I wanted {want}, but now I cannot," said {hero} {sad_adv}.',
    "{Hero} sniffed and explained everything, from the beginning to the end.",
)
OFFERS = (
    '"Do not worry," said {helper}. "I know just what to do."',
    '"Let me help you," said {helper} {kind_adv}.',
    '"Two heads are better than one," {helper} said. "Let us try together."',
    '"I think I can help," said {helper}, "if you will help me too."',
)
SUCCESSES = (
    "It worked!", "Hooray! It worked!", "And just like that, the problem was solved.",
    "{Hero} could hardly believe it.", "{Hero} clapped {his} {hands} with joy.",
)
THANKS = (
    '"Thank you, {helper}!" said {hero}. "That is what friends are for," {helper} replied.',
    '"You are the best!" cried {hero}, and {helper} smiled {kind_adv}.',
    '{Hero} thanked {helper} again and again, until they both started laughing.',
)

# ending type -> (story templates, summary clauses). Summary clauses follow ", and ".
ENDINGS = {
    "happy": (
        ("Then {hero} {past} {the_obj}, just as {he} had dreamed. {He} felt {good}.",
         "At last, {hero} got {want}. {He} had never felt so {good}.",
         "{Hero} {past} {the_obj} with a great big grin, and {he} felt {good} all the way home."),
        ("in the end {he} got to {verb} the {obj}",
         "{he} finally {past} the {obj} and felt {good}")),
    "bittersweet": (
        ("By then the sun was setting, and it was too late {want}. {Hero} felt a little sad, but also {good}, because {he} had found a new friend in {helper}.",
         "{Hero} did not get {want} that day. But as {he} walked home beside {helper}, {he} felt {good} anyway."),
        ("though {he} never got to {verb} the {obj} that day, {he} made a true friend",
         "even without the {obj}, {he} went home {good} to have a new friend")),
    "lesson": (
        ("{Hero} {past} {the_obj} at last. That day, {he} learned that {moral}.",
         "Later, {hero} thought about the whole day with the {obj}. {He} had learned that {moral}."),
        ("{he} learned that {moral}",
         "along with the {obj}, {he} came away knowing that {moral}")),
    "surprise": (
        ("Then something amazing happened. Right there {prep} {place}, they found {surprise}!",
         "{Hero} and {helper} gasped. Behind the last bush, they discovered {surprise}."),
        ("together they discovered {surprise}",
         "besides the {obj}, they found {surprise}")),
    "sharing": (
        ("{Hero} did not want to keep the fun of the {obj} all to {self}, so {he} invited everyone {prep} {place} to join in.",
         "Soon {hero} shared the {obj} with {helper} and all of {his} friends, and everyone felt {good}."),
        ("{he} shared the fun of the {obj} with everyone",
         "in the end {he} shared the {obj} with all of {his} friends")),
}
ENDING_TYPES = tuple(ENDINGS)
MORAL_LINES = (
    "The moral of the story is that {moral}.",
    '"You see," said {helper}, "{moral}."',
    "And so {hero} remembered that {moral}.",
)
CLOSINGS = (
    "From that day on, {hero} and {helper} were the best of friends.",
    "That night, {hero} dreamed about {the_obj} and smiled in {his} sleep.",
    "And whenever {hero} came back to {place} after that, {he} remembered this special day.",
    "It had been a wonderful day {prep} {place}.",
    "When {he} got home, {hero} told the whole story twice, once to {his} mother and once to {his} toys.",
)

SUMMARIES = (
    "{hero} the {kind} wanted {want} {prep} {place}, but {obstacle}; {helper} the {hkind} helped, and {end}.",
    "{Prep} {place}, {a_trait} {kind} named {hero} hoped {want}, but {obstacle} until {helper} the {hkind} came to help, and {end}.",
    "When {obstacle} {prep} {place}, {hero} the {kind}, who wanted {want}, got help from {helper} the {hkind}, and {end}.",
    "This is a story about {hero} the {trait} {kind}, who wanted {want} {prep} {place}; after {obstacle}, {helper} the {hkind} lent a hand, and {end}.",
    "{hero}, {a_trait} {kind}, set out {want} {prep} {place}, but {obstacle}, so {helper} the {hkind} helped, and {end}.",
)

# Which objects fit a place, and which obstacles fit a (place, object): precomputed once
# so the per-story loop is a few rng.choice calls.
_OBJECTS_FOR = {s: tuple(o for o in OBJECTS if o[4] in ("any", s)) for s in ("in", "out")}
_OBSTACLES_FOR = {
    (s, portable): tuple(ob for ob in OBSTACLES if ob[0] in ("any", s) and (portable or not ob[1]))
    for s in ("in", "out") for portable in (False, True)
}


def _a(phrase: str) -> str:
    # "honest" is the one word here that starts with a silent h
    return ("an " if phrase.startswith(("a", "e", "i", "o", "u", "hon")) else "a ") + phrase


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _make_story(seed: int, story_id: int) -> dict:
    rng = random.Random(f"stories:{seed}:{story_id}")
    pick = rng.choice
    chance = rng.random

    # --- latent plot ---
    if chance() < 0.5:
        hero, pron = pick(GIRL_NAMES), SHE
        kind = "girl" if chance() < 0.35 else pick(ANIMAL_KINDS)
    else:
        hero, pron = pick(BOY_NAMES), HE
        kind = "boy" if chance() < 0.35 else pick(ANIMAL_KINDS)
    trait, trait_line = pick(TRAITS)
    hpron = SHE if chance() < 0.5 else HE
    helper = hero
    while helper == hero:
        helper = pick(GIRL_NAMES if hpron is SHE else BOY_NAMES)
    hkind, hadj = pick(HELPER_KINDS), pick(HELPER_ADJS)
    prep, place, setting, scenery = pick(PLACES)
    noun, verb, past, adjs, _, portable = pick(_OBJECTS_FOR[setting])
    adj = pick(adjs)
    obstacle = pick(_OBSTACLES_FOR[setting, portable])
    weather, weather_line = pick(WEATHERS)
    ending = pick(ENDING_TYPES)
    bad, good, eager = pick(BAD_FEELINGS), pick(GOOD_FEELINGS), pick(EAGER)
    moral = pick(MORALS)
    # One knob per story for how many optional sentences appear, so lengths vary widely
    # instead of clustering around the mean.
    extra = chance()

    def maybe(p: float = 1.0) -> bool:
        return chance() < p * extra

    weather_opening = chance() < 0.6
    opening = f"One {weather} {pick(TIMES)}" if weather_opening else pick(PLAIN_OPENINGS)
    a_obj = _a(f"{adj} {noun}")
    ctx = {
        "hero": hero, "Hero": hero, "kind": kind, "trait": trait, "a_trait": _a(trait),
        "he": pron[0], "him": pron[1], "his": pron[2], "self": pron[3],
        "He": _cap(pron[0]), "His": _cap(pron[2]), "hands": BODY.get(kind, "paws"),
        "helper": helper, "Helper": helper, "hkind": hkind, "hadj": hadj, "a_hadj": _a(hadj),
        "hhe": hpron[0], "hhim": hpron[1], "hhis": hpron[2], "hhands": BODY.get(hkind, "paws"),
        "prep": prep, "Prep": _cap(prep), "place": place, "Place": _cap(place),
        "s1": scenery[0], "s2": scenery[1], "s3": scenery[2],
        "s2bare": scenery[1].removeprefix("a "), "s3bare": scenery[2].removeprefix("a "),
        "obj": noun, "verb": verb, "past": past, "a_obj": a_obj, "the_obj": f"the {adj} {noun}",
        "want": f"to {verb} {a_obj}",
        "bad": bad, "good": good, "eager": eager, "moral": moral, "surprise": pick(SURPRISES),
        "Opening": opening, "like": pick(LIKES), "like2": pick(LIKES), "sound": pick(SOUNDS),
        "snack": pick(SNACKS), "happy_adv": pick(HAPPY_ADVS), "sad_adv": pick(SAD_ADVS),
        "kind_adv": pick(KIND_ADVS),
    }
    obstacle_clause = obstacle[2].format_map(ctx)
    ctx["obstacle"] = obstacle_clause

    # --- render: a list of paragraphs, each a list of template strings ---
    setup = [pick(INTROS)]
    if weather_opening and maybe(0.8):
        setup.append(weather_line)
    if maybe():
        setup.append(pick(TRAIT_LINES))
    if maybe(0.7):
        setup.append(trait_line)
    if maybe(0.6):
        setup.append(pick(LIKE_LINES))
    if maybe():
        setup.append(pick(PLACE_LINES))
    if maybe(0.4):
        setup.append(pick(SOUND_LINES))

    goal = [pick(WANT_LINES)]
    if maybe():
        goal.append(pick(WANT_TALK))
    if maybe(0.7):
        goal.append(pick(EAGER_LINES))

    trouble = []
    if maybe(0.7):
        trouble.append(pick(TROUBLE_STARTS))
    trouble.append(pick(obstacle[3]))
    if chance() < 0.3 + extra:
        trouble.append(pick(BAD_LINES))
    for attempt in rng.sample(ATTEMPTS, 1 + int(extra * 3.5 * chance())):
        trouble.append(attempt)
        if maybe(0.5):
            trouble.append(pick(ATTEMPT_TAILS))
    if maybe(0.4):
        trouble.append(pick(SNACK_LINES))
    if maybe(0.5):
        trouble.append(pick(LAMENTS))

    help_ = [pick(ARRIVALS)]
    if maybe():
        help_.append(pick(HELPER_ASKS))
        help_.append(pick(EXPLAINS))
    if maybe():
        help_.append(pick(OFFERS))
    help_.append(pick(obstacle[4]))
    if maybe():
        help_.append(pick(SUCCESSES))
    if maybe(0.6):
        help_.append(pick(THANKS))

    story_endings, summary_endings = ENDINGS[ending]
    end = [pick(story_endings)]
    if ending != "lesson" and maybe(0.3):  # lesson endings already state their moral
        end.append(pick(MORAL_LINES))
    if maybe(0.8):
        end.append(pick(CLOSINGS))

    paragraphs = [setup, goal, trouble, help_, end]
    # Sometimes join the first two paragraphs so paragraph counts vary too.
    if chance() < 0.3:
        paragraphs = [setup + goal, trouble, help_, end]
    text = "\n".join(" ".join(t.format_map(ctx) for t in para) for para in paragraphs)

    ctx["end"] = pick(summary_endings).format_map(ctx)
    summary = _cap(pick(SUMMARIES).format_map(ctx))

    return {
        "story_id": story_id, "text": text, "summary": summary,
        "hero": hero, "hero_kind": kind, "trait": trait, "helper": helper, "helper_kind": hkind,
        "place": place, "object": noun, "want": ctx["want"], "obstacle": obstacle_clause,
        "feeling_before": bad, "feeling_after": good, "ending": ending,
    }


def iter_stories(n: int, seed: int, start: int = 0) -> Iterator[dict]:
    """Yield the records of stories start..start+n-1 one at a time (keys: STORY_FIELDS)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return (_make_story(seed, i) for i in range(start, start + n))


def generate_stories(n: int, seed: int, start: int = 0) -> dict[str, list]:
    """Columns: 'text' (str), 'summary' (str), 'story_id' (int, = start + i), plus the plot
    fields as strings ('hero', 'hero_kind', 'trait', 'helper', 'helper_kind', 'place', 'object',
    'want', 'obstacle', 'feeling_before', 'feeling_after', 'ending') for stories
    start..start+n-1. Deterministic in (seed, story_id)."""
    columns = {f: [] for f in STORY_FIELDS}
    for record in iter_stories(n, seed, start):
        for f in STORY_FIELDS:
            columns[f].append(record[f])
    return columns
