// Package pgledger keeps an agent's bandonce.Ledger in PostgreSQL and
// elects one writer among its replicas, so that the agent survives the loss
// of a machine: several processes of one agent, on different hosts, share
// one database; one holds the agent's lease and runs the shell, the others
// wait as hot standbys and take over when it stops renewing.
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	store, err := pgledger.Open(ctx, pool, pgledger.Options{AgentID: agentID})
//	err = store.RunLeader(ctx, func(ctx context.Context, ledger *pgledger.Ledger) error {
//		shell, err := bandonce.New(bandonce.Config{APIKey: key, Handler: h, Ledger: ledger})
//		if err != nil {
//			return err
//		}
//		return shell.Run(ctx)
//	})
//
// # The records
//
// The records are boltledger's: per room, each reply key's state (intent,
// accepted, duplicate-dropped), each message whose processed mark is
// outstanding, and each journaled step's result (Message.Step), in the
// tables keys, acks and steps of a schema ("bandonce" unless Options.Schema
// says otherwise), keyed by the agent's id so that agents can share the
// tables. Open creates the schema on first use and migrates it
// (versioned steps recorded in its migrations table, applied once under an
// advisory lock). A database it cannot use is an *OpenError: ErrNotPostgres,
// ErrSchemaTooNew, ErrForeignSchema or ErrPermission. Each Ledger call is one
// statement, committed before it returns.
//
// # The lease
//
// The table leases has one row per agent: its epoch, its holder and when it
// expires. All times are the database's (now()); hosts' clocks never decide
// who holds a lease. A standby takes the lease when it has expired (or names
// its own Holder: the answer to its acquisition was lost), with the epoch
// incremented; the holder renews it every third of Options.LeaseTime (10 s
// unless set), counts it MaxClockSkew (1%) shorter than the database does,
// and releases it when RunLeader's context ends, so a planned handover takes
// one poll (a twentieth of the lease by default), not a lease time. A holder SIGKILLed or
// cut off is replaced once its lease runs out: within LeaseTime of its last
// renewal, plus the standby's start-up.
//
// # Fencing
//
// Every write carries its lease's epoch and happens only if, in the same
// statement, the lease row still has that epoch and has not expired; the
// lease row is read FOR SHARE, so a takeover and a write are ordered. A
// refused write is a *FencedError (ErrFenced).
//
// The intent written right before each post is also the holder's re-check
// of its lease: it needs a third of the lease left by the database's clock,
// and SetKey fails if, when the answer arrives, this process's own clock
// says less than that is left (it was paused while the write was in flight).
// The shell never posts without its intent on record, so a holder that was
// paused (SIGSTOP, a long GC pause, a frozen VM) and wakes after losing the
// lease posts nothing more; the first thing its renewal loop does on waking
// is to give the lease up and cancel the shell with ErrLeaseLost.
//
// What fencing cannot cover: Band itself knows nothing of epochs. A holder
// paused after its intent returned and before its POST left the process,
// for longer than a third of the lease, would post once it woke, after a
// new holder had read the room and found nothing. The window is the few
// microseconds between the two calls; the third of a lease it must outlast
// makes it a pause of seconds in exactly that spot.
//
// # Outages
//
// While the database is unreachable, ledger calls fail (each within half a
// lease time, or a second, whichever is longer), and the shell posts nothing
// without its intent: it
// backs off and resumes by itself. The holder keeps renewing every tenth of
// a lease; an outage longer than the lease ends its term (ErrLeaseLost) and
// RunLeader campaigns again, logging, until the database is back. Open too
// waits out an unreachable database until its context ends.
package pgledger
