// Package boltledger is a durable bandonce.Ledger kept in one bbolt file
// per agent. The root package does not depend on bbolt; an agent opts in by
// opening a Ledger here and passing it as Config.Ledger.
//
// A durable ledger lets a restarted agent answer most redeliveries without
// reading the room, because the shell can trust what the ledger says:
//
//   - KeyAccepted or KeyDuplicateDropped: the reply is in the room; drop it.
//   - KeyUnknown: this agent never tried to post the key; post it.
//   - KeyIntent: a post was about to be sent and may or may not have landed;
//     only this state needs the room read.
//
// # Writes and crashes
//
// Every call that changes the ledger is one bbolt transaction, committed
// before the call returns. A commit writes the changed pages, fdatasyncs,
// writes the meta page that makes them current, and fdatasyncs again, so a
// crash at any instant leaves the file as of the last call that returned
// and no trace of a call cut short. Only the intent has to be durable for
// correctness; the other writes are synced as well, because bbolt has no
// safe way to skip a sync (NoSync can leave a torn commit), and because each
// of them saves a room read or a repeated mark after a crash.
//
// One reply goes through these steps. Those marked "synced" are ledger
// writes; the others are calls to Band and write nothing here.
//
//  1. SetKey(KeyIntent), synced before the post is sent.
//  2. The post.
//  3. SetKey(KeyAccepted), or KeyDuplicateDropped when the shell found the
//     reply already posted, synced.
//  4. SetAckPending(true), synced.
//  5. The processed mark.
//  6. SetAckPending(false), "done", synced: deletes the ack-pending record.
//
// What a crash leaves behind, and what the shell does on the redelivery:
//
//   - Before 1: no record. Key says KeyUnknown and the shell posts without
//     reading, which is right: nothing was sent.
//   - Between 1 and 3 (before or after the post): KeyIntent. The shell
//     reads the room and posts only if the reply is not there, else records
//     KeyDuplicateDropped. This read is what keeps a post that landed just
//     before the crash from being posted twice.
//   - Between 3 and 4: KeyAccepted. The shell drops the reply without
//     reading and goes on to the processed mark.
//   - Between 4 and 5: KeyAccepted and ack-pending. The shell only retries
//     the processed mark.
//   - Between 5 and 6: the same records, but Band has consumed the message
//     and does not serve it again, so the ack-pending record is stale. It
//     is harmless and small; Prune removes it.
//   - After 6: the key record alone, which guards the key against a later
//     message that produces the same reply.
//
// # Journaled steps
//
// Message.Step records a step's result with SetStep, synced before the
// result goes back to the handler; a later delivery of the message reads
// it with Step and does not run the step again. A crash between the
// step's effect and SetStep leaves no record, so the step runs again on
// the redelivery, with the same idempotency key: that window is what the
// key is for. Step records live in their own bucket (a ledger created
// before steps existed gains it on its first step) and are kept until
// Prune removes them.
//
// # One agent, one writer
//
// Open takes bbolt's exclusive lock on the file (flock on Unix). A second
// Open of the same path, from this process or another, gives up after
// Options.LockTimeout and fails with ErrLocked: two writers would each
// believe their KeyUnknown means "never tried". The file records the
// agent it belongs to; opening it for another agent fails with
// ErrAgentMismatch.
//
// # Damaged files
//
// A damaged file is reported, never reset: an empty or truncated file, a
// file that is not a bbolt database, a bbolt database that is not a ledger
// or has a schema version this package does not read all fail with
// ErrCorrupt, and the file is left as it was. A reset would turn "posted"
// into "never tried", which is exactly the duplicate the ledger prevents.
// bbolt can panic or fault on a damaged file; Open and every method recover
// that and return ErrCorrupt. Open reads the meta and freelist pages, the
// file's length and the schema marker, not every record: a damaged record
// page shows as ErrCorrupt from the call that reaches it.
//
// A new ledger is built under a temporary name next to the path
// (path.creating-*), synced, and then linked into place, so a file at the
// path is always a complete ledger and an empty one is always damage. A
// crash while creating can leave such a temporary file behind; it is never
// read and can be deleted.
//
// # Growth
//
// The file holds one record per reply key (the room id, the key and ten
// bytes, plus bbolt's per-item overhead: roughly 100 bytes for a UUID room
// and a short key), kept for good so that a later message with the same key
// is still recognised, and one per journaled step (its key and its
// result). Ack-pending records are deleted when done. bbolt
// reuses freed pages but never shrinks the file. Prune deletes in-room keys
// and stale ack-pending records older than a cutoff, at the price described
// on it.
package boltledger
