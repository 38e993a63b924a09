#!/usr/bin/env python3
"""Generate tuneloop's small built-in paraphrase dataset.

The data is synthetic: English news-style sentence pairs built from templates
and word lists with a fixed random seed, using only the Python standard
library (no network, no external data).  It is NOT GLUE/MRPC data; it only
copies the GLUE MRPC file layout so that the same loader reads both.

    python3 tools/make_sample_data.py            # writes src/tuneloop/sample_data/mrpc/
    python3 tools/make_sample_data.py --out DIR  # somewhere else

Layout written (exactly as GLUE ships MRPC):

* ``train.tsv`` (400 rows), ``dev.tsv`` (100 rows): UTF-8 with a byte-order
  mark, header ``Quality\\t#1 ID\\t#2 ID\\t#1 String\\t#2 String``, then
  ``label\\tid1\\tid2\\tsentence1\\tsentence2``.
* ``test.tsv`` (100 rows): no BOM, header
  ``index\\t#1 ID\\t#2 ID\\t#1 String\\t#2 String``, unlabeled.

Label 1 ("equivalent") pairs are real paraphrases (synonyms, active/passive,
moved clauses, reporting-verb variation, reworded numbers).  Label 0
("not_equivalent") pairs are topically close but differ in meaning (different
action verb, negation, swapped roles, different entity/object, missing or
extra information, and a minority of changed numbers or dates).  About 68% of
the pairs are positive, like MRPC.
"""

import argparse
import os
import random
import re

SEED = 20240611
SPLITS = (("train", 400), ("dev", 100), ("test", 100))
POS_FRACTION = 0.68

HEADER_LABELED = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
HEADER_TEST = "index\t#1 ID\t#2 ID\t#1 String\t#2 String"

# ---------------------------------------------------------------------------
# Vocabulary (fictional companies, teams and people; real place names)
# ---------------------------------------------------------------------------

FIRST = [
    "John", "Maria", "David", "Sarah", "Michael", "Laura", "James", "Anna",
    "Robert", "Elena", "Thomas", "Karen", "Daniel", "Linda", "Peter", "Susan",
    "Richard", "Julia", "Mark", "Helen", "Paul", "Nancy", "Steven", "Carol",
    "Andrew", "Rachel", "Kevin", "Diane", "Brian", "Monica", "Ahmed", "Yuki",
    "Carlos", "Priya", "Olga", "Wei", "Fatima", "Lars", "Grace", "Tomas",
]
LAST = [
    "Miller", "Garcia", "Thompson", "Nakamura", "Schmidt", "Okafor", "Rossi",
    "Kowalski", "Johnson", "Fischer", "Larsen", "Brennan", "Patel", "Moreau",
    "Alvarez", "Novak", "Hughes", "Sato", "Lindqvist", "Murphy", "Kaplan",
    "Dubois", "Ferreira", "Walsh", "Chen", "Ivanova", "Baker", "Holt", "Reyes",
    "Stewart", "Mensah", "Horvath", "Costa", "Bergman", "Quinn", "Adeyemi",
]
COMPANIES = [
    "Northwind Systems", "Harbor Bancorp", "Apex Motors", "Bluestone Energy",
    "Crescent Pharmaceuticals", "Delta Foods", "Evergreen Telecom",
    "Falcon Airlines", "Granite Insurance", "Helix Software", "Ironwood Steel",
    "Keystone Retail", "Lumen Media", "Meridian Health", "Nova Semiconductor",
    "Orion Logistics", "Pinnacle Chemicals", "Quarry Mining", "Redwood Capital",
    "Summit Brewing", "Titan Aerospace", "Unity Bank", "Vertex Biotech",
    "Willow Pharmaceuticals", "Atlas Shipping", "Beacon Semiconductors",
    "Cobalt Mobile", "Silverline Rail", "Horizon Grocers", "Polaris Chemicals",
    "Sterling Hotels", "Cascade Paper", "Brightwater Utilities", "Magnolia Textiles",
]
TEAMS = [
    "Ashford United", "Kingsport City", "Millbrook Rovers", "Eastgate Athletic",
    "Riverton Wanderers", "Hollowell Town", "Carrick Albion", "Westbury Rangers",
    "Dunmore FC", "Stanwick County", "Fairhaven Celtic", "Oakridge Villa",
    "Brampton Harriers", "Lowfield Olympic", "Northam Borough", "Selby Forest",
]
CITIES = [
    "Chicago", "Lyon", "Osaka", "Melbourne", "Toronto", "Nairobi", "Lima",
    "Hamburg", "Denver", "Seattle", "Manila", "Dublin", "Seville", "Krakow",
    "Houston", "Montreal", "Atlanta", "Glasgow", "Auckland", "Phoenix",
    "Rotterdam", "Boston", "Cape Town", "Sao Paulo", "Milan", "Vancouver",
    "Geneva", "Pittsburgh", "Brisbane", "Oslo",
]
COASTS = [
    "Florida", "the Philippines", "southern Japan", "the Gulf Coast",
    "Bangladesh", "Queensland", "Taiwan", "the Carolinas", "Mozambique",
    "Hong Kong", "Louisiana", "Cuba", "Vietnam", "Texas",
]
STORM_NAMES = [
    "Alma", "Bertha", "Carlos", "Dolly", "Edouard", "Fay", "Gustav", "Hanna",
    "Ike", "Josephine", "Kyle", "Laura", "Marco", "Nana", "Omar", "Paloma",
]
STORM_KINDS = ["Hurricane", "Tropical Storm", "Typhoon", "Cyclone"]
RIVER_TOWNS = {
    "Elbe": ["Dresden", "Magdeburg", "Hamburg"], "Danube": ["Vienna", "Budapest", "Passau"],
    "Mississippi": ["St. Louis", "Memphis", "Baton Rouge"], "Red": ["Fargo", "Winnipeg"],
    "Severn": ["Worcester", "Gloucester", "Shrewsbury"], "Rhine": ["Cologne", "Basel", "Bonn"],
    "Ohio": ["Cincinnati", "Louisville", "Evansville"], "Missouri": ["Omaha", "Kansas City"],
    "Thames": ["Reading", "Oxford", "Windsor"], "Oder": ["Wroclaw", "Frankfurt an der Oder"],
}
RIVERS = sorted(RIVER_TOWNS)
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
        "Sunday"]
DATES = ["March 3", "June 14", "April 22", "May 9", "October 1",
         "November 17", "January 28", "August 5", "September 30", "July 11"]
QUARTERS = ["first", "second", "third", "fourth"]

DISEASES = ["heart disease", "type 2 diabetes", "lung cancer",
            "Alzheimer's disease", "asthma", "stroke", "high blood pressure",
            "depression", "kidney failure", "osteoporosis", "migraines"]
