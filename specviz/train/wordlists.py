"""Word lists the templated chat prompts draw from: topics, people, personas, questions, programming languages and
tasks, concepts, countries, names, priced items, and the pieces of German news sentences for translation prompts.
"""

TOPICS = """the water cycle|photosynthesis|black holes|the French Revolution|the Roman Empire|climate change|renewable energy|
electric cars|the stock market|inflation|machine learning|the internet|social media|sleep|healthy eating|meditation|
the human heart|vaccines|antibiotics|the immune system|volcanoes|earthquakes|the ocean|coral reefs|rainforests|deserts|
honey bees|dinosaurs|evolution|DNA|the Moon landing|Mars exploration|the solar system|gravity|electricity|magnetism|
the printing press|the Industrial Revolution|World War I|World War II|the Cold War|ancient Egypt|ancient Greece|
the Renaissance|jazz music|classical music|the Olympic Games|football|chess|coffee|tea|chocolate|bread baking|
urban gardening|recycling|plastic pollution|air pollution|public transport|remote work|time management|leadership|
teamwork|public speaking|learning a new language|reading habits|video games|virtual reality|smartphones|cybersecurity|
passwords|cloud computing|blockchain|3D printing|robots|self-driving cars|space tourism|the Great Wall of China|
the Amazon river|Mount Everest|Antarctica|volunteering|friendship|minimalism|personal finance|saving money|
starting a small business|marketing|customer service|job interviews|exercise|running|yoga|cycling|swimming|
the history of writing|libraries|museums|architecture|photography|painting|film making|theater|poetry|mythology|
democracy|human rights|the United Nations|globalization|tourism|migration|cities of the future|water scarcity|
nuclear energy|solar panels|wind farms|batteries|quantum computers|the periodic table|chemical reactions|
the speed of light|sound waves|rainbows|weather forecasting|hurricanes|glaciers|forests|wolves|elephants|whales|
cats|dogs|birds migration|agriculture|food waste|vegetarian diets|street food|Italian cuisine|Japanese culture|
Indian festivals|Mexican history|African savannas|the Silk Road|the Vikings|pirates|castles|trains|airplanes|
bridges|skyscrapers|online learning|homework|exams|creativity|happiness|stress|kindness|curiosity|memory|dreams""".replace(
    "\n", ""
).split("|")

PEOPLE = """a young teacher|an old fisherman|a curious robot|a lonely astronaut|a brave firefighter|a shy student|
a retired detective|a street musician|a small dragon|a talking cat|a busy nurse|a young inventor|a farmer|
a librarian|a ship captain|a famous chef|a little girl|a grandfather|a software engineer|a travelling painter""".replace(
    "\n", ""
).split("|")

PERSONAS = """a pirate captain|Sherlock Holmes|a medieval knight|a friendly alien visiting Earth|a fitness coach|
a grumpy wizard|a tour guide in Rome|a Shakespearean actor|a famous scientist from the 1800s|a cowboy|
a startup founder|a kind kindergarten teacher|a sports commentator|a chef in Paris|a time traveller from the year 3000|
a sailor|a detective in 1920s Chicago|a marine biologist|an ancient Greek philosopher|a stand-up comedian""".replace(
    "\n", ""
).split("|")

QUESTIONS = """What do you think about modern technology?|How should I spend my weekend?|What is the secret of a happy life?|
Why should people read more books?|What is your favourite food and why?|How do you deal with failure?|
What advice would you give to young people?|Describe your typical day.|What are you most afraid of?|
What would you change about the world?|How do you stay motivated?|What is the best way to learn something new?""".replace(
    "\n", ""
).split("|")

LANGS = ["Python", "JavaScript", "C++", "Java", "Rust", "Go", "C", "TypeScript", "Bash", "SQL"]
TASKS = """reverses a string|checks whether a number is prime|computes the factorial of n|returns the nth Fibonacci number|
sorts a list of numbers with bubble sort|finds the largest element of a list|counts the vowels in a string|
checks whether a word is a palindrome|merges two sorted lists|removes duplicates from a list|computes the average of an array|
reads a text file and counts its words|converts Celsius to Fahrenheit|implements binary search|finds the greatest common divisor of two numbers|
flattens a nested list|counts word frequencies in a sentence|validates an email address|generates a random password|
implements a stack with push and pop|computes the sum of digits of a number|transposes a matrix|finds the second largest number|
checks whether two strings are anagrams|prints a multiplication table|returns the longest word in a sentence""".replace(
    "\n", ""
).split("|")

