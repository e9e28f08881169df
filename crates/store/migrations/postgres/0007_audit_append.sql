-- gatehouse state (PostgreSQL only): the audit chain appended by the database, in the
-- transaction that holds the write lock, so the lock is never held across a round trip to a
-- gateway. The hash is `state::audit::entry_hash`'s (which `gatehouse audit verify` checks):
-- SHA-256 over `prev_hash` and `seq`, each framed by its length as a little-endian u64, then
-- the entry's other columns framed the same way, which the gateway sends ready-framed
-- (`state::audit::framed_columns`).

-- `n`'s eight bytes, least significant first (as Rust's `u64::to_le_bytes`): `int8send`'s
-- big-endian bytes, reversed. (One expression, without FROM, so PostgreSQL inlines it.)
CREATE FUNCTION gatehouse_u64le(n BIGINT) RETURNS BYTEA
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT substr(int8send(n), 8, 1) || substr(int8send(n), 7, 1)
        || substr(int8send(n), 6, 1) || substr(int8send(n), 5, 1)
        || substr(int8send(n), 4, 1) || substr(int8send(n), 3, 1)
        || substr(int8send(n), 2, 1) || substr(int8send(n), 1, 1)
$$;

-- Appends one entry per element of the arrays (all the same length), in order, after the
-- chain's head, under the transaction-level advisory lock `write_lock`; returns the last
-- entry's number (0 for no entries on an empty log). `framed[i]` is entry i's columns after
-- `seq`, framed as the hash takes them.
CREATE FUNCTION gatehouse_append(
    write_lock BIGINT, ats BIGINT[], kinds TEXT[], calls TEXT[], tenants TEXT[],
    principals TEXT[], tools TEXT[], outcomes TEXT[], records TEXT[], framed BYTEA[]
) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    head_seq  BIGINT;
    head_hash TEXT;
    seqs      BIGINT[] := '{}';
    prevs     TEXT[] := '{}';
    hashes    TEXT[] := '{}';
BEGIN
    PERFORM pg_advisory_xact_lock(write_lock);
    SELECT seq, hash INTO head_seq, head_hash FROM audit ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND THEN
        head_seq := 0;
        head_hash := 'genesis';
    END IF;
    FOR i IN 1 .. coalesce(array_length(framed, 1), 0) LOOP
        head_seq := head_seq + 1;
        seqs[i] := head_seq;
        prevs[i] := head_hash;
        head_hash := 'sha256:' || encode(sha256(
            gatehouse_u64le(octet_length(head_hash)) || convert_to(head_hash, 'UTF8')
            || '\x0800000000000000'::BYTEA || gatehouse_u64le(head_seq)
            || framed[i]
        ), 'hex');
        hashes[i] := head_hash;
    END LOOP;
    INSERT INTO audit (seq, at, kind, tool_call_id, tenant, principal, tool, outcome, record, prev_hash, hash)
    SELECT * FROM unnest(seqs, ats, kinds, calls, tenants, principals, tools, outcomes, records, prevs, hashes);
    RETURN head_seq;
END
$$;