SUBSTANCES = ["drinking coffee", "regular exercise", "a diet rich in fish",
              "smoking", "air pollution", "moderate drinking", "eating nuts",
              "a common painkiller", "vitamin D supplements", "working night shifts",
              "eating processed meat", "daily aspirin"]
CRIMES = ["fraud", "tax evasion", "bribery", "money laundering",
          "insider trading", "embezzlement", "arson", "perjury", "extortion"]
CLAIMS = ["patent infringement", "breach of contract", "misleading investors",
          "stealing trade secrets", "price fixing", "software piracy",
          "unfair dismissal of workers"]
LAWS = ["antitrust laws", "federal privacy rules", "environmental regulations",
        "securities laws", "labor laws", "consumer protection laws",
        "export controls"]
POLICIES = ["raise the minimum wage", "cut income taxes",
            "ban smoking in restaurants", "expand health coverage for children",
            "increase military spending", "lower the voting age to 16",
            "build a new high-speed rail line", "tighten gun laws",
            "cut carbon emissions by half", "raise the retirement age",
            "legalize online gambling", "fund free school meals"]
CHAMBERS = ["the Senate", "the House of Representatives", "the state assembly",
            "parliament", "the city council"]
POL_ROLES = ["finance minister", "foreign minister", "health secretary",
             "governor", "defense minister", "interior minister",
             "labor minister", "education secretary"]
RESIGN_REASONS = ["a bribery scandal", "weeks of protests",
                  "a lost confidence vote", "a row over spending",
                  "reports of misused public funds", "a failed budget vote"]
MISSIONS = ["satellite", "probe", "space telescope", "weather satellite"]
TARGETS = ["the Sun", "Mars", "Jupiter's moons", "the ozone layer",
           "distant galaxies", "sea levels", "Arctic ice", "Venus"]
AGENCIES = ["NASA", "the European Space Agency", "Japan's space agency",
            "India's space agency", "China's space agency"]
SKY_OBJECTS = ["planets", "moons", "comets", "asteroids", "brown dwarfs"]
REGULATORS = ["the Food and Drug Administration", "the European Medicines Agency",
              "Canada's health regulator", "Japan's health ministry"]
INJURIES = ["knee", "hamstring", "ankle", "shoulder", "back", "groin", "wrist"]
COURTS = ["the Supreme Court", "a federal appeals court",
          "the state's highest court", "an appeals court"]

WEEKDAY_SET = set(DAYS)
PHARMA = ["Crescent Pharmaceuticals", "Meridian Health", "Vertex Biotech",
          "Willow Pharmaceuticals", "Larkspur Therapeutics", "Osprey Biologics",
          "Kestrel Medical", "Aldergate Labs"]


# ---------------------------------------------------------------------------
# Surface helpers
# ---------------------------------------------------------------------------

def fmt(v):
    return ("%.1f" % v).rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def money(v, unit):
    s = fmt(v)
    return ["$%s %s" % (s, unit), "%s %s dollars" % (s, unit),
            "US$%s %s" % (s, unit)]


def pct(p):
    s = fmt(p)
    return ["%s percent" % s, "%s%%" % s]


SMALL = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven",
         8: "eight", 9: "nine", 10: "ten", 12: "twelve"}


def count(n):
    if n in SMALL:
        return [str(n), SMALL[n]]
    return ["{:,}".format(n)]


def other_number(rng, n, lo, hi, step=1, min_diff=None):
    if min_diff is None:
        min_diff = max(step, 0.2 * n)
    while True:
        m = rng.randrange(lo, hi + 1, step)
        if abs(m - n) >= min_diff:
            return m


def other_float(rng, v, lo, hi):
    while True:
        w = round(rng.uniform(lo, hi), 1)
        if abs(w - v) >= 0.2 * v:
            return w


def person(rng, avoid=()):
    while True:
        p = "%s %s" % (rng.choice(FIRST), rng.choice(LAST))
        if p not in avoid:
            return p


def pick(rng, items, k):
    return rng.sample(items, k)


def day(rng):
    return rng.choice(DAYS) if rng.random() < 0.75 else rng.choice(DATES)


def other(rng, items, *avoid):
    while True:
        x = rng.choice(items)
        if x not in avoid:
            return x


def weekday(rng):
    return rng.choice(DAYS[:5])


def money_amount(rng):
    if rng.random() < 0.5:
        return round(rng.uniform(1.1, 19.9), 1), "billion", (1.1, 19.9)
    return rng.randrange(60, 960, 5), "million", None


def other_money(rng, v, unit, rangef):
    if unit == "billion":
        return other_float(rng, v, *rangef)
    return other_number(rng, v, 60, 955, 5)


class Fact:
    """One underlying event and the ways to word it (or to change it)."""

    def __init__(self, kind, fields, pos, negs, reps=None, extra=None,
                 full=False, wrap_p=0.7):
        self.kind = kind          # name of the template family
        self.fields = fields      # str values, or lists of interchangeable words
        self.pos = pos            # templates that all mean the same thing
        self.negs = negs          # (neg_kind, templates or None, field overrides)
        self.reps = reps          # reporters for "X said on DAY that ..." wrappers
        self.extra = extra        # equivalent wordings of one extra piece of information
        self.full = full          # templates are whole sentences (no wrapping)
        self.wrap_p = wrap_p


# ---------------------------------------------------------------------------
# Template families.  Each returns a Fact built from freshly drawn entities.
# ---------------------------------------------------------------------------

CO_REPS = ["{A}", "the company", "a spokesman for {A}", "a spokeswoman for {A}"]


def f_acquisition(rng):
    A, B, C = pick(rng, COMPANIES, 3)
    v, unit, rf = money_amount(rng)
    F = dict(A=A, B=B, money=money(v, unit),
             buy=["buy", "acquire", "purchase"],
             bought=["bought", "acquired", "purchased"])
    pos = ["{A} has agreed to {buy} {B} for {money}",
           "{A} agreed to {buy} {B} in a deal valued at {money}",
           "{B} will be {bought} by {A} for {money}",
           "{A} will pay {money} to {buy} {B}",
           "{B} has agreed to be {bought} by {A} in a deal worth {money}"]
    negs = [("verb", ["{A} has called off its {money} bid for {B}",
                      "{A} abandoned its plan to {buy} {B} for {money}",
                      "{A} has agreed to sell its {money} stake in {B}"], {}),
            ("negation", ["{A} has not agreed to {buy} {B} for {money}",
                          "{A} denied that it would {buy} {B} for {money}",
                          "{B} rejected a takeover offer of {money} from {A}"], {}),
            ("role", None, {"A": B, "B": A}),
            ("entity", None, {"B": C}),
            ("number", None, {"money": money(other_money(rng, v, unit, rf), unit)})]
    extra = ["the deal is expected to close by the end of the year",
             "the deal should be completed by the end of the year"]
    return Fact("acquisition", F, pos, negs, reps=CO_REPS, extra=extra)


