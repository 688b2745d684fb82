package pgledger

import "strings"

// migration is one step of the schema. Steps are applied in order, once,
// and recorded by number and name in the schema's migrations table; a
// released step is never edited, only followed by new ones.
type migration struct {
	name string
	ddl  string // with {s} for the quoted schema
}

func (m migration) sql(schema string) string { return strings.ReplaceAll(m.ddl, "{s}", schema) }

// migrations is the schema, oldest first. Every table is keyed by the
// agent first: agents share the tables and never see each other's rows.
var migrations = []migration{
	{
		name: "leases, keys and ack-pending records",
		ddl: `
CREATE TABLE {s}.leases (
	agent_id    text PRIMARY KEY,
	epoch       bigint NOT NULL,
	holder      text NOT NULL,
	acquired_at timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL
);
CREATE TABLE {s}.keys (
	agent_id   text NOT NULL,
	room       text NOT NULL,
	key        text NOT NULL,
	state      smallint NOT NULL CHECK (state IN (1, 2, 3)),
	epoch      bigint NOT NULL,
	written_at timestamptz NOT NULL,
	PRIMARY KEY (agent_id, room, key)
);
CREATE TABLE {s}.acks (
	agent_id   text NOT NULL,
	room       text NOT NULL,
	message_id text NOT NULL,
	epoch      bigint NOT NULL,
	written_at timestamptz NOT NULL,
	PRIMARY KEY (agent_id, room, message_id)
);`,
	},
	{
		name: "journaled step results",
		ddl: `
CREATE TABLE {s}.steps (
	agent_id   text NOT NULL,
	room       text NOT NULL,
	message_id text NOT NULL,
	name       text NOT NULL,
	result     bytea NOT NULL,
	epoch      bigint NOT NULL,
	written_at timestamptz NOT NULL,
	PRIMARY KEY (agent_id, room, message_id, name)
);`,
	},
	{
		name: "dead letters",
		ddl: `
CREATE TABLE {s}.deadletters (
	agent_id    text NOT NULL,
	room        text NOT NULL,
	message_id  text NOT NULL,
	sender_id   text NOT NULL,
	sender_name text NOT NULL,
	sender_type text NOT NULL,
	content     text NOT NULL,
	failures    integer NOT NULL,
	reason      text NOT NULL,
	given_up_at timestamptz NOT NULL,
	epoch       bigint NOT NULL,
	PRIMARY KEY (agent_id, room, message_id)
);`,
	},
}

// statements are the SQL texts of a Store, built once for its schema.
//
// Every write is one statement shaped as fenced() builds it: the lease row
// is read FOR SHARE with the write's epoch, and the write happens only if
// that row is current. FOR SHARE makes a takeover (which updates the row)
// wait for writes already under way and makes a write that comes after a
// takeover see it, so no write of an old epoch lands after a new holder
// has begun. The statement answers whether the fence held.
type statements struct {
	privileges string

	acquire, lookup, renew, release string

	key, setKey, deleteKey string
	ack, setAck, deleteAck string
	step, setStep          string
	prune                  string
}

// Parameters of every fenced write: $1 agent, $2 epoch, $3 the lease time
// that must be left, in microseconds.
const fence = `fence AS (
	SELECT 1 FROM {s}.leases
	WHERE agent_id = $1 AND epoch = $2 AND expires_at > now() + $3 * interval '1 microsecond'
	FOR SHARE
)`

func fenced(write string) string {
	return `WITH ` + fence + `, write AS (` + write + `) SELECT EXISTS (SELECT 1 FROM fence)`
}

