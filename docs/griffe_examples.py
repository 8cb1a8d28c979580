"""A Griffe extension for the API reference (mkdocs.yml loads it).

The library's docstrings head their doctests ``Example:``, which Griffe's
Google parser reads as a note of plain text, where an output such as
``[-1.  1.] [0. 1.]`` looks like a Markdown link. This extension renames the
heading ``Examples:``, the section Griffe renders as a code listing.
"""

import re

import griffe

_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.M)


class ExampleSections(griffe.Extension):
    """Reads every ``Example:`` section of a docstring as ``Examples:``."""

    def on_instance(self, *, obj, **kwargs):  # pylint: disable=unused-argument
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and "Example:" in docstring.value:
            docstring.value = _HEADING.sub(r"\1Examples:", docstring.value)
