"""Driver-level statements are built from plain names only, in the driver's style."""

from __future__ import annotations

import pytest

from coordinator.storage import driver


def test_statements_are_built_from_plain_names() -> None:
    """Insert and update text name every column once, with :name placeholders."""
    assert driver.insert_sql("runs", ["run_id", "owner"]) == (
        "INSERT INTO runs (run_id, owner) VALUES (:run_id, :owner)"
    )
    assert driver.update_sql("handoffs", ["state"], "attempt_id") == (
        "UPDATE handoffs SET state = :state WHERE attempt_id = :attempt_id"
    )


@pytest.mark.parametrize("name", ["runs; DROP TABLE runs", "Runs", "a-b", "1st", ""])
def test_anything_but_a_plain_name_is_refused(name: str) -> None:
    """A table or column name that is not a lower-case identifier never becomes SQL."""
    with pytest.raises(ValueError):
        driver.insert_sql(name, ["run_id"])
    with pytest.raises(ValueError):
        driver.update_sql("runs", [name], "run_id")


def test_placeholders_follow_the_driver() -> None:
    """psycopg gets %(name)s; sqlite3 keeps :name."""
    sql = "UPDATE runs SET owner = :owner WHERE run_id = :run_id"
    assert driver._styled("pyformat", sql) == (
        "UPDATE runs SET owner = %(owner)s WHERE run_id = %(run_id)s"
    )
    assert driver._styled("qmark", sql) == sql
