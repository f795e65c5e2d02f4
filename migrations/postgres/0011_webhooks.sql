-- What happened (a run ended, a case started failing, a device was
-- quarantined, a case was muted), written by whoever raised it in the
-- transaction that did it; the webhooks task turns each into a delivery
-- per webhook that wants it, then marks it dispatched.
CREATE TABLE events (
    id           BIGSERIAL PRIMARY KEY,
    kind         TEXT NOT NULL,
    event_json   TEXT NOT NULL,
    at           BIGINT NOT NULL,
    dispatched   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX events_to_dispatch ON events (id) WHERE dispatched = 0;
CREATE INDEX events_at ON events (at);

-- One event sent to one webhook: tried until taken, refused, or past its
-- time; every try's answer is kept on the row (the last) for the dashboard.
CREATE TABLE webhook_deliveries (
    id           BIGSERIAL PRIMARY KEY,
    event_id     BIGINT NOT NULL,
    webhook      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    -- pending, delivered, refused (a 4xx) or abandoned (out of time).
    state        TEXT NOT NULL,
    attempts     BIGINT NOT NULL DEFAULT 0,
    next_at      BIGINT NOT NULL,
    last_status  BIGINT,
    last_error   TEXT,
    created_at   BIGINT NOT NULL,
    finished_at  BIGINT,
    UNIQUE (event_id, webhook)
);
CREATE INDEX deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX deliveries_created ON webhook_deliveries (created_at DESC);