def f_jobcuts(rng):
    A, C = pick(rng, COMPANIES, 2)
    n = rng.randrange(200, 12000, 50)
    F = dict(A=A, n=count(n), cut=["cut", "eliminate", "shed"],
             jobs=["jobs", "positions"])
    pos = ["{A} will {cut} {n} {jobs}",
           "{A} plans to {cut} {n} {jobs}",
           "{n} {jobs} will be cut at {A}",
           "{A} is to {cut} {n} {jobs} as part of a restructuring"]
    negs = [("verb", ["{A} will hire {n} new workers",
                      "{A} plans to add {n} {jobs}",
                      "{A} will create {n} new {jobs}"], {}),
            ("negation", ["{A} will not {cut} any {jobs}",
                          "{A} has ruled out cutting {n} {jobs}"], {}),
            ("entity", None, {"A": C}),
            ("number", None, {"n": count(other_number(rng, n, 200, 12000, 50))})]
    extra = ["it will also close {k} factories", "it also plans to close {k} plants"]
    F["k"] = count(rng.randrange(2, 9))
    return Fact("jobcuts", F, pos, negs, reps=CO_REPS, extra=extra)


def f_earnings(rng):
    A, C = pick(rng, COMPANIES, 2)
    q = rng.choice(QUARTERS)
    v, unit, rf = money_amount(rng)
    F = dict(A=A, q=q, money=money(v, unit),
             profit=["profit", "net profit", "net income"], profit2=["profit", "net profit"],
             reported=["reported", "posted", "announced"])
    pos = ["{A} {reported} a {q}-quarter {profit} of {money}",
           "{A} {reported} {profit} of {money} for the {q} quarter",
           "{A} earned {money} in the {q} quarter",
           "In the {q} quarter, {A} turned a {profit2} of {money}"]
    negs = [("verb", ["{A} {reported} a {q}-quarter loss of {money}",
                      "{A} lost {money} in the {q} quarter",
                      "{A} {reported} a net loss of {money} for the {q} quarter"], {}),
            ("negation", ["{A} failed to turn a profit in the {q} quarter"], {}),
            ("entity", None, {"A": C}),
            ("number", None, {"money": money(other_money(rng, v, unit, rf), unit)}),
            ("date", None, {"q": other(rng, QUARTERS, q)})]
    extra = ["revenue rose {p} to {rev}", "sales increased {p} to {rev}"]
    F["p"] = pct(rng.randrange(3, 25))
    F["rev"] = money(round(rng.uniform(2, 40), 1), "billion")
    return Fact("earnings", F, pos, negs, reps=None, extra=extra)


def f_shares(rng):
    A, C = pick(rng, COMPANIES, 2)
    p = round(rng.uniform(1.5, 14.9), 1)
    price = round(rng.uniform(8, 180), 2)
    F = dict(A=A, p=pct(p), price="$%.2f" % price, day=weekday(rng),
             rose=["rose", "gained", "climbed", "jumped"])
    pos = ["Shares of {A} {rose} {p} to close at {price} on {day}",
           "{A}'s stock {rose} {p} on {day}, closing at {price}",
           "On {day}, {A} shares {rose} {p} to end the day at {price}",
           "{A} shares closed up {p} at {price} on {day}"]
    negs = [("verb", ["Shares of {A} fell {p} to close at {price} on {day}",
                      "{A}'s stock dropped {p} on {day}, closing at {price}",
                      "{A} shares closed down {p} at {price} on {day}"], {}),
            ("negation", ["Shares of {A} did not move on {day}, closing unchanged at {price}"], {}),
            ("entity", None, {"A": C}),
            ("number", None, {"p": pct(other_float(rng, p, 1.5, 14.9))}),
            ("date", None, {"day": other(rng, DAYS[:5], F["day"])})]
    return Fact("shares", F, pos, negs, wrap_p=0.0)


def f_ceo(rng):
    A, C = pick(rng, COMPANIES, 2)
    P = person(rng)
    F = dict(A=A, P=P, ceo=["chief executive", "chief executive officer", "CEO"],
             named=["named", "appointed", "picked"])
    pos = ["{A} has {named} {P} as its new {ceo}",
           "{P} has been {named} {ceo} of {A}",
           "{P} will become the next {ceo} of {A}",
           "{A} said {P} would take over as its {ceo}"]
    negs = [("verb", ["{A} said {P} will step down as its {ceo}",
                      "{A} has fired {P} as its {ceo}",
                      "{P} has resigned as {ceo} of {A}"], {}),
            ("negation", ["{A} said {P} will not become its next {ceo}",
                          "{P} has turned down an offer to become {ceo} of {A}"], {}),
            ("entity", None, {"A": C}),
            ("entity", None, {"P": person(rng, (P,))}),
            ("role", None, {"ceo": ["chief financial officer", "finance chief"]})]
    return Fact("ceo", F, pos, negs, reps=None, extra=None, wrap_p=0.0)


def f_factory(rng):
    A, C = pick(rng, COMPANIES, 2)
    city, city2 = pick(rng, CITIES, 2)
    n = rng.randrange(150, 4000, 50)
    F = dict(A=A, city=city, n=count(n), plant=["factory", "plant"],
             create=["create", "bring"])
    pos = ["{A} will open a new {plant} in {city}, creating {n} jobs",
           "A new {A} {plant} in {city} will {create} {n} jobs",
           "{A} plans to build a {plant} in {city} that will employ {n} people",
           "{n} jobs will be created when {A} opens a {plant} in {city}"]
    negs = [("verb", ["{A} will close its {plant} in {city}, cutting {n} jobs",
                      "{A} plans to shut a {plant} in {city} that employs {n} people",
                      "{n} jobs will be lost when {A} closes its {plant} in {city}"], {}),
            ("negation", ["{A} has dropped plans to open a {plant} in {city}"], {}),
            ("entity", None, {"city": city2}),
            ("entity", None, {"A": C}),
            ("number", None, {"n": count(other_number(rng, n, 150, 4000, 50))})]
    return Fact("factory", F, pos, negs, reps=CO_REPS)


def f_policy(rng):
    P = person(rng)
    role = rng.choice(POL_ROLES)
    pol, pol2 = pick(rng, POLICIES, 2)
    year = rng.randrange(2004, 2012)
    F = dict(P=P, role=role, pol=pol, year=str(year))
    pos = ["the government will {pol} by {year}",
           "the government plans to {pol} by {year}",
           "the government intends to {pol} by {year}"]
    negs = [("negation", ["the government will not {pol} before {year}",
                          "the government has no plans to {pol} by {year}",
                          "the government has dropped its plan to {pol}"], {}),
            ("entity", None, {"pol": pol2}),
            ("entity", None, {"P": person(rng, (P,)), "role": other(rng, POL_ROLES, role)}),
            ("number", None, {"year": str(other_number(rng, year, 2004, 2012, min_diff=1))})]
    reps = ["{P}, the {role},", "the {role}, {P},"]
    F["day"] = day(rng)
    return Fact("policy", F, pos, negs, reps=reps, wrap_p=1.0)


