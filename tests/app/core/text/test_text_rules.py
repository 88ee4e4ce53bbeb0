"""The text rules of a dictation, case by case: spoken commands, fillers, replacements and their file,
joining a dictation to the previous one, and the pipeline's order. Texts are written as the models write
them (their punctuation and capitals around command words are the point)."""

from __future__ import annotations

import pytest

from sayso.app.core.text.commands import apply_spoken_commands, remove_fillers
from sayso.app.core.text.joining import join_to
from sayso.app.core.text.pipeline import TextRules, apply_rules
from sayso.app.core.text.vocabulary import (
    Replacement,
    apply_replacements,
    format_replacements,
    parse_replacements,
)


@pytest.mark.parametrize("raw, written", [
    ("Hello world comma how are you question mark", "Hello world, how are you?"),
    ("I agree colon it works semicolon ship it exclamation point", "I agree: it works; ship it!"),
    ("We went home full stop it rained exclamation mark", "We went home. It rained!"),
    ("He said open quote hello close quote and left", 'He said "hello" and left'),
    ("He said open quote hello period end quote and left", 'He said "hello." And left'),
    ("See open parenthesis page four close parenthesis period", "See (page four)."),
    ("See open bracket below close bracket", "See (below)"),
    ("A well hyphen known and slash or choice", "A well-known and/or choice"),
    ("John apostrophe s book", "John's book"),
    ("Wait ellipsis what dot dot dot yes dash no", "Wait... what... yes – no"),
    ("COMMA Comma comma", ",,,"),
])
def test_spoken_punctuation(raw, written):
    assert apply_spoken_commands(raw) == written


@pytest.mark.parametrize("raw, written", [
    ("Hello world, period. New line. How are you question mark?", "Hello world.\nHow are you?"),  # tiny.en's
    ("In short, comma, I will call you tomorrow. Period. Can you come? Question mark.",
     "In short, I will call you tomorrow. Can you come?"),
    ("In short, comma, I will call you tomorrow period. Can you come question mark?",
     "In short, I will call you tomorrow. Can you come?"),  # Moonshine's, the same words
    ("Hello world, comma. How are you?", "Hello world, how are you?"),
    ("Yes, colon. The list", "Yes: the list"),
    ("Well, comma. I think so.", "Well, I think so."),  # "I" keeps its capital
    ("Well, comma. I'm sure.", "Well, I'm sure."),
    ("Launch, comma. NASA said.", "Launch, NASA said."),
    ("Hello, comma, John said.", "Hello, John said."),  # no sentence end invented before John: he keeps his
    ("It works. Full stop. it does", "It works. It does"),
    ("Question, mark. Full-stop.", "?."),
])
def test_the_models_punctuation_and_capitals_around_commands_give_way(raw, written):
    assert apply_spoken_commands(raw) == written


@pytest.mark.parametrize("raw, written", [
    ("Dear Anna, new line. Thanks for the letter period. New paragraph. Best, new line, Bob.",
     "Dear Anna\nThanks for the letter.\n\nBest\nBob."),
    # A full stop the model put before a command goes too: the user says where the punctuation is.
    ("Thanks for the letter. New paragraph. Best", "Thanks for the letter\n\nBest"),
    ("One period new paragraph two period new paragraph three period", "One.\n\nTwo.\n\nThree."),
    ("First line newline second line", "First line\nSecond line"),
    ("New paragraph. Dear Anna", "\n\nDear Anna"),
    ("End of the text. New line.", "End of the text\n"),
])
def test_layout(raw, written):
    assert apply_spoken_commands(raw) == written


@pytest.mark.parametrize("raw, written", [
    ("Scratch that. Hello there.", "Hello there."),
    ("I like dogs. Scratch that. I like cats.", "I like cats."),
    ("I like cats. I like dogs, scratch that, birds.", "I like cats. Birds."),
    ("One period two comma scratch that three period", "One. Three."),
    ("One period two period scratch that", "One."),
    ("First line new line second line scratch that third line", "First line\nThird line"),
    ("Dear Anna new paragraph wrong line delete that Right line", "Dear Anna\n\nRight line"),
    ("Open quote hi period close quote scratch that Bye", "Bye"),
])
def test_scratch_that_drops_the_sentence_before_it(raw, written):
    assert apply_spoken_commands(raw) == written


@pytest.mark.parametrize("raw", [
    "The Victorian periodical",
    "A commas list",
    "comma-separated values",
    "The new lines",
    "Their scratch marks",
])
def test_commands_are_whole_words(raw):
    assert apply_spoken_commands(raw) == raw


@pytest.mark.parametrize("raw, written", [
    ("Um, so we go.", "So we go."),
    ("Uh, I think so.", "I think so."),
    ("I think, uh, we should go.", "I think we should go."),
    ("I think, uhm we should go.", "I think we should go."),
    ("Is it, um?", "Is it?"),
    ("Hello. Um. Okay then.", "Hello. Okay then."),
    ("Hmm, erm, well, yes.", "Well, yes."),
    ("So er that's it, mm.", "So that's it."),
    ("Ahh, here. Hmmm.", "Here."),
    ("um we start lowercase", "we start lowercase"),
    ("An umbrella, uh-huh, erms", "An umbrella, uh-huh, erms"),
    ("Take him to the ER, a 5 mm cut.", "Take him to the ER, a 5 mm cut."),
])
def test_fillers(raw, written):
    assert remove_fillers(raw) == written


