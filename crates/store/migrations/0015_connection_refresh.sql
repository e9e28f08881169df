-- gatehouse state: the right to refresh a connection, across gateways sharing the store. A
-- provider that rotates refresh tokens takes each once; two gateways refreshing one connection
-- at once would spend one token twice, and the provider revokes the grant. The gateway that
-- takes the right (until `refreshing_until`, unix ms) refreshes; the others wait for the row to
-- change. Storing the refreshed connection clears it.
ALTER TABLE connections ADD COLUMN refreshing_until BIGINT;
