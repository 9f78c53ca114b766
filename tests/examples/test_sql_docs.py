"""docs/sql.md's application examples (docs/examples/): each runs as a writer on a fresh database and prints what
the page shows, and the page quotes each file as it is."""

import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))

from clients import ROOT, Writer, node_modules  # noqa: E402
from harness import Broker, database, run_cli, workdir, write_config  # noqa: E402,F401  (fixtures)

EXAMPLES = os.path.join(ROOT, "docs", "examples")
SQL_MD = os.path.join(ROOT, "docs", "sql.md")


def read(path):
    with open(path) as f:
        return f.read()


def commands(url):
    return {
        "misuse.sql": (["psql", "-X", "-q", "-v", "ON_ERROR_STOP=0", "-d", url, "-f", "misuse.sql"], {}),
        "transition.py": (["/usr/bin/python3", "transition.py", url], {}),
        "transition.js": (["node", "transition.js", url], {"NODE_PATH": node_modules()}),
    }


@pytest.mark.parametrize("name", ["misuse.sql", "transition.py", "transition.js"])
def test_example_prints_what_the_page_shows(workdir, database, name):
    path = write_config(f"{workdir}/outboxd.yaml", database, Broker("rabbitmq"))
    run_cli("migrate", "-c", path)
    writer = Writer(database)
    try:
        command, env = commands(writer.url)[name]
        # One pipe for stdout and stderr: psql's results and errors in the order a terminal shows them.
        result = subprocess.run(command, cwd=EXAMPLES, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=60, env=dict(os.environ, **env))
    finally:
        writer.drop()
    assert result.returncode == 0, result.stdout
    assert result.stdout == read(os.path.join(EXAMPLES, f"{name}.out"))


def test_the_page_quotes_every_example_as_it_is():
    page = read(SQL_MD)
    quoted = dict(re.findall(r"<!-- (docs/examples/[\w.]+) -->\n```\w*\n(.*?)```\n", page, re.S))
    # The files of docs/examples itself; its folders belong to other pages (cloudevents/: cloudevents.md).
    files = sorted(f"docs/examples/{n}" for n in os.listdir(EXAMPLES) if os.path.isfile(os.path.join(EXAMPLES, n)))
    assert sorted(quoted) == files
    for name, text in quoted.items():
        assert text == read(os.path.join(ROOT, name)), f"{name} differs from its quote in docs/sql.md"
