"""CONTRIBUTING's prose rule, checked: no sentence of the documents over 30 words.

A sentence is cut out of a page's prose: fenced blocks, tables, headings, HTML and
link targets are left out, a code span counts as one word, and each list item is a
sentence of its own. The changelog is history and is left as written. docs/cli.md is
generated from the commands' help texts (``orchestrator.clidoc``), so they are held to
the rule too."""

from __future__ import annotations

from tests.docs import LONGEST_SENTENCE, cut_sentences, long_sentences, pages, sentences

EXEMPT = {"docs/changelog.md"}


def _documents() -> dict[str, str]:
    return {path: text for path, text in pages().items() if path not in EXEMPT}


def test_no_sentence_of_the_documents_is_over_30_words() -> None:
    assert LONGEST_SENTENCE == 30
    assert long_sentences(_documents()) == []


def test_no_sentence_is_cut_in_two_by_pasted_text() -> None:
    assert cut_sentences(_documents()) == []


def test_the_check_counts_prose_and_leaves_code_tables_and_headings_out() -> None:
    long = " ".join(["word"] * 31) + "."
    page = (f"# {long}\n\n| {long} |\n\n```sh\n{long}\n```\n\n"
            "A `code span with many words in it` and [a link](target/with/many/words.md)"
            " count as one word each. Next sentence, e.g. this one.\n\n"
            f"- {' '.join(['item'] * 30)}.\n- short item\n\nIt costs\n40) dollars.\n")
    found = list(sentences(page))
    assert [(line, count) for line, count, _ in found] == [(9, 10), (9, 5), (11, 30),
                                                           (12, 2), (14, 4)]
    assert long_sentences({"x.md": page}) == []
    assert long_sentences({"x.md": f"Intro.\n\nA `code\nspan` and\n[a](b\nc). {long}\n"}) == [
        f"x.md:6: 31 words: {long[:60]}..."]
    assert cut_sentences({"x.md": "It runs with `A`,\nthe other.\n\nB, and\n\nC,\n"}) == [
        "x.md:6: ends on a comma: ...C,"]
    assert cut_sentences({"x.md": "It runs with `A`,\nA run's record says so.\n"}) == [
        "x.md:1: a sentence starts after a comma: A run's record says so."]
