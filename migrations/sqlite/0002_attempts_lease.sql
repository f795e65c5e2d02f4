-- Results find their attempt by its lease.
CREATE INDEX attempts_lease ON attempts (lease_id);
