// The built-in spec-decode prompt set, written for specctl. Speculative decoding's
// acceptance differs several-fold between tasks (EAGLE's papers report it per
// category), so the set has the same number of prompts in each category, and each
// prompt is a realistic request of one to four sentences; the summarisation and
// extraction prompts carry the passage they work on.

#include "workload_text.hpp"

namespace specctl::bench::workload_detail {

namespace {

constexpr SpecDecCategory k_set[] = {
    {"conversation",
     {
         "I just moved to a new city for work and I don't know anyone here yet. What are some low-pressure ways to "
         "meet people when you're in your thirties?",
         "My sister keeps borrowing money and never paying it back, but I don't want to damage our relationship. How "
         "could I bring it up with her?",
         "What's a good way to spend a rainy Sunday at home without just scrolling on my phone all day?",
         "I have a job interview tomorrow for a project manager role and I'm really nervous. Can you help me feel "
         "more prepared?",
         "Do you think it's worth learning to play the piano as an adult who has never read music? I'm 42.",
         "My dog has started barking at every person who walks past the window. Why might that be happening, and "
         "what can I try?",
         "I'm hosting a dinner for six friends on Saturday and one of them is vegan and another can't eat gluten. "
         "What could I cook that everyone will enjoy?",
         "Can you recommend a few novels for someone who loved The Martian and wants something similar in tone?",
         "I keep putting off replying to an old friend's message because so much time has passed. How do I reach "
         "out without it being awkward?",
         "What are some questions I should ask a landlord before signing a lease on an apartment?",
     }},
    {"code",
     {
         "Write a Python function that takes a list of integers and returns the length of the longest strictly "
         "increasing contiguous run. Include a few test cases.",
         "In C++, implement a thread-safe bounded queue with push and pop that block when the queue is full or "
         "empty, using std::mutex and std::condition_variable.",
         "Write a SQL query that returns, for each customer, their total spending in 2023 and the date of their most "
         "recent order, from tables customers(id, name) and orders(id, customer_id, amount, created_at).",
         "Explain what this JavaScript prints and why: for (var i = 0; i < 3; i++) { setTimeout(() => "
         "console.log(i), 0); }",
         "Write a Bash script that finds every file larger than 100 MB under a given directory and prints their "
         "sizes in human-readable form, largest first.",
         "Implement binary search in Rust over a sorted slice of i64 that returns the index of the first element "
         "greater than or equal to a target.",
         "Refactor this Python code to avoid the nested loops: result = [] / for a in xs: / for b in ys: / if a == "
         "b: result.append(a). Keep the output order the same.",
         "Write a Go HTTP handler that accepts a JSON body with a name field and responds with a greeting, returning "
         "400 when the body is invalid.",
         "Write a function in TypeScript that debounces another function: calls within a given wait time are "
         "collapsed into one call made after the wait.",
         "Write a Python class for an LRU cache with get and put in O(1) time, without using functools.",
     }},
    {"math",
     {
         "A train leaves at 9:40 and travels 210 km at an average speed of 84 km/h. At what time does it arrive? "
         "Show your working.",
         "Solve for x: 3(x - 4) + 2 = 5x - 18. Explain each step.",
         "What is the probability of rolling a total of 8 with two fair six-sided dice? Show how you count the "
         "outcomes.",
         "A shop raises a price by 20% and later lowers the new price by 20%. Is the final price the same as the "
         "original? Compute the net change.",
         "Find the derivative of f(x) = x^3 * ln(x) and the point where f'(x) = 0 for x > 0.",
         "How many ways can a committee of 3 be chosen from 10 people if two particular people refuse to serve "
         "together?",
         "The sum of three consecutive odd numbers is 147. What are the numbers?",
         "Compute the integral of 2x * e^(x^2) from x = 0 to x = 1, and explain the substitution you use.",
         "A rectangle's length is 3 cm more than twice its width, and its area is 65 square cm. Find its "
         "dimensions.",
         "Prove that the sum of the first n odd numbers is n squared.",
     }},
    {"summarisation",
     {
         "Summarise the following in two sentences: The town council met on Tuesday to discuss the closure of the "
         "Elm Street library branch. Officials cited rising maintenance costs and falling visitor numbers, which "
         "dropped by 30 percent over five years. Residents argued that the branch is the only quiet study space for "
         "students in the area and offered to run a volunteer fundraising drive. The council agreed to postpone the "
         "decision for six months while the fundraising plan is assessed.",
         "Give a one-paragraph summary of this passage: Honeybees communicate the location of food through a "
         "behaviour called the waggle dance. A returning forager runs in a figure-of-eight pattern on the vertical "
         "comb, and the angle of the straight run relative to vertical matches the angle between the food and the "
         "sun. The duration of the waggle portion signals distance, with longer runs meaning farther sources. Other "
         "bees follow the dancer closely and then fly out to search in the indicated direction.",
         "Summarise this customer review in one sentence: I ordered the blender after reading good reviews, and at "
         "first it worked well for smoothies. After about three weeks the motor started making a grinding noise and "
         "the jar began to leak at the base. Customer service replied quickly and sent a replacement jar, but the "
         "noise is still there. It's fine for soft fruit, but I wouldn't trust it with ice.",
         "Write a short summary for a busy manager: The migration of the billing service to the new database was "
         "completed on Friday night. Two issues came up: a batch job timed out because an index was missing, and "
         "about 40 invoices were generated twice. The index was added within an hour and the duplicate invoices "
         "were voided before any were sent. Monitoring shows query latency 35 percent lower than before.",
         "Summarise the main argument of this text in three bullet points: Remote work has changed how cities "
         "function. With fewer commuters, downtown restaurants and shops have lost revenue, while suburban centres "
         "have gained. Office vacancy rates remain high in many cities, prompting proposals to convert buildings "
         "into housing. However, conversions are expensive because office floors are deep and lack windows for "
         "interior rooms.",
         "Condense this into a headline and one sentence: Researchers tested a new drought-resistant variety of "
         "wheat across 40 farms in three countries over two seasons. In dry years, the new variety produced about "
         "18 percent more grain than standard varieties, while in wet years yields were similar. The team plans to "
         "make the seeds available to farmers next year.",
         "Summarise this email thread for someone who missed it: Anna proposed moving the weekly team meeting from "
         "Monday to Wednesday because Mondays are full of client calls. Ben agreed but asked for the afternoon. "
         "Chloe said Wednesday afternoon clashes with her training course until March. Anna suggested Wednesday "
         "morning at 10 instead, and both Ben and Chloe agreed.",
         "Summarise the plot of this story opening in two sentences: Mara had kept the lighthouse for eleven years "
         "without a single visitor. One foggy morning a small boat drifted onto the rocks below, empty except for a "
         "sealed envelope addressed to her by name. The handwriting was her brother's, who had been lost at sea a "
         "decade earlier.",
         "Summarise these meeting notes as action items: The website redesign is two weeks behind schedule. Design "
         "will deliver the final mock-ups by the 12th. Engineering needs the content team to supply product "
         "descriptions before building the catalogue pages. Marketing wants a launch date confirmed by the end of "
         "the month so they can book advertising.",
         "Summarise this paragraph for a ten-year-old: Volcanoes form where molten rock from deep inside the Earth "
         "finds a way to the surface. Pressure from gases in the magma can build up until it erupts, sending out "
         "lava, ash and rock. Over many eruptions, the material piles up and forms a mountain. Some volcanoes erupt "
         "often, while others stay quiet for thousands of years.",
     }},
    {"translation",
     {
         "Translate into French: The meeting has been moved to Thursday afternoon because the director is "
         "travelling on Wednesday.",
         "Translate into Spanish: Could you tell me where the nearest pharmacy is? I need something for a "
         "headache.",
         "Translate into German: We are pleased to inform you that your application has been accepted, and we look "
         "forward to working with you.",
         "Translate this German sentence into English: Wir haben den Zug verpasst, weil der Bus im Stau stand.",
         "Translate into Italian, keeping a friendly tone: Thanks so much for dinner last night, it was lovely to "
         "see you both again.",
         "Translate into Portuguese: Please keep your ticket until the end of the journey, as inspectors may ask to "
         "see it.",
         "Translate this French paragraph into English: Le musée sera fermé lundi pour travaux. Les billets achetés "
         "pour ce jour seront remboursés ou échangés contre une autre date.",
         "Translate into Japanese, in polite form: I am sorry for the late reply. I will send the documents by "
         "tomorrow.",
         "Translate into Dutch: The recipe serves four people and takes about forty minutes to prepare.",
         "Translate this Spanish text into English: El año pasado visitamos el norte del país y nos encantaron los "
         "pueblos de montaña y la comida local.",
     }},
    {"reasoning",
     {
         "Alice is older than Bob, and Bob is older than Carol. Dan is younger than Carol. Who is the second "
         "youngest? Explain your reasoning.",
         "A farmer must take a wolf, a goat and a cabbage across a river in a boat that holds him and one item. The "
         "wolf eats the goat and the goat eats the cabbage if left alone. How does he get everything across?",
         "If all bloops are razzies and some razzies are lazzies, can we conclude that some bloops are lazzies? "
         "Explain why or why not.",
         "A company's sales rose in every month that it ran radio ads. Does this show the ads caused the increase? "
         "What else could explain it?",
         "You have two ropes that each take exactly one hour to burn, but they burn unevenly. How can you measure "
         "exactly 45 minutes?",
         "Three boxes are labelled apples, oranges and mixed, and every label is wrong. You may take one fruit from "
         "one box. How do you relabel all the boxes correctly?",
         "A bat and a ball cost 1.10 in total, and the bat costs 1.00 more than the ball. How much does the ball "
         "cost? Explain why the intuitive answer is wrong.",
         "If it takes five machines five minutes to make five widgets, how long would it take 100 machines to make "
         "100 widgets? Reason step by step.",
         "A team can ship feature A in 3 weeks or feature B in 5 weeks, and B is expected to bring twice the "
         "revenue of A. With only 6 weeks available, what should they consider before choosing?",
         "Every day a lily pad patch doubles in size, and it covers the whole pond on day 48. On which day did it "
         "cover half the pond, and why?",
     }},
    {"extraction",
     {
         "Extract every date and the event it refers to from this text, as a list: The contract was signed on 3 "
         "March 2021. The first payment was due on 1 April 2021, and the project review took place on 15 September "
         "2021. The contract ends on 2 March 2024.",
         "From the following order confirmation, return JSON with the fields name, items (a list of name and "
         "quantity) and total: Thank you, Priya Shah! Your order includes 2 x ceramic mug, 1 x teapot and 4 x "
         "coaster. Order total: 46.50 EUR.",
         "List the people mentioned in this paragraph and their roles: The panel was chaired by Dr. Lena Ortiz, a "
         "climate scientist. She was joined by Marcus Webb, the city's transport director, and Yuki Tanaka, who "
         "founded a bicycle-sharing start-up.",
         "Extract the product name, price and warranty period from this listing: The Aurora X2 cordless vacuum "
         "offers 45 minutes of run time and a washable filter. Now 199 dollars, down from 249. Comes with a "
         "two-year manufacturer warranty.",
         "Pull out all the email addresses and phone numbers from this text: For support, write to "
         "help@example.org or call +44 20 7946 0000. Sales questions go to sales@example.org, and the office line "
         "is +44 20 7946 0111.",
         "From this job advert, extract the job title, location, salary range and required years of experience: We "
         "are hiring a Senior Data Engineer in Rotterdam. Salary 70,000 to 85,000 euros. You have at least five "
         "years of experience with data pipelines.",
         "Identify the symptoms and the medication mentioned in this note: Patient reports a dry cough and mild "
         "fever for three days, along with fatigue. Prescribed paracetamol 500 mg every six hours as needed.",
         "Extract the key figures from this report excerpt as a table: Revenue grew to 12.4 million in the third "
         "quarter, up 8 percent. Operating costs were 9.1 million, and the company ended the quarter with 3.2 "
         "million in cash.",
         "From this flight itinerary, list each leg with origin, destination and departure time: Flight 1 leaves "
         "Lisbon at 07:15 for Frankfurt. Flight 2 departs Frankfurt at 11:40 for Singapore. Flight 3 leaves "
         "Singapore at 09:05 for Sydney.",
         "Extract the names of all the cities in this text and the country each is in: On our trip we started in "
         "Kyoto, flew to Seoul, spent a week in Hanoi, and finished in Bangkok before flying "
         "home.",
     }},
    {"writing",
     {
         "Write a short poem of eight lines about the first snowfall of winter in a city.",
         "Write a polite email to a neighbour asking them to keep their music down after 11 at night.",
         "Write the opening paragraph of a mystery story set on a night train crossing the Alps.",
         "Write a product description of about 80 words for a handmade oak cutting board.",
         "Write a short speech a best man could give at a wedding, warm and lightly funny, about two minutes long.",
         "Write a cover letter paragraph for a junior graphic designer applying to a small design studio.",
         "Write a children's bedtime story about a turtle who wants to see the mountains.",
         "Write a LinkedIn post announcing that our team has released version 2.0 of our open-source library.",
         "Write a persuasive paragraph arguing that cities should plant more trees along their streets.",
         "Write a haiku sequence of three haiku about a morning walk by the sea.",
     }},
};

} // namespace

std::span<const SpecDecCategory> specdec_set() {
  return k_set;
}

} // namespace specctl::bench::workload_detail
