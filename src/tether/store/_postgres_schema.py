"""The PostgreSQL schema as numbered migrations (docs/storage.md explains every column).

Append-only: a released migration is never edited; a change is a new entry. Every
statement is formatted with the quoted schema name (``{s}``), so one database can
hold several isolated tether schemas. Applied versions are rows of
``{s}.tether_schema``; ``PostgresStore.open`` applies the missing ones under a
transaction-scoped advisory lock, so processes opening at once are safe.

Why the shapes:

* ``tether_scopes`` holds each scope's head. A commit moves it with a conditional
  ``UPDATE ... WHERE generation = $ AND sequence = $``: the row lock serialises
  writers of one scope across processes and machines, and a writer whose head went
  stale updates no row, which is the conflict. ``sequence`` and ``frontier`` are not
  indexed, so these updates stay HOT (fillfactor leaves room for them).
* ``tether_commit``/``tether_reset``/``tether_delete_namespace`` are PL/pgSQL so a
  commit is one round trip, and because each statement inside a volatile function
  takes a fresh snapshot: a reset deletes the rows committed by a writer it waited
  for, so nothing of the old generation survives.
* Text that is compared by prefix (namespaces, scopes, resource keys) is
  ``COLLATE "C"``: byte order, the same as SQLite and the in-memory store.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]  # formatted with s=<quoted schema>


# Migration 1's commit function, as released. Never edit: migration 2 replaces it.
_COMMIT_V1 = r"""
CREATE FUNCTION {s}.tether_commit(
    p_ns text, p_scopes text[], p_gens bigint[], p_seqs bigint[], p_counts int[],
    p_frontiers bytea[],
    n_scope int[], n_seq bigint[], n_id bytea[], n_kind smallint[], n_parents bytea[],
    n_cms bigint[], n_ctext text[], n_rkey text[], n_payload bytea[]
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    i int;
    v_sid bigint;
    sids bigint[] := '{{}}';
    g bigint;
    q bigint;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_scopes, 1), 0) LOOP
        v_sid := NULL;
        IF p_counts[i] > 0 THEN
            UPDATE {s}.tether_scopes
               SET sequence = p_seqs[i] + p_counts[i], frontier = p_frontiers[i]
             WHERE ns = p_ns AND scope = p_scopes[i]
               AND generation = p_gens[i] AND sequence = p_seqs[i]
            RETURNING sid INTO v_sid;
            IF v_sid IS NULL AND p_gens[i] = 0 AND p_seqs[i] = 0 THEN
                INSERT INTO {s}.tether_scopes (ns, scope, sequence, frontier)
                VALUES (p_ns, p_scopes[i], p_counts[i], p_frontiers[i])
                ON CONFLICT (ns, scope) DO NOTHING
                RETURNING sid INTO v_sid;
            END IF;
        ELSE
            -- A head assertion: hold the row still until this commit ends.
            SELECT sid INTO v_sid FROM {s}.tether_scopes
             WHERE ns = p_ns AND scope = p_scopes[i]
               AND generation = p_gens[i] AND sequence = p_seqs[i]
            FOR SHARE;
            IF v_sid IS NULL AND p_gens[i] = 0 AND p_seqs[i] = 0 THEN
                PERFORM 1 FROM {s}.tether_scopes WHERE ns = p_ns AND scope = p_scopes[i];
                IF NOT FOUND THEN
                    v_sid := 0;  -- never existed: the empty head holds
                END IF;
            END IF;
        END IF;
        IF v_sid IS NULL THEN
            SELECT generation, sequence INTO g, q FROM {s}.tether_scopes
             WHERE ns = p_ns AND scope = p_scopes[i];
            RAISE EXCEPTION USING
                ERRCODE = 'TT409',
                MESSAGE = 'tether: stale head',
                DETAIL = json_build_object(
                    'scope', p_scopes[i],
                    'generation', coalesce(g, 0),
                    'sequence', coalesce(q, 0))::text;
        END IF;
        sids := sids || v_sid;
    END LOOP;

    INSERT INTO {s}.tether_nodes
        (sid, seq, kind, id, parents, created_ms, created_text, rkey, payload)
    SELECT sids[t.sc], t.seq, t.kind, t.id, t.parents, t.cms, t.ctext, t.rkey, t.payload
      FROM unnest(n_scope, n_seq, n_id, n_kind, n_parents, n_cms, n_ctext, n_rkey, n_payload)
           AS t(sc, seq, id, kind, parents, cms, ctext, rkey, payload);

    INSERT INTO {s}.tether_resource_heads (sid, key, seq)
    SELECT DISTINCT ON (sids[t.sc], t.rkey) sids[t.sc], t.rkey, t.seq
      FROM unnest(n_scope, n_seq, n_rkey) AS t(sc, seq, rkey)
     WHERE t.rkey IS NOT NULL
     ORDER BY sids[t.sc], t.rkey, t.seq DESC
    ON CONFLICT (sid, key) DO UPDATE SET seq = EXCLUDED.seq;
