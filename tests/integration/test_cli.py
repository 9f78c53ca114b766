"""The one-shot commands as the README shows them: migrate --dry-run, status --json, requeue and skip, version."""

import json
import types
from urllib.parse import urlparse, urlunparse

from harness import enqueue, run_cli, unique, write_config

# These commands only talk to PostgreSQL; nothing listens at this broker URL.
NO_BROKER = types.SimpleNamespace(url="amqp://127.0.0.1:1", profile="generic", user="", password="")


def config_for(workdir, database):
    return write_config(f"{workdir}/outboxd.yaml", database, NO_BROKER)


def outbox_exists(database):
    return database.query("SELECT to_regclass('outbox.messages') IS NOT NULL")[0][0]


def test_migrate_dry_run_lists_what_it_would_apply_and_changes_nothing(workdir, unmigrated_database):
    database = unmigrated_database
    config = config_for(workdir, database)
    dry = run_cli("migrate", "--dry-run", "-c", config)
    assert "001_outbox.sql: would apply" in dry.stdout, dry.stdout
    assert "would be applied to schema outbox (now at version 0); nothing changed" in dry.stdout, dry.stdout
    assert not outbox_exists(database)

    applied = run_cli("migrate", "-c", config)
    assert "applied " in applied.stdout and "to schema outbox: version 0 -> " in applied.stdout, applied.stdout
    assert outbox_exists(database)
    again = run_cli("migrate", "--dry-run", "-c", config)
    assert "dry run: 0 migrations would be applied" in again.stdout, again.stdout


def parked_rows(database):
    """p1 and p2 of session a, p3 of b, p4 of c parked; one pending row of d."""
    with database.connect() as conn, conn.cursor() as cur:
        for message_id, session in (("p1", "a"), ("p2", "a"), ("p3", "b"), ("p4", "c"), ("ok", "d")):
            enqueue(cur, "orders", message_id, b"x", session_id=session)
        cur.execute("UPDATE outbox.messages SET status = 'parked', attempts = 10 WHERE message_id LIKE 'p%'")


def statuses(database):
    return dict(database.query("SELECT message_id, status FROM outbox.messages"))


def test_status_requeue_and_skip_by_id_session_and_all_parked(workdir, database):
    config = config_for(workdir, database)
    parked_rows(database)

    report = json.loads(run_cli("status", "--json", "-c", config).stdout)
    assert report["total"]["parked"] == 4 and report["total"]["pending"] == 1, report
    assert report["destinations"]["orders"]["parked"] == 4, report
    assert "(total)" in run_cli("status", "-c", config).stdout

    no_target = run_cli("requeue", "-c", config, check=False)
    assert no_target.returncode == 2 and "--all-parked" in no_target.stderr, no_target.stderr

    assert run_cli("requeue", "-c", config, "--session", "a").stdout == "requeue: 2 parked rows\n"
    assert run_cli("skip", "-c", config, "p3").stdout == "skip: 1 parked row\n"
    assert run_cli("skip", "-c", config, "--all-parked").stdout == "skip: 1 parked row\n"
    assert statuses(database) == {"p1": "pending", "p2": "pending", "p3": "cancelled", "p4": "cancelled",
                                  "ok": "pending"}

    nothing = run_cli("requeue", "-c", config, "p3", check=False)
    assert nothing.returncode == 1 and nothing.stdout == "requeue: 0 parked rows\n", nothing


def test_version_names_the_program(workdir):
    assert run_cli("version").stdout.startswith("outboxd ")


def test_migrate_refuses_a_schema_name_longer_than_52_bytes(workdir, unmigrated_database):
    database = unmigrated_database
    # config/outboxd.yaml: outbox.schema at most 52 bytes, so that <schema>_dispatcher fits in 63.
    config = write_config(f"{workdir}/outboxd.yaml", database, NO_BROKER, outbox={"schema": "s" * 53})
    refused = run_cli("migrate", "-c", config, check=False)
    # The config refuses it (exit 78, at the key's position) before migrate connects.
    assert refused.returncode == 78 and "9:11: outbox.schema: " in refused.stderr, refused.stderr
    assert "at most 52 bytes" in refused.stderr, refused.stderr
    assert database.query("SELECT to_regclass(quote_ident(%s) || '.messages') IS NULL", ("s" * 53,))[0][0]
    fits = write_config(f"{workdir}/fits.yaml", database, NO_BROKER, outbox={"schema": "s" * 52})
    run_cli("migrate", "-c", fits)


def test_run_against_a_schema_behind_this_binary_says_to_migrate(workdir, database):
    # An upgrade that skipped `outboxd migrate`: the newest script is not recorded as applied.
    latest = database.query("SELECT max(version) FROM outbox.schema_migrations")[0][0]
    database.query("DELETE FROM outbox.schema_migrations WHERE version = %s RETURNING version", (latest,))
    config = write_config(f"{workdir}/outboxd.yaml", database, NO_BROKER)
    run = run_cli("run", "-c", config, check=False)
    assert run.returncode == 1, run.stderr
    assert (f"schema outbox is at migration {latest - 1}, and this outboxd needs migration {latest}: "
            "run `outboxd migrate`") in run.stderr, run.stderr


def test_a_database_owner_with_createrole_migrates_without_being_superuser(workdir, unmigrated_database):
    database = unmigrated_database
    # docs/sql.md: migrate needs CREATEROLE for 003_roles.sql, not a superuser.
    role = unique("migrator")
    with database.connect() as conn, conn.cursor() as cur:
        cur.execute(f'CREATE ROLE "{role}" LOGIN CREATEROLE')
        cur.execute(f'ALTER DATABASE "{database.name}" OWNER TO "{role}"')
    try:
        parsed = urlparse(database.url)
        as_role = types.SimpleNamespace(url=urlunparse(parsed._replace(netloc=f"{role}@{parsed.hostname}:{parsed.port}")))
        config = write_config(f"{workdir}/outboxd.yaml", as_role, NO_BROKER)
        assert "to schema outbox: version 0 -> " in run_cli("migrate", "-c", config).stdout
        assert database.query("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'outbox'") == [(role,)]
    finally:
        with database.connect() as conn, conn.cursor() as cur:
            cur.execute(f'REASSIGN OWNED BY "{role}" TO CURRENT_USER')
            cur.execute(f'DROP OWNED BY "{role}"')
            cur.execute(f'DROP ROLE "{role}"')


def test_run_against_a_database_never_migrated_says_to_migrate(workdir, unmigrated_database):
    run = run_cli("run", "-c", config_for(workdir, unmigrated_database), check=False)
    assert run.returncode == 1, run.stderr
    assert "schema outbox has no outbox tables in this database: run `outboxd migrate`" in run.stderr, run.stderr