SAYSO = Replacement("say so", "sayso")
JSON = Replacement("jay son", "JSON")


@pytest.mark.parametrize("text, items, written", [
    ("Data as jay son.", (JSON,), "Data as JSON."),
    ("Jay son is data.", (JSON,), "JSON is data."),
    ("I use say so daily.", (SAYSO,), "I use sayso daily."),
    ("Say so works.", (SAYSO,), "Sayso works."),  # an all-lowercase form takes the sentence's capital
    ("It runs\nkube   cuttle get pods", (Replacement("kube cuttle", "kubectl"),), "It runs\nkubectl get pods"),
    ("Kube cuttle runs.", (Replacement("kube cuttle", "kubectl"),), "Kubectl runs."),
    ("Deploy on kates.", (Replacement("kates", "K8s"),), "Deploy on K8s."),
    ("Use i phone.", (Replacement("i phone", "iPhone"),), "Use iPhone."),
    ("Say something, say so.", (SAYSO,), "Say something, sayso."),
    ("Essay so long.", (SAYSO,), "Essay so long."),  # whole words only
    ("New York City and New York.",
     (Replacement("new york", "NY"), Replacement("new york city", "NYC")), "NYC and NY."),  # longest first
    ("c sharp code", (Replacement("c sharp", "C#"),), "C# code"),
    ("Nothing to do.", (), "Nothing to do."),
])
def test_replacements(text, items, written):
    assert apply_replacements(text, items) == written


def test_the_replacements_file_round_trips():
    items = (JSON, SAYSO, Replacement("c sharp", "C#"), Replacement("new york city", "NYC"))
    text = format_replacements(items)
    assert text.startswith("#") and "->" in text.splitlines()[0]
    assert parse_replacements(text) == items
    assert parse_replacements(format_replacements(())) == ()


def test_the_replacements_file_skips_comments_and_blank_lines_and_tidies_spaces():
    text = "# mine\n\n  jay   son  ->  JSON \n# later\nsay so->sayso\n"
    assert parse_replacements(text) == (JSON, SAYSO)


@pytest.mark.parametrize("text, line, advice", [
    ("jay son -> JSON\njay son JSON\n", "Line 2 has no '->'", "e.g. 'jay son -> JSON'"),
    ("# header\n -> JSON\n", "Line 2 has nothing before '->'", "write what you say there"),
    ("jay son ->\n", "Line 1 has nothing after '->'", "or delete the line"),
    ("jay son -> JSON\n\nJay  Son -> Json\n", "Line 3 repeats 'Jay Son' of line 1", "keep one of the two lines"),
])
def test_a_bad_replacements_file_names_the_line_and_what_to_write(text, line, advice):
    with pytest.raises(ValueError) as error:
        parse_replacements(text)
    assert str(error.value).startswith(line) and advice in str(error.value)


@pytest.mark.parametrize("previous, text, joined", [
    (None, "  Hello there. ", "Hello there."),
    ("", "Hello", "Hello"),
    ("I'll call you.", "Tomorrow at noon.", " Tomorrow at noon."),
    ("I'll call you.", "tomorrow at noon.", " Tomorrow at noon."),
    ('He said "stop."', "then he left.", ' Then he left.'),
    ("(See above.)", "then go on", " Then go on"),
    ("Really?", "yes", " Yes"),
    ("Wow!", "yes", " Yes"),
    ("Dear Anna\n", "thanks for the letter.", "Thanks for the letter."),
    ("I'll call you", "Tomorrow at noon.", " tomorrow at noon."),
    ("First,", "Second", " second"),
    ("Wait;", "Then", " then"),
    ("Note:", "The rest", " the rest"),
    ("So", "I think so.", " I think so."),
    ("So", "I'm sure.", " I'm sure."),
    ("Ask", "NASA first.", " NASA first."),
    ("Call me ", "Tomorrow", "tomorrow"),  # never two spaces
    ("It ended. ", "next", "Next"),
    ("See (", "Page two", "Page two"),
    ("Yes", ", and more", ", and more"),  # a dictation that starts with "comma"
    ("Yes", "\n\nNew part", "\n\nNew part"),
    ("Yes", "", ""),
    ("Yes", "   ", ""),
])
def test_joining_to_the_previous_dictation(previous, text, joined):
    assert join_to(previous, text) == joined


def test_the_pipeline_runs_commands_then_fillers_then_replacements():
    rules = TextRules(fillers=True, replacements=(Replacement("dot", "period"), JSON))
    # The replacement writes "period" after the commands ran: it stays a word.
    assert apply_rules("  Um, the dot, comma, is jay son, uh. Period. ", rules) == "The period, is JSON."
    assert apply_rules("Um, jay son period", TextRules()) == "Um, jay son."
    assert apply_rules("Um, jay son period", TextRules(commands=False)) == "Um, jay son period"


def test_the_pipeline_keeps_a_dictated_line_break_at_either_end():
    assert apply_rules("New paragraph. Dear Anna, new line.", TextRules()) == "\n\nDear Anna\n"