CONCEPTS = """entropy|inertia|osmosis|supply and demand|opportunity cost|natural selection|plate tectonics|the greenhouse effect|
compound interest|the placebo effect|cognitive dissonance|the theory of relativity|photosynthesis|recursion|
object-oriented programming|the Pythagorean theorem|probability|statistics|democracy|the separation of powers|
utilitarianism|existentialism|the scientific method|neural networks|encryption|the blockchain|the water cycle|
gross domestic product|monetary policy|fiscal policy|the carbon cycle|acids and bases|kinetic energy|
the law of conservation of energy|friction|buoyancy|cell division|the nervous system|climate and weather|
impressionism|the Enlightenment|feudalism|colonialism|the Big Bang|quantum entanglement|machine translation""".replace(
    "\n", ""
).split("|")

COUNTRIES = """France|Germany|Japan|Brazil|Canada|Australia|India|Egypt|Kenya|Mexico|Italy|Spain|China|Norway|Peru|
Argentina|Turkey|Vietnam|Greece|Ireland|Poland|Sweden|Chile|Morocco|Thailand|Portugal|Nigeria|Indonesia""".replace(
    "\n", ""
).split("|")

NAMES = [
    "Anna",
    "Ben",
    "Carlos",
    "Diana",
    "Emma",
    "Farid",
    "Grace",
    "Hiro",
    "Ivy",
    "Jack",
    "Kofi",
    "Lena",
    "Mia",
    "Noah",
    "Olga",
    "Priya",
    "Quinn",
    "Rosa",
    "Sam",
    "Tom",
    "Uma",
    "Victor",
    "Wendy",
    "Yusuf",
    "Zoe",
]
ITEMS = [
    ("apples", 0.5, 3),
    ("books", 4, 20),
    ("pencils", 0.25, 2),
    ("cookies", 1, 4),
    ("tickets", 5, 40),
    ("shirts", 8, 30),
    ("plants", 3, 15),
    ("cupcakes", 2, 5),
    ("marbles", 0.1, 1),
    ("notebooks", 1, 6),
]

# German sentences for "Translate German to English" (subject, verb phrase, complement)
DE_SUBJ = [
    "Die Regierung",
    "Der Präsident",
    "Viele Menschen",
    "Die Polizei",
    "Das Unternehmen",
    "Meine Schwester",
    "Der Bürgermeister",
    "Die Schüler",
    "Ein Sprecher des Ministeriums",
    "Die Mannschaft",
    "Unsere Nachbarn",
    "Die Forscher",
    "Der Trainer",
    "Die Stadt",
    "Die Bank",
    "Der Autor",
    "Die Ärzte",
    "Die Firma",
]
DE_VERB = [
    "hat am Montag angekündigt",
    "will im nächsten Jahr",
    "plant seit Monaten",
    "hat gestern erklärt",
    "möchte bald",
    "kritisierte am Wochenende",
    "hat überraschend beschlossen",
    "sagte in einem Interview",
    "hofft weiterhin",
    "hat vor kurzem begonnen",
]
DE_OBJ = [
    "neue Wohnungen zu bauen",
    "die Steuern zu senken",
    "mehr Geld in Schulen zu investieren",
    "dass die Preise weiter steigen werden",
    "ein neues Krankenhaus zu eröffnen",
    "die Gespräche fortzusetzen",
    "dass die Lage ernst ist",
    "den Vertrag zu verlängern",
    "die Straßen zu sanieren",
    "mehr Personal einzustellen",
    "dass der Winter sehr kalt wird",
    "ein Museum in der Altstadt zu eröffnen",
    "den Flughafen zu erweitern",
    "dass die Ergebnisse gut sind",
    "neue Arbeitsplätze zu schaffen",
    "die Umwelt besser zu schützen",
]
DE_TAIL = [
    "",
    " , wie die Zeitung berichtet",
    " , obwohl es Kritik gibt",
    " , um die Wirtschaft zu stärken",
    " , teilte ein Sprecher mit",
    " , nachdem es lange Streit gab",
]