END
$fn$
"""

# Migration 2: the same, plus p_has_rkey, so commits without resource nodes skip
# the resource-heads statement.
_COMMIT_V2 = r"""
CREATE FUNCTION {s}.tether_commit(
    p_ns text, p_scopes text[], p_gens bigint[], p_seqs bigint[], p_counts int[],
    p_frontiers bytea[],
    n_scope int[], n_seq bigint[], n_id bytea[], n_kind smallint[], n_parents bytea[],
    n_cms bigint[], n_ctext text[], n_rkey text[], n_payload bytea[], p_has_rkey boolean
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    i int;
    v_sid bigint;
    sids bigint[] := '{{}}';
    g bigint;
    q bigint;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_scopes, 1), 0) LOOP
        v_sid := NULL;
        IF p_counts[i] > 0 THEN
            UPDATE {s}.tether_scopes
               SET sequence = p_seqs[i] + p_counts[i], frontier = p_frontiers[i]
             WHERE ns = p_ns AND scope = p_scopes[i]
               AND generation = p_gens[i] AND sequence = p_seqs[i]
            RETURNING sid INTO v_sid;
            IF v_sid IS NULL AND p_gens[i] = 0 AND p_seqs[i] = 0 THEN
                INSERT INTO {s}.tether_scopes (ns, scope, sequence, frontier)
                VALUES (p_ns, p_scopes[i], p_counts[i], p_frontiers[i])
                ON CONFLICT (ns, scope) DO NOTHING
                RETURNING sid INTO v_sid;
            END IF;
        ELSE
            -- A head assertion: hold the row still until this commit ends.
            SELECT sid INTO v_sid FROM {s}.tether_scopes
             WHERE ns = p_ns AND scope = p_scopes[i]
               AND generation = p_gens[i] AND sequence = p_seqs[i]
            FOR SHARE;
            IF v_sid IS NULL AND p_gens[i] = 0 AND p_seqs[i] = 0 THEN
                PERFORM 1 FROM {s}.tether_scopes WHERE ns = p_ns AND scope = p_scopes[i];
                IF NOT FOUND THEN
                    v_sid := 0;  -- never existed: the empty head holds
                END IF;
            END IF;
        END IF;
        IF v_sid IS NULL THEN
            SELECT generation, sequence INTO g, q FROM {s}.tether_scopes
             WHERE ns = p_ns AND scope = p_scopes[i];
            RAISE EXCEPTION USING
                ERRCODE = 'TT409',
                MESSAGE = 'tether: stale head',
                DETAIL = json_build_object(
                    'scope', p_scopes[i],
                    'generation', coalesce(g, 0),
                    'sequence', coalesce(q, 0))::text;
        END IF;
        sids := sids || v_sid;
    END LOOP;

    INSERT INTO {s}.tether_nodes
        (sid, seq, kind, id, parents, created_ms, created_text, rkey, payload)
    SELECT sids[t.sc], t.seq, t.kind, t.id, t.parents, t.cms, t.ctext, t.rkey, t.payload
      FROM unnest(n_scope, n_seq, n_id, n_kind, n_parents, n_cms, n_ctext, n_rkey, n_payload)
           AS t(sc, seq, id, kind, parents, cms, ctext, rkey, payload);

    IF p_has_rkey THEN  -- most commits hold no resource node: skip the statement
        INSERT INTO {s}.tether_resource_heads (sid, key, seq)
        SELECT DISTINCT ON (sids[t.sc], t.rkey) sids[t.sc], t.rkey, t.seq
          FROM unnest(n_scope, n_seq, n_rkey) AS t(sc, seq, rkey)
         WHERE t.rkey IS NOT NULL
         ORDER BY sids[t.sc], t.rkey, t.seq DESC
        ON CONFLICT (sid, key) DO UPDATE SET seq = EXCLUDED.seq;
    END IF;