def f_vote(rng):
    ch = rng.choice(CHAMBERS)
    pol, pol2 = pick(rng, POLICIES, 2)
    a = rng.randrange(51, 90)
    b = rng.randrange(5, 49)
    F = dict(ch=ch, pol=pol, a=str(a), b=str(b), day=day(rng),
             approved=["approved", "passed"], bill=["a bill", "legislation"])
    pos = ["{ch} voted {a} to {b} on {day} to approve {bill} that would {pol}",
           "{bill} to {pol} was {approved} by {ch} on {day} by a vote of {a} to {b}",
           "On {day}, {ch} {approved}, {a}-{b}, {bill} that would {pol}",
           "{ch} {approved} {bill} on {day} to {pol}, by a {a}-{b} vote"]
    negs = [("verb", ["{ch} voted {a} to {b} on {day} to reject {bill} that would {pol}",
                      "{bill} to {pol} was defeated in {ch} on {day} by a vote of {a} to {b}",
                      "On {day}, {ch} blocked {bill} that would {pol}"], {}),
            ("negation", ["{ch} failed on {day} to approve {bill} that would {pol}"], {}),
            ("entity", None, {"pol": pol2}),
            ("number", None, {"a": str(a - rng.randrange(8, 20))}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("vote", F, pos, negs, wrap_p=0.0)


def f_meeting(rng):
    P1 = person(rng)
    P2 = person(rng, (P1,))
    P3 = person(rng, (P1, P2))
    r1 = rng.choice(POL_ROLES)
    city, city2 = pick(rng, CITIES, 2)
    F = dict(P1=P1, P2=P2, r1=r1, city=city, day=day(rng),
             met=["met with", "held talks with"])
    pos = ["{P1}, the {r1}, {met} {P2} in {city} on {day}",
           "{P2} {met} the {r1}, {P1}, in {city} on {day}",
           "On {day}, {P1}, the {r1}, {met} {P2} in {city}",
           "The {r1}, {P1}, and {P2} held talks in {city} on {day}"]
    negs = [("verb", ["{P1}, the {r1}, cancelled a planned meeting with {P2} in {city} on {day}",
                      "{P2} refused to meet the {r1}, {P1}, in {city} on {day}",
                      "On {day}, {P1}, the {r1}, called off talks with {P2} in {city}"], {}),
            ("negation", ["{P1}, the {r1}, did not meet with {P2} in {city} on {day}",
                          "{P2} and the {r1}, {P1}, failed to hold talks in {city} on {day}"], {}),
            ("entity", None, {"P2": P3}),
            ("entity", None, {"city": city2}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("meeting", F, pos, negs, wrap_p=0.0)


def f_resign(rng):
    P = person(rng)
    role = rng.choice(POL_ROLES)
    reason, reason2 = pick(rng, RESIGN_REASONS, 2)
    F = dict(P=P, role=role, reason=reason, day=day(rng),
             after=["after", "following"])
    pos = ["{P}, the {role}, resigned on {day} {after} {reason}",
           "{P} stepped down as {role} on {day} {after} {reason}",
           "The {role}, {P}, quit on {day} {after} {reason}",
           "{after} {reason}, {P} resigned as {role} on {day}"]
    negs = [("verb", ["{P} was appointed {role} on {day} {after} {reason}",
                      "{P}, the {role}, was promoted on {day} {after} {reason}"], {}),
            ("negation", ["{P}, the {role}, refused to resign on {day} despite {reason}",
                          "{P} rejected calls on {day} to step down as {role} after {reason}"], {}),
            ("entity", None, {"role": other(rng, POL_ROLES, role)}),
            ("entity", None, {"reason": reason2}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("resign", F, pos, negs, wrap_p=0.0)


def f_election(rng):
    P = person(rng)
    P2 = person(rng, (P,))
    city = rng.choice(CITIES)
    p = rng.randrange(51, 72)
    F = dict(P=P, P2=P2, city=city, p=pct(p))
    pos = ["{P} won the mayoral election in {city} with {p} of the vote",
           "{P} was elected mayor of {city} with {p} of the vote",
           "{P} was voted in as mayor of {city} with {p} of the vote",
           "With {p} of the vote, {P} won the race for mayor of {city}"]
    negs = [("verb", ["{P} lost the mayoral election in {city}, winning only {p} of the vote",
                      "{P} conceded defeat in the race for mayor of {city}"], {}),
            ("role", ["{P} was defeated by {P2} in the mayoral election in {city}",
                      "{P2} beat {P} in the race for mayor of {city}"], {}),
            ("negation", ["{P} failed to win the mayoral election in {city}",
                          "{P} was not elected mayor of {city}"], {}),
            ("entity", None, {"P": P2}),
            ("number", None, {"p": pct(other_number(rng, p, 51, 72, min_diff=4))})]
    return Fact("election", F, pos, negs, wrap_p=0.0)


def f_match(rng):
    T1, T2, T3 = pick(rng, TEAMS, 3)
    a = rng.randrange(2, 6)
    b = rng.randrange(0, a)
    F = dict(T1=T1, T2=T2, a=str(a), b=str(b), day=day(rng),
             beat=["beat", "defeated"])
    pos = ["{T1} {beat} {T2} {a}-{b} on {day}",
           "{T2} lost {a}-{b} to {T1} on {day}",
           "{T2} were beaten {a}-{b} by {T1} on {day}",
           "On {day}, {T1} won {a}-{b} against {T2}",
           "{T1} recorded a {a}-{b} win over {T2} on {day}"]
    negs = [("role", None, {"T1": T2, "T2": T1}),
            ("verb", ["{T1} and {T2} drew {a}-{a} on {day}",
                      "{T1} drew {b}-{b} with {T2} on {day}"], {}),
            ("negation", ["{T1} failed to beat {T2} on {day}",
                          "{T1} did not win against {T2} on {day}"], {}),
            ("entity", None, {"T2": T3}),
            ("number", None, {"a": str(a + rng.randrange(1, 3))}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("match", F, pos, negs, wrap_p=0.0)


def f_signing(rng):
    P = person(rng)
    T, T2 = pick(rng, TEAMS, 2)
    n = rng.randrange(2, 6)
    F = dict(P=P, T=T, n=count(n), deal=["contract", "deal"],
             signed=["signed", "agreed to"])
    pos = ["{P} {signed} a {n}-year {deal} with {T}",
           "{T} signed {P} to a {n}-year {deal}",
           "{P} has joined {T} on a {n}-year {deal}",
           "{T} have signed {P} on a {n}-year {deal}"]
    negs = [("verb", ["{P} turned down a {n}-year {deal} offer from {T}",
                      "{T} released {P} with {n} years left on the {deal}",
                      "{P} has left {T} after {n} years"], {}),
            ("negation", ["{P} has not signed a new {deal} with {T}"], {}),
            ("entity", None, {"T": T2}),
            ("number", None, {"n": count(other_number(rng, n, 2, 6))})]
    return Fact("signing", F, pos, negs, reps=None, wrap_p=0.0)


def f_injury(rng):
    P = person(rng)
    T = rng.choice(TEAMS)
    inj, inj2 = pick(rng, INJURIES, 2)
    n = rng.randrange(2, 9)
    F = dict(P=P, T=T, inj=inj, n=count(n))
    pos = ["{T} said {P} will miss {n} weeks with a {inj} injury",
           "{P} will be out for {n} weeks with a {inj} injury, {T} said",
           "A {inj} injury will sideline {P} for {n} weeks, {T} said",
           "{T} said a {inj} injury would keep {P} out for {n} weeks"]
    negs = [("verb", ["{T} said {P} has recovered from a {inj} injury and will play this week",
                      "{P} is fit again after a {inj} injury, {T} said"], {}),
            ("negation", ["{T} said {P} will not miss any games despite a {inj} injury"], {}),
            ("entity", None, {"inj": inj2}),
            ("number", None, {"n": count(other_number(rng, n, 2, 9))})]
    return Fact("injury", F, pos, negs, wrap_p=0.0)


def f_coach(rng):
    P = person(rng)
    T, T2 = pick(rng, TEAMS, 2)
    F = dict(P=P, T=T, day=day(rng), fired=["fired", "sacked", "dismissed"])
    pos = ["{T} {fired} coach {P} on {day}",
           "{P} was {fired} as coach of {T} on {day}",
           "On {day}, {T} {fired} its coach, {P}",
           "{T} {fired} {P} as coach on {day}"]
    negs = [("verb", ["{T} gave coach {P} a new contract on {day}",
                      "{T} hired {P} as coach on {day}",
                      "{P} was named coach of {T} on {day}"], {}),
            ("negation", ["{T} said on {day} that it would not fire coach {P}"], {}),
            ("entity", None, {"T": T2}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("coach", F, pos, negs, wrap_p=0.0)


def f_study(rng):
    city = rng.choice(CITIES)
    sub = rng.choice(SUBSTANCES)
    dis, dis2 = pick(rng, DISEASES, 2)
    up = rng.random() < 0.5
    inc = ["increases", "raises"]
    dec = ["reduces", "lowers", "cuts"]
    F = dict(city=city, sub=sub, dis=dis, eff=inc if up else dec)
    pos = ["researchers at the University of {city} found that {sub} {eff} the risk of {dis}",
           "{sub} {eff} the risk of {dis}, according to a study from the University of {city}",
           "a study by the University of {city} shows that {sub} {eff} the risk of {dis}",
           "according to researchers at the University of {city}, {sub} {eff} the risk of {dis}"]
    negs = [("verb", None, {"eff": dec if up else inc}),
            ("negation", ["researchers at the University of {city} found that {sub} has no effect on the risk of {dis}",
                          "a study by the University of {city} found no link between {sub} and {dis}"], {}),
            ("entity", None, {"dis": dis2})]
    return Fact("study", F, pos, negs, wrap_p=0.0)


def f_launch(rng):
    ag, ag2 = pick(rng, AGENCIES, 2)
    mis = rng.choice(MISSIONS)
    tgt, tgt2 = pick(rng, TARGETS, 2)
    F = dict(ag=ag, mis=mis, tgt=tgt, day=day(rng), study=["study", "observe"])
    pos = ["{ag} launched a {mis} to {study} {tgt} on {day}",
           "a {mis} designed to {study} {tgt} was launched by {ag} on {day}",
           "On {day}, {ag} sent up a {mis} that will {study} {tgt}",
           "{ag} successfully launched a new {mis} on {day} to {study} {tgt}"]
    negs = [("verb", ["{ag} postponed the launch of a {mis} to {study} {tgt} on {day}",
                      "a {mis} built to {study} {tgt} was destroyed during its launch by {ag} on {day}",
                      "{ag} lost contact with a {mis} sent to {study} {tgt} on {day}"], {}),
            ("negation", ["{ag} did not launch a {mis} to {study} {tgt} on {day} as planned",
                          "{ag} failed to launch a {mis} to {study} {tgt} on {day}"], {}),
            ("entity", None, {"tgt": tgt2}),
            ("entity", None, {"ag": ag2}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("launch", F, pos, negs, wrap_p=0.0)


def f_discovery(rng):
    n = rng.randrange(2, 13)
    obj, obj2 = pick(rng, SKY_OBJECTS, 2)
    city = rng.choice(CITIES)
    F = dict(n=count(n), obj=obj, city=city,
             found=["discovered", "found", "identified"],
             new=["new", "previously unknown"])
    pos = ["astronomers in {city} have {found} {n} {new} {obj} orbiting a nearby star",
           "{n} {new} {obj} orbiting a nearby star have been {found} by astronomers in {city}",
           "a team of astronomers in {city} has {found} {n} {new} {obj} circling a nearby star"]
    negs = [("negation", ["astronomers in {city} have failed to find any {obj} orbiting a nearby star",
                          "astronomers in {city} said a nearby star has no {obj} orbiting it"], {}),
            ("verb", ["astronomers in {city} have lost track of {n} {obj} orbiting a nearby star",
                      "{n} {obj} orbiting a nearby star have been destroyed, astronomers in {city} said"], {}),
            ("entity", None, {"obj": obj2}),
            ("number", None, {"n": count(other_number(rng, n, 2, 13))})]
    return Fact("discovery", F, pos, negs, wrap_p=0.0)


def f_approval(rng):
    A = rng.choice(PHARMA)
    reg = rng.choice(REGULATORS)
    dis, dis2 = pick(rng, DISEASES, 2)
    F = dict(A=A, reg=reg, dis=dis, day=day(rng), approved=["approved", "cleared"])
    pos = ["{reg} {approved} {A}'s drug for {dis} on {day}",
           "{A} won approval from {reg} for its {dis} drug on {day}",
           "On {day}, {reg} {approved} a drug made by {A} to treat {dis}",
           "a {dis} drug from {A} was {approved} by {reg} on {day}"]
    negs = [("verb", ["{reg} rejected {A}'s drug for {dis} on {day}",
                      "{reg} delayed a decision on {A}'s {dis} drug on {day}",
                      "On {day}, {reg} ordered {A} to stop selling its {dis} drug"], {}),
            ("negation", ["{reg} did not approve {A}'s drug for {dis} on {day}"], {}),
            ("entity", None, {"dis": dis2})]
    return Fact("approval", F, pos, negs, wrap_p=0.0)


def f_storm(rng):
    name = "%s %s" % (rng.choice(STORM_KINDS), rng.choice(STORM_NAMES))
    place, place2 = pick(rng, COASTS, 2)
    n = rng.randrange(3, 60)
    F = dict(name=name, place=place, n=count(n), day=day(rng),
             hit=["hit", "struck", "slammed into"], killed=["killed", "left dead"])
    pos = ["{name} {hit} {place} on {day}, killing {n} people",
           "{n} people were killed when {name} {hit} {place} on {day}",
           "On {day}, {name} {hit} {place}, leaving {n} people dead",
           "{name} killed {n} people after it {hit} {place} on {day}"]
    negs = [("verb", ["{name} {hit} {place} on {day}, injuring {n} people",
                      "{name} missed {place} on {day} and no one was hurt",
                      "{n} people were rescued when {name} {hit} {place} on {day}"], {}),
            ("negation", ["{name} {hit} {place} on {day}, but nobody was killed"], {}),
            ("entity", None, {"place": place2}),
            ("number", None, {"n": count(other_number(rng, n, 3, 60))})]
    return Fact("storm", F, pos, negs, wrap_p=0.0)


def f_outage(rng):
    city, city2 = pick(rng, CITIES, 2)
    n = rng.randrange(5000, 400000, 1000)
    cause = rng.choice(["heavy snow", "an ice storm", "strong winds", "a heat wave"])
    F = dict(city=city, n=count(n), cause=cause, day=day(rng),
             homes=["homes", "households"])
    pos = ["about {n} {homes} in {city} lost power after {cause} on {day}",
           "{cause} left about {n} {homes} in {city} without electricity on {day}",
           "on {day}, {cause} knocked out power to some {n} {homes} in {city}",
           "roughly {n} {homes} in {city} were without power on {day} because of {cause}"]
    negs = [("verb", ["power was restored to about {n} {homes} in {city} on {day} after {cause}",
                      "about {n} {homes} in {city} got their electricity back on {day} after {cause}"], {}),
            ("negation", ["no {homes} in {city} lost power despite {cause} on {day}",
                          "{cause} did not cause any power cuts in {city} on {day}"], {}),
            ("entity", None, {"city": city2}),
            ("entity", None, {"cause": other(rng, ["heavy snow", "an ice storm", "strong winds",
                                                    "a heat wave", "a fire at a substation"], cause)}),
            ("number", None, {"n": count(other_number(rng, n, 5000, 400000, 1000))})]
    reps = ["the local utility", "officials", "utility officials"]
    return Fact("outage", F, pos, negs, reps=reps, wrap_p=0.4)


def f_heat(rng):
    city, city2 = pick(rng, CITIES, 2)
    t = rng.randrange(34, 45)
    F = dict(city=city, t=str(t), day=day(rng),
             reach=["reach", "hit", "climb to"])
    pos = ["temperatures in {city} are expected to {reach} {t} degrees Celsius on {day}",
           "forecasters expect temperatures in {city} to {reach} {t} degrees Celsius on {day}",
           "{city} could see temperatures {reach} {t} degrees Celsius on {day}, forecasters said",
           "on {day}, temperatures in {city} are forecast to {reach} {t} degrees Celsius"]
    # {reach} in the third template reads "could see temperatures reach" -> fine English
    negs = [("verb", ["temperatures in {city} are expected to fall below zero degrees Celsius on {day}",
                      "forecasters expect heavy snow in {city} on {day}"], {}),
            ("negation", ["temperatures in {city} are not expected to {reach} {t} degrees Celsius on {day}"], {}),
            ("entity", None, {"city": city2}),
            ("number", None, {"t": str(other_number(rng, t, 20, 45, min_diff=4))})]
    return Fact("heat", F, pos, negs, wrap_p=0.0)


def f_flood(rng):
    river, river2 = pick(rng, RIVERS, 2)
    city = rng.choice(RIVER_TOWNS[river])
    n = rng.randrange(300, 20000, 100)
    F = dict(river=river, city=city, n=count(n),
             residents=["residents", "people"], evacuate=["evacuate", "leave their homes"])
    pos = ["the {river} River burst its banks, forcing {n} {residents} of {city} to {evacuate}",
           "{n} {residents} of {city} were evacuated after the {river} River flooded",
           "flooding on the {river} River forced {n} {residents} of {city} to {evacuate}",
           "after the {river} River overflowed, {n} {residents} in {city} had to {evacuate}"]
    negs = [("verb", ["{n} {residents} of {city} were allowed to return home as the {river} River receded",
                      "{n} {residents} of {city} refused to {evacuate} as the {river} River rose"], {}),
            ("negation", ["the {river} River did not flood, and the {n} {residents} of {city} did not have to {evacuate}"], {}),
            ("entity", None, {"city": rng.choice(RIVER_TOWNS[river2]), "river": river2}),
            ("number", None, {"n": count(other_number(rng, n, 300, 20000, 100))})]
    reps = ["officials", "local officials", "the mayor's office"]
    return Fact("flood", F, pos, negs, reps=reps, wrap_p=0.4)


def f_ruling(rng):
    A, C = pick(rng, COMPANIES, 2)
    city = rng.choice(CITIES)
    law, law2 = pick(rng, LAWS, 2)
    F = dict(A=A, city=city, law=law, day=day(rng),
             violated=["violated", "broke"])
    pos = ["a federal judge in {city} ruled on {day} that {A} {violated} {law}",
           "{A} {violated} {law}, a federal judge in {city} ruled on {day}",
           "On {day}, a federal judge in {city} found that {A} had {violated} {law}",
           "a federal judge in {city} decided on {day} that {A} had {violated} {law}"]
    negs = [("negation", ["a federal judge in {city} ruled on {day} that {A} did not violate {law}",
                          "{A} did not break {law}, a federal judge in {city} ruled on {day}"], {}),
            ("verb", ["a federal judge in {city} cleared {A} on {day} of violating {law}",
                      "On {day}, a federal judge in {city} dismissed claims that {A} had {violated} {law}"], {}),
            ("entity", None, {"law": law2}),
            ("entity", None, {"A": C})]
    return Fact("ruling", F, pos, negs, wrap_p=0.0)


def f_sentence(rng):
    P = person(rng)
    crime, crime2 = pick(rng, CRIMES, 2)
    n = rng.randrange(2, 25)
    F = dict(P=P, crime=crime, n=count(n))
    pos = ["{P} was sentenced to {n} years in prison for {crime}",
           "{P} received a {n}-year prison sentence for {crime}",
           "a judge sentenced {P} to {n} years in prison for {crime}",
           "{P} was jailed for {n} years after being convicted of {crime}"]
    negs = [("verb", ["{P} was acquitted of {crime}",
                      "{P} was cleared of {crime} after a {n}-week trial",
                      "{P} was released from prison after serving {n} years for {crime}"], {}),
            ("negation", ["{P} will not go to prison for {crime}"], {}),
            ("entity", None, {"crime": crime2}),
            ("number", None, {"n": count(other_number(rng, n, 2, 25))})]
    reps = ["prosecutors", "the prosecutor's office", "court officials"]
    F["day"] = day(rng)
    return Fact("sentence", F, pos, negs, reps=reps, wrap_p=0.5)


def f_lawsuit(rng):
    A, B, C = pick(rng, COMPANIES, 3)
    claim, claim2 = pick(rng, CLAIMS, 2)
    F = dict(A=A, B=B, claim=claim, day=day(rng))
    pos = ["{A} sued {B} on {day}, accusing it of {claim}",
           "{B} was sued by {A} on {day} over alleged {claim}",
           "{A} filed a lawsuit against {B} on {day}, alleging {claim}",
           "On {day}, {A} took {B} to court, accusing it of {claim}"]
    negs = [("role", None, {"A": B, "B": A}),
            ("verb", ["{A} dropped its lawsuit against {B} on {day}",
                      "{A} settled a lawsuit with {B} on {day} over alleged {claim}",
                      "a judge threw out {A}'s lawsuit against {B} on {day}"], {}),
            ("negation", ["{A} said on {day} that it would not sue {B} over alleged {claim}",
                          "{A} denied on {day} that it had filed a lawsuit against {B}"], {}),
            ("entity", None, {"claim": claim2}),
            ("entity", None, {"B": C})]
    return Fact("lawsuit", F, pos, negs, wrap_p=0.0)


def f_appeal(rng):
    P = person(rng)
    court = rng.choice(COURTS)
    crime, crime2 = pick(rng, CRIMES, 2)
    F = dict(P=P, court=court, crime=crime, day=day(rng),
             upheld=["upheld", "confirmed"])
    pos = ["{court} {upheld} {P}'s conviction for {crime} on {day}",
           "{P}'s conviction for {crime} was {upheld} by {court} on {day}",
           "On {day}, {court} {upheld} the {crime} conviction of {P}",
           "{court} on {day} {upheld} the conviction of {P} for {crime}"]
    negs = [("verb", ["{court} overturned {P}'s conviction for {crime} on {day}",
                      "{P}'s conviction for {crime} was thrown out by {court} on {day}",
                      "On {day}, {court} ordered a new trial for {P} on charges of {crime}"], {}),
            ("negation", ["{court} refused to uphold {P}'s conviction for {crime} on {day}",
                          "{court} did not uphold the {crime} conviction of {P} on {day}"], {}),
            ("entity", None, {"crime": crime2}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("appeal", F, pos, negs, wrap_p=0.0)


QUOTES = [
    ("We are very pleased with the results", "We are very disappointed with the results"),
    ("This agreement is good news for our customers", "This agreement is bad news for our customers"),
    ("We expect growth to continue next year", "We do not expect growth to continue next year"),
    ("The evidence clearly supports the verdict", "The evidence does not support the verdict"),
    ("We will not raise taxes this year", "We will raise taxes this year"),
    ("The team played extremely well tonight", "The team played very badly tonight"),
    ("The storm was worse than anyone expected", "The storm was not as bad as we expected"),
    ("Our results show that the drug is safe", "Our results show that the drug is not safe"),
    ("We have no plans to sell the company", "We are planning to sell the company"),
    ("The talks were constructive and friendly", "The talks ended without any progress"),
    ("This is a victory for consumers", "This is a defeat for consumers"),
    ("We intend to appeal the decision", "We accept the decision and will not appeal"),
]
QUOTE_ROLES = ["the company's chief executive", "the finance minister",
               "the team's coach", "a government spokesman", "the lead researcher",
               "the defense lawyer", "the mayor", "a union leader"]


def f_quote(rng):
    P = person(rng)
    P2 = person(rng, (P,))
    q, qn = rng.choice(QUOTES)
    F = dict(P=P, role=rng.choice(QUOTE_ROLES), q=q, day=day(rng),
             said=["said", "told reporters"])
    pos = ['"{q}," {P}, {role}, said on {day}.',
           '{P}, {role}, {said} on {day}: "{q}."',
           'On {day}, {P}, {role}, {said}: "{q}."',
           '"{q}," said {P}, {role}, on {day}.']
    negs = [("negation", None, {"q": qn}),
            ("entity", None, {"P": P2}),
            ("date", None, {"day": other(rng, DAYS + DATES, F["day"])})]
    return Fact("quote", F, pos, negs, full=True)


def f_called(rng):
    """Quoted descriptions, MRPC style: X called the deal "...". """
    A, B = pick(rng, COMPANIES, 2)
    P = person(rng)
    good, bad = rng.choice([
        ("a major step forward", "a serious mistake"),
        ("an excellent fit", "a poor fit"),
        ("a great day for our shareholders", "a sad day for our shareholders"),
        ("the right decision", "the wrong decision"),
    ])
    F = dict(A=A, B=B, P=P, good=good, day=day(rng),
             called=["called", "described"])
    pos = ['{P}, chief executive of {A}, called the deal with {B} "{good}" on {day}.',
           '{P}, the chief executive of {A}, described the agreement with {B} as "{good}" on {day}.',
           'On {day}, {A} chief executive {P} said the deal with {B} was "{good}."',
           '"It is {good}," {P}, chief executive of {A}, said of the deal with {B} on {day}.']
    negs = [("negation", None, {"good": bad}),
            ("entity", None, {"B": other(rng, COMPANIES, A, B)})]
    return Fact("called", F, pos, negs, full=True)


FAMILIES = [
    # business
    f_acquisition, f_jobcuts, f_earnings, f_shares, f_ceo, f_factory,
    # politics
    f_policy, f_vote, f_meeting, f_resign, f_election,
    # sport
    f_match, f_signing, f_injury, f_coach,
    # science
    f_study, f_launch, f_discovery, f_approval,
    # weather
    f_storm, f_outage, f_heat, f_flood,
    # courts
    f_ruling, f_sentence, f_lawsuit, f_appeal,
    # quotations (some end up with an unbalanced quote mark)
    f_quote, f_called,
]

# How often each kind of meaning change is chosen for a negative pair (when the
# family offers it).  Number/date changes are deliberately a minority.
NEG_WEIGHTS = {"verb": 3.0, "negation": 3.5, "entity": 1.0, "role": 0.4,
               "extra": 0.5, "number": 0.4, "date": 0.3}

WRAPPERS = [
    "{rep} said {on_day} that {clause}.",
    "On {day}, {rep} said {clause}.",
    "{clause}, {rep} said {on_day}.",
    "{rep} {rverb} {on_day} that {clause}.",
    "{clause}, {rep} {rverb} {on_day}.",
    "{clause}, according to a statement issued by {rep} {on_day}.",
]
RVERBS = ["said", "announced", "confirmed", "stated", "told reporters"]


# ---------------------------------------------------------------------------
# Realisation
# ---------------------------------------------------------------------------

def resolve(rng, fields):
    return {k: (rng.choice(v) if isinstance(v, list) else v) for k, v in fields.items()}


def cap(s):
    return s[:1].upper() + s[1:]


def realize(rng, fact, template, fields, wrapped, extra):
    vals = resolve(rng, fields)
    text = template.format(**vals)
    if fact.full:
        return tidy(text)
    if extra:
        text += ", and " + rng.choice(fact.extra).format(**vals)
    if wrapped:
        rep = rng.choice(fact.reps).format(**vals)
        d = vals["day"]
        on_day = rng.choice(["on " + d, d]) if d in WEEKDAY_SET else "on " + d
        w = rng.choice(WRAPPERS)
        if "according to" in w:
            on_day = "on " + d
        elif w.startswith("{clause}") and rep.endswith(","):
            rep = rep[:-1]
            w = w.replace("{rep} said", "{rep}, said").replace("{rep} {rverb}", "{rep}, {rverb}")
        text = w.format(rep=rep, clause=text, on_day=on_day, day=d,
                        rverb=rng.choice(RVERBS))
    else:
        text += "."
    return tidy(text)


def tidy(text):
    text = " ".join(text.split())
    text = re.sub(r"s's\b", "s'", text)                          # Motors's -> Motors'
    text = re.sub(r"\ba (?=(?:8\d*|11|18)\b)", "an ", text)        # a 18-year -> an 18-year
    text = re.sub(r"\bA (?=(?:8\d*|11|18)\b)", "An ", text)
    return cap(text)


def make_pair(rng, family, label):
    fact = family(rng)
    wrapped = bool(fact.reps) and not fact.full and rng.random() < fact.wrap_p
    if fact.reps and not fact.full and fact.wrap_p >= 1.0:
        wrapped = True
    if "day" not in fact.fields:
        wrapped = False
    t1 = rng.choice(fact.pos)
    others = [t for t in fact.pos if t != t1] or fact.pos

    if label == 1:
        both_extra = bool(fact.extra) and rng.random() < 0.2
        s1 = realize(rng, fact, t1, fact.fields, wrapped, both_extra)
        t2 = t1 if rng.random() < 0.3 else rng.choice(others)
        s2 = realize(rng, fact, t2, fact.fields, wrapped, both_extra)
        return s1, s2, "pos"

    negs = list(fact.negs)
    if fact.extra:
        negs.append(("extra", None, {}))
    uses_day = wrapped or "{day}" in t1
    negs = [n for n in negs if n[0] != "date" or uses_day]
    kinds = sorted(set(n[0] for n in negs))
    kind = rng.choices(kinds, weights=[NEG_WEIGHTS[k] for k in kinds])[0]
    _, templates, overrides = rng.choice([n for n in negs if n[0] == kind])
    if kind == "extra":
        s1 = realize(rng, fact, t1, fact.fields, wrapped, False)
        s2 = realize(rng, fact, rng.choice(others), fact.fields, wrapped, True)
        if rng.random() < 0.5:   # missing information instead of extra
            s1, s2 = realize(rng, fact, t1, fact.fields, wrapped, True), s1
        return s1, s2, kind
    fields2 = dict(fact.fields)
    fields2.update(overrides)
    s1 = realize(rng, fact, t1, fact.fields, wrapped, False)
    t2 = rng.choice(templates) if templates else rng.choice(others)
    s2 = realize(rng, fact, t2, fields2, wrapped, False)
    return s1, s2, kind


def drop_closing_quote(s):
    i = s.rfind('"')
    return s[:i] + s[i + 1:] if i > 0 else s


def generate(seed=SEED):
    rng = random.Random(seed)
    total = sum(n for _, n in SPLITS)
    ids = rng.sample(range(100000, 4000000), 2 * total)
    seen_s1, seen_pairs = set(), set()
    splits = {}
    id_iter = iter(ids)
    for name, n in SPLITS:
        n_pos = round(n * POS_FRACTION)
        labels = [1] * n_pos + [0] * (n - n_pos)
        rows = []
        for i, label in enumerate(labels):
            # The first few pairs of every split are quotations, one of them
            # with an unbalanced quote mark, so each split has such rows.
            while True:
                if i < 3:
                    fam = f_quote if i != 1 else f_called
                else:
                    fam = rng.choice(FAMILIES)
                s1, s2, kind = make_pair(rng, fam, label)
                if fam in (f_quote, f_called) and (i == 0 or rng.random() < 0.3):
                    if rng.random() < 0.5:
                        s1 = drop_closing_quote(s1)
                    else:
                        s2 = drop_closing_quote(s2)
                if s1 == s2 or s1 in seen_s1 or (s1, s2) in seen_pairs or (s2, s1) in seen_pairs:
                    continue
                break
            if rng.random() < 0.5 and label == 1:
                s1, s2 = s2, s1
                if s1 in seen_s1:
                    s1, s2 = s2, s1
            seen_s1.add(s1)
            seen_pairs.add((s1, s2))
            for s in (s1, s2):
                assert "\t" not in s and "\n" not in s and "\r" not in s, s
            rows.append((label, next(id_iter), next(id_iter), s1, s2, fam.__name__[2:], kind))
        rng.shuffle(rows)
        splits[name] = rows
    return splits


def write(splits, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, rows in splits.items():
        path = os.path.join(out_dir, name + ".tsv")
        if name == "test":
            lines = [HEADER_TEST] + ["%d\t%d\t%d\t%s\t%s" % (i, r[1], r[2], r[3], r[4])
                                     for i, r in enumerate(rows)]
            data = ("\n".join(lines) + "\n").encode("utf-8")
        else:
            lines = [HEADER_LABELED] + ["%d\t%d\t%d\t%s\t%s" % r[:5] for r in rows]
            data = b"\xef\xbb\xbf" + ("\n".join(lines) + "\n").encode("utf-8")
        with open(path, "wb") as f:
            f.write(data)
        n_pos = sum(r[0] for r in rows)
        print("%-5s %4d rows  %3d equivalent (%.0f%%)  -> %s"
              % (name, len(rows), n_pos, 100.0 * n_pos / len(rows), path))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, os.pardir, "src", "tuneloop", "sample_data", "mrpc")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.normpath(default_out),
                    help="output directory (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--show", type=int, default=0,
                    help="print this many train pairs with their template family and change kind")
    args = ap.parse_args()
    splits = generate(args.seed)
    write(splits, args.out)
    for r in splits["train"][:args.show]:
        print("%d [%s/%s]\n   %s\n   %s" % (r[0], r[5], r[6], r[3], r[4]))


if __name__ == "__main__":
    main()