func buildStatements(schema string) statements {
	s := func(text string) string { return strings.ReplaceAll(text, "{s}", schema) }
	return statements{
		// has_table_privilege holds when any privilege listed holds: each
		// is asked on its own.
		privileges: `SELECT bool_and(has_table_privilege(format('%I.%I', $1::text, t), p))
			FROM unnest(ARRAY['leases', 'keys', 'acks', 'steps', 'deadletters']) AS t, unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p`,

		// $1 agent, $2 holder, $3 lease time in microseconds. A lease
		// that ran out is free; so is one this holder holds: the answer
		// to its own acquisition was lost, and waiting for that term to
		// run out would leave the agent without a leader for a lease
		// time. Taking it again, with the next epoch, fences that term.
		acquire: s(`INSERT INTO {s}.leases AS l (agent_id, epoch, holder, acquired_at, expires_at)
			VALUES ($1, 1, $2, now(), now() + $3 * interval '1 microsecond')
			ON CONFLICT (agent_id) DO UPDATE
			SET epoch = l.epoch + 1, holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
			WHERE l.expires_at <= now() OR l.holder = excluded.holder
			RETURNING l.epoch`),
		// $1 agent.
		lookup: s(`SELECT holder, epoch, greatest(0, (extract(epoch FROM expires_at - now()) * 1000000)::bigint)
			FROM {s}.leases WHERE agent_id = $1`),
		// $1 agent, $2 epoch, $3 lease time in microseconds.
		renew: s(`UPDATE {s}.leases SET expires_at = now() + $3 * interval '1 microsecond'
			WHERE agent_id = $1 AND epoch = $2 AND expires_at > now()`),
		// $1 agent, $2 epoch.
		release: s(`UPDATE {s}.leases SET expires_at = now()
			WHERE agent_id = $1 AND epoch = $2 AND expires_at > now()`),

		// $1 agent, $2 room, $3 key.
		key: s(`SELECT state FROM {s}.keys WHERE agent_id = $1 AND room = $2 AND key = $3`),
		// $4 room, $5 key, $6 state.
		setKey: s(fenced(`INSERT INTO {s}.keys (agent_id, room, key, state, epoch, written_at)
			SELECT $1, $4, $5, $6, $2, now() FROM fence
			ON CONFLICT (agent_id, room, key) DO UPDATE
			SET state = excluded.state, epoch = excluded.epoch, written_at = excluded.written_at`)),
		deleteKey: s(fenced(`DELETE FROM {s}.keys
			WHERE agent_id = $1 AND room = $4 AND key = $5 AND EXISTS (SELECT 1 FROM fence)`)),

		// $1 agent, $2 room, $3 message.
		ack: s(`SELECT EXISTS (SELECT 1 FROM {s}.acks WHERE agent_id = $1 AND room = $2 AND message_id = $3)`),
		// $4 room, $5 message.
		setAck: s(fenced(`INSERT INTO {s}.acks (agent_id, room, message_id, epoch, written_at)
			SELECT $1, $4, $5, $2, now() FROM fence
			ON CONFLICT (agent_id, room, message_id) DO UPDATE
			SET epoch = excluded.epoch, written_at = excluded.written_at`)),
		deleteAck: s(fenced(`DELETE FROM {s}.acks
			WHERE agent_id = $1 AND room = $4 AND message_id = $5 AND EXISTS (SELECT 1 FROM fence)`)),

		// $1 agent, $2 room, $3 message, $4 step name.
		step: s(`SELECT result FROM {s}.steps WHERE agent_id = $1 AND room = $2 AND message_id = $3 AND name = $4`),
		// $4 room, $5 message, $6 step name, $7 result.
		setStep: s(fenced(`INSERT INTO {s}.steps (agent_id, room, message_id, name, result, epoch, written_at)
			SELECT $1, $4, $5, $6, $7, $2, now() FROM fence
			ON CONFLICT (agent_id, room, message_id, name) DO UPDATE
			SET result = excluded.result, epoch = excluded.epoch, written_at = excluded.written_at`)),

		// $1 agent, $2 cutoff, $3 the most rows to delete from each
		// table. Not fenced: it only forgets. One batch a statement, so
		// that each fits the call timeout however large the backlog;
		// Prune repeats it until a batch comes back short.
		prune: s(`WITH k AS (
				DELETE FROM {s}.keys WHERE ctid = ANY (ARRAY (
					SELECT ctid FROM {s}.keys WHERE agent_id = $1 AND state IN (2, 3) AND written_at < $2 LIMIT $3))
				RETURNING 1
			), a AS (
				DELETE FROM {s}.acks WHERE ctid = ANY (ARRAY (
					SELECT ctid FROM {s}.acks WHERE agent_id = $1 AND written_at < $2 LIMIT $3))
				RETURNING 1
			), st AS (
				DELETE FROM {s}.steps WHERE ctid = ANY (ARRAY (
					SELECT ctid FROM {s}.steps WHERE agent_id = $1 AND written_at < $2 LIMIT $3))
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM k), (SELECT count(*) FROM a), (SELECT count(*) FROM st)`),
	}
}
