"""MkDocs hook: a page may link a file of the repository outside docs/ (``../examples/x.py``).

Each such file that exists is published with the site under ``repository/``, so the link
works in the built site as on GitHub; a link to a file that does not exist is left alone,
and ``mkdocs build --strict`` fails on it as on any broken link.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

# ](../path) in a page's Markdown: a relative link that leaves docs/
_OUTSIDE = re.compile(r"\]\(\.\./([^)#\s]+)")


def on_files(files: Files, config: Any) -> Files:
    docs = Path(config["docs_dir"])
    root = docs.parent
    for page in list(files.documentation_pages()):
        text = Path(str(page.abs_src_path)).read_text(encoding="utf-8")
        for target in _OUTSIDE.findall(text):
            source = f"../{target}"
            if (root / target).is_file() and files.get_file_from_path(source) is None:
                files.append(_published(source, target, str(docs), config))
    return files


def _published(source: str, target: str, docs: str, config: Any) -> File:
    return File(
        source,
        docs,
        config["site_dir"],
        config["use_directory_urls"],
        dest_uri=f"repository/{target}",
        inclusion=InclusionLevel.INCLUDED,
    )
