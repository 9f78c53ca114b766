-- The order saga's own tables: what the simulated stock and payment services did, one row per action.
--
-- No unique keys on purpose: the services' inbox (outbox.record_received) is
-- what keeps a redelivered command from acting twice, and check.py counts the
-- rows to prove it. Run by the database owner after the outboxd migrations,
-- with psql -v app=ROLE (the login role holding only outbox_writer).
CREATE SCHEMA shop;

CREATE TABLE shop.stock_moves (
  order_id   text NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('reserve', 'release')),
  message_id text NOT NULL,
  at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE shop.payment_moves (
  order_id     text NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('capture', 'abandon', 'refund')),
  message_id   text NOT NULL,
  effective_at timestamptz NOT NULL,  -- when the customer's money moves (a capture may be slow)
  at           timestamptz NOT NULL DEFAULT now()
);

GRANT USAGE ON SCHEMA shop TO :"app";
GRANT SELECT, INSERT ON shop.stock_moves, shop.payment_moves TO :"app";
