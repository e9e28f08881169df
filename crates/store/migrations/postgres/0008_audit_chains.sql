-- gatehouse state (PostgreSQL only): the audit log partitioned into chains (`[store] chains`,
-- `state::audit::chain_of`), each appended under an advisory lock of its own, so gateways
-- writing for tenants of different chains never wait on each other.
--
-- An entry's `chain` is its tenant's, `link` its position in that chain (from 1, no gaps), and
-- its hash covers `link` where it covered `seq`. The entries written before are chain 0, with
-- `link = seq`: their hashes stay as they are and verify. `seq` keeps numbering the whole log
-- in the order it was appended, now from a sequence: increasing within a chain (a chain's
-- appender takes its numbers under the chain's lock), and skipping a number where a
-- transaction rolled back.

ALTER TABLE audit ADD COLUMN chain INT NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN link BIGINT;
UPDATE audit SET link = seq;
ALTER TABLE audit ALTER COLUMN link SET NOT NULL;
CREATE UNIQUE INDEX audit_by_chain ON audit (chain, link);

CREATE SEQUENCE audit_seq AS BIGINT;
SELECT setval('audit_seq', coalesce((SELECT max(seq) FROM audit), 0) + 1, false);


-- Appends one entry per element of the arrays (all the same length), each after its chain's
-- head (`chains[i]`), in order within a chain; returns the last `seq` (0 for no entries).
-- Each chain's lock is `write_lock + chain`, taken in ascending order of chain, so two
-- appenders never wait on each other in a cycle. `framed[i]` is entry i's columns after
-- `link`, framed as the hash takes them.
CREATE FUNCTION gatehouse_append(
    write_lock BIGINT, chains INT[], ats BIGINT[], kinds TEXT[], calls TEXT[], tenants TEXT[],
    principals TEXT[], tools TEXT[], outcomes TEXT[], records TEXT[], framed BYTEA[]
) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    n         INT := coalesce(array_length(framed, 1), 0);
    c         INT;
    head_link BIGINT;
    head_hash TEXT;
    last_seq  BIGINT := 0;
    seqs      BIGINT[] := '{}';
    links     BIGINT[] := '{}';
    prevs     TEXT[] := '{}';
    hashes    TEXT[] := '{}';
BEGIN
    FOR c IN SELECT DISTINCT x FROM unnest(chains) AS x ORDER BY x LOOP
        PERFORM pg_advisory_xact_lock(write_lock + c);
        SELECT link, hash INTO head_link, head_hash
            FROM audit WHERE chain = c ORDER BY link DESC LIMIT 1;
        IF NOT FOUND THEN
            head_link := 0;
            head_hash := 'genesis';
        END IF;
        FOR i IN 1 .. n LOOP
            CONTINUE WHEN chains[i] <> c;
            head_link := head_link + 1;
            seqs[i] := nextval('audit_seq');
            last_seq := greatest(last_seq, seqs[i]);
            links[i] := head_link;
            prevs[i] := head_hash;
            head_hash := 'sha256:' || encode(sha256(
                gatehouse_u64le(octet_length(head_hash)) || convert_to(head_hash, 'UTF8')
                || '\x0800000000000000'::BYTEA || gatehouse_u64le(head_link)
                || framed[i]
            ), 'hex');
            hashes[i] := head_hash;
        END LOOP;
    END LOOP;
    INSERT INTO audit (seq, chain, link, at, kind, tool_call_id, tenant, principal, tool, outcome, record, prev_hash, hash)
    SELECT * FROM unnest(seqs, chains, links, ats, kinds, calls, tenants, principals, tools, outcomes, records, prevs, hashes);
    RETURN last_seq;
END
$$;

-- The append of the version before, for gateways of that version still running during a
-- rolling upgrade: their entries go to chain 0, numbered and hashed as above.
CREATE OR REPLACE FUNCTION gatehouse_append(
    write_lock BIGINT, ats BIGINT[], kinds TEXT[], calls TEXT[], tenants TEXT[],
    principals TEXT[], tools TEXT[], outcomes TEXT[], records TEXT[], framed BYTEA[]
) RETURNS BIGINT
LANGUAGE sql AS $$
    SELECT gatehouse_append(write_lock,
        array_fill(0, ARRAY[coalesce(array_length(framed, 1), 0)]),
        ats, kinds, calls, tenants, principals, tools, outcomes, records, framed)
$$;
