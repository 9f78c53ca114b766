"""Tenant databases copied from a migrated one, for the tests of many outboxes."""

import psycopg2


class Copies:
    """Databases made from a migrated one by CREATE DATABASE ... TEMPLATE (a copy takes a fraction of a second,
    a migration seconds). The group roles and the template's login roles are cluster-wide, so its two login
    roles reach every copy."""

    def __init__(self, template, count):
        self.template = template
        self.names = []
        try:
            for i in range(count):
                name = f"{template.name}_{i}"
                template._admin(f'CREATE DATABASE "{name}" TEMPLATE "{template.name}"')
                self.names.append(name)
        except BaseException:
            self.drop()
            raise

    def url(self, name, role):
        base = {"dispatcher": self.template.url, "writer": self.template.writer_url,
                "superuser": self.template.superuser_url}[role]
        return base.rpartition("/")[0] + "/" + name

    def outboxes_yaml(self):
        return "outboxes:\n" + "".join(f'  - name: {name}\n    database: {{url: "{self.url(name, "dispatcher")}"}}\n'
                                       for name in self.names)

    def count(self, name):
        conn = psycopg2.connect(self.url(name, "superuser"))
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT count(*) FROM outbox.messages")
                return cur.fetchone()[0]
        finally:
            conn.close()

    def drop(self):
        for name in self.names:
            self.template._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names = []