END
$fn$
"""

_RESET = r"""
CREATE FUNCTION {s}.tether_reset(p_ns text, p_scope text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_sid bigint;
    v_gen bigint;
BEGIN
    INSERT INTO {s}.tether_scopes AS t (ns, scope, generation)
    VALUES (p_ns, p_scope, 1)
    ON CONFLICT (ns, scope) DO UPDATE
        SET generation = t.generation + 1, sequence = 0, frontier = '\x'::bytea
    RETURNING sid, generation INTO v_sid, v_gen;
    -- A new statement, a new snapshot: it sees rows of writers this one waited for.
    DELETE FROM {s}.tether_nodes WHERE sid = v_sid;
    DELETE FROM {s}.tether_resource_heads WHERE sid = v_sid;
    RETURN v_gen;
END
$fn$
"""

_DELETE_NS = r"""
CREATE FUNCTION {s}.tether_delete_namespace(p_ns text) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    v_sids bigint[];
    v_live bigint;
BEGIN
    -- Lock in scope order, the order multi-scope commits take their rows in.
    SELECT array_agg(sid), count(*) FILTER (WHERE sequence > 0)
      INTO v_sids, v_live
      FROM (SELECT sid, sequence FROM {s}.tether_scopes WHERE ns = p_ns
            ORDER BY scope FOR UPDATE) AS locked;
    IF v_sids IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE {s}.tether_scopes
       SET generation = generation + 1, sequence = 0, frontier = '\x'::bytea
     WHERE sid = ANY(v_sids);
    DELETE FROM {s}.tether_nodes WHERE sid = ANY(v_sids);
    DELETE FROM {s}.tether_resource_heads WHERE sid = ANY(v_sids);
    RETURN v_live;
END
$fn$
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="initial schema: scopes, nodes, resource heads, commit functions",
        statements=(
            """CREATE TABLE {s}.tether_scopes (
                sid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                generation bigint NOT NULL DEFAULT 0,
                sequence bigint NOT NULL DEFAULT 0,
                ns text COLLATE "C" NOT NULL,
                scope text COLLATE "C" NOT NULL,
                frontier bytea NOT NULL DEFAULT '\\x'::bytea,
                CONSTRAINT tether_scopes_name UNIQUE (ns, scope)
            ) WITH (fillfactor = 70)""",
            """CREATE TABLE {s}.tether_nodes (
                sid bigint NOT NULL,
                seq bigint NOT NULL,
                created_ms bigint,
                kind smallint NOT NULL,
                id bytea NOT NULL,
                parents bytea NOT NULL,
                created_text text,
                rkey text COLLATE "C",
                payload bytea NOT NULL,
                CONSTRAINT tether_nodes_pkey PRIMARY KEY (sid, seq)
            )""",
            "CREATE UNIQUE INDEX tether_nodes_id ON {s}.tether_nodes (sid, id)",
            """CREATE INDEX tether_nodes_rkey ON {s}.tether_nodes (sid, rkey, seq)
                WHERE rkey IS NOT NULL""",
            """CREATE TABLE {s}.tether_resource_heads (
                sid bigint NOT NULL,
                seq bigint NOT NULL,
                key text COLLATE "C" NOT NULL,
                CONSTRAINT tether_resource_heads_pkey PRIMARY KEY (sid, key)
            )""",
            _COMMIT_V1,
            _RESET,
            _DELETE_NS,
        ),
    ),
    Migration(
        version=2,
        name="tether_commit skips the resource-heads insert when no node has a key",
        statements=(
            "DROP FUNCTION {s}.tether_commit(text, text[], bigint[], bigint[], int[], bytea[],"
            " int[], bigint[], bytea[], smallint[], bytea[], bigint[], text[], text[], bytea[])",
            _COMMIT_V2,
        ),
    ),
)

LATEST = MIGRATIONS[-1].version
